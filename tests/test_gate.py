"""The regression gate of fathom compare (issue #28): it fires at the default k, keeps its false-alarm
rate, and says what it could see. The flip statistics by hand, then real runs, then the simulation."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from test_analysis import record

from fathom.analysis.effective import effective_length_change, run_effective_length
from fathom.analysis.flips import EXACT_UNITS, RESAMPLES, SignTest, adjust, one_sided, upper_tail
from fathom.analysis.gate import gate
from fathom.analysis.power import pair_chances, samples_needed, sign_test_power
from fathom.cli import main

sys.path.append(str(Path(__file__).parents[1] / "benchmarks"))
from gate_calibration import ALPHA, Design, flag_rate, trial

ISSUE = ["--tokenizer", "cl100k_base", "--lengths", "1k,2k,4k,8k,16k", "--depths", "3", "--samples", "3",
         "--no-progress"]  # fmt: skip


def cli(*args: str | Path) -> int:
    status: int = main([str(a) for a in args])
    return status


# --- the sign tests and their flips, by hand -------------------------------------------------------


def test_the_upper_tail_is_the_binomial_sum_by_hand() -> None:
    # P(X >= w), X ~ Bin(4, 1/2): (1 + 4 + 6 + 4 + 1, 4 + 6 + 4 + 1, 6 + 4 + 1, 4 + 1, 1) / 16.
    assert list(upper_tail(4)) == [16 / 16, 15 / 16, 11 / 16, 5 / 16, 1 / 16]
    assert one_sided(5, 0) == 1 / 32 and one_sided(0, 5) == 1.0 and one_sided(0, 0) == 1.0
    assert one_sided(9, 1) == 11 / 1024  # P(X >= 9) of 10


def test_one_test_alone_keeps_its_exact_p_and_a_copy_of_it_costs_nothing() -> None:
    """A test's adjusted p is the chance its flips reach its p; a second test of the very same pairs
    moves with it, so it adds nothing (Bonferroni would have doubled both)."""
    test = SignTest(tuple(range(7)), (-1,) * 6 + (1,))
    alone = adjust([test])
    assert alone.exact and alone.drop == (one_sided(6, 1),) == (8 / 128,)
    assert alone.drop_adjusted == pytest.approx((8 / 128,), rel=1e-12)
    assert adjust([test, test]).drop_adjusted == pytest.approx((8 / 128, 8 / 128), rel=1e-12)


def test_independent_tests_pay_for_each_other_and_the_step_down_keeps_their_order() -> None:
    """Two tests of disjoint pairs, each 5 of 5 worse: the chance either reaches 1/32 under flips is
    1 - (31/32)^2 = 63/1024, by enumerating all 2^10 flips."""
    first = SignTest(tuple(range(5)), (-1,) * 5)
    second = SignTest(tuple(range(5, 10)), (-1,) * 5)
    weaker = SignTest(tuple(range(10, 13)), (-1, -1, 1))
    adjusted = adjust([first, second, weaker])
    assert adjusted.exact
    assert adjusted.drop_adjusted[:2] == pytest.approx((63 / 1024, 63 / 1024), rel=1e-12)
    # The weaker test is adjusted last: never below the more significant tests' adjusted p.
    assert adjusted.drop_adjusted[2] >= adjusted.drop_adjusted[0]
    assert adjusted.drop_adjusted[2] == pytest.approx(one_sided(2, 1), rel=1e-12)  # 1/2, alone at the end


def test_an_item_flips_whole_so_its_repeats_are_not_new_evidence() -> None:
    """A suite's item asked at two limits is one flip unit: two worse observations of one unit flip
    together, so 3 units all worse have chance 1/8, not the 1/64 of six independent pairs."""
    repeated = SignTest(("a", "a", "b", "b", "c", "c"), (-1,) * 6)
    adjusted = adjust([repeated])
    assert adjusted.drop == (1 / 64,) and adjusted.drop_adjusted == pytest.approx((1 / 8,), rel=1e-12)


def test_many_units_are_resampled_with_a_fixed_seed_and_counted_with_one_more() -> None:
    units = EXACT_UNITS + 7
    test = SignTest(tuple(range(units)), (-1,) * units)
    first, again = adjust([test]), adjust([test])
    assert not first.exact and first.drop_adjusted == again.drop_adjusted  # reproducible
    # No resample but the identity reaches 2^-20: the (hits + 1) / (resamples + 1) floor.
    assert first.drop_adjusted == pytest.approx((1 / (RESAMPLES + 1),), rel=1e-9)


# --- the gate on real runs -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def issue_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The issue's example: 5 lengths x 3 depths x 3 samples, sim:perfect against a cliff at 4k."""
    folder = tmp_path_factory.mktemp("issue")
    assert cli("run", "niah", "--model", "sim:perfect", *ISSUE, "--run-dir", folder / "A") == 0
    assert cli("run", "niah", "--model", "sim:cliff?window=4k", *ISSUE, "--run-dir", folder / "B") == 0
    return folder / "A", folder / "B"


