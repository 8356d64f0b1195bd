"""Every summary as lines of text for a terminal: what the CLI prints (a comparison's lines are
``compare_text``'s, the run listing's ``runs_text``'s)."""

from __future__ import annotations

from fathom.analysis.control import answered_share
from fathom.analysis.hard import FORM_AXES
from fathom.analysis.stats import SCORE_INTERVAL_RULE
from fathom.analysis.summary import NiahGrid, Perplexity, Row, RulerGrid, Summary
from fathom.report.babi_text import babi_text
from fathom.report.categories_text import categories_text
from fathom.report.listing_text import listing_text
from fathom.report.mrcr_text import mrcr_text
from fathom.report.provider_text import provider_counts_line
from fathom.report.qualification_text import qualification_line
from fathom.report.score_text import axis_table, effective_lines
from fathom.report.score_text import pct as _pct
from fathom.report.thinking_text import thinking_line
from fathom.units import format_count, length_or_none

RULER_FILL = (
    "fill: RULER's (--fill ruler): each haystack sized by RULER's search, so prompts fall below their "
    "length; each record keeps its prompt's own length (actual_tokens)"
)


def summary_text(summary: Summary) -> list[str]:
    """A run's summary as the lines ``fathom run`` and ``fathom report`` print: the perplexity
    table, the no-context control, then RULER's table or NIAH's scores by length."""
    lines = [] if summary.perplexity is None else perplexity_text(summary.perplexity)
    if summary.control is not None:
        lines.append(control_text(summary, summary.control))
    if isinstance(summary.sweep, RulerGrid):
        lines += ruler_text(summary.sweep)
        if summary.run is not None and summary.run.fill == "ruler":
            lines.append(RULER_FILL)
    elif isinstance(summary.sweep, NiahGrid):
        lines += niah_text(summary.sweep)
    if summary.sweep is not None:
        lines.append(f"{samples_count(summary)}, errors: {summary.errors}")
    if summary.slow is not None:
        slow = summary.slow
        cause = slow_cause("" if summary.run is None else summary.run.model)  # unknown: a real one's
        lines.append(
            f"slow samples: {slow['count']} took at least {slow['factor']:g}x their task's median time per "
            f"prompt token at their length (likely {cause}): see report.html"
        )
    if summary.thinking is not None:
        lines.append(thinking_line(summary.thinking))
    if summary.provider_counts is not None:
        lines.append(provider_counts_line(summary.provider_counts))
    return lines + [line for section in summary.judges for line in judges_text(section)]


def slow_cause(model: str) -> str:
    """What likely made samples slow, by the backend of ``model``: a simulated one holds no KV cache, so
    its slow samples are the machine's load or its own delay; any other's may be its cache paged out."""
    if model.partition(":")[0] == "sim":
        return "the machine's load or the simulated delay: a simulated backend holds no KV cache"
    return "a KV cache paged to host memory or a server swapping"


def controls_count(summary: Summary) -> int:
    """The no-context controls the run asked, errors included; 0 for a run without them."""
    control = summary.control
    return 0 if control is None else control["n"] + control["errors"]


def samples_count(summary: Summary) -> str:
    """The run's samples and, apart, its controls, as the terminal and report.html both say them:
    "180 samples + 180 controls" (``fathom run`` writes both, and says how many it wrote)."""
    controls = controls_count(summary)
    return f"{summary.samples} samples" + (f" + {controls} controls" if controls else "")


def _kappa(agreement: Row) -> str:
    if agreement["value"] is None:
        return f"{agreement['statistic']} undefined (one label throughout)"
    interval = (
        "" if agreement["ci_low"] is None else f" [{agreement['ci_low']:.2f}, {agreement['ci_high']:.2f}]"
    )
    return f"{agreement['statistic']} {agreement['value']:.2f}{interval} over {agreement['n']}"


