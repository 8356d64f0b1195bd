"""What a run folder promises (docs/run-folder.md, "Guarantees"), checked the hard way: kill -9 at random
moments, two writers at once, readers beside a writer, arbitrary damage to the record file."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_store import manifest, record

from fathom.cli import main as cli
from fathom.errors import RunFolderError
from fathom.records import SampleRecord
from fathom.run.store import LOCK, QUARANTINE, RunFolder

SWEEP = [
    "run", "niah", "--model", "sim:cliff?delay=0.02", "--tokenizer", "cl100k_base", "--lengths", "1k,2k",
    "--depths", "3", "--samples", "6", "--no-progress",
]  # fmt: skip
PLANNED = 2 * 3 * 6 * 2  # lengths x depths x samples, and a no-context control each
HANG = 600.0  # seconds a run may take to reach a moment a test waits for: only a hang reaches it


def fathom(*args: str | Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "fathom.cli", *map(str, args)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def ids(folder: Path) -> list[str]:
    path = folder / "samples.jsonl"
    return [json.loads(line)["sample_id"] for line in path.read_text().splitlines()] if path.exists() else []


def lines_written(folder: Path) -> int:
    """The whole lines of samples.jsonl (a line being appended is not one yet)."""
    path = folder / "samples.jsonl"
    return path.read_bytes().count(b"\n") if path.exists() else 0


def holds_lock(folder: Path, process: subprocess.Popen[bytes]) -> bool:
    """Whether ``process`` has taken the folder (its pid in run.lock): its start-up is over."""
    try:
        return (folder / LOCK).read_text().strip() == str(process.pid)
    except FileNotFoundError:
        return False


def reached(folder: Path, process: subprocess.Popen[bytes], records: int) -> bool:
    """Waits until ``process`` holds ``folder``'s lock with ``records`` records written, or ends;
    whether it got there. However loaded the machine, the moment is the run's own progress: only a
    hang meets the cap."""
    deadline = time.monotonic() + HANG
    while not (holds_lock(folder, process) and lines_written(folder) >= records):
        if process.poll() is not None:
            return False
        assert time.monotonic() < deadline, f"the run made no progress for {HANG:.0f} s"
        time.sleep(0.01)
    return True


@pytest.mark.slow
def test_kill_9_at_random_moments_loses_nothing_and_duplicates_nothing(tmp_path: Path) -> None:
    """Rounds of the same sweep, each killed at random moments until one attempt finishes, then
    checked against an uninterrupted run: at least 20 kills in all. A moment is a point in the run's
    own progress, never a clock's: once it holds the folder's lock and has written n records, n
    drawn from those it has yet to write (none: a kill during its start; all: a kill while it
    derives its summary), or one more than it can write (no kill: the attempt that finishes)."""
    reference = tmp_path / "reference"
    with fathom(*SWEEP, "--run-dir", reference) as process:
        assert process.wait() == 0
    expected = json.loads((reference / "summary.json").read_text())
    rng, kills, rounds = random.Random(14), 0, 0
    while kills < 20:
        folder, seen = tmp_path / f"killed-{rounds}", set[str]()
        while True:
            target = rng.randint(len(seen), PLANNED + 1)
            # Each process in a with block, which closes its stderr pipe however the run ended.
            with fathom(*SWEEP, "--run-dir", folder) as process:
                killed = reached(folder, process, target)
                if killed:
                    process.send_signal(signal.SIGKILL)
                finished = process.wait() == 0
                assert finished or killed, process.stderr.read() if process.stderr else ""
            if finished:
                break
            kills += 1
            now = ids(folder)
            assert seen <= set(now), "a record written before the kill is gone"
            assert len(now) == len(set(now)), "a sample was written twice"
            seen = set(now)
        final = ids(folder)
        assert sorted(final) == sorted(ids(reference)) and len(final) == PLANNED
        # Summaries hold no latencies: equal to the uninterrupted run's, field for field.
        assert json.loads((folder / "summary.json").read_text()) == expected
        rounds += 1


@pytest.mark.slow
def test_a_second_writer_is_refused_with_the_first_ones_pid(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "run"
    # At least 600 records x 0.25 s = 150 s of answers: the first writer is still writing when the
    # checks below end, however slow the machine (they take seconds).
    sweep = [*SWEEP[:-1], "--samples", "50", "--no-progress"]
    sweep[sweep.index("--model") + 1] = "sim:cliff?delay=0.25"
    with fathom(*sweep, "--run-dir", folder) as first:
        try:
            assert reached(folder, first, 1), "the first writer ended early"
            assert cli([*sweep, "--run-dir", str(folder)]) == 2
            err = capsys.readouterr().err
            assert f"is in use by pid {first.pid}" in err and err.count("\n") == 1
            # A reader needs no lock, and never sees half a line while the writer appends.
            for _ in range(200):
                records = RunFolder(folder).records()
                assert all(isinstance(r, SampleRecord) for r in records)
            assert (folder / LOCK).read_text().strip() == str(first.pid)
            assert first.poll() is None, "the first writer ended before the checks did"
        finally:
            first.kill()
            first.wait()
    assert len(ids(folder)) == len(set(ids(folder)))


LINES = st.lists(st.binary(max_size=60).map(lambda b: b.replace(b"\n", b"")), max_size=4)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=LINES, tail=st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"")), json_line=st.booleans())
def test_any_damage_is_named_or_moved_aside_never_lost(
    tmp_path_factory: pytest.TempPathFactory, lines: list[bytes], tail: bytes, json_line: bool
) -> None:
    folder = RunFolder(tmp_path_factory.mktemp("run"))
    folder.start(manifest())
    with folder:
        for index in range(3):
            folder.append(record(index))
    good = folder.samples_path.read_bytes()
    extra = [json.dumps([len(line)]).encode() for line in lines] if json_line else lines
    damage = b"".join(line + b"\n" for line in extra) + tail
    with folder.samples_path.open("ab") as handle:
        handle.write(damage)

    try:  # a reader: the records, or a clear error; never another exception
        assert [r.sample for r in folder.records()][:3] == [0, 1, 2]
    except RunFolderError as exc:
        assert "fathom repair" in str(exc) and "\n" not in str(exc)

    folder.start(manifest())  # the writer keeps every record and moves the rest aside
    folder.close()
    records = folder.records()
    assert [r.sample for r in records][:3] == [0, 1, 2]
    quarantined = (folder.path / QUARANTINE).read_bytes() if (folder.path / QUARANTINE).exists() else b""
    kept = folder.samples_path.read_bytes()
    # Nothing dropped: every byte is either still a record line or in the quarantine.
    assert kept.startswith(good)
    assert len(kept) + len(quarantined) == len(good) + len(damage) + (1 if tail else 0)


def test_the_record_file_is_never_rewritten_while_a_reader_reads_it(tmp_path: Path) -> None:
    """Appends go to the end of the same file: a reader holding it open sees whole lines only."""
    folder = RunFolder(tmp_path / "run")
    folder.start(manifest())
    with folder:
        folder.append(record(0))
        inode = os.stat(folder.samples_path).st_ino
        for index in range(1, 50):
            folder.append(record(index))
        assert os.stat(folder.samples_path).st_ino == inode
    assert [r.sample for r in folder.records()] == list(range(50))
