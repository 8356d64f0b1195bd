"""Each threshold visited at its edge, from both sides: the value exactly at it, a step below and a step
above, and the verdict on each side. A test far from the edge cannot tell ``<`` from ``<=``; these can.

Steps are the smallest the quantity has: one sample of sixty for a pooled score, one token for a
length, one ulp (``math.nextafter``) for seconds and probabilities, one byte for memory. Values are
chosen to be exact in binary (powers of two, 51/60 pooled to 0.85 exactly) so that "exactly at" is exact.
"""

from __future__ import annotations

import dataclasses
import math
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from test_store import record

from fathom.analysis.effective import effective_length_change, run_effective_length
from fathom.analysis.gate import gate
from fathom.analysis.slow import LEAST_SECONDS, SLOW_FACTOR, slow_samples
from fathom.analysis.stats import longest_passing
from fathom.analysis.suites import length_bin
from fathom.backends.schedule import SHARED_TOKENS, PrefixChunks, prefix_plan
from fathom.plan.costs import USABLE, tp_degree
from fathom.plan.gpus import GPUS
from fathom.plan.presets import PRESETS
from fathom.prompts import length_tolerance
from fathom.prompts.builder import Prompt
from fathom.records import SampleRecord
from fathom.run.runner import _request
from fathom.tasks.ruler.catalogue import RULER_THRESHOLD

LENGTHS = (1024, 2048, 4096)


def scored(length: int, index: int, score: float, **change: Any) -> SampleRecord:
    return dataclasses.replace(
        record(index),
        sample_id=f"niah|L{length}|D0.5000|S{index}",
        length=length,
        target_tokens=length,
        actual_tokens=length,
        score=score,
        **change,
    )


def niah_run(passed_at_2048: int) -> list[SampleRecord]:
    """Sixty samples a length: all right at 1k and 4k, ``passed_at_2048`` of them at 2k."""
    return [
        scored(length, i, 1.0 if length != 2048 or i < passed_at_2048 else 0.0)
        for length in LENGTHS
        for i in range(60)
    ]


@pytest.mark.parametrize(("passed", "effective"), [(50, 1024), (51, 4096), (52, 4096)])
def test_niah_effective_length_passes_a_length_scoring_exactly_the_threshold(
    passed: int, effective: int
) -> None:
    # 51/60 is 0.85, NIAH's threshold, which a length must reach ("at least"): 50/60 fails it. Sixty,
    # not twenty: 17 * (1/20) is 0.8500000000000001 in floating point, which "above" passes too,
    # while 51 * (1/60) is 0.85 exactly.
    records = niah_run(passed)
    assert run_effective_length(records).mean == effective
    # The comparison's bootstrap judges the data as the summary does, at the edge too.
    change = effective_length_change([(r, r) for r in records], 0.05)
    assert change is not None
    assert (change.base, change.new) == (effective, effective)


def ruler_run(passed_at_2048: int) -> list[SampleRecord]:
    """Two RULER tasks, 125 samples each a length (depths drawn: none fixed): all right at 1k and 4k,
    ``passed_at_2048`` of each task's at 2k."""
    return [
        scored(length, i, 1.0 if length != 2048 or i < passed_at_2048 else 0.0, task=task, depth=None)
        for task in ("niah_single_1", "vt")
        for length in LENGTHS
        for i in range(125)
    ]


@pytest.mark.parametrize(("passed", "effective"), [(106, 1024), (107, 1024), (108, 4096)])
def test_ruler_effective_length_needs_a_length_above_its_threshold(passed: int, effective: int) -> None:
    # 107/125 is 85.6%, RULER's threshold (Llama-2-7B-chat's own score at 4k), which a length must
    # exceed: it fails, as 106 does, and 108 (86.4%) passes.
    records = ruler_run(passed)
    assert run_effective_length(records).mean == effective
    change = effective_length_change([(r, r) for r in records], 0.05)
    assert change is not None
    assert (change.base, change.new) == (effective, effective)


@pytest.mark.parametrize(
    ("at_8k", "strict", "effective"),
    [
        (RULER_THRESHOLD, True, 4096),  # RULER's: above 85.6, Llama-2-7B's own score, is needed
        (math.nextafter(RULER_THRESHOLD, math.inf), True, 16384),
        (RULER_THRESHOLD, False, 16384),  # "at least", as NIAH's
        (math.nextafter(RULER_THRESHOLD, -math.inf), False, 4096),
    ],
)
def test_longest_passing_at_the_threshold_strict_and_not(at_8k: float, strict: bool, effective: int) -> None:
    points = [(16384, 90.0), (4096, 90.0), (8192, at_8k)]  # any order: scanned from the shortest
    assert longest_passing(points, RULER_THRESHOLD, strict=strict) == effective


