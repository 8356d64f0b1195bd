"""A series of checkpoints as lines of text for a terminal: what ``fathom series`` prints. The names
and the regression lines are the page's too (``fathom.report.html.series``)."""

from __future__ import annotations

from collections.abc import Sequence

from fathom.analysis.checkpoint import AtLength, Numbers, Scored
from fathom.analysis.series import EFFECTIVE, FirstRegression, Series, Step, fired
from fathom.run.labels import labels_text
from fathom.units import format_count, length_or_none

AGAINST_WORDS = {"baseline": "the baseline", "best": "the best checkpoint before it"}


def checkpoint_name(numbers: Numbers, by: str | None) -> str:
    """A checkpoint as the series names it: its ``by`` label (``step=1200``), else all its labels,
    else its folder's name."""
    if by is not None and by in numbers.labels:
        return f"{by}={numbers.labels[by]}"
    return labels_text(numbers.labels) or numbers.path.name


def short_score(score: Scored) -> str:
    """A score and its 95% interval in whole percent: "72 [59-81]"."""
    if score.mean is None or score.ci_low is None or score.ci_high is None:
        return "n/a"
    return f"{100 * score.mean:.0f} [{100 * score.ci_low:.0f}-{100 * score.ci_high:.0f}]"


def _at(lengths: Sequence[AtLength], length: int) -> str:
    """The score at ``length``, "n/a" where a run has none there (a partial run)."""
    return next((short_score(at.score) for at in lengths if at.length == length), "n/a")


def long_score(score: Scored) -> str:
    """A score and its 95% interval: "71.7% [59.2, 81.5]"."""
    if score.mean is None or score.ci_low is None or score.ci_high is None:
        return "n/a"
    return f"{score.mean:.1%} [{100 * score.ci_low:.1f}, {100 * score.ci_high:.1f}]"


def effective_text(step: Step) -> str:
    """Its effective length on the mean, on the lower bound, and the bootstrap's 95% interval:
    "4k / 2k [2k-4k]"; "—" for a suite's run."""
    effective = step.numbers.effective_length
    if effective is None:
        return "—"
    text = f"{length_or_none(effective.mean)} / {length_or_none(effective.lower_bound)}"
    if step.effective_interval is not None:
        low, high = step.effective_interval
        text += f" [{length_or_none(low)}-{length_or_none(high)}]"
    return text


def status(series: Series, index: int) -> str:
    """What a checkpoint's comparisons found: "baseline", "ok", or what regressed against what."""
    step = series.steps[index]
    if index == series.baseline_index and step.best is None:
        return "baseline"
    found = [
        f"{word}: {', '.join(_fired_names(step, which))}"
        for which, word in (("baseline", "vs baseline"), ("best", "vs best"))
        if _fired_names(step, which)
    ]
    return "; ".join(found) or ("baseline, ok" if index == series.baseline_index else "ok")


def _fired_names(step: Step, which: str) -> list[str]:
    comparison = step.baseline if which == "baseline" else step.best
    return [
        name if level in ("overall", EFFECTIVE) else f"{level} {name}" for level, name in fired(comparison)
    ]


def series_text(series: Series) -> list[str]:
    """The series as lines: what it is, a table of the checkpoints (overall, per length, effective
    length, what regressed), a table per task (RULER's and a suite's), the first regressions, and
    whether the last checkpoint regressed."""
    steps, by = series.steps, series.by
    names = [checkpoint_name(step.numbers, by) for step in steps]
    base = checkpoint_name(series.baseline, by)
    where = "" if series.baseline_index is not None else f" ({series.baseline.path}, outside the series)"
    lines = [
        f"series of {len(steps)} {steps[0].numbers.task} runs, ordered {f'by {by}' if by else 'as given'}; "
        f"baseline {base}{where}; the best before each: the highest overall mean score; each compared "
        f"as fathom compare does (its gate, alpha {series.alpha:g})",
    ]
    lengths = sorted({at.length for step in steps for at in step.numbers.lengths})
    head = ["checkpoint", "overall", *(format_count(n) for n in lengths), "effective / lower [95%]"]
    rows = [
        [
            name,
            short_score(step.numbers.overall),
            *(_at(step.numbers.lengths, n) for n in lengths),
            effective_text(step),
            status(series, i),
        ]
        for i, (name, step) in enumerate(zip(names, steps, strict=True))
    ]
    lines.append(
        "scores in percent with their 95% intervals; effective length on the mean / the lower bound:"
    )
    lines += _table([*head, "regressed"], rows)
    tasks = list(dict.fromkeys(t.task for step in steps for t in step.numbers.tasks))
    if tasks:
        lines.append("by task, over all lengths (percent, 95% interval):")
        scores = [{t.task: short_score(t.score) for t in step.numbers.tasks} for step in steps]
        rows = [
            [name, *(by_task.get(task, "n/a") for task in tasks)]
            for name, by_task in zip(names, scores, strict=True)
        ]
        lines += _table(["checkpoint", *tasks], rows)
    lines += first_regression_lines(series, names)
    last = names[-1]
    verdict = f"regressed ({status(series, len(steps) - 1)})" if series.regressed else "did not regress"
    return [*lines, f"last checkpoint {last}: {verdict}"]


def first_regression_lines(series: Series, names: list[str]) -> list[str]:
    """Per comparison, each test's first regression: "  length 8k: step=200 (100.0% → 30.0%)"."""
    lines = []
    for which, word in AGAINST_WORDS.items():
        found = [first for first in series.first_regressions if first.against == which]
        lines.append(f"first regressions against {word}: {'none' if not found else ''}".rstrip())
        lines += [
            f"  {first_regression_name(first)}: {names[first.step]} ({change(series, first)})"
            for first in found
        ]
    return lines


def first_regression_name(first: FirstRegression) -> str:
    return first.name if first.level in ("overall", EFFECTIVE) else f"{first.level} {first.name}"


def change(series: Series, first: FirstRegression) -> str:
    """The regressed test's change, against what: "100.0% → 30.0% against step=100"."""
    step = series.steps[first.step]
    comparison = step.baseline if first.against == "baseline" else step.best
    gate = None if comparison is None else comparison.gate
    if gate is None:
        return "n/a"
    if first.level == EFFECTIVE and gate.effective_length is not None:
        moved = f"{length_or_none(gate.effective_length.base)} → {length_or_none(gate.effective_length.new)}"
    else:
        test = next(t for t in gate.tests if t.level == first.level and t.name == first.name)
        moved = f"{test.base_mean:.1%} → {test.new_mean:.1%}, adjusted p {test.p_adjusted:.3g}"
    if first.against == "best" and step.best_index is not None:
        moved += f", against {checkpoint_name(series.steps[step.best_index].numbers, series.by)}"
    return moved


def _table(head: list[str], rows: list[list[str]]) -> list[str]:
    """Aligned columns, the first left and the rest right, the last never padded."""
    widths = [max(len(row[i]) for row in [head, *rows]) for i in range(len(head) - 1)]

    def line(row: list[str]) -> str:
        cells = [
            row[0].ljust(widths[0]),
            *(cell.rjust(w) for cell, w in zip(row[1:-1], widths[1:], strict=True)),
        ]
        return "  " + "  ".join([*cells, row[-1]])

    return [line(head), *(line(row) for row in rows)]
