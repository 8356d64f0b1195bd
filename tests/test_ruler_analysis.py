"""Tests for RULER's analysis: intervals, the task grid, equal task weighting, RULER's published
aggregates, the depth profile, the plots and the derived files of a RULER run folder."""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_store import identity

from fathom.analysis.niah import cell_table
from fathom.analysis.ruler import (
    POOLED,
    DepthBin,
    TaskCell,
    depth_bin,
    depth_profile,
    length_scores,
    ruler_aggregates,
    ruler_summary,
    task_grid,
)
from fathom.analysis.stats import score_interval, wilson_interval
from fathom.analysis.summary import RulerGrid, run_summary
from fathom.cli import _print_summary
from fathom.manifest import Manifest
from fathom.records import SampleRecord
from fathom.report.derive import derive
from fathom.report.files import DEPTH, GRID, HEATMAP, SUMMARY
from fathom.report.plots import plot_depth_profile, plot_task_grid
from fathom.report.text import ruler_text
from fathom.run.store import RunFolder
from fathom.spec import RunSpec

K4, K8, K16, K32, K64, K128 = (4096 * 2**i for i in range(6))


def rec(
    task: str = "vt",
    length: int = K4,
    score: float = 1.0,
    sample: int = 0,
    depths: tuple[float, ...] = (0.5,),
    error: str | None = None,
    beyond_window: bool = False,
) -> SampleRecord:
    return SampleRecord(
        sample_id=f"{task}|L{length}|S{sample}", task=task, length=length, depth=None, sample=sample,
        seed=0, prompt_sha256="0" * 64, target_tokens=length, actual_tokens=length, needle_kind="ruler",
        needle_token_offsets=tuple(int(d * length) for d in depths), needle_depths=depths, question="q?",
        answers=("a",), output="a" if score else "", finish_reason="stop", score=score,
        matched=("a",) if score else (), scoring="all", latency_s=0.0, beyond_window=beyond_window,
        max_new_tokens=30, error=error,
    )  # fmt: skip


# --- score_interval ---------------------------------------------------------------------------------


def test_binary_scores_get_the_wilson_interval() -> None:
    mean, low, high = score_interval([1.0, 1.0, 0.0, 1.0])
    assert mean == pytest.approx(0.75)
    # Wilson, 3 of 4, z^2 = 3.841459: centre (0.75 + 0.480182) / 1.960365 = 0.627527, half-width
    # 1.959964 * sqrt(0.046875 + 0.060023) / 1.960365 = 0.326886.
    assert (low, high) == pytest.approx((0.300641, 0.954413), abs=1e-6)


def test_few_fractional_scores_get_wilsons_interval_of_their_mean() -> None:
    # Two scores: Wilson's of 1 of 2, (0.5 + z²/4 ± z·sqrt(1/8 + z²/16)) / (1 + z²/2); the bootstrap's
    # resampled means would make (0.25, 0.75), as certain as 8 pass/fail samples.
    assert score_interval([0.25, 0.75]) == pytest.approx((0.5, 0.094531, 0.905469), abs=1e-6)
    # Identical fractional scores are not certain either (the bootstrap made a zero-width interval).
    assert score_interval([0.5, 0.5, 0.5]) == pytest.approx((0.5, 0.125334, 0.874666), abs=1e-6)


def test_bootstrap_is_deterministic_and_close_to_the_normal_interval() -> None:
    scores = [((i * 37) % 11) / 10 for i in range(60)]  # spread over 0.0..1.0, not all binary
    first, second = score_interval(scores), score_interval(scores)
    assert first == second
    mean, low, high = first
    half = 1.959964 * statistics.pstdev(scores) / math.sqrt(len(scores))
    assert mean == pytest.approx(statistics.fmean(scores))
    assert low == pytest.approx(statistics.fmean(scores) - half, abs=0.02)
    assert high == pytest.approx(statistics.fmean(scores) + half, abs=0.02)


