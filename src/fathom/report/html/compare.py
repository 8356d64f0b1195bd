"""The comparison of two runs (``fathom compare``'s result) as HTML: a section for a run's report,
and compare.html, a page of its own with the two runs' grids side by side."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from fathom.analysis.control import CONTROL_WORDS
from fathom.analysis.paired import machine_warning
from fathom.analysis.summary import Summary
from fathom.report.html.page import (
    FAILURE_LABELS,
    Square,
    depth_label,
    esc,
    heatmap,
    number_box,
    page,
    percent,
    summary_heatmap,
    table,
)
from fathom.report.plots import comparison_rows, format_length
from fathom.safe_files import write_file
from fathom.units import length_or_none, length_span

VERDICT_FLAGS = {"regressed": " ▼", "improved": " ▲"}


def _row(task: str | None, depth: float | None) -> str:
    """A compared cell's row: its task (RULER's), depth (NIAH's), or variant and depth (NIAH's, in a
    run of several variants)."""
    return " · ".join(part for part in (task, None if depth is None else depth_label(depth)) if part)


def _where(cell: Mapping[str, Any]) -> str:
    return f"{format_length(cell['length'])} · {_row(cell['task'], cell['depth'])}"


def _difference_square(cell: Mapping[str, Any]) -> Square:
    title = (
        f"{_where(cell)}: base {cell['base_mean']:.1%} → new {cell['new_mean']:.1%} "
        f"({100 * cell['difference']:+.1f} points), {cell['pairs']} pairs, {cell['worse']} worse, "
        f"{cell['better']} better, p {cell['p_value']:.3g}, adjusted p {cell['p_adjusted']:.3g}: "
        f"{cell['verdict']}"
    )
    place = [(name, str(cell[name]) if name == "task" else repr(cell[name]))
             for name in ("depth", "task") if cell[name] is not None]  # fmt: skip
    return Square(
        row=_row(cell["task"], cell["depth"]),
        column=format_length(cell["length"]),
        # The accuracy colours over -1..1: red worse, yellow the same, green better.
        value=min(1.0, max(0.0, (cell["difference"] + 1) / 2)),
        label=f"{100 * cell['difference']:+.0f}{VERDICT_FLAGS.get(cell['verdict'], '')}",
        title=title,
        marks=(cell["verdict"],),
        data=(("length", str(cell["length"])), *place, ("verdict", cell["verdict"])),
    )


def difference_heatmap(comparison: Mapping[str, Any]) -> str:
    """New minus base per cell, in points; regressed and improved cells outlined and flagged."""
    cells = comparison["cells"]
    squares = [_difference_square(c) for c in cells]
    rows = [_row(*row) for row in comparison_rows((c["task"], c["depth"]) for c in cells)]
    columns = [format_length(n) for n in sorted({c["length"] for c in cells})]
    return heatmap(squares, rows, columns, corner="new minus base")


def _changed_cells(comparison: Mapping[str, Any]) -> str:
    changed = sorted(
        (c for c in comparison["cells"] if c["verdict"] != "unchanged"),
        key=lambda c: (c["verdict"], c["p_adjusted"]),
    )
    if not changed:
        return "<p>none</p>"
    head = ("verdict", "cell", "base", "new", "difference (points)", "pairs", "worse", "better", "p",
            "adjusted p")  # fmt: skip
    rows = [
        (c["verdict"], _where(c), percent(c["base_mean"]), percent(c["new_mean"]),
         f"{100 * c['difference']:+.1f}", c["pairs"], c["worse"], c["better"], f"{c['p_value']:.3g}",
         f"{c['p_adjusted']:.3g}")
        for c in changed
    ]  # fmt: skip
    return table(head, rows)


def _comparison_boxes(comparison: Mapping[str, Any]) -> str:
    overall = comparison["overall"]
    # A suite's verdicts are its tasks' (``fathom.analysis.suite_pairs``), and it has no effective length.
    units = "tasks" if "tasks" in comparison else "cells"
    boxes = [
        number_box(comparison.get("verdict", "unchanged"), "the gate's verdict"),
        number_box(
            f"{percent(overall['base_mean'])} → {percent(overall['new_mean'])}",
            f"overall, base → new (p {overall['p_value']:.3g})",
        ),
        number_box(str(comparison["regressions"]), f"regressed {units}"),
        number_box(str(comparison["improvements"]), f"improved {units}"),
    ]
    if "effective_length" in comparison:
        base, new = comparison["effective_length"]["base"], comparison["effective_length"]["new"]
        boxes += [
            number_box(f"{length_or_none(base['mean'])} → {length_or_none(new['mean'])}", "effective length"),
            number_box(
                f"{length_or_none(base['lower_bound'])} → {length_or_none(new['lower_bound'])}",
                "effective length on the 95% lower bound",
            ),
        ]
        if any(cell["depth"] is not None for cell in comparison["cells"]):  # NIAH's: RULER's are drawn
            boxes.append(
                number_box(
                    f"{length_or_none(base['worst_depth'])} → {length_or_none(new['worst_depth'])}",
                    "effective length at the worst depth",
                )
            )
    return f'<div class="headline">{"".join(boxes)}</div>'


def _gate(comparison: Mapping[str, Any]) -> str:
    """The gate: its verdict and what fired, its tests above the cells, the effective length's
    bootstrap, and the power each level had (with a warning for a level that could flag nothing)."""
    gate = comparison.get("gate")
    if gate is None:
        return ""
    fired = gate["fired"]
    exits = "<code>fathom compare</code> exits with"
    verdict = (
        f"<p><strong>Regressed:</strong> {esc(', '.join(fired))}. {exits} 1.</p>"
        if fired
        else f"<p><strong>No regression found.</strong> {exits} 0.</p>"
    )
    head = ("level", "where", "base", "new", "pairs", "worse", "better", "p (one-sided)", "adjusted p",
            "verdict")  # fmt: skip
    rows = [
        (t["level"], _gate_name(t), percent(t["base_mean"]), percent(t["new_mean"]), t["pairs"], t["worse"],
         t["better"], f"{t['p_value']:.3g}", f"{t['p_adjusted']:.3g}", t["verdict"])
        for t in gate["tests"] if t["level"] != "cell"
    ]  # fmt: skip
    signs = f"{gate['signs_alpha']:.3g}"
    return (
        f"<h3>The gate</h3>{verdict}<p>How: {esc(gate['scheme'])}; alpha {esc(gate['alpha'])} ({esc(signs)} "
        "for the sign tests). The cells are in the map below.</p>"
        f"{table(head, rows)}{_effective(gate['effective_length'])}"
        f"<p>Power, with the pairs these runs had:</p><ul>{''.join(map(_power, gate['power']))}</ul>"
    )


def _effective(change: Mapping[str, Any] | None) -> str:
    if change is None:
        return ""
    lengths = f"{length_or_none(change['base'])} → {length_or_none(change['new'])}"
    base, new = (
        length_span(change["base_low"], change["base_high"]),
        length_span(change["low"], change["high"]),
    )
    intervals = f"base {base}, new {new}"
    flagged = "regressed" if change["regressed"] else "not flagged"
    return (
        f"<p>Effective length {esc(lengths)}: in a paired bootstrap over the samples (within each cell), "
        f"the new run's is not shorter in {change['p_value']:.1%} of resamples (95% intervals: "
        f"{esc(intervals)}); a drop is flagged at {change['alpha']:.3g} or less: {flagged}.</p>"
    )


def _power(power: Mapping[str, Any]) -> str:
    drop = power["detectable_drop"]
    seen = (
        f"a drop of {drop:.0%} of them (right to wrong, none the other way) would be flagged"
        if drop is not None
        else "<strong>no test can reach significance</strong> (the least one-sided p is "
        f"{0.5 ** power['pairs']:.3g})"
    )
    tests = f"{power['level']}: {power['tests']} test(s), at most {power['pairs']} pairs each"
    return f"<li>{esc(tests)}: {seen}</li>"


def _gate_name(test: Mapping[str, Any]) -> str:
    parts = (
        None if test["length"] is None else format_length(test["length"]),
        test["task"],
        None if test["depth"] is None else depth_label(test["depth"]),
    )
    return " · ".join(p for p in parts if p) or "all pairs"


def _tasks(comparison: Mapping[str, Any]) -> str:
    """A suite's tasks, each over its items: what its verdicts are given to."""
    if "tasks" not in comparison:
        return ""
    files = comparison["data_differences"]
    warning = (
        f"<p><strong>The runs read different data files ({esc(', '.join(files))}):</strong> a sample is "
        f"paired only where both runs asked the same item, and the {esc(comparison['left_out']['items'])} "
        "whose items differ are left out.</p>"
        if files
        else ""
    )
    return (
        f"<h3>By task</h3>{warning}<p>Each task over its items, each scored in each run by its mean over "
        "the length limits (a question asked at 1k and at 8k is one piece of evidence, not two): the exact "
        "sign test (two-sided p); the adjusted p and the verdict are the gate's, for a drop; the difference "
        "is new minus base, with a 95% percentile-bootstrap interval over the items' differences.</p>"
        f"{_task_table(comparison['tasks'], ('worse', 'better'))}"
    )


