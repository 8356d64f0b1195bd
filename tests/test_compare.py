"""fathom compare and fathom runs: paired exact tests between two runs of one spec, and the run listing.

Simulated models make the ground truth known: sim:perfect against sim:cliff plants a regression past
the cliff's window, and two seeds of one stochastic model differ only by chance.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_store import identity

from fathom.analysis.failures import FAILURE_KINDS
from fathom.analysis.gate import SCHEME, gate
from fathom.analysis.paired import (
    EffectiveLength,
    RunRecords,
    compare_records,
    holm_adjust,
    paired_test,
    sign_test,
)
from fathom.analysis.pairing import graded_pairs, twins
from fathom.cli import main
from fathom.errors import RunFolderError
from fathom.manifest import Manifest
from fathom.records import SampleRecord
from fathom.report.compare import compare_runs, read_run, write_comparison
from fathom.report.derive import run_spec
from fathom.report.runs import list_runs
from fathom.run.runner import run
from fathom.spec import RunSpec

SPEC = RunSpec(
    task="niah",
    model="sim:perfect",
    tokenizer="cl100k_base",
    lengths=(1024, 4096, 16384),
    depths=(0.0, 0.5, 1.0),
    samples=10,
)
CLIFF = "sim:cliff?window=4k"
SMALL = RunSpec(
    task="niah", model="sim:perfect", tokenizer="cl100k_base", lengths=(1024,), depths=(0.5,), samples=2
)


def cli(*args: str | Path) -> int:
    status: int = main([str(a) for a in args])
    return status


def sweep(folder: Path, spec: RunSpec = SPEC, **changes: Any) -> Path:
    run_spec(dataclasses.replace(spec, **changes), folder, show_progress=False)
    return folder


def rewrite_samples(folder: Path, edit: Callable[[list[dict[str, Any]]], list[dict[str, Any]]]) -> None:
    """``edit`` the run's graded samples, in their order; their no-context controls stay as they were."""
    path = folder / "samples.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines()]
    controls = [r for r in records if r.get("control")]
    samples = [r for r in records if not r.get("control")]
    path.write_text("".join(json.dumps(r) + "\n" for r in controls + edit(samples)))


def edit_manifest(folder: Path, edit: Callable[[dict[str, Any]], None]) -> None:
    path = folder / "manifest.json"
    manifest = json.loads(path.read_text())
    edit(manifest)
    path.write_text(json.dumps(manifest))


