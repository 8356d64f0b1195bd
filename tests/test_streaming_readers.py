"""The readers of samples.jsonl and judgements.jsonl stream (issue #30): they hold the records, not the
file's bytes; a record costs about what its line does; a resume's read holds no line and no record.
Measured with tracemalloc on a samples.jsonl of about 20 MB, so that a reader that held the file whole
(and its lines, and the good lines again: about 3x the file beside the records) fails, and so do records
of 3.7 KB a line of 1.26 KB (each with a dict of its fields and its own copy of every string)."""

from __future__ import annotations

import gc
import json
import random
import shutil
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from fathom.records import Cell, PerplexityRecord
from fathom.run.lines import Damage, parse_stream
from fathom.run.store import QUARANTINE, RunFolder

FIXTURE = Path(__file__).parent / "fixtures" / "records-v11"
SIZE = 20_000_000  # bytes of samples.jsonl
DOCUMENT = 65_536  # tokens of a perplexity document

T = TypeVar("T")


def big_run(folder: Path) -> int:
    """The fixture's run with its samples and controls repeated at new sample indices (its spec asks
    for as many) until samples.jsonl holds about SIZE bytes; its size."""
    shutil.copytree(FIXTURE, folder)
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["identity"]["spec"]["samples"] = 100_000
    (folder / "manifest.json").write_text(json.dumps(manifest))
    # Records without an identity predate it and count as the run's own: the spec changed, theirs did not.
    cells = [json.loads(line) for line in (FIXTURE / "samples.jsonl").read_text().splitlines()]
    cells = [{k: v for k, v in c.items() if k != "run_identity"} for c in cells if "probe" not in c]
    written, index = 0, 0
    with (folder / "samples.jsonl").open("w") as out:
        while written < SIZE:
            for cell in cells:
                record = cell | {"sample": index}
                at = Cell(
                    record["task"], record["length"], record["depth"], index, record.get("control", False)
                )
                written += out.write(json.dumps(record | {"sample_id": at.id}) + "\n")
            index += 1
    return written


def test_reading_samples_holds_the_records_and_not_the_file(tmp_path: Path) -> None:
    folder = RunFolder(tmp_path / "run")
    size = big_run(folder.path)
    gc.collect()
    tracemalloc.start()
    try:
        records = folder.records()
        held, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(records) > 15_000
    # Beyond the records themselves, the reader's peak is a few lines and the list's growth: not the
    # file's bytes (3x the file, once, where it was read whole).
    assert peak - held < size / 10, (peak, held, size)
    assert peak < 1.2 * held


def traced(read: Callable[[], list[T]]) -> tuple[list[T], int]:
    """What ``read`` returns, and the bytes it holds (tracemalloc's count of what it allocated)."""
    gc.collect()
    tracemalloc.start()
    try:
        records = read()
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return records, held


def test_the_latest_records_cost_little_more_than_their_lines(tmp_path: Path) -> None:
    folder = RunFolder(tmp_path / "run")
    size = big_run(folder.path)
    records, held = traced(folder.latest)
    # 1.26 KB a line; 3.7 KB a record when each held a dict of its fields and its own copy of every
    # string (1.4 KB measured with slots and the repeating values shared).
    assert size / len(records) > 1200
    assert held / len(records) < 2000, held / len(records)


def test_log_probabilities_cost_8_bytes_each_not_a_python_float(tmp_path: Path) -> None:
    folder = RunFolder(tmp_path / "run")
    shutil.copytree(FIXTURE, folder.path)
    manifest = json.loads(folder.manifest_path.read_text())
    manifest["identity"]["spec"] |= {"lengths": [DOCUMENT], "samples": 100}
    folder.manifest_path.write_text(json.dumps(manifest))
    rng = random.Random(0)
    with folder.samples_path.open("w") as out:
        for index in range(16):
            logprobs = tuple(round(-rng.expovariate(0.4), 5) for _ in range(DOCUMENT - 1))
            cell = Cell("perplexity", DOCUMENT, None, index)
            document = PerplexityRecord(
                cell.id, "perplexity", DOCUMENT, index, 0, "prose", 0, "0" * 64, DOCUMENT, DOCUMENT, 1,
                logprobs, 1.0, False,
            )  # fmt: skip
            out.write(json.dumps(document.to_json(), sort_keys=True) + "\n")
    records, held = traced(folder.latest)
    tokens = sum(len(r.logprobs) for r in records if isinstance(r, PerplexityRecord))
    assert tokens == 16 * (DOCUMENT - 1)
    # About 9 bytes a token in the file; 32 in a tuple of floats, 8 as doubles.
    assert held / tokens < 10, held / tokens


def test_a_resume_holds_no_line_and_no_record_and_moves_damage_aside_in_a_second_pass(tmp_path: Path) -> None:
    folder = RunFolder(tmp_path / "run")
    size = big_run(folder.path)
    good = folder.samples_path.read_bytes().splitlines(keepends=True)
    middle = len(good) // 2
    folder.samples_path.write_bytes(b"".join([*good[:middle], b"garbage\n", *good[middle:], b'{"torn']))
    manifest = folder.read_manifest()
    gc.collect()
    tracemalloc.start()
    try:
        folder.start(manifest)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        folder.close()
    # Neither the file's lines (they were all held for the rewrite) nor its records (about 2x the file)
    # are held, at any time: a few lines, and one None a record while they are counted.
    assert peak < size / 10, (peak, size)
    assert folder.samples_path.read_bytes() == b"".join(good)
    assert (folder.path / QUARANTINE).read_bytes() == b'garbage\n{"torn\n'
    assert not [p for p in folder.path.iterdir() if p.name.endswith(".partial")]


def test_a_stream_ends_in_its_torn_tail_and_keeps_no_line() -> None:
    lines = [b'{"a": 1}\n', b"garbage\n", b'{"a": 2}\n', b'{"a": ']
    parsed = parse_stream(iter(lines), "x.jsonl", lambda data: data["a"])
    assert (parsed.records, parsed.torn) == ([1, 2], b'{"a": ')
    assert parsed.damaged == [Damage(2, "not JSON")]
