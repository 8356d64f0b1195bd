"""Run folders of every shape a received one can take, opened by every command that reads or writes
one: links planted at any of its names (to a file outside, to a folder outside, to nothing), extra
lines, and the commands' own arguments drawn too. Each command finishes, or refuses with one line and
exit status 2, never a traceback; and nothing outside the folder changes (#30)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from fathom.cli import main

FIXTURE = Path(__file__).parent / "fixtures" / "records-v12"
# The names fathom reads, appends to or writes whole in a run folder, and some it never writes.
NAMES = (
    "manifest.json", "samples.jsonl", "run.lock", "samples.quarantine", "judgements.jsonl",
    "judgements.quarantine", "qualifications.jsonl", "summary.json", "report.html", "heatmap.png",
    "manifest.json.tmp", "summary.json.tmp", "compare-base", "other.txt",
)  # fmt: skip
TARGETS = ("file", "folder", "nothing")
COMMANDS = (
    ("report",),
    ("report", "--threshold", "0.5"),
    ("runs",),
    ("repair",),
    ("judge", "--judge", "sim-judge:reference"),
    ("compare",),
    ("series",),
)
LINES = st.sampled_from([b"", b"{}\n", b"not json\n", b'{"schema": 999}\n', b"\xff\xfe\n", b"torn"])


@pytest.fixture(scope="module")
def outside() -> Iterator[Path]:
    """A file and a folder outside every run folder, which no command may change."""
    with tempfile.TemporaryDirectory() as name:
        root = Path(name)
        (root / "victim.txt").write_bytes(b"nobody writes here\n")
        (root / "victims").mkdir()
        (root / "victims" / "kept.txt").write_bytes(b"nor here\n")
        yield root


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@settings(
    max_examples=80,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    links=st.dictionaries(st.sampled_from(NAMES), st.sampled_from(TARGETS), max_size=3),
    extra=LINES,
    command=st.sampled_from(COMMANDS),
)
def test_any_received_folder_is_opened_or_refused_in_one_line_and_nothing_outside_changes(
    outside: Path,
    capsys: pytest.CaptureFixture[str],
    links: dict[str, str],
    extra: bytes,
    command: tuple[str, ...],
) -> None:
    before = snapshot(outside)
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name) / "run"
        shutil.copytree(FIXTURE, folder)
        with (folder / "samples.jsonl").open("ab") as handle:
            handle.write(extra)
        for link, target in links.items():
            path = folder / link
            if path.is_dir():
                shutil.rmtree(path)
            else:
                path.unlink(missing_ok=True)
            pointed = {"file": outside / "victim.txt", "folder": outside / "victims"}.get(target)
            os.symlink(pointed or outside / "absent", path)
        verb, *options = command
        args = [verb, *([str(folder)] * (2 if verb == "compare" else 1)), *options]
        if verb == "runs":
            args = [verb, str(folder.parent)]
        capsys.readouterr()
        status = main([*args, "--no-progress"] if verb == "judge" else args)
        err = capsys.readouterr().err
        event(f"{verb}: exit {status}")
        assert status in (0, 1, 2, 3), (args, err)
        assert "Traceback" not in err
        if status == 2:
            assert err.count("fathom: error:") == 1, err
    assert snapshot(outside) == before, (links, command)
    assert not (outside / "absent").exists()
