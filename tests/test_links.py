"""A received run folder may hold links planted to make fathom write outside it: every command that
writes there either refuses the folder (exit 2, one line naming the link) or writes a regular file
in place of the link; what the link points at never changes.

Which policy applies where (docs/run-folder.md, "Guarantees"):

- refused: a link, or any non-regular file, at a name fathom reads or appends to (manifest.json,
  run.lock, samples.jsonl, judgements.jsonl, qualifications.jsonl and their .quarantine files), and
  a link to anything but a regular file anywhere in the folder (``compare-x -> /etc``);
- replaced: a link to a regular file at a name fathom writes whole (summary.json, report.html, the
  plots, a comparison's files, series.json, an export's file, a Parquet table, a cache entry) gives
  way to the regular file written; a link at the fixed temporary names of old (``manifest.json.tmp``)
  is left alone, as fathom writes its temporary files under new random names.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from fathom.cli import main
from fathom.run import distributed, runner
from fathom.run.store import RunFolder
from fathom.safe_files import LinkedFileError, open_append, refuse_links, replacing, write_file, write_through

GRID = ["niah", "--lengths", "1k", "--depths", "2", "--samples", "1", "--no-control", "--no-progress"]
JUDGE = ["--judge", "sim-judge:reference", "--no-progress"]
SECRET = b"#!/bin/sh\necho the victim's own bytes\n"


def cli(*args: str | Path) -> int:
    status: int = main([str(a) for a in args])
    return status


def run_args(folder: Path, model: str = "sim:perfect", *extra: str) -> list[str | Path]:
    return ["run", *GRID, "--model", model, "--run-dir", folder, *extra]


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("finished") / "run"
    assert cli(*run_args(folder)) == 0
    return folder


@pytest.fixture
def run(finished: Path, tmp_path: Path) -> Path:
    """A copy of a finished run, to plant links in."""
    return Path(shutil.copytree(finished, tmp_path / "run", symlinks=True))


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    """A file outside every folder fathom is given, which a planted link points at."""
    path = tmp_path / "outside" / "victim.sh"
    path.parent.mkdir()
    path.write_bytes(SECRET)
    return path


def unchanged(victim: Path) -> bool:
    """The victim's bytes, and its folder's listing, as they were."""
    return victim.read_bytes() == SECRET and sorted(p.name for p in victim.parent.iterdir()) == ["victim.sh"]


def plant(link: Path, target: Path) -> Path:
    """``link`` -> ``target``, whatever stood at ``link`` before."""
    if link.is_dir() and not link.is_symlink():
        shutil.rmtree(link)
    else:
        link.unlink(missing_ok=True)
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(target)
    return link


def refused_naming(capsys: pytest.CaptureFixture[str], link: Path) -> bool:
    """One error line, naming the link and the fix."""
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("fathom: error:")]
    return len(errors) == 1 and f"'{link}'" in errors[0] and "remove it" in errors[0]


# Refused: the files fathom reads or appends to.

OWN_FILES = [
    "manifest.json",
    "run.lock",
    "samples.jsonl",
    "samples.quarantine",
    "judgements.jsonl",
    "judgements.quarantine",
    "qualifications.jsonl",
]
COMMANDS: dict[str, Callable[[Path], list[str | Path]]] = {
    "resume": run_args,
    "report": lambda folder: ["report", folder],
    "judge": lambda folder: ["judge", folder, *JUDGE],
    "repair": lambda folder: ["repair", folder],
}


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("name", OWN_FILES)
def test_a_link_at_a_file_fathom_reads_or_appends_to_is_refused(
    run: Path, victim: Path, name: str, command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    link = plant(run / name, victim)
    assert cli(*COMMANDS[command](run)) == 2
    assert refused_naming(capsys, link)
    assert unchanged(victim) and link.is_symlink()


@pytest.mark.parametrize("command", COMMANDS)
def test_a_fifo_or_a_folder_at_such_a_name_is_refused_too(
    run: Path, command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    os.mkfifo(run / "samples.quarantine")  # opened for appending, it would wait for a reader forever
    (run / "judgements.jsonl").mkdir()
    assert cli(*COMMANDS[command](run)) == 2
    err = capsys.readouterr().err
    assert err.count("fathom: error:") == 1 and "judgements.jsonl" in err and "samples.quarantine" in err


@pytest.mark.parametrize("command", COMMANDS)
def test_a_link_to_a_folder_outside_is_refused_whatever_its_name(
    run: Path, victim: Path, command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    link = plant(run / "compare-base", victim.parent)
    assert cli(*COMMANDS[command](run)) == 2
    assert refused_naming(capsys, link)
    assert unchanged(victim)


def test_a_fresh_run_into_a_folder_with_a_planted_lock_link_is_refused(
    tmp_path: Path, victim: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    link = plant(tmp_path / "new" / "run.lock", victim)
    assert cli(*run_args(tmp_path / "new")) == 2
    assert refused_naming(capsys, link)
    assert unchanged(victim) and sorted(p.name for p in link.parent.iterdir()) == ["run.lock"]


# Replaced: the files fathom writes whole.

DERIVED = ["summary.json", "report.html", "heatmap.png"]
OLD_TEMPORARY = ["manifest.json.tmp", "summary.json.tmp", "report.html.tmp", "samples.jsonl.tmp"]


@pytest.mark.parametrize("name", DERIVED)
def test_report_writes_a_regular_file_in_place_of_a_link(run: Path, victim: Path, name: str) -> None:
    link = plant(run / name, victim)
    assert cli("report", run) == 0
    assert unchanged(victim)
    assert stat.S_ISREG(link.lstat().st_mode) and link.stat().st_size > 0


@pytest.mark.parametrize(
    "command",
    [
        lambda run: ["report", run],
        lambda run: ["judge", run, *JUDGE],  # rewrites the manifest: it lists its judges
        lambda run: ["judge", run, "--judge", "sim-judge:reference", "--qualify", "--no-progress"],
        lambda run: torn(run_args(run), run / "samples.jsonl"),  # the resume rewrites samples.jsonl
    ],
    ids=["report", "judge", "qualify", "resume"],
)
def test_no_command_writes_through_a_link_at_an_old_temporary_name(
    run: Path, victim: Path, command: Callable[[Path], list[str | Path]]
) -> None:
    links = [plant(run / name, victim) for name in OLD_TEMPORARY]
    cli(*command(run))
    assert unchanged(victim)
    assert all(link.is_symlink() for link in links)
    assert not [p for p in run.iterdir() if p.name.endswith(".partial")], "a temporary file was left"


def torn(args: list[str | Path], samples: Path) -> list[str | Path]:
    """``args``, once ``samples`` ends in the torn tail of a killed write (a resume moves it aside)."""
    with samples.open("ab") as stream:
        stream.write(b'{"sample_id": "cut sh')
    return args


def test_a_run_started_in_a_folder_of_planted_links_replaces_them(tmp_path: Path, victim: Path) -> None:
    folder = tmp_path / "new"
    links = [plant(folder / name, victim) for name in [*DERIVED, *OLD_TEMPORARY]]
    assert cli(*run_args(folder)) == 0
    assert unchanged(victim)
    assert all(stat.S_ISREG(link.lstat().st_mode) for link in links[: len(DERIVED)])
    assert RunFolder(folder).latest()


def test_compare_writes_regular_files_in_place_of_links_in_its_folder(
    finished: Path, run: Path, tmp_path: Path, victim: Path
) -> None:
    new = tmp_path / "new"
    assert cli(*run_args(new, "sim:lost-in-the-middle?window=2k")) == 0
    out = new / f"compare-{run.name}"
    links = [plant(out / name, victim) for name in ("compare.json", "compare.png", "compare.html")]
    assert cli("compare", run, new) in (0, 1)
    assert unchanged(victim)
    assert all(stat.S_ISREG(link.lstat().st_mode) for link in links)


def test_series_writes_regular_files_in_place_of_links(tmp_path: Path, victim: Path) -> None:
    first, second = tmp_path / "c1", tmp_path / "c2"
    assert cli(*run_args(first, "sim:perfect", "--label", "step=1")) == 0
    assert cli(*run_args(second, "sim:perfect", "--label", "step=2")) == 0
    out = tmp_path / "series"
    links = [plant(out / name, victim) for name in ("series.json", "series.html")]
    assert cli("series", first, second, "--by", "step", "--out", out) in (0, 1)
    assert unchanged(victim)
    assert all(stat.S_ISREG(link.lstat().st_mode) for link in links)


def test_export_replaces_a_link_at_its_file_and_never_writes_through_its_old_temporary_name(
    tmp_path: Path, victim: Path
) -> None:
    out = tmp_path / "examples.jsonl"
    partial = plant(tmp_path / ".examples.jsonl.partial", victim)
    args = ["export", "niah", "--tokenizer", "char", "--lengths", "2k", "--depths", "2", "--count", "2"]
    assert cli(*args, "--out", out) == 0
    plant(out, victim)
    assert cli(*args, "--out", out, "--force") == 0  # --force replaces what is there: the link itself
    assert unchanged(victim) and partial.is_symlink()
    assert stat.S_ISREG(out.lstat().st_mode) and len(out.read_text().splitlines()) == 2


def test_index_parquet_replaces_links_at_its_tables(finished: Path, tmp_path: Path, victim: Path) -> None:
    pytest.importorskip("duckdb", reason="needs the index extra: pip install -e '.[index]'")
    index, parquet = tmp_path / "runs.duckdb", tmp_path / "parquet"
    assert cli("index", finished.parent, "--out", index) == 0
    links = [plant(parquet / name, victim) for name in ("runs.parquet", "runs.parquet.tmp")]
    assert cli("index", finished.parent, "--out", index, "--parquet", parquet) == 0
    assert unchanged(victim)
    assert stat.S_ISREG(links[0].lstat().st_mode) and links[1].is_symlink()


def test_make_demo_replaces_a_link_at_a_suite_file(tmp_path: Path, victim: Path) -> None:
    link = plant(tmp_path / "demo" / "hotpotqa.jsonl", victim)
    assert cli("suites", "make-demo", tmp_path / "demo", "--items", "2", "--force") == 0
    assert unchanged(victim) and stat.S_ISREG(link.lstat().st_mode)


def test_a_link_at_a_corpus_cache_entry_gives_way_to_the_rebuilt_entry(tmp_path: Path, victim: Path) -> None:
    """In fresh processes, so that the entry is read from the disk, not from memory."""
    env = {**os.environ, "FATHOM_CACHE_DIR": str(tmp_path / "cache")}
    fathom = str(Path(sys.executable).with_name("fathom"))
    subprocess.run([fathom, *map(str, run_args(tmp_path / "a"))], env=env, check=True, capture_output=True)
    [entry] = (tmp_path / "cache").rglob("v*.npz")  # the tokenised corpus, not its word index
    plant(entry, victim)
    subprocess.run([fathom, *map(str, run_args(tmp_path / "b"))], env=env, check=True, capture_output=True)
    assert unchanged(victim) and stat.S_ISREG(entry.lstat().st_mode)


# The helpers themselves, as every writer uses them.


def test_replacing_writes_under_a_new_name_and_renames_over_a_link(tmp_path: Path, victim: Path) -> None:
    link = plant(tmp_path / "entry.npz", victim)
    with replacing(link) as handle:
        handle.write(b"new")
        partials = [p for p in tmp_path.iterdir() if p.name.endswith(".partial")]
        assert len(partials) == 1 and stat.S_ISREG(partials[0].lstat().st_mode)
    assert unchanged(victim) and link.read_bytes() == b"new" and not link.is_symlink()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["entry.npz", "outside"]


def test_replacing_that_fails_leaves_the_target_and_no_partial_file(tmp_path: Path) -> None:
    target = write_file(tmp_path / "summary.json", "old")
    with pytest.raises(RuntimeError), replacing(target) as handle:
        handle.write(b"half")
        raise RuntimeError("killed")
    assert target.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["summary.json"]


def test_open_append_refuses_a_link_and_a_fifo_and_appends_to_a_regular_file(
    tmp_path: Path, victim: Path
) -> None:
    with pytest.raises(LinkedFileError, match="remove it"):
        open_append(plant(tmp_path / "samples.jsonl", victim))
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(LinkedFileError):
        open_append(tmp_path / "fifo")
    fd = open_append(tmp_path / "judgements.jsonl")
    os.write(fd, b"line\n")
    os.close(fd)
    assert (tmp_path / "judgements.jsonl").read_bytes() == b"line\n" and unchanged(victim)


def test_write_through_refuses_what_the_library_made_unless_it_is_a_regular_file(
    tmp_path: Path, victim: Path
) -> None:
    with pytest.raises(LinkedFileError):
        write_through(tmp_path / "runs.parquet", lambda made: made.symlink_to(victim))
    write_through(tmp_path / "samples.parquet", lambda made: made.write_bytes(b"PAR1"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["outside", "samples.parquet"]


def test_refuse_links_names_every_offender_and_passes_a_clean_folder(tmp_path: Path, victim: Path) -> None:
    refuse_links(victim.parent, lambda name: True)
    plant(tmp_path / "a.jsonl", victim)
    plant(tmp_path / "b", victim.parent)
    plant(tmp_path / "dangling.png", tmp_path / "nothing")
    plant(tmp_path / "heatmap.png", victim)  # not its own file: a write replaces the link
    with pytest.raises(LinkedFileError) as refused:
        refuse_links(tmp_path, lambda name: name.endswith(".jsonl"))
    message = str(refused.value)
    assert "\n" not in message and "remove them" in message
    assert all(f"'{tmp_path / name}'" in message for name in ("a.jsonl", "b", "dangling.png"))
    assert "heatmap.png" not in message


# The lock before any preparation.


def test_a_second_writer_is_refused_before_it_prepares_anything(
    finished: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def prepare(*args: object, **kwargs: object) -> None:
        pytest.fail("the run prepared its task while another process held the folder")

    monkeypatch.setattr(runner, "prepare", prepare)
    holder = RunFolder(finished)
    holder.hold()
    try:
        assert cli(*run_args(finished)) == 2
    finally:
        holder.close()
    err = capsys.readouterr().err
    assert err.count("fathom: error:") == 1 and f"is in use by pid {os.getpid()}" in err


def test_a_second_ray_writer_is_refused_before_it_joins_a_cluster(
    finished: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def ray() -> None:
        pytest.fail("the Ray run looked for a cluster while another process held the folder")

    monkeypatch.setattr(distributed, "_ray", ray)
    with RunFolder(finished) as holder:
        holder.hold()
        assert cli(*run_args(finished), "--executor", "ray", "--replicas", "2") == 2
    assert f"is in use by pid {os.getpid()}" in capsys.readouterr().err


def test_a_failed_preparation_gives_the_claimed_lock_back_and_writes_nothing_in_a_new_folder(
    finished: Path, tmp_path: Path
) -> None:
    assert cli(*run_args(finished, "sim:no-such-model")) == 2
    with RunFolder(finished) as folder:
        folder.hold()  # the lock is free again (a held one raises)
    assert cli(*run_args(tmp_path / "new", "sim:no-such-model")) == 2
    assert not (tmp_path / "new").exists()


# fathom repair and a line of a newer fathom.


def test_repair_sets_a_newer_schema_line_aside_only_when_asked(
    run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    samples = run / "samples.jsonl"
    good = samples.read_bytes()
    newer = b'{"schema": 999, "sample_id": "from-the-future"}\n'
    samples.write_bytes(good + newer)
    assert cli("report", run) == 2
    assert cli("repair", run) == 2
    err = capsys.readouterr().err.splitlines()[-1]
    assert "newer fathom" in err and f"fathom repair {run} --set-aside-newer" in err
    assert samples.read_bytes() == good + newer  # the refusal moves nothing
    assert cli("repair", run, "--set-aside-newer") == 0
    assert "moved 1 damaged lines aside" in capsys.readouterr().out
    assert samples.read_bytes() == good and (run / "samples.quarantine").read_bytes() == newer
    assert cli("report", run) == 0