def test_the_issues_example_fails_the_gate_and_a_run_against_itself_passes(
    issue_runs: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base, new = issue_runs
    capsys.readouterr()
    assert cli("compare", base, new, "--out", tmp_path / "cliff") == 1
    out = capsys.readouterr().out
    # 9 pairs a length: 8k and 16k lost all 9 (one-sided p = 2^-9), no cell of 3 pairs can say so.
    assert "gate: REGRESSED: overall, length 8k, length 16k, effective length 16k → 4k (" in out
    assert "  length 8k: 100.0% → 0.0% (9 pairs: 9 worse, 0 better), p = 0.00195, adjusted p = " in out
    assert "warning: no cell test can reach significance at alpha 0.04 with 3 pairs" in out
    assert "regressed cells (by the gate, of 15): none" in out
    data = json.loads((tmp_path / "cliff" / "compare.json").read_text())
    assert data["verdict"] == "regressed" and data["gate"]["fired"][:3] == [
        "overall",
        "length 8k",
        "length 16k",
    ]
    change = data["gate"]["effective_length"]
    assert (change["base"], change["new"], change["steps_high"], change["regressed"]) == (
        16384,
        4096,
        -2,
        True,
    )
    assert cli("compare", base, base, "--out", tmp_path / "self") == 0
    assert "gate: no regression found (" in capsys.readouterr().out
    page = (tmp_path / "cliff" / "compare.html").read_text()
    assert "<h3>The gate</h3><p><strong>Regressed:</strong> overall, length 8k, length 16k" in page


def test_the_gate_says_the_power_each_level_had(issue_runs: tuple[Path, Path]) -> None:
    from fathom.report.compare import compare_runs

    verdicts = compare_runs(*issue_runs).gate
    assert verdicts is not None
    power = {p.level: p for p in verdicts.power}
    assert set(power) == {"overall", "length", "cell"}
    assert power["cell"].pairs == 3 and power["cell"].detectable_drop is None  # 1/8 can never pass
    assert power["length"].pairs == 9 and power["length"].detectable_drop is not None
    # A length's least detectable drop: w of its 9 pairs all worse, w the least with the chance that
    # any test reaches 2^-w under these flips (and 2^-w itself) within 0.04; at least 5 (2^-5 = 0.031).
    assert 5 / 9 <= power["length"].detectable_drop <= 1.0
    assert (
        power["overall"].detectable_drop is not None
        and power["overall"].detectable_drop < power["length"].detectable_drop
    )


def test_five_of_five_pairs_worse_are_flagged_and_the_power_row_says_they_could_be() -> None:
    """One cell of 5 pairs, all right before and wrong after: p = 1/32 = 0.031 overall and in the
    cell (the same pairs; one length is no level of its own), within the sign tests' 0.04 (80% of
    0.05), and only the flip of all five reaches it, so the adjusted p is 1/32 too. The power row
    must say a drop of 5 of 5 could be flagged: counting the test's own 1/32 twice (1/16 = 0.0625)
    said none could."""
    pairs = [(record(4096, 0.5, 1.0, sample=i), record(4096, 0.5, 0.0, sample=i)) for i in range(5)]
    verdicts = gate(pairs, 0.05, lambda r: r.sample_id)
    assert [(t.level, t.verdict) for t in verdicts.tests] == [("overall", "regressed"), ("cell", "regressed")]
    assert [t.p_adjusted for t in verdicts.tests] == pytest.approx([1 / 32] * 2, rel=1e-12)
    assert [(p.level, p.pairs, p.detectable_drop) for p in verdicts.power] == [
        ("overall", 5, 1.0),
        ("cell", 5, 1.0),
    ]
    # Four pairs (1/16 > 0.04) can be neither (the effective length's bootstrap judges them apart).
    four = gate(pairs[:4], 0.05, lambda r: r.sample_id)
    assert all(t.verdict == "unchanged" for t in four.tests) and all(
        p.detectable_drop is None for p in four.power
    )


def test_the_effective_length_by_bootstrap_is_the_runs_own_on_the_data(issue_runs: tuple[Path, Path]) -> None:
    from fathom.analysis.pairing import graded_pairs, twins
    from fathom.report.compare import read_run

    pairs = graded_pairs(twins(read_run(issue_runs[0]), read_run(issue_runs[1])).pairs)
    change = effective_length_change(pairs, 0.01)
    assert change is not None
    assert change.base == run_effective_length([b for b, _ in pairs]).mean == 16384
    assert change.new == run_effective_length([n for _, n in pairs]).mean == 4096
    # Both lost lengths lost every pair: no resample can bring them back.
    assert (change.low, change.high, change.p_value) == (4096, 4096, 0.0)


def test_two_seeds_of_the_noisy_model_are_independent_coins_and_pass_the_gate(tmp_path: Path) -> None:
    """What the simulation below assumes: sim:noisy's answers under two seeds are coins of its
    accuracy, drawn apart, on the very same prompts."""
    grid = ["--tokenizer", "cl100k_base", "--lengths", "1k,2k", "--depths", "11", "--samples", "6",
            "--no-progress", "--no-control"]  # fmt: skip
    for seed in (1, 2):
        model = f"sim:noisy?accuracy=0.8&seed={seed}"
        assert cli("run", "niah", "--model", model, *grid, "--run-dir", tmp_path / str(seed)) == 0
    scores = [
        {
            r["sample_id"]: r["score"]
            for r in map(json.loads, (tmp_path / str(s) / "samples.jsonl").read_text().splitlines())
        }
        for s in (1, 2)
    ]
    assert scores[0].keys() == scores[1].keys() and len(scores[0]) == 132
    first, second = (np.array([run[i] for i in sorted(run)]) for run in scores)
    # 132 coins of 0.8 each: within about 3 standard deviations (0.035) of the accuracy; disagreeing
    # on about 2 x 0.8 x 0.2 = 32% of the samples, as independent coins do (the same coin would on none).
    assert abs(first.mean() - 0.8) < 0.11 and abs(second.mean() - 0.8) < 0.11
    assert 0.18 < float(np.mean(first != second)) < 0.46
    assert cli("compare", tmp_path / "1", tmp_path / "2", "--out", tmp_path / "cmp") == 0


# --- calibration and power, by simulation ----------------------------------------------------------

# 300 trials each: a false-alarm rate of 0.05 would exceed 0.08 in about 1% of such runs; the gate's
# measured rates (benchmarks/results/gate_calibration.json, 2,000 trials) are well below alpha.
TRIALS = 300
TOLERANCE = 0.03


@pytest.mark.slow
@pytest.mark.parametrize("accuracy", [0.95, 0.85])
def test_a_checkpoint_that_did_not_change_is_flagged_at_most_alpha_of_the_time(accuracy: float) -> None:
    rate = flag_rate(TRIALS, seed=7, design=Design(), accuracy=accuracy)
    assert rate.rate <= ALPHA + TOLERANCE


@pytest.mark.slow
def test_a_20_point_drop_at_one_length_is_caught_as_often_as_any_test_could() -> None:
    """5 lengths x 11 depths x 3 samples, a perfect base, the new run's accuracy 20 points down at 8k:
    a pair there turns worse with chance 0.2, never better. With 33 pairs the one-sided test needs 5
    worse (2^-5 = 0.031 <= 0.04 < 2^-4), so no test at alpha 0.05 catches it more often than
    P(Bin(33, 0.2) >= 5) = 0.818. The gate's multiplicity must cost nothing here: its rate over 1,000
    trials lies within 3 standard errors (0.037) of that ceiling, and no higher."""
    import math

    ceiling = 1 - sum(math.comb(33, i) * 0.2**i * 0.8 ** (33 - i) for i in range(5))
    rate = flag_rate(1000, seed=11, design=Design(), accuracy=1.0, drops={8192: 0.2})
    assert ceiling - 0.037 <= rate.rate <= ceiling + 0.037


@pytest.mark.slow
def test_a_20_point_drop_seen_in_the_scores_is_caught_at_k_3() -> None:
    """7 of the 33 samples at 8k lost (21 points in the scores): from a perfect base every trial is
    caught (7 worse of 7: p = 2^-7); from a 98% base at least 80% of them."""
    perfect = flag_rate(TRIALS, seed=13, design=Design(), accuracy=1.0, drops={8192: 0.2}, realised=True)
    assert perfect.rate == 1.0
    noisy = flag_rate(TRIALS, seed=17, design=Design(), accuracy=0.98, drops={8192: 0.2}, realised=True)
    assert noisy.rate >= 0.75  # measured 0.819 over 1,000 trials (benchmarks/results/gate_calibration.json)


def test_a_simulated_trial_holds_every_cell_of_the_design() -> None:
    pairs = trial(np.random.default_rng(0), Design(), 0.9, {8192: 0.5})
    assert len(pairs) == 5 * 11 * 3 and all(b.sample_id == n.sample_id for b, n in pairs)
    at_8k = [n.score for _, n in pairs if n.length == 8192]
    elsewhere = [n.score for _, n in pairs if n.length != 8192]
    assert np.mean(at_8k) < np.mean(elsewhere) - 0.2


def test_gate_on_identical_runs_flags_nothing() -> None:
    pairs = [(b, b) for b, _ in trial(np.random.default_rng(0), Design(), 0.9)]
    verdicts = gate(pairs, 0.05, lambda r: r.sample_id)
    assert not verdicts.regressed and all(t.p_adjusted == 1.0 for t in verdicts.tests)


# --- power before a run ----------------------------------------------------------------------------


def test_the_power_of_a_perfect_base_is_the_binomial_tail_by_hand() -> None:
    """Base always right, the new run right 80% of the time: each pair worse with chance 0.2, never
    better. At alpha 0.05 the test needs 5 worse (2^-5 = 0.031); of 33 pairs that is
    P(Bin(33, 0.2) >= 5) = 1 - sum_{i<5} C(33,i) 0.2^i 0.8^(33-i)."""
    import math

    worse, better = pair_chances(1.0, 0.2)
    assert (worse, better) == pytest.approx((0.2, 0.0))
    by_hand = 1 - sum(math.comb(33, i) * 0.2**i * 0.8 ** (33 - i) for i in range(5))
    assert sign_test_power(33, worse, better, 0.05) == pytest.approx(by_hand, rel=1e-9)
    # 2^-4 = 0.0625 > 0.05: four pairs can never pass, so four pairs have no power at all.
    assert sign_test_power(4, worse, better, 0.05) == 0.0


def test_the_samples_needed_reach_the_power_and_one_fewer_does_not() -> None:
    worse, better = pair_chances(0.9, 0.1)
    k = samples_needed(0.1, 0.9, 0.04 / 5, 11)
    assert k is not None
    assert sign_test_power(k * 11, worse, better, 0.04 / 5) >= 0.8
    assert sign_test_power((k - 1) * 11, worse, better, 0.04 / 5) < 0.8


def test_plan_detect_prints_each_levels_samples_and_refuses_a_drop_out_of_range(
    capsys: pytest.CaptureFixture[str],
) -> None:
    plan = ["plan", "niah", "--arch", "llama-3.1-8b", "--lengths", "1k,2k,4k,8k,16k", "--depths", "11",
            "--samples", "3"]  # fmt: skip
    assert cli(*plan, "--detect", "20", "--base-accuracy", "1") == 0
    out = capsys.readouterr().out
    # At one length: 11 pairs a sample; 5 length tests share 0.04, 0.008 each; a perfect base's pairs
    # go worse with chance 0.2: the least k with power 0.8 is the one the search finds.
    k = samples_needed(0.2, 1.0, 0.04 / 5, 11)
    assert f"  at one length (11 pairs a sample, 5 such tests): --samples {k} (" in out
    assert "  at one cell (1 pair a sample, 55 such tests): --samples " in out
    for bad, message in (
        (["--detect", "0"], "--detect takes a drop in points between 0 and 100, not 0"),
        (["--detect", "150"], "--detect takes a drop in points between 0 and 100, not 150"),
        (["--detect", "30", "--base-accuracy", "0.2"], "--base-accuracy must lie above the drop (0.3)"),
        (["--detect", "10", "--alpha", "1"], "--alpha must lie strictly between 0 and 1, not 1"),
    ):
        assert cli(*plan, *bad) == 2
        out, err = capsys.readouterr()
        assert message in err and len(err.strip().splitlines()) == 1
        assert out == ""  # refused before the plan is made, not after its table


def test_a_ruler_runs_effective_length_by_bootstrap_is_its_own_on_the_data(tmp_path: Path) -> None:
    """RULER's effective length averages its tasks' means and passes above 85.6: the bootstrap's
    reading of the data must be the run's own, as the summary computes it."""
    from fathom.analysis.pairing import graded_pairs, twins
    from fathom.report.compare import read_run

    grid = ["--tokenizer", "cl100k_base", "--lengths", "2k,8k", "--samples", "8", "--corpus", "noise",
            "--no-progress", "--no-control"]  # fmt: skip
    models = {"base": "sim:perfect", "new": "sim:cliff?window=4k&floor=0.5"}
    for name, model in models.items():
        assert cli("run", "niah_multiquery", "--model", model, *grid, "--run-dir", tmp_path / name) == 0
    pairs = graded_pairs(twins(read_run(tmp_path / "base"), read_run(tmp_path / "new")).pairs)
    change = effective_length_change(pairs, 0.01)
    assert change is not None
    assert (change.base, change.new) == (8192, 2048)
    assert change.base == run_effective_length([b for b, _ in pairs]).mean
    assert change.new == run_effective_length([n for _, n in pairs]).mean