def test_a_single_fractional_score_and_none_are_not_falsely_certain() -> None:
    # Wilson with 0.5 of 1: centre 0.5, half-width 1.959964 * sqrt(0.25 + 0.960365) / 4.841459 = 0.445379.
    assert score_interval([0.5]) == pytest.approx((0.5, 0.054621, 0.945379), abs=1e-6)
    assert score_interval([]) == (None, 0.0, 1.0)


# --- task grid and per-length scores ---------------------------------------------------------------


def test_task_grid_orders_by_suite_then_name_and_counts_errors() -> None:
    records = [
        rec("zz_custom", K4),
        rec("qa_1", K8, 0.0),
        rec("qa_1", K4, 1.0),
        rec("niah_single_1", K4, 1.0, sample=0),
        rec("niah_single_1", K4, 0.5, sample=1, beyond_window=True),
        rec("niah_single_1", K4, 0.0, sample=2, error="timeout: 600s"),
        rec("aa_custom", K4),
        rec("vt", K4),
    ]
    grid = task_grid(records)
    assert [(c.task, c.length) for c in grid] == [
        ("niah_single_1", K4),
        ("vt", K4),
        ("qa_1", K4),
        ("qa_1", K8),
        ("aa_custom", K4),
        ("zz_custom", K4),
    ]
    first = grid[0]
    assert (first.n, first.errors, first.mean, first.beyond_window) == (2, 1, 0.75, True)
    # Wilson's of the mean of (1.0, 0.5): 1.5 of 2.
    assert (first.ci_low, first.ci_high) == pytest.approx((0.197867, 0.973323), abs=1e-6)
    assert not grid[1].beyond_window


def test_each_task_weighs_the_same_at_a_length() -> None:
    records = [rec("vt", K4, 1.0, sample=i) for i in range(4)] + [rec("cwe", K4, 0.0, depths=())]
    (row,) = length_scores(task_grid(records))
    assert row.mean == pytest.approx(0.5)  # not 0.8, the mean over the five samples
    # The tasks' Wilson intervals combined (MOVER): vt's 4 of 4 is (4 / 7.841459, 1) = (0.510109, 1) and
    # cwe's 0 of 1 is (0, 3.841459 / 4.841459) = (0, 0.793451); each side has one task's distance, halved.
    assert (row.ci_low, row.ci_high) == pytest.approx((0.255055, 0.896725), abs=1e-6)
    assert row.tasks == 2


def test_a_length_where_a_task_has_nothing_scored_has_no_score() -> None:
    records = [rec("vt", K4), rec("cwe", K4), rec("vt", K8), rec("cwe", K8, error="http: 500")]
    rows = length_scores(task_grid(records))
    assert [(r.length, r.tasks, r.mean) for r in rows] == [(K4, 2, 1.0), (K8, 1, None)]
    assert rows[1].ci_low is None and rows[1].ci_high is None


# --- RULER's aggregates ----------------------------------------------------------------------------

RULER_LENGTHS = (K4, K8, K16, K32, K64, K128)


# Rows of RULER's README table (NVIDIA/RULER): per-length scores, then average, wAvg inc, wAvg dec and
# effective length as published.
@pytest.mark.parametrize(
    ("scores", "published", "effective"),
    [
        ((96.6, 96.3, 95.2, 93.2, 87.0, 81.2), (91.6, 89.0, 94.1), K64),  # GPT-4-1106-preview
        ((95.5, 93.8, 91.6, 87.4, 84.7, 77.0), (88.3, 85.4, 91.3), K32),  # Llama-3.1-8B
        ((96.5, 95.8, 95.4, 94.8, 88.4, 66.6), (89.6, 85.5, 93.7), K64),  # Llama-3.1-70B
        ((96.7, 96.6, 96.4, 96.0, 95.4, 95.1), (96.0, 95.7, 96.3), K128),  # Jamba-1.5-large: >128k
        ((96.4, 96.3, 95.3, 94.0, 85.9, 48.1), (86.0, 79.5, 92.5), K64),  # Mistral-Large-2411: 85.9
    ],
)
def test_reproduces_rulers_published_aggregates(
    scores: tuple[float, ...], published: tuple[float, float, float], effective: int
) -> None:
    agg = ruler_aggregates(dict(zip(RULER_LENGTHS, scores, strict=True)))
    assert agg.average is not None and agg.wavg_inc is not None and agg.wavg_dec is not None
    assert (round(agg.average, 1), round(agg.wavg_inc, 1), round(agg.wavg_dec, 1)) == published
    assert agg.effective_length == effective
    assert agg.threshold == 85.6


