"""Progress: controls and samples as phases of their own, the samples counted in prompt tokens, so
the time left is estimated from the long prompts' own rate."""

from __future__ import annotations

import dataclasses
import io

import pytest
from test_store import record

from fathom.records import Cell
from fathom.run import progress as progress_module
from fathom.run.progress import Progress, RunProgress


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    """The progress module's clock, moved by hand."""
    fake = Clock()
    monkeypatch.setattr(progress_module.time, "monotonic", fake)
    return fake


def test_a_log_gets_one_line_per_tenth_with_tqdms_numbers(clock: Clock) -> None:
    stream = io.StringIO()
    phase = Progress("niah sim", 1000, "tok", stream=stream)
    phase.begin()
    for _ in range(100):
        clock.now += 0.5
        phase.advance(10)
    lines = stream.getvalue().splitlines()
    assert len(lines) == 10
    # 500 tokens in 25 s: 20 tokens a second, and 25 s left.
    assert lines[4] == "niah sim:  50%|#####     | 500/1.00k [00:25<00:25, 20.0tok/s]"
    assert lines[-1].startswith("niah sim: 100%|##########| 1.00k/1.00k [00:50<00:00,")


def test_the_samples_rate_leaves_out_the_time_the_controls_took(clock: Clock) -> None:
    todo = [Cell("niah", 1024, 0.5, i, control=True) for i in range(2)]
    todo += [Cell("niah", 4096, 0.5, i) for i in range(4)]
    run = RunProgress("niah sim", todo)
    run.controls.stream = run.samples.stream = stream = io.StringIO()
    assert (run.controls.total, run.samples.total) == (2, 4 * 4096)
    for index in range(2):
        clock.now += 100.0  # slow controls must not make the samples look slow
        run.record_done(dataclasses.replace(record(index), control=True))
    for index in range(2):
        clock.now += 8.0
        run.record_done(dataclasses.replace(record(index), length=4096))
    last = stream.getvalue().splitlines()[-1]
    # Half the tokens in 16 s of samples: 16 s left, at 512 tokens a second.
    assert last == "niah sim:  50%|#####     | 8.19k/16.4k [00:16<00:16, 512tok/s]", last


def test_samples_are_counted_in_whole_numbers(clock: Clock) -> None:
    stream = io.StringIO()
    phase = Progress("controls", 24, "sample", stream=stream)
    phase.begin()
    for _ in range(12):
        clock.now += 0.5
        phase.advance()
    assert (
        stream.getvalue().splitlines()[-1] == "controls:  50%|#####     | 12/24 [00:06<00:06,  2.00sample/s]"
    )


def test_disabled_progress_writes_nothing() -> None:
    stream = io.StringIO()
    phase = Progress("x", 10, "tok", stream=stream, enabled=False)
    phase.advance(10)
    assert stream.getvalue() == ""