def judges_text(section: Row) -> list[str]:
    """One rubric's judges: each one's pass rate and agreement with the metric, their agreement."""
    lines = []
    for judge in section["judges"]:
        missing = f", {judge['errors']} unreadable" if judge["errors"] else ""
        missing += f", {judge['unjudged']} not judged yet" if judge["unjudged"] else ""
        mean = "n/a" if judge["mean"] is None else f"{judge['mean']:.2f}"
        if judge["ci_low"] is not None:
            mean += f" [{judge['ci_low']:.2f}, {judge['ci_high']:.2f}]"
        lines.append(
            f"{judge['role']} {judge['name']} ({section['rubric']}): mean score {mean}, "
            f"pass {_percent(judge['pass_rate'])} of {judge['judged']}{missing}; against the metric "
            f"(pass: score >= {section['metric_pass']}): {_kappa(judge['metric_agreement'])}"
        )
        if not (judge.get("qualification") or {}).get("passed"):
            lines.append(f"warning: {judge['role']} {qualification_line(judge.get('qualification'))}")
    if "agreement" in section:
        agreement = section["agreement"]
        lines.append(
            f"judges' agreement: {_kappa(agreement)} answers ({_percent(agreement['observed'])} identical); "
            f"{len(section['disagreements'])} disagreements to read in report.html"
        )
    return lines


def niah_text(grid: NiahGrid) -> list[str]:
    """NIAH's sweep as lines: the score per length, the effective length on the mean, on the 95%
    lower bound and at the worst depth, and the lost-in-the-middle index."""
    lines = []
    for row in grid.lengths:
        mean = "n/a" if row["mean"] is None else f"{row['mean']:.1%}"
        lines.append(f"  {format_count(row['length']):>6}: {mean}  (n={row['n']}, errors={row['errors']})")
    effective = grid.effective_length
    lines.append(
        f"effective length (score >= {effective['threshold']}): {length_or_none(effective['mean'])}; "
        f"on the 95% lower bound: {length_or_none(effective['lower_bound'])}; "
        f"at the worst depth (every depth's cell >= {effective['threshold']}): "
        f"{length_or_none(effective['worst_depth'])}"
    )
    lim = grid.lost_in_the_middle_index
    lines.append(f"lost-in-the-middle index: {'n/a' if lim is None else f'{lim:+.3f}'}")
    return lines + variants_text(grid.variants) + hard_text(grid.hard)


def _percent(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1%}"


def variants_text(variants: dict[str, Row]) -> list[str]:
    """Each variant's score per length and effective length (pooled, and at the worst depth), one line
    a variant."""
    lines = []
    for task, grid in variants.items():
        scores = " ".join(f"{format_count(r['length'])} {_percent(r['mean'])}" for r in grid["lengths"])
        effective = grid["effective_length"]
        lines.append(
            f"  {task}: {scores}; effective length {length_or_none(effective['mean'])}, "
            f"at the worst depth {length_or_none(effective['worst_depth'])}"
        )
    return ["by variant:", *lines] if lines else []


def hard_to_report(hard: Row) -> bool:
    """Whether a run had hard needles to report: any hard section but the overlap table, or an overlap
    table that compares needle kinds. Every run records its needles' overlap with their questions, so a
    plain run's one row (the number needle's) compares nothing and is no hard needle; redraws are the
    corpus's, not the needles' hardness."""
    return len(hard.get("overlap", [])) > 1 or any(
        hard.get(name) for name in hard if name not in ("overlap", "redraws")
    )