def test_weighted_averages_by_hand() -> None:
    agg = ruler_aggregates({K8: 60.0, K4: 90.0, K16: 30.0})  # any order in, ascending out
    assert agg.lengths == (K4, K8, K16)
    assert agg.average == pytest.approx(60.0)
    assert agg.wavg_inc == pytest.approx((90 * 1 + 60 * 2 + 30 * 3) / 6)
    assert agg.wavg_dec == pytest.approx((90 * 3 + 60 * 2 + 30 * 1) / 6)


def test_relative_threshold_uses_the_shortest_length_or_the_given_base() -> None:
    per_length = {K4: 80.0, K8: 70.0, K16: 67.0, K32: 60.0}
    agg = ruler_aggregates(per_length)
    assert agg.effective_length is None  # never above 85.6
    assert (agg.relative_base, agg.relative_cutoff) == (80.0, pytest.approx(68.0))
    assert agg.effective_length_relative == K8
    based = ruler_aggregates(per_length, base=70.0)  # cutoff 59.5
    assert based.effective_length_relative == K32


def test_effective_length_must_exceed_the_threshold() -> None:
    assert ruler_aggregates({K4: 90.0, K8: 85.6, K16: 90.0}).effective_length == K4
    assert ruler_aggregates({K4: 90.0, K8: 85.61}).effective_length == K8


def test_a_task_scoring_exactly_the_threshold_does_not_pass() -> None:
    """107 of 125 is 0.856 exactly, 85.6 in percent: RULER's threshold must be exceeded; 108 passes."""
    records = [
        rec("vt", length, 1.0 if i < hits else 0.0, i)
        for length, hits in ((K4, 125), (K8, 108), (K16, 107), (K32, 125))
        for i in range(125)
    ]
    mean = ruler_summary(records)["aggregates"]["mean"]
    assert mean["scores"][1:3] == [86.4, 85.6]
    assert mean["effective_length"] == K8


def test_effective_length_stops_at_a_dip_despite_recovery() -> None:
    agg = ruler_aggregates({K4: 95.0, K8: 90.0, K16: 70.0, K32: 92.0, K64: 93.0})
    assert agg.effective_length == K8
    assert agg.effective_length_relative == K8  # cutoff 0.85 * 95 = 80.75


def test_effective_length_none_when_never_above_and_on_missing_scores() -> None:
    assert ruler_aggregates({K4: 50.0, K8: 40.0}).effective_length is None
    missing = ruler_aggregates({K4: 95.0, K8: None, K16: 95.0})
    assert (missing.effective_length, missing.effective_length_relative) == (K4, K4)
    assert (missing.average, missing.wavg_inc, missing.wavg_dec) == (None, None, None)
    empty = ruler_aggregates({})
    assert (empty.effective_length, empty.relative_cutoff, empty.average) == (None, None, None)


# --- depth profile ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("depth", "index"), [(0.0, 0), (0.0999, 0), (0.1, 1), (0.3, 3), (0.7, 7), (0.95, 9), (1.0, 9)]
)
def test_depth_bins(depth: float, index: int) -> None:
    assert depth_bin(depth) == index


