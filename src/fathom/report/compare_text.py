"""A comparison of two runs as lines of text for a terminal: what ``fathom compare`` prints."""

from __future__ import annotations

from fathom.analysis.control import CONTROL_VERDICTS, CONTROL_WORDS, ControlComparison, ControlCount
from fathom.analysis.family_pairs import FamilyComparison, MeasureChange, TruncationChange
from fathom.analysis.flips import RESAMPLES
from fathom.analysis.gate import Gate, GateTest
from fathom.analysis.paired import CellComparison, Comparison, machine_warning
from fathom.analysis.pairing import PairedTest, TaskComparison
from fathom.analysis.suite_pairs import SuiteComparison
from fathom.analysis.thinking import ThinkingChange, ThinkingComparison
from fathom.units import format_count, length_or_none, length_span


def _cell_name(cell: CellComparison | ThinkingChange) -> str:
    """Its length, then its task (RULER's, or a NIAH variant's) and depth (NIAH's), where it has them."""
    depth = None if cell.depth is None else f"depth {cell.depth:.0%}"
    length = None if cell.length is None else format_count(cell.length)
    return ", ".join(part for part in (length, cell.task, depth) if part)


def failures_line(comparison: Comparison) -> str:
    """The failure kinds that either run has, each counted in the base run and in the new."""
    held = comparison.overall.pairs + comparison.left_out_errors
    changes = ", ".join(f"{f.kind} {f.base} → {f.new}" for f in comparison.failures if f.base or f.new)
    return f"failures by kind, base → new, over the {held} samples both runs hold: {changes or 'none'}"


def _cell_line(cell: CellComparison) -> str:
    test = cell.test
    return (
        f"  {_cell_name(cell)}: {test.base_mean:.1%} → {test.new_mean:.1%} "
        f"({test.pairs} pairs: {test.worse} worse, {test.better} better), "
        f"p = {test.p_value:.3g}, adjusted p = {cell.p_adjusted:.3g}"
    )


def _change(test: PairedTest, interval: tuple[float, float], unit: str, down: str, up: str) -> str:
    """A paired change: both means, the difference with its 95% interval, the pairs each way, and p."""
    low, high = interval
    return (
        f"{test.base_mean:.1%} → {test.new_mean:.1%} ({100 * test.difference:+.1f} points, "
        f"95% interval {100 * low:+.1f} to {100 * high:+.1f}; {test.pairs} {unit}: "
        f"{test.worse} {down}, {test.better} {up}), p = {test.p_value:.3g}"
    )


def _task_line(
    task: TaskComparison, unit: str = "items", words: tuple[str, str] = ("worse", "better")
) -> str:
    """A task's change; a control task's (``words`` lower, higher) with its verdict in those words."""
    change = _change(task.test, (task.ci_low, task.ci_high), unit, *words)
    verdict = task.verdict if words == ("worse", "better") else CONTROL_VERDICTS[task.verdict]
    return f"  {task.task}: {change}, adjusted p = {task.p_adjusted:.3g}" + (
        "" if verdict == "unchanged" else f": {verdict}"
    )


def suite_comparison_text(comparison: SuiteComparison) -> list[str]:
    """A suite's comparison by task (its verdicts), then the cells' verdicts in a line, and a warning
    where the runs read different data files."""
    lines = [
        "by task, over its items, each scored by its mean over the length limits (two-sided exact sign "
        "test; adjusted p: the gate's, for a drop; the difference is new minus base, with a 95% "
        "bootstrap interval over the items):",
        *(_task_line(task) for task in comparison.tasks),
    ]
    for name, changed in (("regressed", comparison.regressed), ("improved", comparison.improved)):
        lines.append(f"{name} tasks (by the gate): {', '.join(t.task for t in changed) or 'none'}")
    verdicts = [cell.verdict for cell in comparison.cells]
    lines.append(
        f"cells (task x length limit, {len(verdicts)}, drawn in compare.html): "
        f"{verdicts.count('regressed')} regressed, {verdicts.count('improved')} improved"
    )
    if comparison.data_differences:
        lines.append(
            f"warning: the runs read different data files ({', '.join(comparison.data_differences)}): "
            f"a sample is paired only where both runs asked the same item, and the "
            f"{comparison.left_out_items} whose items differ are left out"
        )
    return lines


def _measure(change: MeasureChange) -> str:
    difference = change.new_mean - change.base_mean
    return (
        f"{change.name} {change.base_mean:.1%} → {change.new_mean:.1%} ({100 * difference:+.1f} points, "
        f"95% interval {100 * change.ci_low:+.1f} to {100 * change.ci_high:+.1f})"
    )


def _cut(change: TruncationChange) -> str:
    return (
        f"cut at the output budget {change.base} → {change.new} ({change.newly} newly, {change.no_longer} "
        f"no longer; p = {change.p_value:.3g})"
    )


