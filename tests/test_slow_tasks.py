"""Slow samples are set beside their own task's samples at their length: two tasks of very different
cost per token at one length flag nothing, and a sample ten times its own task's median is still
flagged (issue #33: a length's median alone flagged an expensive task's every sample)."""

from __future__ import annotations

import dataclasses

from test_store import record

from fathom.analysis.slow import slow_samples
from fathom.records import SampleRecord


def timed(task: str, index: int, seconds: float, *, control: bool = False) -> SampleRecord:
    return dataclasses.replace(
        record(index),
        sample_id=f"{task}|{'control' if control else 'sample'}|{index}",
        task=task,
        control=control,
        length=4096,
        actual_tokens=64 if control else 4096,
        latency_s=seconds,
    )


def test_two_tasks_of_very_different_cost_at_one_length_flag_nothing() -> None:
    # Six cheap samples (2 s) set the length's median; four expensive ones take 15x that, every one
    # alike: against the length's median all four were "slow", against their task's none is.
    cheap = [timed("cheap", i, 2.0) for i in range(6)]
    expensive = [timed("expensive", i, 30.0) for i in range(4)]
    assert slow_samples([*cheap, *expensive])["count"] == 0


def test_a_sample_ten_times_its_own_task_s_median_is_still_flagged() -> None:
    cheap = [timed("cheap", i, 2.0) for i in range(6)]
    expensive = [timed("expensive", i, 30.0) for i in range(4)]
    # 25 s is 12.5x its task's 2 s (and under the expensive task's 30 s: no task is compared with
    # another); 300 s is 10x the expensive task's median.
    cheap_slow, expensive_slow = timed("cheap", 9, 25.0), timed("expensive", 9, 300.0)
    found = slow_samples([*cheap, cheap_slow, *expensive, expensive_slow])
    assert [(r["sample_id"], r["factor"]) for r in found["samples"]] == [
        ("cheap|sample|9", 12.5),
        ("expensive|sample|9", 10.0),
    ]
    assert found["samples"][0]["median_ms_per_token"] == round(1000 * 2.0 / 4096, 4)


def test_the_controls_are_set_beside_the_controls() -> None:
    # A control's prompt is 64 tokens: 1.5 s of it is 23 ms a token, 48x the samples' 2 s over 4096.
    # Beside the other controls it is not slow; a control 10x theirs is.
    samples = [timed("niah", i, 2.0) for i in range(6)]
    controls = [timed("niah", i, 1.5, control=True) for i in range(3)]
    assert slow_samples([*samples, *controls])["count"] == 0
    found = slow_samples([*samples, *controls, timed("niah", 9, 15.0, control=True)])
    assert [r["sample_id"] for r in found["samples"]] == ["niah|control|9"]