def test_depth_profile_bins_by_mean_needle_depth_per_task_and_pooled() -> None:
    records = [
        rec("vt", K4, 1.0, 0, depths=(0.0, 0.4)),  # mean 0.2 -> bin 2
        rec("vt", K8, 0.0, 1, depths=(0.25,)),  # bin 2
        rec("vt", K4, 1.0, 2, depths=(0.95,)),  # bin 9
        rec("niah_single_1", K4, 1.0, 0, depths=(0.21,)),  # bin 2; suite order puts it first
        rec("niah_single_1", K4, 1.0, 1, depths=(0.5,), error="timeout: 1s"),  # not a data point
        rec("cwe", K4, 0.5, depths=()),  # no needles: no row
    ]
    profile = depth_profile(records)
    rows = [(b.task, b.low, b.high, b.n, b.mean) for b in profile]
    assert rows == [
        ("niah_single_1", 0.2, 0.3, 1, 1.0),
        ("vt", 0.2, 0.3, 2, 0.5),
        ("vt", 0.9, 1.0, 1, 1.0),
        (POOLED, 0.2, 0.3, 3, pytest.approx(2 / 3)),
        (POOLED, 0.9, 1.0, 1, 1.0),
    ]
    # Wilson, 2 of 3: centre (2/3 + 0.640243) / 2.280486 = 0.573084, half-width
    # 1.959964 * sqrt(0.074074 + 0.106707) / 2.280486 = 0.365424.
    assert (profile[3].ci_low, profile[3].ci_high) == pytest.approx((0.207660, 0.938508), abs=1e-6)


def test_depth_profile_of_tasks_without_needles_is_empty() -> None:
    assert depth_profile([rec("cwe", depths=()), rec("fwe", depths=())]) == []


# --- the summary -----------------------------------------------------------------------------------


def two_task_run() -> list[SampleRecord]:
    """vt and qa_1 at 4k-32k: vt 100, 100, 50, 0 and qa_1 100, 80, 60, 40 (percent), 5 samples each."""
    vt, qa = (1.0, 1.0, 0.5, 0.0), (1.0, 0.8, 0.6, 0.4)
    records = []
    for length, vt_score, qa_score in zip((K4, K8, K16, K32), vt, qa, strict=True):
        for i in range(5):
            qa_hit = 1.0 if i < round(5 * qa_score) else 0.0
            records.append(rec("vt", length, vt_score, i, depths=(i / 5, i / 5 + 0.1)))
            records.append(rec("qa_1", length, qa_hit, i, depths=(i / 5,), beyond_window=length > K16))
    return [*records, rec("vt", K32, 0.0, 9, error="http: 500")]


def test_ruler_summary_is_json_ready_with_both_aggregates() -> None:
    summary = ruler_summary(two_task_run())
    assert json.loads(json.dumps(summary, allow_nan=False)) == summary
    assert summary["kind"] == "ruler"
    assert (summary["samples"], summary["errors"], summary["error_kinds"]) == (41, 1, {"http": 1})
    assert [row["mean"] for row in summary["lengths"]] == pytest.approx([1.0, 0.9, 0.55, 0.2])
    mean, low = summary["aggregates"]["mean"], summary["aggregates"]["lower_bound"]
    assert mean["scores"] == pytest.approx([100.0, 90.0, 55.0, 20.0])
    assert mean["average"] == pytest.approx(66.25)
    assert (mean["effective_length"], mean["effective_length_relative"]) == (K8, K8)
    # 5/5 has a Wilson lower bound of 0.57, so nothing passes on the bound; the relative cutoff is
    # 0.85 x the mean's 4k score (85.0), not x the bound's.
    assert low["relative_base"] == 100.0 and low["effective_length"] is None
    assert all(lo <= m for lo, m in zip(low["scores"], mean["scores"], strict=True))
    assert len(summary["grid"]) == 8 and summary["grid"][0]["task"] == "vt"
    assert {b["task"] for b in summary["depth_profile"]} == {"vt", "qa_1", POOLED}