def family_text(comparison: FamilyComparison) -> list[str]:
    """A family's axis value by value: its task's change (the gate's verdict), its measures' changes
    and its answers cut at their budget; a warning where the new run's are cut more often."""
    lines = [
        f"by {comparison.axis} ({comparison.family}; two-sided exact sign test over the pairs; adjusted p: "
        "the gate's, for a drop; the difference is new minus base, with a 95% bootstrap interval over "
        "the pairs):"
    ]
    for row in comparison.rows:
        cuts = row.truncated
        extras = [*map(_measure, row.measures), *([_cut(cuts)] if cuts.base or cuts.new else [])]
        lines += [_task_line(row.task, "pairs"), *([f"    {'; '.join(extras)}"] if extras else [])]
    cut = comparison.truncated
    if cut is not None and cut.new > cut.base:
        lines.append(
            f"warning: the new run's answers are cut at their output budget more often ({cut.base} → "
            f"{cut.new} of {comparison.overall.pairs} pairs; {cut.newly} newly cut, {cut.no_longer} no "
            f"longer; p = {cut.p_value:.3g}): an answer cut short loses whatever it had left to say, "
            "however well it read"
        )
    return lines


def _cells_text(comparison: Comparison) -> list[str]:
    """The regressed and improved cells (the map's), and the change of effective length."""
    lines = []
    for name in ("regressed", "improved"):
        cells = [cell for cell in comparison.cells if cell.verdict == name]
        lines.append(f"{name} cells (by the gate, of {len(comparison.cells)}): {len(cells) or 'none'}")
        lines += [_cell_line(cell) for cell in cells]
    base_length, new_length = comparison.base_effective_length, comparison.new_effective_length
    worst = ""
    if any(cell.depth is not None for cell in comparison.cells):  # NIAH's: RULER's depths are drawn
        worst = (
            f"; at the worst depth: {length_or_none(base_length.worst_depth)} → "
            f"{length_or_none(new_length.worst_depth)}"
        )
    lines.append(
        f"effective length: {length_or_none(base_length.mean)} → {length_or_none(new_length.mean)}; "
        f"on the 95% lower bound: {length_or_none(base_length.lower_bound)} → "
        f"{length_or_none(new_length.lower_bound)}{worst}"
    )
    return lines


def comparison_text(comparison: Comparison) -> list[str]:
    """The comparison as lines for a terminal: both models, what was paired and left out, the overall
    change, the regressed and improved cells and the change of effective length (a suite's: its tasks,
    and no effective length)."""
    overall = comparison.overall
    suite = comparison if isinstance(comparison, SuiteComparison) else None
    items = "" if suite is None else f", {suite.left_out_items} whose item differs"
    lines = [
        f"base: {comparison.base.model}  ({comparison.base.path})",
        f"new:  {comparison.new.model}  ({comparison.new.path})",
        f"pairs: {overall.pairs}; left out: {comparison.left_out_errors} with an error in either run, "
        f"{comparison.left_out_unpaired} in one run only{items}",
        f"overall: {overall.base_mean:.1%} → {overall.new_mean:.1%} ({overall.worse} pairs worse, "
        f"{overall.better} better; pooled exact test p = {overall.p_value:.3g})",
        failures_line(comparison),
    ]
    lines += gate_text(comparison.gate)
    lines += _cells_text(comparison) if suite is None else suite_comparison_text(suite)
    if isinstance(comparison, FamilyComparison):
        lines += family_text(comparison)
    lines += control_comparison_text(comparison.controls)
    lines += thinking_comparison_text(comparison.thinking)
    if comparison.machine_differences:
        lines.append(f"warning: {machine_warning(comparison.machine_differences)}")
    return lines


def _thinking_change(change: ThinkingChange) -> str:
    """A cell's (or the runs') reasoning tokens a sample, base → new, and its samples still thinking."""
    tokens = " → ".join("none" if n is None else f"{n:g}" for n in change.means)
    moved = "" if change.change is None else f" ({change.change:+g})"
    return f"{tokens}{moved} tokens a sample, still thinking {change.base_still} → {change.new_still}"


def thinking_comparison_text(thinking: ThinkingComparison | None) -> list[str]:
    """Where either run read reasoning: its tokens a sample and its samples still thinking when their
    reply ended (no answer), base → new, over the samples both runs hold and cell by cell."""
    if thinking is None:
        return []
    return [
        f"thinking (reasoning kept apart from the answer; base → new, over the samples both runs hold): "
        f"{_thinking_change(thinking.overall)}",
        *(f"  {_cell_name(cell)}: {_thinking_change(cell)}" for cell in thinking.cells),
    ]