TASK_COLUMNS = ("base", "new", "difference (points)", "95% interval")


def _task_cells(test: Mapping[str, Any], count: str) -> tuple[Any, ...]:
    """A tested task's means, difference, interval, ``count`` (its items or pairs), moves each way, p,
    adjusted p and verdict."""
    return (percent(test["base_mean"]), percent(test["new_mean"]), f"{100 * test['difference']:+.1f}",
            f"{100 * test['difference_ci_low']:+.1f} to {100 * test['difference_ci_high']:+.1f}", test[count],
            test["worse"], test["better"], f"{test['p_value']:.3g}", f"{test['p_adjusted']:.3g}",
            test["verdict"])  # fmt: skip


def _task_table(tasks: Sequence[Mapping[str, Any]], moves: tuple[str, str]) -> str:
    """Tasks compared over their items: means, the difference and its interval, p and the verdict."""
    head = ("task", *TASK_COLUMNS, "items", *moves, "p", "adjusted p", "verdict")
    return table(head, [(t["task"], *_task_cells(t, "items")) for t in tasks])


def _measure_cell(change: Mapping[str, Any]) -> str:
    return (
        f"{percent(change['base_mean'])} → {percent(change['new_mean'])} ({100 * change['difference']:+.1f}; "
        f"{100 * change['difference_ci_low']:+.1f} to {100 * change['difference_ci_high']:+.1f})"
    )