def test_cell_table_refuses_records_without_a_fixed_depth() -> None:
    with pytest.raises(ValueError, match="no fixed depth"):
        cell_table([rec()])


# --- plots -----------------------------------------------------------------------------------------


def read_png(path: Path) -> np.ndarray:
    import matplotlib.image

    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    return np.asarray(matplotlib.image.imread(path))


def uniform_grid(score: float, beyond_from: int | None = None) -> list[TaskCell]:
    low, high = wilson_interval(10 * score, 10)
    return [
        TaskCell(task, length, 10, 0, score, low, high, beyond_from is not None and length >= beyond_from)
        for task in ("vt", "niah_single_1", "cwe")
        for length in RULER_LENGTHS
    ]


def test_task_grid_plot_writes_a_png_whose_colour_follows_the_score(tmp_path: Path) -> None:
    good, bad = tmp_path / "good.png", tmp_path / "bad.png"
    plot_task_grid(uniform_grid(1.0), good, "model · ruler · k=10")
    plot_task_grid(uniform_grid(0.0), bad, "model · ruler · k=10")
    a, b = read_png(good), read_png(bad)
    assert a.shape == b.shape and 300 <= a.shape[0] <= 4000
    assert a[..., 1].mean() > b[..., 1].mean()  # green dominates the all-correct grid
    assert b[..., 0].mean() > a[..., 0].mean()


def test_task_grid_plot_handles_gaps_wide_intervals_and_the_window(tmp_path: Path) -> None:
    grid = uniform_grid(0.5, beyond_from=K64)
    grid[0] = TaskCell("vt", K4, 0, 3, None, 0.0, 1.0, False)  # only errors: n/a, and an n/a average
    del grid[-1]  # never run
    plain, marked = tmp_path / "plain.png", tmp_path / "marked.png"
    plot_task_grid(grid, plain, "mixed", wide_interval=1.0)
    plot_task_grid(grid, marked, "mixed", wide_interval=0.1)
    assert not np.array_equal(read_png(plain), read_png(marked))