def _counted(count: ControlCount) -> str:
    return f"{count.answered} of {count.graded} answered without the context"


def control_comparison_text(controls: ControlComparison) -> list[str]:
    """The no-context controls compared, or why they are not (nothing where neither run has any); a
    warning where the new run answers more of them (reported, not gated on: see ``fathom compare
    --help``) or where controls were left out."""
    held = [
        (name, count) for name, count in (("base", controls.base), ("new", controls.new)) if count is not None
    ]
    if not held:
        return []  # both made with --no-control (or before controls): nothing to say, as before them
    if len(held) == 1:
        name, count = held[0]
        return [f"no-context controls: only the {name} run has them ({_counted(count)}): not compared"]
    lines = []
    if controls.overall is None:
        lines.append("no-context controls: the runs share none that both graded: not compared")
    else:
        tasks = controls.tasks
        interval = controls.ci_low, controls.ci_high
        change = _change(controls.overall, interval, "questions", *CONTROL_WORDS)
        lines.append(
            f"no-context controls (every question asked again without its context; exact sign test per "
            f"task, Holm-adjusted over {len(tasks)} task{'s' * (len(tasks) != 1)}): {change}"
        )
        if len(tasks) > 1:
            lines += [_task_line(task, "questions", CONTROL_WORDS) for task in tasks]
    if controls.flagged:
        found = "; ".join(
            f"{t.task}: {t.test.base_mean:.1%} → {t.test.new_mean:.1%}, adjusted p = {t.p_adjusted:.3g}"
            for t in controls.flagged
        )
        lines.append(
            f"warning: the new checkpoint answers more questions without their context than the base "
            f"({found}): a sign that it memorised them or that they leaked into its training data, so its "
            "scores on them are no evidence of using the context. No retrieval regression: the exit "
            "status does not count it (compare.json lists it under controls.flagged)"
        )
    if controls.left_out_errors or controls.left_out_unpaired:
        lines.append(
            f"warning: no-context controls left out: {controls.left_out_errors} with an error in either "
            f"run, {controls.left_out_unpaired} in one run only (the runs asked different controls; "
            "those both asked are compared)"
        )
    return lines


def _gate_line(test: GateTest) -> str:
    verdict = "" if test.verdict == "unchanged" else f": {test.verdict}"
    name = test.name if test.level == "overall" else f"{test.level} {test.name}"
    return (
        f"  {name}: {test.base_mean:.1%} → {test.new_mean:.1%} ({test.pairs} pairs: {test.worse} "
        f"worse, {test.better} better), p = {test.p_value:.3g}, adjusted p = {test.p_adjusted:.3g}{verdict}"
    )


def gate_text(gate: Gate) -> list[str]:
    """The gate: its verdict and what fired, each level's tests (the cells only where they changed:
    the lines above list them), the effective length's bootstrap, and the power each level had."""
    fired = gate.fired()
    flips = "every" if gate.exact else f"{RESAMPLES:,} random"
    how = (
        f"one-sided exact sign tests for a drop, adjusted together by step-down minP over {flips} paired "
        f"sign flips, at alpha {gate.signs_alpha:.3g}"
    )
    if gate.effective_length is not None:
        how += f"; the effective length by a paired bootstrap at {gate.effective_length.alpha:.3g}"
    lines = [
        f"gate: {'REGRESSED: ' + ', '.join(fired) if fired else 'no regression found'} ({how})",
        *(_gate_line(test) for test in gate.tests if test.level != "cell"),
    ]
    change = gate.effective_length
    if change is not None:
        lines.append(
            f"  effective length: {length_or_none(change.base)} → {length_or_none(change.new)} (paired "
            f"bootstrap, 95% intervals: base {length_span(change.base_low, change.base_high)}, new "
            f"{length_span(change.low, change.high)}; not shorter in {change.p_value:.1%} of resamples)"
            + (": regressed" if change.regressed else "")
        )
    lines += power_text(gate)
    return lines


def power_text(gate: Gate) -> list[str]:
    """The smallest drop each level would have flagged with the pairs it had, and a warning for each
    level that could flag none."""
    seen = [
        f"{power.level} {power.detectable_drop:.0%} of {power.pairs} pairs"
        for power in gate.power
        if power.detectable_drop is not None
    ]
    lines = [
        "power (the smallest drop each level would have flagged, as a share of its pairs turning from "
        f"right to wrong, none the other way): {'; '.join(seen) or 'none'}"
    ]
    for power in gate.power:
        if power.detectable_drop is None:
            lines.append(
                f"warning: no {power.level} test can reach significance at alpha {gate.signs_alpha:.3g} with "
                f"{power.pairs} pairs (its least one-sided p is {0.5**power.pairs:.3g}): raise --samples to "
                "gate on them; the levels that pool them decide"
            )
    return lines