@pytest.fixture(scope="module")
def cliff_pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A baseline that finds every needle and a checkpoint that fails past 4k: same spec otherwise."""
    root = tmp_path_factory.mktemp("pair")
    return sweep(root / "base"), sweep(root / "new", model=CLIFF)


@pytest.fixture(scope="module")
def small_base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return sweep(tmp_path_factory.mktemp("small") / "base", SMALL)


# One cell of ten samples, so Holm's correction (over one cell) leaves each p-value as it is.
ONE_CELL = dataclasses.replace(SMALL, samples=10)


@pytest.fixture(scope="module")
def one_cell(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return sweep(tmp_path_factory.mktemp("one") / "run", ONE_CELL)


def scored_pair(run: Path, folder: Path, base: list[float], new: list[float]) -> tuple[Path, Path]:
    """Two copies of the one-cell run whose ten samples scored ``base`` and ``new``, in order."""
    pair = []
    for name, scores in (("base", base), ("new", new)):
        copy = shutil.copytree(run, folder / name)
        rewrite_samples(
            copy, lambda rs, s=scores: [dict(r, score=x, scoring="all") for r, x in zip(rs, s, strict=True)]
        )  # fractional scores: a fraction of the references ("all"), no binary method's grades
        pair.append(copy)
    return pair[0], pair[1]


@pytest.fixture
def copies(cliff_pair: tuple[Path, Path], tmp_path: Path) -> tuple[Path, Path]:
    """Copies of the pair that a test may edit."""
    base, new = cliff_pair
    return shutil.copytree(base, tmp_path / "base"), shutil.copytree(new, tmp_path / "new")


# --- the statistics, by hand ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("worse", "better", "expected"),
    [
        (0, 10, 2 / 1024),  # 2 * P(X = 0), X ~ Bin(10, 1/2)
        (10, 0, 2 / 1024),
        (1, 9, 2 * (1 + 10) / 1024),
        (2, 8, 2 * (1 + 10 + 45) / 1024),
        (0, 5, 2 / 32),
        (3, 3, 1.0),  # the two tails overlap: capped at 1
        (0, 1, 1.0),
        (0, 0, 1.0),  # no discordant pair: no evidence of any change
    ],
)
def test_sign_test_is_the_exact_mcnemar_p_value(worse: int, better: int, expected: float) -> None:
    assert sign_test(worse, better) == pytest.approx(expected, rel=1e-12)


def test_sign_test_stays_exact_for_thousands_of_pairs() -> None:
    reference = 2 * sum(math.comb(1000, i) for i in range(451)) / 2**1000
    assert sign_test(450, 550) == pytest.approx(reference, rel=1e-12)
    assert 0.001 < reference < 0.003  # a real tail, neither 0 nor 1
    assert sign_test(1500, 1500) == 1.0
    assert sign_test(0, 3000) == 0.0  # 2 / 2**3000 underflows a float: rounded, not an overflow error
    with pytest.raises(ValueError, match="counts must be >= 0, got worse=-1, better=3"):
        sign_test(-1, 3)


def test_holm_adjusts_a_known_list_in_its_own_order() -> None:
    # Sorted: 0.005 x 4 = 0.02, 0.01 x 3 = 0.03, 0.03 x 2 = 0.06, 0.04 x 1 = 0.04 -> 0.06 (monotone)
    assert holm_adjust([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm_adjust([0.5, 0.6]) == [1.0, 1.0]  # capped at 1
    assert holm_adjust([0.2]) == [0.2]
    assert holm_adjust([]) == []


def record(sample: int, score: float, **fields: Any) -> SampleRecord:
    values: dict[str, Any] = dict(
        sample_id=f"vt|L4096|S{sample}", task="vt", length=4096, depth=None, sample=sample, seed=0,
        prompt_sha256="0" * 64, target_tokens=4096, actual_tokens=4096, needle_kind="vt",
        needle_token_offsets=(), needle_depths=(), question="q", answers=("a", "b", "c", "d"), output="",
        finish_reason="stop", score=score, matched=(), scoring="all", latency_s=0.0, beyond_window=False,
    )  # fmt: skip
    values.update(fields)
    return SampleRecord(**values)


def test_fractional_scores_are_tested_by_the_sign_of_each_difference() -> None:
    scores = [(1.0, 0.75)] * 5 + [(0.5, 0.5)] * 3 + [(0.25, 1.0)]
    pairs = [(record(i, b), record(i, n)) for i, (b, n) in enumerate(scores)]
    test = paired_test(pairs)
    assert (test.pairs, test.worse, test.better) == (9, 5, 1)  # the three ties carry no evidence
    assert test.p_value == pytest.approx(2 * (1 + 6) / 64)
    assert test.base_mean == pytest.approx((5 * 1.0 + 3 * 0.5 + 0.25) / 9)
    assert test.new_mean == pytest.approx((5 * 0.75 + 3 * 0.5 + 1.0) / 9)


def test_the_comparison_is_data_made_from_records_alone() -> None:
    """The paired tests need two runs' manifests and records, no folder, file or page."""
    spec = RunSpec("ruler", "base", "char", (4096,), (), 10).to_json()
    base_manifest = Manifest.from_json({"identity": identity(spec)})
    new_manifest = Manifest.from_json({"identity": identity({**spec, "model": "new"})})
    base = RunRecords(Path("base"), base_manifest, [record(i, 1.0) for i in range(10)])
    new = RunRecords(Path("new"), new_manifest, [record(i, float(i == 9)) for i in range(10)])
    comparison = compare_records(base, new)
    (cell,) = comparison.cells
    assert (cell.task, cell.length, cell.test.worse, cell.test.better) == ("vt", 4096, 9, 0)
    assert cell.test.p_value == pytest.approx(2 / 2**9) and cell.verdict == "regressed"
    assert (comparison.base.model, comparison.new.model, comparison.machine_differences) == (
        "base",
        "new",
        (),
    )


# --- a planted regression --------------------------------------------------------------------------


