"""The effective length at the worst depth (issue #33): every depth's cell must pass, not only the
length pooled over depths, so a hole at mid-depth shortens it where the pooled one passes."""

from __future__ import annotations

import dataclasses

from test_analysis import record

from fathom.analysis.effective import EffectiveLength, run_effective_length
from fathom.analysis.niah import cell_table, summarize, worst_depth_effective_length
from fathom.analysis.summary import SUMMARIES, NiahGrid, run_summary
from fathom.records import SampleRecord
from fathom.report.html.header import headline
from fathom.report.text import niah_text
from fathom.schemas import SUMMARY_SCHEMA

DEPTHS = (0.0, 0.25, 0.5, 0.75, 1.0)


def cell_records(length: int, depth: float, hits: int, n: int = 10) -> list[SampleRecord]:
    """``hits`` of ``n`` samples right at one (length, depth)."""
    return [record(length, depth, 1.0 if i < hits else 0.0, sample=i) for i in range(n)]


def holed_run() -> list[SampleRecord]:
    """10 samples a cell at five depths. 1k and 4k: every cell 10 of 10. 2k: 10 of 10 but 5 of 10 at
    depth 0.5, so 45 of 50 = 0.9 pooled, which passes 0.85, while that cell's 0.5 fails it. 8k: 0 of 10
    everywhere. Pooled, 1k, 2k and 4k pass: 4k. At the worst depth, 2k fails: 1k."""
    hits = {(2048, 0.5): 5} | {(8192, depth): 0 for depth in DEPTHS}
    return [
        r
        for length in (1024, 2048, 4096, 8192)
        for depth in DEPTHS
        for r in cell_records(length, depth, hits.get((length, depth), 10))
    ]


def test_a_mid_depth_hole_shortens_the_worst_depth_effective_length_not_the_pooled_one() -> None:
    effective = summarize(holed_run())["effective_length"]
    assert effective["mean"] == 4096
    assert effective["worst_depth"] == 1024


def test_a_cell_exactly_at_the_threshold_passes_and_one_sample_fewer_fails() -> None:
    """17 of 20 is 0.85 exactly (k / n is rounded once, to 0.85's own float): it passes at 0.85, as a
    pooled length at exactly the threshold does; 16 of 20 (0.8) fails, and so does 17 of 20 against a
    threshold a hair above it."""
    at = [*cell_records(1024, 0.0, 20, n=20), *cell_records(1024, 0.5, 17, n=20)]
    below = [*cell_records(1024, 0.0, 20, n=20), *cell_records(1024, 0.5, 16, n=20)]
    assert worst_depth_effective_length(cell_table(at), 0.85) == 1024
    assert worst_depth_effective_length(cell_table(below), 0.85) is None
    assert worst_depth_effective_length(cell_table(at), 0.8500001) is None
    assert worst_depth_effective_length(cell_table(below), 0.8) == 1024


def test_a_cell_with_nothing_scored_fails_its_length_and_every_longer_one() -> None:
    errored = [dataclasses.replace(r, error="timeout: after 600s") for r in cell_records(2048, 1.0, 10)]
    records = [*cell_records(1024, 0.0, 10), *cell_records(1024, 1.0, 10), *cell_records(2048, 0.0, 10)]
    records += errored + cell_records(4096, 0.0, 10) + cell_records(4096, 1.0, 10)
    assert worst_depth_effective_length(cell_table(records)) == 1024
    assert summarize(records)["effective_length"]["mean"] == 4096  # pooled, 2k's scored cell is 10/10


def test_the_comparison_reads_it_beside_the_pooled_one() -> None:
    # Pooled 2k on the 95% lower bound: 45 of 50, p = 0.9, z^2/n = 0.076832, centre = 0.938415 /
    # 1.076832 = 0.871460, half = 1.959964 * sqrt(0.0018 + 0.000384) / 1.076832 = 0.085063, so 0.786,
    # under 0.85: 1k. 1k's 50 of 50: 50 / 53.841 = 0.929 passes.
    assert run_effective_length(holed_run()) == EffectiveLength(mean=4096, lower_bound=1024, worst_depth=1024)


def test_the_terminal_summary_and_report_show_it() -> None:
    summary = run_summary(holed_run())
    assert isinstance(summary.sweep, NiahGrid)
    line = next(line for line in niah_text(summary.sweep) if line.startswith("effective length"))
    assert line.endswith("; at the worst depth (every depth's cell >= 0.85): 1k")
    assert line.startswith("effective length (score >= 0.85): 4k;")
    assert "<b>1k</b><span>at the worst depth (every cell&#x27;s accuracy ≥ 0.85)</span>" in headline(summary)


def test_a_summary_of_schema_6_gains_it_from_its_own_cells() -> None:
    today = summarize(holed_run())
    old = {"schema": 6, "kind": "niah", **today}
    old["effective_length"] = {k: v for k, v in today["effective_length"].items() if k != "worst_depth"}
    old["variants"] = {"niah": {k: old[k] for k in ("cells", "lengths", "effective_length")}}
    upgraded = SUMMARIES.upgrade(old)
    # through 7 (the worst depth), then 8 (thinking) and 9 (the intervals of few fractional scores)
    assert SUMMARY_SCHEMA == upgraded["schema"] == 9
    assert upgraded["effective_length"]["worst_depth"] == 1024
    assert upgraded["variants"]["niah"]["effective_length"]["worst_depth"] == 1024


def test_an_upgrade_leaves_other_kinds_alone() -> None:
    old = {"schema": 6, "kind": "perplexity", "samples": 0}
    assert SUMMARIES.upgrade(old) == {**old, "schema": 9}
    # RULER's grid gains its categories (tests/test_ruler_categories.py), never a worst depth: an
    # empty grid, none.
    ruler = {"schema": 6, "kind": "ruler", "samples": 0, "grid": []}
    assert SUMMARIES.upgrade(ruler) == {**ruler, "schema": 9}