def timed(index: int, seconds: float, tokens: int = 1024) -> SampleRecord:
    return dataclasses.replace(record(index), sample_id=f"s{index}", actual_tokens=tokens, latency_s=seconds)


def flagged(slowest: float, others: float) -> list[str]:
    """The samples flagged among nine at ``others`` seconds and one at ``slowest`` (1024 tokens each;
    the median is ``others`` per 1024 tokens)."""
    records = [timed(i, others) for i in range(9)] + [timed(9, slowest)]
    return [row["sample_id"] for row in slow_samples(records)["samples"]]


def test_a_sample_exactly_ten_times_the_median_is_slow_and_one_ulp_less_is_not() -> None:
    assert SLOW_FACTOR == 10.0
    # 0.125 s a sample: ten times is 1.25 s, above the 1 s floor, so the factor alone decides.
    assert flagged(1.25, 0.125) == ["s9"]
    assert flagged(math.nextafter(1.25, 0.0), 0.125) == []
    assert flagged(math.nextafter(1.25, 2.0), 0.125) == ["s9"]


def test_a_slow_sample_must_take_at_least_a_second() -> None:
    assert LEAST_SECONDS == 1.0
    # 0.0625 s a sample: 1 s is sixteen times the median, so the floor alone decides.
    assert flagged(1.0, 0.0625) == ["s9"]
    assert flagged(math.nextafter(1.0, 0.0), 0.0625) == []


def test_a_slow_samples_row_value_by_value() -> None:
    # 1.25 s for 1024 tokens: 1.2207 ms a token (1.220703...), against a median of 0.125 s: 0.1221.
    records = [timed(i, 0.125) for i in range(9)] + [timed(9, 1.25)]
    assert slow_samples(records) == {
        "factor": 10.0,
        "least_seconds": 1.0,
        "samples": [
            {
                "sample_id": "s9",
                "length": 1024,
                "seconds": 1.25,
                "ms_per_token": 1.2207,
                "median_ms_per_token": 0.1221,
                "factor": 10.0,
                "timed": "latency",
            }
        ],
        "count": 1,
    }


def test_prefill_seconds_are_what_is_timed_where_a_backend_gave_them() -> None:
    # Latency says 10 s (ten times the others'), the prefill 0.5 s: not slow, as its prefill is not.
    records = [timed(i, 1.0) for i in range(9)] + [dataclasses.replace(timed(9, 10.0), prefill_s=0.5)]
    assert slow_samples(records)["samples"] == []


def worse(count: int, *, better: bool = False) -> list[tuple[SampleRecord, SampleRecord]]:
    """``count`` pairs of one cell, each right in the base and wrong in the new run (or the reverse)."""
    pairs = []
    for i in range(count):
        right = record(i)
        wrong = dataclasses.replace(right, score=0.0, output="no", matched=())
        pairs.append((wrong, right) if better else (right, wrong))
    return pairs


@pytest.mark.parametrize("better", [False, True])
def test_the_gate_fires_below_alpha_and_not_at_it(better: bool) -> None:
    # Five of five pairs moved one way: the one-sided p is 0.5^5 = 0.03125, the same for the overall
    # test and its one cell (a copy of a test costs nothing under step-down minP).
    pairs, p = worse(5, better=better), 0.5**5
    at = gate(pairs, p, lambda r: r.sample_id, effective=False)
    if not better:
        assert [(t.level, t.p_value, t.p_adjusted) for t in at.tests] == [("overall", p, p), ("cell", p, p)]
    assert [t.verdict for t in at.tests] == ["unchanged"] * 2  # "below its share of alpha" (docs/gate.md)
    above = gate(pairs, math.nextafter(p, 1.0), lambda r: r.sample_id, effective=False)
    assert [t.verdict for t in above.tests] == ["improved" if better else "regressed"] * 2
    assert above.regressed is (not better)


def test_the_gates_power_rows_worked_out_by_hand() -> None:
    # Five pairs, all worse. A drop of w pairs is flagged when the share of the 32 flip vectors whose
    # least p is at most 1/2^w (the step-down's adjusted p, the test's own chance in it), and never
    # less than 1/2^w, stays within alpha. A vector of j worse has p = P(X >= j), X ~ Bin(5, 1/2):
    # 1/32 at j = 5, 6/32 at j = 4. w = 4: only j = 5 reaches 1/16, so max(1/16, 1/32) = 1/16, within
    # 0.1; w = 3: 1/8 is over it. So 4 of 5 pairs: 0.8, at each level (one test each).
    def rows(alpha: float) -> list[tuple[str, int, int, float | None]]:
        power = gate(worse(5), alpha, lambda r: r.sample_id, effective=False).power
        return [(p.level, p.tests, p.pairs, p.detectable_drop) for p in power]

    assert rows(0.1) == [("overall", 1, 5, 0.8), ("cell", 1, 5, 0.8)]
    # "Within alpha" (docs/gate.md): at exactly 1/16 the four pairs still count; an ulp below, only all
    # five do (1/32: the p the verdict flags them at); below 1/32, none.
    assert rows(1 / 16) == [("overall", 1, 5, 0.8), ("cell", 1, 5, 0.8)]
    assert rows(math.nextafter(1 / 16, 0.0)) == [("overall", 1, 5, 1.0), ("cell", 1, 5, 1.0)]
    assert rows(1 / 32) == [("overall", 1, 5, 1.0), ("cell", 1, 5, 1.0)]
    assert rows(math.nextafter(1 / 32, 0.0)) == [("overall", 1, 5, None), ("cell", 1, 5, None)]