def hard_text(hard: Row) -> list[str]:
    """The hard needles' numbers as lines: distractors taken, every needle found, the literal twins'
    cost, the odd-name shortcut beside each low-overlap variant, split needles by distance, overlap
    (where the run had hard needles, ``hard_to_report``), redraws."""
    lines = []
    for row in hard.get("lures", []):
        lured, hedged = row["lured"], row["hedged"]
        lines.append(
            f"  {format_count(row['length']):>6}: answered a distractor {lured['count']} of {lured['n']} "
            f"({_percent(lured['share'])}), hedged {hedged['count']}"
        )
    if lines:
        lines.insert(0, "distractors (samples with look-alikes):")
    for row in hard.get("rejected_lures", []):  # right answers that named a look-alike to reject it
        rejected = row["rejected"]
        lines.append(
            f"  {format_count(row['length']):>6}: rejected a look-alike {rejected['count']} of "
            f"{rejected['n']} ({_percent(rejected['share'])}), counted right"
        )
    rows = hard.get("all_or_nothing", [])
    if rows:
        found = ", ".join(f"{format_count(int(r['label']))} {_percent(r['mean'])}" for r in rows)
        lines.append(f"every needle found: {found}")
    for row in hard.get("literal_cost", []):
        lines.append(
            f"literal twin at {format_count(row['length'])}: {_percent(row['literal'])} against "
            f"{_percent(row['low_overlap'])} low-overlap ({row['pairs']} pairs, cost {row['cost']:+.1%}, "
            f"sign test p = {row['p_value']:.3g})"
        )
    for row in hard.get("odd_name", []):  # the knowledge-free baseline beside each low-overlap score
        score, odd = (
            interval_text(r["mean"], r["ci_low"], r["ci_high"]) for r in (row["score"], row["odd_name"])
        )
        lines.append(f"{row['variant']}: {score} (n={row['n']}); odd-name shortcut on these prompts: {odd}")
    rows = hard.get("part_distance", [])
    if rows:
        lines.append(
            "split needles by distance between parts: "
            + ", ".join(f"{r['label']} {_percent(r['mean'])}" for r in rows)
        )
    for row in hard.get("overlap", []) if hard_to_report(hard) else []:
        lines.append(
            f"overlap of {row['label']} needles with their questions: {row['shared_words']:.1f} content "
            f"words, ROUGE-1 {row['rouge1']:.2f} (score {_percent(row['mean'])})"
        )
    for axis in FORM_AXES:  # low-overlap scores by each part of the needles' form a run varied
        rows = [r for r in hard.get("forms", []) if r["axis"] == axis]
        if rows:
            by = ", ".join(
                f"{r['label']} {interval_text(r['mean'], r['ci_low'], r['ci_high'])} (n={r['n']})"
                for r in rows
            )
            lines.append(f"low-overlap by {axis}: {by}")
    rows = hard.get("neighbours", [])
    if rows:
        met, none = rows
        lines.append(
            f"low-overlap samples whose window names a near neighbour of the place: {_percent(met['mean'])} "
            f"(n={met['n']}), against {_percent(none['mean'])} (n={none['n']}) where it names none"
        )
    redraws = hard.get("redraws", {})
    if redraws:
        lines.append(f"needles drawn again for {redraws['samples']} samples (e.g. {redraws['first'][0]})")
    return lines + knowledge_text(hard.get("knowledge", {}))


def knowledge_text(section: Row) -> list[str]:
    """The low-overlap items apart from the context: how many the model knew closed-book, the score on
    all items and on the known ones per length, and the effective length relative to the items' bases."""
    if not section:
        return []
    lines = []
    probes = section.get("probes")
    if probes:
        lines.append(
            f"closed-book probes: knew {probes['known']} of {probes['graded']} items "
            f"({_percent(probes['share'])}, 95% {_percent(probes['ci_low'])}-{_percent(probes['ci_high'])})"
        )
    for row in section.get("lengths", []):
        every, known = (
            interval_text(r["mean"], r["ci_low"], r["ci_high"]) for r in (row["all"], row["known"])
        )
        lines.append(
            f"  {format_count(row['length']):>6}: all items {every} (n={row['all']['n']}), "
            f"known items {known} (n={row['known']['n']})"
        )
    relative = section["relative"]
    ratios = ", ".join(
        f"{format_count(r['length'])} {_percent(r['ratio'])} (n={r['samples']})" for r in relative["lengths"]
    )
    bases = ", ".join(format_count(n) for n in relative["base_lengths"])
    effective = length_or_none(relative["effective_length"])
    lines.append(
        f"relative to each item's base (best of {bases}; {relative['zero_base']} of {relative['items']} "
        f"items at 0 left out): {ratios}; effective length {effective} at {relative['threshold']:.0%} of base"
    )
    return lines


