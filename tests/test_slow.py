"""Slow samples: a sample far slower per prompt token than the others of its length is listed (a KV
cache paged to host memory is tens of times slower), from the backend's prefill time where it
reports one; records of schema 7 carry those times."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from test_store import record

from fathom.analysis.slow import LEAST_SECONDS, SLOW_FACTOR, slow_samples
from fathom.cli import main
from fathom.records import SampleRecord, record_from_json


def timed(i: int, length: int, seconds: float, prefill: float | None = None) -> SampleRecord:
    return dataclasses.replace(
        record(i),
        sample_id=f"s{i}",
        length=length,
        actual_tokens=length,
        latency_s=seconds,
        prefill_s=prefill,
    )


def test_a_sample_ten_times_its_lengths_median_per_token_is_listed() -> None:
    fast = [timed(i, 4096, 2.0) for i in range(4)]
    slow = timed(9, 4096, 25.0)  # 12.5x the median of 2.0 s over the same tokens
    other_length = [timed(10 + i, 1024, 0.5) for i in range(3)]  # not compared with 4k's
    found = slow_samples([*fast, slow, *other_length])
    assert (found["factor"], found["least_seconds"], found["count"]) == (SLOW_FACTOR, LEAST_SECONDS, 1)
    (row,) = found["samples"]
    assert row == {
        "sample_id": "s9",
        "length": 4096,
        "seconds": 25.0,
        "ms_per_token": round(1000 * 25.0 / 4096, 4),
        "median_ms_per_token": round(1000 * 2.0 / 4096, 4),
        "factor": 12.5,
        "timed": "latency",
    }


def test_below_the_factor_or_the_least_seconds_nothing_is_listed() -> None:
    # 9.5x is under the factor; 20x of a millisecond median is under a second: noise, not a cache.
    assert slow_samples([*(timed(i, 4096, 2.0) for i in range(4)), timed(9, 4096, 19.0)])["count"] == 0
    assert slow_samples([*(timed(i, 4096, 0.01) for i in range(4)), timed(9, 4096, 0.2)])["count"] == 0


def test_the_prefill_time_is_used_where_the_backend_reported_it() -> None:
    # Latencies alike, but one prefill 20x the others': a long decode does not hide a slow prefill.
    group = [timed(i, 8192, 10.0, prefill=1.0) for i in range(4)] + [timed(9, 8192, 30.0, prefill=20.0)]
    (row,) = slow_samples(group)["samples"]
    assert (row["sample_id"], row["factor"], row["timed"]) == ("s9", 20.0, "prefill")


def stalled_run(folder: Path) -> str:
    """A simulated run into ``folder`` whose fourth sample's prefill is 25x the others' (as a KV cache
    paged out, or a loaded machine's stall, would make it); that sample's id."""
    args = ["run", "niah", "--model", "sim:perfect?delay=0.001", "--lengths", "1k", "--depths", "5"]
    assert main([*args, "--samples", "2", "--run-dir", str(folder), "--no-progress", "--no-control"]) == 0
    path = folder / "samples.jsonl"
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    for line in lines:
        line["prefill_s"] = 0.2
    lines[3]["prefill_s"] = 5.0
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return str(lines[3]["sample_id"])


def test_a_slow_sample_reaches_the_summary_the_terminal_and_the_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "run"
    stalled = stalled_run(folder)
    capsys.readouterr()
    assert main(["report", str(folder)]) == 0
    assert "slow samples: 1 took at least 10x their task's median" in capsys.readouterr().out
    summary = json.loads((folder / "summary.json").read_text())
    assert [r["sample_id"] for r in summary["slow"]["samples"]] == [stalled]
    assert '<section id="slow"><h2>Slow samples</h2>' in (folder / "report.html").read_text()


def test_a_simulated_delay_is_recorded_as_prefill(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    args = ["run", "niah", "--model", "sim:perfect?delay=0.01", "--lengths", "1k", "--depths", "2"]
    assert main([*args, "--samples", "1", "--run-dir", str(folder), "--no-progress", "--no-control"]) == 0
    records = [
        record_from_json(json.loads(line)) for line in (folder / "samples.jsonl").read_text().splitlines()
    ]
    assert all(isinstance(r, SampleRecord) and (r.prefill_s, r.decode_s) == (0.01, 0.0) for r in records)
    without = tmp_path / "plain"
    plain = ["run", "niah", "--model", "sim:perfect", "--lengths", "1k", "--depths", "2", "--samples", "1"]
    assert main([*plain, "--run-dir", str(without), "--no-progress", "--no-control"]) == 0
    assert '"prefill_s"' not in (without / "samples.jsonl").read_text()  # left out when unknown


def test_a_record_of_schema_6_with_prefill_times_is_no_record() -> None:
    line = {**record(0).to_json(), "schema": 6, "prefill_s": 1.0}
    with pytest.raises(TypeError, match="a field of schema 7, in a record of schema 6"):
        record_from_json(line)