def test_prompts_sharing_exactly_the_shared_tokens_are_a_group_and_one_fewer_are_not() -> None:
    def pair(shared: int) -> list[np.ndarray]:
        first = np.arange(1000, dtype=np.int32)
        second = first.copy()
        second[shared:] += 5000  # they differ from token ``shared`` on
        return [first, second]

    assert prefix_plan(pair(SHARED_TOKENS)).after == (None, 0)  # the second waits for the first
    assert prefix_plan(pair(SHARED_TOKENS - 1)).after == (None, None)
    # The lazy planner plans up to the last place neighbours share under SHARED_TOKENS (a group could
    # start after it): at exactly SHARED_TOKENS there is no such place and nothing is planned yet.
    chunks = PrefixChunks[np.ndarray](lambda ids: ids)
    assert chunks(pair(SHARED_TOKENS), whole=False).order == ()
    assert chunks(pair(SHARED_TOKENS - 1), whole=False).order == (0,)
    assert chunks(pair(SHARED_TOKENS), whole=True).order == (0, 1)


@pytest.mark.parametrize(("target", "tolerance"), [(0, 8), (1600, 8), (1601, 9), (2000, 10), (2001, 11)])
def test_the_length_tolerance_is_8_tokens_or_half_a_percent(target: int, tolerance: int) -> None:
    assert length_tolerance(target) == tolerance


def checked(target: int, actual: int, limit: int | None = None, new_tokens: int = 32) -> str | None:
    """Why the runner would not send a prompt of ``actual`` token ids built for ``target`` to a backend
    taking ids with a context of ``limit`` tokens (None: it sends it)."""
    prompt = Prompt(np.zeros(actual, dtype=np.int32), target, 0, actual, ())
    sample = SimpleNamespace(
        prompt=prompt,
        cell=SimpleNamespace(id="c"),
        max_new_tokens=new_tokens,
        answers=("1",),
        question="q",
        query_keys=(),
        patterns=(),
    )
    backend = SimpleNamespace(input="ids", tokenizer=None, max_prompt_tokens=limit)
    return _request(backend, sample, False)[2]


@pytest.mark.parametrize("target", [1600, 2000])
def test_a_prompt_missing_its_target_by_the_tolerance_is_sent_and_by_one_more_refused(target: int) -> None:
    tolerance = length_tolerance(target)
    for miss in (-tolerance, tolerance):
        assert checked(target, target + miss) is None
    for miss in (-tolerance - 1, tolerance + 1):
        refusal = checked(target, target + miss)
        assert refusal is not None and refusal.startswith("length_mismatch:"), refusal


def test_a_prompt_and_its_new_tokens_filling_the_context_exactly_are_sent() -> None:
    assert checked(1024, 1024, limit=1024 + 32) is None
    refusal = checked(1024, 1024, limit=1024 + 31)
    assert refusal is not None and refusal.startswith("too_long:"), refusal


def test_the_tensor_parallel_degree_holds_exactly_its_usable_memory() -> None:
    arch, gpu = PRESETS["llama-3.1-8b"], GPUS["h100"]
    for tp, next_tp in ((1, 2), (2, 4), (4, 8), (8, None)):
        edge = tp * USABLE * gpu.memory
        assert tp_degree(edge, arch, gpu) == tp
        assert tp_degree(math.nextafter(edge, math.inf), arch, gpu) == next_tp
        assert tp_degree(math.nextafter(edge, 0.0), arch, gpu) == tp


@pytest.mark.parametrize(
    ("tokens", "length"),
    [
        (0, 1),
        (1, 1),
        (2, 2),
        (3, 4),
        (4095, 4096),
        (4096, 4096),
        (4097, 8192),
        (2**25, 2**25),
        (2**25 + 1, 2**26),
    ],
)
def test_a_suites_prompt_is_binned_at_the_power_of_two_at_or_above_it(tokens: int, length: int) -> None:
    assert length_bin(tokens) == length