def test_a_planted_regression_is_found_past_the_cliff_and_nowhere_else(
    cliff_pair: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    base, new = cliff_pair
    comparison = compare_runs(base, new)
    assert (comparison.base.model, comparison.new.model) == ("sim:perfect", CLIFF)
    assert comparison.overall.pairs == 90
    assert (comparison.left_out_errors, comparison.left_out_unpaired) == (0, 0)
    assert len(comparison.cells) == 9
    for cell in comparison.cells:
        assert cell.test.pairs == 10 and cell.task is None
        if cell.length > 4096:
            assert cell.verdict == "regressed"
            assert cell.p_adjusted < 0.02 and cell.test.new_mean <= 0.1
        else:
            assert cell.verdict == "unchanged"
    assert comparison.overall.p_value < 1e-6 and comparison.overall.worse >= 27
    assert comparison.base_effective_length == EffectiveLength(
        mean=16384, lower_bound=16384, worst_depth=16384
    )
    assert comparison.new_effective_length == EffectiveLength(mean=4096, lower_bound=1024, worst_depth=4096)

    capsys.readouterr()
    assert cli("compare", base, new) == 1  # a regression fails the gate
    out = capsys.readouterr().out
    assert "base: sim:perfect" in out and f"new:  {CLIFF}" in out
    assert "pairs: 90; left out: 0 with an error in either run, 0 in one run only" in out
    assert (
        "gate: REGRESSED: overall, length 16k, cell 16k, depth 0%, cell 16k, depth 50%, cell 16k, "
        "depth 100%, effective length 16k → 4k (" in out
    )
    assert "  length 16k: 100.0% → 0.0% (30 pairs: 30 worse, 0 better), p = 9.31e-10" in out
    assert "regressed cells (by the gate, of 9): 3" in out
    assert "  16k, depth 50%: 100.0% → 0.0% (10 pairs: 10 worse, 0 better)" in out
    assert "improved cells (by the gate, of 9): none" in out
    assert "effective length: 16k → 4k;" in out
    written = new / "compare-base"
    assert (
        f"wrote {written / 'compare.json'}, {written / 'compare.png'} and {written / 'compare.html'}" in out
    )
    assert json.loads((written / "compare.json").read_text()) == comparison.to_json()
    page = (written / "compare.html").read_text()
    regressed = re.findall(r'<div class="cell regressed" data-length="(\d+)"', page)
    assert regressed == ["16384"] * 3 and page.count("<figure><figcaption>") == 2  # both runs' heatmaps

    # The run's own report shows the comparison when given the baseline.
    assert cli("report", new, "--baseline", base) == 0
    report = (new / "report.html").read_text()
    assert '<section id="comparison">' in report
    assert re.findall(r'<div class="cell regressed" data-length="(\d+)"', report) == ["16384"] * 3


def test_swapped_runs_show_improvements_and_pass_the_gate(
    cliff_pair: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base, new = cliff_pair
    comparison = compare_runs(new, base)
    assert [c.length for c in comparison.improved] == [16384] * 3
    assert not comparison.regressed
    assert comparison.base_effective_length.mean == 4096 and comparison.new_effective_length.mean == 16384

    assert comparison.gate is not None and comparison.gate.fired() == ()
    assert [t.name for t in comparison.gate.tests if t.verdict == "improved"][:2] == ["overall", "16k"]
    assert cli("compare", new, base, "--out", tmp_path / "swapped") == 0
    out = capsys.readouterr().out
    assert "gate: no regression found (" in out
    assert "regressed cells (by the gate, of 9): none" in out
    assert "  16k, depth 0%: 0.0% → 100.0% (10 pairs: 0 worse, 10 better)" in out
    assert (tmp_path / "swapped" / "compare.json").is_file()


def test_the_difference_heatmap_is_red_for_regressions_and_blue_for_improvements(
    cliff_pair: tuple[Path, Path], tmp_path: Path
) -> None:
    import matplotlib.image

    base, new = cliff_pair
    worse_json, worse_png = write_comparison(compare_runs(base, new), tmp_path / "worse")
    _, better_png = write_comparison(compare_runs(new, base), tmp_path / "better")
    assert worse_json.is_file()
    worse, better = (np.asarray(matplotlib.image.imread(p)) for p in (worse_png, better_png))
    assert worse.shape == better.shape
    # RGB(A) in [0, 1]: the regressed map leans red, the improved one blue.
    red_minus_blue = [float((pixels[..., 0] - pixels[..., 2]).mean()) for pixels in (worse, better)]
    assert red_minus_blue[0] > red_minus_blue[1] + 0.02


def test_comparison_json_has_exactly_the_agreed_shape(cliff_pair: tuple[Path, Path]) -> None:
    data = compare_runs(*cliff_pair, alpha=0.02).to_json()
    assert set(data) == {
        "base", "new", "alpha", "correction", "test", "pairs", "left_out", "overall", "cells",
        "machine_differences", "effective_length", "regressions", "improvements", "failures", "controls",
        "verdict", "gate",
    }  # fmt: skip
    assert data["verdict"] == "regressed" and data["gate"]["regressed"] is True
    # Neither simulated model finds a needle that is not there: 0 of 90 controls each, no pair differs.
    controls = data["controls"]
    none_answered = {"graded": 90, "answered": 0}
    assert controls["base"] == controls["new"] == none_answered
    assert controls["overall"] == {
        "pairs": 90, "base_mean": 0.0, "new_mean": 0.0, "worse": 0, "better": 0, "p_value": 1.0,
        "difference": 0.0, "difference_ci_low": 0.0, "difference_ci_high": 0.0,
    }  # fmt: skip
    assert [(t["task"], t["items"], t["verdict"]) for t in controls["tasks"]] == [("niah", 90, "unchanged")]
    assert controls["flagged"] == [] and controls["left_out"] == {"errors": 0, "unpaired": 0}
    # Every failure kind, counted in both runs over the 90 samples they share: the cliff's 30 past
    # its 4k window fail there, and inside it the one miss (of 98% accuracy) says it found nothing.
    assert list(data["failures"]) == list(FAILURE_KINDS)
    assert {k: n for k, n in data["failures"].items() if n != {"base": 0, "new": 0}} == {
        "beyond_window": {"base": 0, "new": 30}, "refusal": {"base": 0, "new": 1}
    }  # fmt: skip
    assert data["machine_differences"] == []  # both runs made here, by one simulated build
    assert data["alpha"] == 0.02 and data["correction"] == SCHEME
    assert data["test"] == "exact McNemar (sign test on paired scores)"
    assert data["left_out"] == {"errors": 0, "unpaired": 0}
    assert set(data["overall"]) == {"base_mean", "new_mean", "worse", "better", "p_value"}
    assert data["effective_length"] == {
        "base": {"mean": 16384, "lower_bound": 16384, "worst_depth": 16384},
        "new": {"mean": 4096, "lower_bound": 1024, "worst_depth": 4096},  # see the test below
    }
    cell_keys = {"length", "depth", "task", "pairs", "base_mean", "new_mean", "difference", "worse", "better",
                 "p_value", "p_adjusted", "verdict"}  # fmt: skip
    assert all(set(cell) == cell_keys for cell in data["cells"])
    order = [(c["length"], c["depth"]) for c in data["cells"]]
    assert order == sorted(order)
    # Ten of ten pairs worse on 0/1 scores: every pair went from 1 to 0.
    regressed_means = [(c["base_mean"], c["new_mean"], c["difference"]) for c in data["cells"][-3:]]
    assert regressed_means == [(1.0, 0.0, -1.0)] * 3
    assert data["regressions"] == sum(c["verdict"] == "regressed" for c in data["cells"]) == 3
    assert data["improvements"] == 0
    # The cells' adjusted p and verdicts are the gate's cell tests'.
    gate_cells = [t for t in data["gate"]["tests"] if t["level"] == "cell"]
    assert [(c["p_adjusted"], c["verdict"]) for c in data["cells"]] == [
        (t["p_adjusted"], t["verdict"]) for t in gate_cells
    ]
    assert [t["level"] for t in data["gate"]["tests"]] == ["overall"] + ["length"] * 3 + ["cell"] * 9
    assert [p["level"] for p in data["gate"]["power"]] == ["overall", "length", "cell"]
    json.dumps(data)  # plain JSON values throughout


def test_the_effective_lengths_on_the_lower_bound_follow_from_the_hit_counts(
    cliff_pair: tuple[Path, Path],
) -> None:
    """The new run's lower-bound effective length, from its hits and Wilson's bound worked by hand.

    With z = 1.959964 (z^2 = 3.841459), k of n = 30 samples per length:
    30/30: the lower bound is n / (n + z^2) = 30 / 33.841459 = 0.8865, at least 0.85: passes.
    29/30: p = 0.966667, z^2/n = 0.128049, centre = (p + z^2/2n) / (1 + z^2/n) = 1.030691 / 1.128049
    = 0.913693, half-width = z * sqrt(p(1-p)/n + z^2/4n^2) / 1.128049 = 1.959964 * 0.046273 / 1.128049
    = 0.080397, so the lower bound is 0.8333, below 0.85: fails, and every longer length with it.
    """
    base, new = cliff_pair
    hits: dict[str, dict[int, float]] = {}
    for name, folder in (("base", base), ("new", new)):
        per_length: dict[int, float] = {}
        for line in (folder / "samples.jsonl").read_text().splitlines():
            r = json.loads(line)
            if not r.get("control"):
                per_length[r["length"]] = per_length.get(r["length"], 0.0) + r["score"]
        hits[name] = per_length
    assert hits["base"] == {1024: 30.0, 4096: 30.0, 16384: 30.0}
    assert hits["new"] == {1024: 30.0, 4096: 29.0, 16384: 0.0}  # sim:cliff's accuracy 0.98 missed one
    comparison = compare_runs(base, new)
    assert comparison.base_effective_length == EffectiveLength(
        mean=16384, lower_bound=16384, worst_depth=16384
    )
    # The mean: 30/30 and 29/30 = 0.967 pass 0.85, 0/30 fails. The worst depth: 4k's worst cell
    # is 9 of 10 = 0.9 (the miss), which passes 0.85; every 16k cell is 0 of 10.
    assert comparison.new_effective_length == EffectiveLength(mean=4096, lower_bound=1024, worst_depth=4096)


# --- the verdict: significant, and the mean and the pairs agree on the direction --------------------

DROP_OUTWEIGHS_GAINS = ([1.0] + [0.0] * 9, [0.0] + [0.1] * 9)  # mean 0.10 -> 0.09; 1 worse, 9 better
GAIN_OUTWEIGHS_DROPS = ([0.0] + [0.1] * 9, [1.0] + [0.0] * 9)  # mean 0.09 -> 0.10; 9 worse, 1 better


@pytest.mark.parametrize(
    ("scores", "worse", "better", "p_value", "verdict"),
    [
        # The gate's one-sided p for a drop, P(X >= worse) with X ~ Bin(10, 1/2), exact: with ten pairs
        # every flip is enumerated, and the one cell is the whole run. A verdict only if the mean moves
        # the way the significant pairs do: 9 better (p for a rise 11/1024) with a falling mean is none.
        (DROP_OUTWEIGHS_GAINS, 1, 9, 1023 / 1024, "unchanged"),
        (GAIN_OUTWEIGHS_DROPS, 9, 1, 11 / 1024, "unchanged"),
        (([0.5] * 10, [0.4] * 10), 10, 0, 1 / 1024, "regressed"),
        (([0.4] * 10, [0.5] * 10), 0, 10, 1.0, "improved"),
    ],
)
def test_a_verdict_needs_the_mean_and_the_pairs_to_point_the_same_way(
    one_cell: Path,
    tmp_path: Path,
    scores: tuple[list[float], list[float]],
    worse: int,
    better: int,
    p_value: float,
    verdict: str,
) -> None:
    """A few large drops can outweigh many small gains of fractional scores: then the test's evidence
    (the gains) and the mean disagree about the direction, and the cell gets no verdict."""
    base, new = scored_pair(one_cell, tmp_path, *scores)
    (cell,) = compare_runs(base, new).cells
    assert (cell.test.pairs, cell.test.worse, cell.test.better) == (10, worse, better)
    assert cell.p_adjusted == pytest.approx(p_value, rel=1e-12)
    assert cell.verdict == verdict


def test_an_adjusted_p_equal_to_alpha_is_not_significant(one_cell: Path, tmp_path: Path) -> None:
    """The criterion is p < alpha. Ten of ten pairs worse in the one cell of a run: every flip of the ten
    is enumerated, so the adjusted p is exactly 1 / 2**10 (a binary fraction); without the effective
    length's share the signs have all of alpha, which can then equal it exactly."""
    base, new = scored_pair(one_cell, tmp_path, [1.0] * 10, [0.0] * 10)
    pairs = graded_pairs(twins(read_run(base), read_run(new)).pairs)
    at = 1 / 1024
    (cell,) = gate(pairs, at, lambda r: r.sample_id, effective=False).at("cell")
    assert (cell.p_adjusted, cell.verdict) == (at, "unchanged")
    (cell,) = gate(pairs, math.nextafter(at, 1.0), lambda r: r.sample_id, effective=False).at("cell")
    assert cell.verdict == "regressed"


def test_ruler_cells_are_tasks_at_lengths_with_fractional_scores(tmp_path: Path) -> None:
    spec = RunSpec(task="niah_multiquery", model="sim:perfect", tokenizer="cl100k_base",
                   lengths=(2048, 8192), depths=(), samples=8, corpus="noise")  # fmt: skip
    base = sweep(tmp_path / "base", spec)
    # Four keys per sample, each found with chance 0.5 past the window: scores of 0, 1/4, ..., 1.
    new = sweep(tmp_path / "new", spec, model="sim:cliff?window=4k&floor=0.5")
    comparison = compare_runs(base, new)
    assert [(c.task, c.length, c.depth) for c in comparison.cells] == [
        ("niah_multiquery", 2048, None),
        ("niah_multiquery", 8192, None),
    ]
    short, long = comparison.cells
    assert short.verdict == "unchanged" and short.test.worse == 0
    assert 0.0 < long.test.new_mean < 1.0 and long.verdict == "regressed"
    assert comparison.base_effective_length.mean == 8192
    assert comparison.new_effective_length.mean == 2048


# --- chance alone -----------------------------------------------------------------------------------


def binomial_upper_quantile(n: int, p: float, level: float = 0.99) -> int:
    """The smallest count whose cumulative Binomial(n, p) probability reaches ``level``."""
    total = 0.0
    for count in range(n + 1):
        total += math.comb(n, count) * p**count * (1 - p) ** (n - count)
        if total >= level:
            return count
    return n


SEED_PAIRS = 30
ALPHAS = (0.05, 0.25, 0.5)


def test_two_seeds_of_one_model_are_rarely_told_apart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Runs of one stochastic model that differ only in its seed: no cell truly differs, so the share
    of seed pairs with any flagged cell (regressed or improved: stricter than regressions alone) must
    stay within the family-wise rate alpha, give or take chance: at most the 99% upper quantile of
    Binomial(pairs, alpha), over pairs (5/30 at alpha = 0.05). Checked at three alphas, and each time
    the raw p-values of the same comparisons must exceed the bound: without Holm's correction this
    test fails."""
    # Statistics only: the runner's records without the derived files, and no per-record fsync, which
    # would take most of the time.
    monkeypatch.setattr(os, "fsync", lambda fd: None)
    # pi-decay at half=768, slope=1: accuracy about 0.6 at 512 and 0.43 at 1k, whatever the depth,
    # so all ten cells sit well inside (0, 1) where seeds disagree most.
    spec = RunSpec(
        task="niah",
        model="sim:pi-decay?half=768&slope=1",
        tokenizer="cl100k_base",
        lengths=(512, 1024),
        depths=(0.0, 0.25, 0.5, 0.75, 1.0),
        samples=16,
        corpus="noise",
    )
    flagged = dict.fromkeys(ALPHAS, 0)
    uncorrected = dict.fromkeys(ALPHAS, 0)
    for index in range(SEED_PAIRS):
        folders = [tmp_path / f"seed{seed}" for seed in (2 * index, 2 * index + 1)]
        for seed, folder in enumerate(folders, start=2 * index):
            run(dataclasses.replace(spec, model=f"{spec.model}&seed={seed}"), folder, show_progress=False)
        for alpha in ALPHAS:
            comparison = compare_runs(*folders, alpha=alpha)
            flagged[alpha] += bool(comparison.regressed or comparison.improved)
            uncorrected[alpha] += any(c.test.p_value < alpha for c in comparison.cells)
    assert 0.3 < comparison.overall.base_mean < 0.7  # the profile is where the comment says
    for alpha in ALPHAS:
        bound = binomial_upper_quantile(SEED_PAIRS, alpha) / SEED_PAIRS
        assert flagged[alpha] / SEED_PAIRS <= bound, (alpha, flagged[alpha])
        # The grid is sensitive enough that uncorrected p-values would cross the bound.
        assert uncorrected[alpha] / SEED_PAIRS > bound, (alpha, uncorrected[alpha])


# --- refusals and what is left out ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("changes", "named"),
    [
        ({"seed": 1}, "spec.seed (base 0, new 1)"),
        (
            {"tokenizer": "o200k_base"},
            "tokenizer (base 'cl100k_base', new 'o200k_base', different vocabularies)",
        ),
        ({"lengths": (2048,)}, "spec.lengths (base [1024], new [2048])"),
        ({"depths": (0.0, 0.5)}, "spec.depths (base [0.5], new [0.0, 0.5])"),
        ({"corpus": "noise"}, "task.corpus_sha256"),
    ],
)
def test_runs_that_saw_different_prompts_are_refused(
    small_base: Path, tmp_path: Path, changes: dict[str, Any], named: str, capsys: pytest.CaptureFixture[str]
) -> None:
    other = sweep(tmp_path / "other", SMALL, model="sim:cliff", **changes)
    with pytest.raises(RunFolderError) as refusal:
        compare_runs(small_base, other)
    message = str(refusal.value)
    assert "did not see the same prompts" in message and "differ only in --model" in message
    assert named in message
    assert "\n" not in message
    assert cli("compare", small_base, other) == 2
    assert capsys.readouterr().err.startswith("fathom: error: the runs did not see the same prompts")


def test_a_run_without_samples_is_a_clear_error(small_base: Path, tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    shutil.copy(small_base / "manifest.json", empty / "manifest.json")
    with pytest.raises(RunFolderError, match=r"'.*empty' has no graded samples to compare .*run it first"):
        compare_runs(small_base, empty)
    with pytest.raises(RunFolderError, match=r"'.*nowhere' does not exist"):
        compare_runs(small_base, tmp_path / "nowhere")


def test_different_prompt_hashes_are_refused_with_a_count_and_the_first(copies: tuple[Path, Path]) -> None:
    base, new = copies
    tampered: list[str] = []

    def tamper(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for r in records[40:42]:
            r["prompt_sha256"] = "f" * 64
            tampered.append(r["sample_id"])
        return records

    rewrite_samples(new, tamper)
    first = re.escape(min(tampered))
    with pytest.raises(RunFolderError, match=rf"^2 paired samples have different prompts \(first: {first}\)"):
        compare_runs(base, new)


def test_errored_and_unpaired_samples_are_left_out_and_counted(
    copies: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    base, new = copies
    # The first ten records are the cell (1k, depth 0): two fail in the new run, three never ran in the base.
    rewrite_samples(new, lambda rs: [dict(r, error="length_mismatch: 990 tokens", score=0.0) if i < 2 else r
                                     for i, r in enumerate(rs)])  # fmt: skip
    rewrite_samples(base, lambda rs: rs[:2] + rs[5:])
    comparison = compare_runs(base, new)
    assert (comparison.left_out_errors, comparison.left_out_unpaired) == (2, 3)
    assert comparison.overall.pairs == 85
    assert comparison.cells[0].length == 1024 and comparison.cells[0].depth == 0.0
    assert comparison.cells[0].test.pairs == 5
    assert cli("compare", base, new) == 1
    assert "pairs: 85; left out: 2 with an error in either run, 3 in one run only" in capsys.readouterr().out


def test_no_shared_graded_sample_is_refused(copies: tuple[Path, Path]) -> None:
    base, new = copies
    rewrite_samples(new, lambda rs: [dict(r, error="too_long: 99 tokens", score=0.0) for r in rs])
    with pytest.raises(RunFolderError, match="share no sample that both graded without an error"):
        compare_runs(base, new)


def test_alpha_outside_0_1_is_refused(cliff_pair: tuple[Path, Path]) -> None:
    with pytest.raises(RunFolderError, match="alpha must lie strictly between 0 and 1"):
        compare_runs(*cliff_pair, alpha=5.0)


# --- fathom runs ------------------------------------------------------------------------------------


def test_the_manifest_plans_its_samples_outside_the_identity(cliff_pair: tuple[Path, Path]) -> None:
    manifest = json.loads((cliff_pair[0] / "manifest.json").read_text())
    assert manifest["planned"] == 180  # 90 samples and their no-context controls
    assert "planned" not in manifest["identity"]


def test_runs_lists_complete_partial_old_and_broken_runs(
    cliff_pair: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "runs"
    base = shutil.copytree(cliff_pair[0], folder / "base")
    new = shutil.copytree(cliff_pair[1], folder / "new")
    partial = shutil.copytree(cliff_pair[1], folder / "partial")
    old = shutil.copytree(cliff_pair[1], folder / "old")
    rewrite_samples(partial, lambda rs: [dict(r, error="length_mismatch: 990") if i < 2 else r
                                         for i, r in enumerate(rs[:40])])  # fmt: skip
    edit_manifest(old, lambda m: m.pop("planned"))
    for day, name in enumerate(("base", "new", "partial", "old"), start=1):
        path = folder / name / "manifest.json"
        manifest = json.loads(path.read_text())
        manifest["environment"]["created"] = f"2026-11-{day:02d}T10:00:00+00:00"
        path.write_text(json.dumps(manifest))
    (folder / "broken").mkdir()
    (folder / "broken" / "manifest.json").write_text("{")
    (folder / "not-a-run").mkdir()
    damaged = shutil.copytree(cliff_pair[1], folder / "damaged")
    with (damaged / "samples.jsonl").open("ab") as handle:
        handle.write(b"\xff\xfe\n")

    entries = list_runs(folder)
    assert [e.folder.name for e in entries] == ["base", "new", "partial", "old", "broken", "damaged"]
    by_name = {e.folder.name: e for e in entries}
    assert by_name["base"].status == "complete" and by_name["base"].effective_length == 16384
    assert by_name["new"].status == "complete" and by_name["new"].effective_length == 4096
    assert by_name["partial"].status == "partial 130/180, 2 errors"  # with the 90 controls
    assert by_name["old"].status == "partial? 180/?"
    assert by_name["broken"].problem is not None and "manifest.json is damaged" in by_name["broken"].problem
    assert by_name["damaged"].problem is not None and "line 181 is not a record" in by_name["damaged"].problem

    created = json.loads((old / "manifest.json").read_text())["environment"]["created"]
    sweep(old, model=CLIFF)  # resuming the old run records its plan, and changes nothing else
    assert [e.status for e in list_runs(old)] == ["complete"]
    assert json.loads((old / "manifest.json").read_text())["environment"]["created"] == created

    assert cli("runs", folder) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 6
    assert lines[0].split() == ["2026-11-01", "10:00", "base", "sim:perfect", "niah", "1k-16k", "k=10",
                                "complete", "ctl", "0/90", "effective", "16k"]  # fmt: skip
    cliff = lines[1].split()
    assert cliff[3] == CLIFF and cliff[-5:] == ["complete", "ctl", "0/90", "effective", "4k"]
    assert "partial 130/180, 2 errors" in lines[2]
    assert lines[4].startswith("—") and "broken" in lines[4] and "unreadable: " in lines[4]
    assert "damaged" in lines[5] and "not UTF-8 text" in lines[5]
    assert base.exists() and new.exists()


def test_runs_of_a_run_folder_and_of_nothing(
    cliff_pair: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli("runs", cliff_pair[0]) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and "sim:perfect" in out
    empty = tmp_path / "empty"
    empty.mkdir()
    assert cli("runs", empty) == 0
    assert capsys.readouterr().out == f"no run folders in {empty}\n"
    assert cli("runs", tmp_path / "nowhere") == 2
    err = capsys.readouterr().err
    assert err.startswith(f"fathom: error: '{tmp_path / 'nowhere'}' does not exist") and err.count("\n") == 1