def perplexity_text(perplexity: Perplexity) -> list[str]:
    """The perplexity table as lines: per length, the perplexity with its interval, and that of
    the last position bucket (the far end of the context)."""
    table = perplexity.table
    last = {b["length"]: b for b in table["buckets"]}
    lines = ["perplexity by length (95% interval over documents; last bucket = the farthest tokens):"]
    for row in table["lengths"]:
        name = format_count(row["length"])
        if row["perplexity"] is None:
            lines.append(f"  {name:>6}: n/a  (documents={row['documents']}, errors={row['errors']})")
            continue
        far = last[row["length"]]  # a length with a perplexity has scored buckets
        tail = f"; last bucket {format_count(far['lo'])}-{format_count(far['hi'])}: {far['perplexity']:.2f}"
        flag = "  beyond the trained window" if row["beyond_window"] else ""
        lines.append(
            f"  {name:>6}: {row['perplexity']:.2f} [{row['ci_low']:.2f}, {row['ci_high']:.2f}]{tail}"
            f"  (documents={row['documents']}, errors={row['errors']}){flag}"
        )
    return lines


def ruler_text(grid: RulerGrid) -> list[str]:
    """RULER's sweep as lines of text: the task x length table in percent, the per-length average
    over tasks, RULER's averages and the effective lengths on the mean and on the lower bound."""
    lengths = [row["length"] for row in grid.lengths]
    tasks = list(dict.fromkeys(cell["task"] for cell in grid.grid))
    width = max(len("average"), *(len(t) for t in tasks))
    by_pos = {(c["task"], c["length"]): c["mean"] for c in grid.grid}
    lines = ["  " + " " * width + "".join(f"{format_count(n):>8}" for n in lengths)]
    for task in tasks:
        cells = "".join(_pct(by_pos.get((task, n)), 8) for n in lengths)
        lines.append(f"  {task:<{width}}{cells}")
    lines.append(f"  {'average':<{width}}" + "".join(_pct(row["mean"], 8) for row in grid.lengths))
    if grid.suites:  # a real suite: RULER's thresholds are not its own; what its truncation did is
        return lines + suite_text(grid.suites) + suite_tasks_text(grid.suites)
    if grid.state:  # state tracking: its own thresholds, by operation count
        return lines + state_text(grid.state)
    if grid.babi:  # the bAbI-style stories: their own thresholds, by task and by distance
        return lines + babi_text(grid.babi)
    if grid.listing:  # long outputs: F1's own thresholds, precision, recall and truncation
        return lines + listing_text(grid.listing)
    if grid.mrcr:  # multi-round co-reference: its own thresholds, prefixed and exact answers, positions
        return lines + mrcr_text(grid.mrcr)
    mean, low = grid.aggregates["mean"], grid.aggregates["lower_bound"]
    scores = ", ".join(
        f"{name} {'n/a' if mean[key] is None else f'{mean[key]:.1f}'}"
        for name, key in (("average", "average"), ("wAvg inc", "wavg_inc"), ("wAvg dec", "wavg_dec"))
    )
    lines.append(f"RULER score (percent): {scores}")
    lines += categories_text(grid.categories)
    lines.append(
        f"effective length (score > {mean['threshold']:g}): {length_or_none(mean['effective_length'])}; "
        f"on the 95% lower bound: {length_or_none(low['effective_length'])}"
    )
    cutoff = "n/a" if mean["relative_cutoff"] is None else f"{mean['relative_cutoff']:.1f}"
    lines.append(
        f"effective length (score > {mean['relative_threshold']:g} x the shortest length's, {cutoff}): "
        f"{length_or_none(mean['effective_length_relative'])}; "
        f"on the 95% lower bound: {length_or_none(low['effective_length_relative'])}"
    )
    return lines