def test_plots_reject_empty_input(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no cells to plot"):
        plot_task_grid([], tmp_path / "g.png", "empty")
    with pytest.raises(ValueError, match="no depth bins to plot"):
        plot_depth_profile([DepthBin("vt", 0.0, 0.1, 0, None, 0.0, 1.0)], tmp_path / "d.png", "empty")


def test_depth_profile_plot_draws_a_line_per_task_and_the_pooled_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """two_task_run's needles sit in the bins 0, 20, 40, 60 and 80% (centres 5, 25, ... 85). Each bin
    holds one sample of each task per length: vt scores 1, 1, 0.5, 0 there (62.5%); qa_1's sample i
    is right where i < 5, 4, 3, 2 (4, 4, 3, 2, 1 of 4 by bin); pooled, (2.5 + qa's) / 8."""
    import fathom.report.plots

    figures: list[Any] = []
    save = fathom.report.plots.save_figure
    monkeypatch.setattr(
        fathom.report.plots, "save_figure", lambda fig, *rest: (figures.append(fig), save(fig, *rest))
    )
    path = tmp_path / "depth.png"
    plot_depth_profile(depth_profile(two_task_run()), path, "model · ruler · depth")
    (fig,) = figures
    ax = fig.axes[0]
    expected = {
        "vt": [62.5] * 5,
        "qa_1": [100.0, 100.0, 75.0, 50.0, 25.0],
        POOLED: [81.25, 81.25, 68.75, 56.25, 43.75],
    }
    assert [line.get_label() for line in ax.get_lines()] == list(expected)
    for line, scores in zip(ax.get_lines(), expected.values(), strict=True):
        assert list(line.get_xdata()) == pytest.approx([5.0, 25.0, 45.0, 65.0, 85.0])
        assert list(line.get_ydata()) == pytest.approx(scores)
    legend = ax.get_legend()
    assert legend is not None
    assert [t.get_text() for t in legend.get_texts()] == ["vt", "qa_1", "95% interval", POOLED]
    assert ax.get_title() == "model · ruler · depth"
    read_png(path)


# --- derived files and the printed summary ---------------------------------------------------------


def ruler_folder(path: Path, records: list[SampleRecord], exact: bool = True) -> RunFolder:
    folder = RunFolder(path)
    # Ten samples a cell: the spec asks for every index the records hold (two_task_run's failed one is 9).
    spec = RunSpec("ruler", "sim:cliff", "char", tuple(sorted({r.length for r in records})), (), 10).to_json()
    served = {"trained_window": K16, "exact_lengths": exact}
    folder.start(Manifest.from_json({"schema": 1, "identity": identity(spec), "backend": served}))
    with folder:
        for record in records:
            folder.append(record)
    return folder


def test_derive_writes_the_ruler_summary_grid_and_depth_plots(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = ruler_folder(tmp_path / "run", two_task_run())
    summary = derive(folder)
    written = json.loads((folder.path / SUMMARY).read_text())
    assert written == json.loads(json.dumps(summary.to_json()))
    assert written["kind"] == "ruler" and written["trained_window"] == K16
    assert written["run"] == {
        "task": "ruler",
        "model": "sim:cliff",
        "tokenizer": "char",
        "samples": 10,
        "seed": 0,
    }
    assert written["aggregates"]["mean"]["effective_length"] == K8
    read_png(folder.path / GRID)
    read_png(folder.path / DEPTH)
    assert not (folder.path / HEATMAP).exists()

    _print_summary(folder.path)
    out = capsys.readouterr().out
    assert "average   100.0    90.0    55.0    20.0" in out
    assert "vt        100.0   100.0    50.0     0.0" in out
    assert "qa_1      100.0    80.0    60.0    40.0" in out
    assert "RULER score (percent): average 66.2, wAvg inc" in out  # 66.25
    assert "effective length (score > 85.6): 8k; on the 95% lower bound: none" in out
    assert "0.85 x the shortest length's, 85.0): 8k" in out


def test_derive_without_needles_skips_the_depth_plot(tmp_path: Path) -> None:
    folder = ruler_folder(tmp_path / "run", [rec("cwe", K4, 0.7, depths=())])
    summary = derive(folder)
    assert isinstance(summary.sweep, RulerGrid) and summary.sweep.depth_profile == ()
    read_png(folder.path / GRID)
    assert not (folder.path / DEPTH).exists()


def test_derive_titles_say_when_lengths_are_approximate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    titles: list[str] = []
    monkeypatch.setattr("fathom.report.derive.plot_task_grid", lambda grid, path, title: titles.append(title))
    monkeypatch.setattr(
        "fathom.report.derive.plot_depth_profile", lambda bins, path, title: titles.append(title)
    )
    derive(ruler_folder(tmp_path / "approx", two_task_run(), exact=False))
    derive(ruler_folder(tmp_path / "exact", two_task_run()))
    assert titles[0] == "sim:cliff · ruler · char · k=10 (approximate lengths)"
    assert titles[1].startswith(titles[0]) and titles[1].endswith("score by needle depth")
    assert titles[2] == "sim:cliff · ruler · char · k=10"


def test_ruler_text_shows_missing_values() -> None:
    sweep = run_summary([rec("vt", K4, error="http: 500"), rec("cwe", K4, depths=())]).sweep
    assert isinstance(sweep, RulerGrid)
    text = "\n".join(ruler_text(sweep))
    assert "vt          n/a" in text and "average     n/a" in text
    assert "RULER score (percent): average n/a, wAvg inc n/a, wAvg dec n/a" in text
    assert "(score > 85.6): none" in text