def _family(comparison: Mapping[str, Any]) -> str:
    """A family's axis value by value (``fathom.analysis.family_pairs``): each value's task tested,
    its measures' changes and its answers cut at their output budget."""
    family = comparison.get("family")
    if family is None:
        return ""
    axis, rows = family["axis"], family["rows"]
    measures = list(rows[0]["measures"]) if rows else []
    head = (axis, *TASK_COLUMNS, "pairs", "worse", "better", "p", "adjusted p", "verdict",
            *(f"{name} (points; 95% interval)" for name in measures), "cut at the output budget")  # fmt: skip
    cells = [
        (row[axis], *_task_cells(row, "pairs"), *(_measure_cell(row["measures"][m]) for m in measures),
         f"{row['truncated']['base']} → {row['truncated']['new']}")
        for row in rows
    ]  # fmt: skip
    cut = family["truncated"]
    warning = (
        "<p><strong>The new run's answers are cut at their output budget more often</strong> "
        f"({esc(cut['base'])} → {esc(cut['new'])}; {esc(cut['newly'])} newly cut, "
        f"{esc(cut['no_longer'])} no longer; p {cut['p_value']:.3g}): an answer cut short loses "
        "whatever it had left to say, however well it read.</p>"
        if cut is not None and cut["new"] > cut["base"]
        else ""
    )
    return (
        f"<h3>By {esc(axis)}</h3>{warning}<p>{esc(family['name'])}: each value of the axis over its pairs, "
        "the exact sign test (two-sided p); the adjusted p and the verdict are the gate's, for a drop; "
        "each difference is new minus base, with a 95% percentile-bootstrap interval over the pairs' "
        f"differences.</p>{table(head, cells)}"
    )


def _controls(comparison: Mapping[str, Any]) -> str:
    """The no-context controls compared, where both runs asked them; where one did, its count alone;
    nothing where neither did."""
    controls = comparison.get("controls")
    if controls is None or (controls["base"] is None and controls["new"] is None):
        return ""
    head = "<h3>No-context controls</h3>"
    counts = {name: controls[name] for name in ("base", "new")}
    if None in counts.values():
        has = "base" if counts["new"] is None else "new"
        count = counts[has]
        return (
            f"{head}<p>Only the {has} run asked its questions without their context "
            f"({esc(count['answered'])} of {esc(count['graded'])} answered): not compared.</p>"
        )
    flagged = controls["flagged"]
    warning = (
        f"<p><strong>The new checkpoint answers significantly more questions without "
        f"their context ({esc(', '.join(flagged))}):</strong> it may have memorised them, or they leaked "
        "into its training data. This does not change the exit status.</p>"
        if flagged
        else ""
    )
    tasks = (
        _task_table(controls["tasks"], CONTROL_WORDS)
        if controls["tasks"]
        else "<p>none graded in both runs</p>"
    )
    left_out = controls["left_out"]
    return (
        f"{head}{warning}<p>Every question asked again without its context, paired by sample: "
        f"{esc(controls['test'])} per task, {esc(controls['correction'])}-corrected over the tasks as a "
        f"family of their own; left out: {esc(left_out['errors'])} with errors, "
        f"{esc(left_out['unpaired'])} unpaired. A higher score answers more without the context.</p>{tasks}"
    )


