"""report.html's parts for a real suite's run (LongBench, InfiniteBench): its mean over tasks in the
headline, and each task's score with its interval, over all length limits and at each, beside the
LLM judges' mean scores where the run was judged.

Every number is the summary's (``fathom.analysis.suites``, and ``fathom.analysis.agreement`` for the
judges); this module only lays them out. A summary written before fathom had these tables has none.
"""

from __future__ import annotations

from collections.abc import Sequence

from fathom.analysis.stats import SCORE_INTERVAL_RULE
from fathom.analysis.summary import Row
from fathom.report.html.page import esc, interval, number_box, percent, table
from fathom.report.plots import format_length


def suite_boxes(suites: Row) -> list[str]:
    """The mean over tasks, and how many prompts the suite's middle truncation cut."""
    boxes = []
    if "mean" in suites:
        mean = suites["mean"]
        boxes.append(
            number_box(
                percent(mean["mean"]),
                f"mean over {mean['tasks']} tasks, each weighing the same (95% interval {interval(mean)})",
            )
        )
    cut = f"{suites['truncated']} of {suites['samples']}"
    return [*boxes, number_box(cut, "prompts cut to their length limit (their middle left out)")]


def _judge_columns(judges: Sequence[Row]) -> list[tuple[str, dict[str, float | None]]]:
    """Each judge's mean score per task, headed by its role, rubric and scale."""
    columns = []
    for section in judges:
        scale = f"{min(section['scale'])}-{max(section['scale'])}"
        for judge in section["judges"]:
            role = judge["role"]
            means = {row["task"]: row[role] for row in section["by_task"]}
            columns.append((f"{role}: {section['rubric']} ({scale})", means))
    return columns


def _score(value: float | None) -> str:
    return "" if value is None else f"{value:.2f}"


def suite_section(suites: Row, judges: Sequence[Row]) -> str:
    """Per task: items, n, mean and 95% interval, errors and prompts cut, over all length limits and at
    each; the judges' means (over all the limits) beside the metric's."""
    if "by_task" not in suites:
        return ""
    columns = _judge_columns(judges)
    head = ("task", "metric", "length limit", "items", "n", "score", "95% interval", "errors", "prompts cut",
            *(name for name, _ in columns))  # fmt: skip
    rows: list[Sequence[object]] = []
    for task in suites["by_task"]:
        name = task["task"]
        rows.append(
            (
                name,
                task["scoring"],
                "all",
                task.get("items", ""),  # a summary written before fathom counted them has none
                task["n"],
                percent(task["mean"]),
                interval(task),
                task["errors"],
                task["truncated"],
                *(_score(means.get(name)) for _, means in columns),
            )
        )
        # At one limit each item is one sample.
        rows += [("", "", format_length(r["length"]), r["n"], r["n"], percent(r["mean"]), interval(r),
                  r["errors"], r["truncated"], *("" for _ in columns)) for r in task["lengths"]]  # fmt: skip
    judged = (
        " The judges' columns are their mean scores on their rubric's scale, over all the limits."
        if columns
        else ""
    )
    return (
        '<section id="suite-tasks"><h2>Score by task</h2><p>Each task over all its length limits, then at '
        "each: a prompt longer than its limit had its middle cut, as the suite does. The 95% interval is "
        f"{SCORE_INTERVAL_RULE} (F1, ROUGE and edit similarity are fractional). Over all the limits it "
        "is over the items, each scored by its mean over them: a "
        "question asked at 1k and at 8k is one piece of evidence, not two, and an interval over the "
        "samples would be too narrow. At one limit each item is one sample."
        f"{esc(judged)}</p>{table(head, rows)}</section>"
    )