def state_text(state: Row) -> list[str]:
    """State tracking's score by question kind and length (percent), and each operation count's
    effective length on the mean and on the 95% lower bound."""
    lines = axis_table(state["questions"], "question", "length")
    return lines + effective_lines(state, "ops", lambda ops: f"with {ops} operations")


def suite_text(suites: Row) -> list[str]:
    """A real suite's truncation in a line: how many prompts the suite's middle cut shortened."""
    removed = [row["max_removed_tokens"] for row in suites["truncation"] if row["truncated"]]
    most = f", at most {max(removed):,} tokens from one" if removed else ""
    return [
        f"(columns: the length limit) middle truncation: {suites['truncated']} of {suites['samples']} "
        f"prompts cut to their limit{most}; summary.json scores them by the tokens each model read"
    ]


def interval_text(mean: float | None, low: float, high: float) -> str:
    """A score in percent with its 95% interval: "25.6% [10.3, 44.0]"."""
    return "n/a" if mean is None else f"{mean:.1%} [{100 * low:.1f}, {100 * high:.1f}]"


def _prompts(row: Row, limits: int) -> str:
    """The prompts a score is over and, over all the length limits, the items (its interval's units),
    each asked at every limit: "6 prompts (3 items at 2 limits)", never a count "of" a smaller one. No
    items at one limit, where each item is one prompt, nor in a summary written before fathom counted
    them."""
    at = f"{limits} limit" + ("" if limits == 1 else "s")
    items = f" ({row['items']} items at {at})" if "items" in row else ""
    return f"{row['n']} prompts{items}"


def _task_row(name: str, length: str, row: Row, width: int) -> str:
    errors = f", {row['errors']} errors" if row["errors"] else ""
    return (
        f"  {name:<{width}}  {length:>4}  {interval_text(row['mean'], row['ci_low'], row['ci_high']):<22}"
        f"{_prompts(row, len(row.get('lengths', ())))}, {row['truncated']} cut{errors}"
    )


def suite_tasks_text(suites: Row) -> list[str]:
    """A suite's score per task over all its length limits and at each, with its interval and the
    prompts cut, then the mean over tasks; nothing for a summary written before fathom had them."""
    rows = suites.get("by_task", [])
    if not rows:
        return []
    width = max(len(row["task"]) for row in rows)
    lines = [
        f"score by task, over all length limits and at each (95% interval: {SCORE_INTERVAL_RULE}; over "
        "all limits it is over the items, each scored by its mean over them; prompts cut to the limit):"
    ]
    for row in rows:
        lines.append(f"{_task_row(row['task'], 'all', row, width)}  ({row['scoring']})")
        lines += [_task_row("", format_count(r["length"]), r, width) for r in row["lengths"]]
    mean = suites["mean"]
    limits = {r["length"] for row in rows for r in row["lengths"]}
    return [
        *lines,
        f"mean over {mean['tasks']} tasks, each weighing the same: "
        f"{interval_text(mean['mean'], mean['ci_low'], mean['ci_high'])} ({_prompts(mean, len(limits))})",
    ]


def answered_count(summary: Summary, control: Row) -> str:
    """The count of ``summary``'s ``control`` answered, as "2 of 12 questions answered without the
    context": a real suite counts prompts, one per item and length limit, so several ask one question."""
    suite = isinstance(summary.sweep, RulerGrid) and bool(summary.sweep.suites)
    unit = "prompts" if suite else "questions"
    return f"{control['answered']} of {control['n']} {unit} answered without the context"


def control_text(summary: Summary, control: Row) -> str:
    """The control in a line, with a warning when questions were answered without the context: the
    share answered with its count, then the mean score (partial credit), named apart."""
    counted = f"{_percent(answered_share(control))} ({answered_count(summary, control)})"
    line = f"no-context control: {counted}, mean score {_percent(control['mean'])}"
    line += f", {control['errors']} errors" if control["errors"] else ""
    if control["answered"]:
        line += (
            "; warning: those samples' scores are no evidence of using the context "
            "(see report.html, 'No-context control')"
        )
    return line