def _failures(comparison: Mapping[str, Any]) -> str:
    """Each failure kind that either run has, counted in both: a run that starts answering look-alike
    distractors (or hedging between the answer and one) shows here."""
    rows = [(kind, FAILURE_LABELS[kind], n["base"], n["new"], f"{n['new'] - n['base']:+d}")
            for kind, n in comparison["failures"].items() if n["base"] or n["new"]]  # fmt: skip
    held = comparison["pairs"] + comparison["left_out"]["errors"]
    counts = table(("kind", "what it means", "base", "new", "change"), rows) if rows else "<p>none</p>"
    return f"<h3>Failures by kind</h3><p>Over the {esc(held)} samples both runs hold.</p>{counts}"


def _tokens(value: float | None) -> str:
    return "none" if value is None else f"{value:g}"


def _thinking_row(where: str, change: Mapping[str, Any]) -> tuple[object, ...]:
    moved = change["tokens_change"]
    return (where, _tokens(change["base_tokens_mean"]), _tokens(change["new_tokens_mean"]),
            "" if moved is None else f"{moved:+g}", change["base_still_thinking"],
            change["new_still_thinking"])  # fmt: skip


def _thinking(comparison: Mapping[str, Any]) -> str:
    """Where either run read reasoning (``fathom.analysis.thinking.compare_thinking``): each run's
    reasoning tokens a sample and its samples still thinking, over the samples both hold and per cell."""
    thinking = comparison.get("thinking")
    if thinking is None:
        return ""
    rows = [_thinking_row("all samples", thinking), *(_thinking_row(_where(c), c) for c in thinking["cells"])]
    head = ("cell", "base tokens", "new tokens", "change", "base still thinking", "new still thinking")
    return (
        "<h3>Thinking</h3><p>The reasoning kept apart from the answer: each run's mean reasoning tokens a "
        "sample and its samples still thinking when their reply ended (no answer), over the samples both "
        f"runs hold; reported beside the verdicts, never among them.</p>{table(head, rows)}"
    )


def _machines(comparison: Mapping[str, Any]) -> str:
    differences = comparison.get("machine_differences") or []
    return f"<p><strong>Warning:</strong> {esc(machine_warning(differences))}.</p>" if differences else ""


def comparison_section(comparison: Mapping[str, Any]) -> str:
    c, left_out, overall = comparison, comparison["left_out"], comparison["overall"]
    items = f", {esc(left_out['items'])} of other items" if "items" in left_out else ""
    return (
        f'<section id="comparison"><h2>Comparison</h2><p>base: {esc(c["base"]["model"])} '
        f"({esc(c['base']['path'])})<br>new: {esc(c['new']['model'])} ({esc(c['new']['path'])})</p>"
        f"{_comparison_boxes(c)}<p>{esc(c['pairs'])} paired samples, {esc(overall['worse'])} pairs worse, "
        f"{esc(overall['better'])} better; left out: {esc(left_out['errors'])} with errors, "
        f"{esc(left_out['unpaired'])} unpaired{items}.</p>{_machines(c)}{_gate(c)}{_tasks(c)}{_family(c)}"
        f"{difference_heatmap(c)}"
        '<p class="legend">colour and label: new minus base, in points; ▼ regressed, ▲ improved (by the '
        "gate); hover a cell for its numbers</p>"
        f"<h3>Regressed and improved cells</h3>{_changed_cells(c)}{_failures(c)}{_controls(c)}"
        f"{_thinking(c)}</section>"
    )


def write_comparison_html(
    comparison: Mapping[str, Any],
    out: Path,
    base_summary: Summary | None = None,
    new_summary: Summary | None = None,
) -> Path:
    """A page of its own for a comparison (compare.html), with the two runs' grids side by side
    when their summaries are given."""
    names = f"{comparison['base']['model']} → {comparison['new']['model']}"
    body = [f"<header><h1>{esc(names)}</h1></header>", comparison_section(comparison)]
    if base_summary is not None and new_summary is not None:
        figures = "".join(
            f"<figure><figcaption>{esc(name)}: {esc(comparison[name]['model'])}</figcaption>"
            f"{summary_heatmap(summary, with_samples=False, size='compact')}</figure>"
            for name, summary in (("base", base_summary), ("new", new_summary))
        )
        body.append(f'<section><h2>The two runs</h2><div class="gallery">{figures}</div></section>')
    return write_file(out, page(f"fathom · {names}", "\n".join(body), {}))
