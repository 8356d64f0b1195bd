"""The no-context control's numbers: its score, the questions answered without the context, how
much the context raised the gold answer's log-probability (see ``fathom.tasks.control``), and two
runs' controls compared question by question (``fathom compare``)."""

from __future__ import annotations

import dataclasses
import math
import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

from fathom.analysis.failures import declines, lowered
from fathom.analysis.pairing import (
    CORRECTION,
    TEST,
    PairedTest,
    RunRecords,
    TaskComparison,
    compare_tasks,
    differences,
    graded_pairs,
    item_pairs,
    paired_test,
    twins,
)
from fathom.analysis.stats import bootstrap_interval, group_stats
from fathom.analysis.suites import is_suite_run, item_key
from fathom.errors import SpecError
from fathom.records import CONTROL, SampleRecord
from fathom.registry import SCORING

# Control answers listed in the report and summary, the highest-scoring first.
EXAMPLES = 10


def control_summary(controls: Sequence[SampleRecord], samples: Sequence[SampleRecord]) -> dict[str, Any]:
    """The controls' score (and per task for a suite), the questions answered without the context,
    and, where the gold answer's log-probability was read both ways, how much the context raised it."""
    scored = [r for r in controls if r.error is None]
    by_task: dict[str, list[SampleRecord]] = defaultdict(list)
    for record in controls:
        by_task[record.task].append(record)
    found = answered(controls)
    return {
        **group_stats(controls),
        "answered": len(found),
        "by_task": {task: group_stats(group) for task, group in sorted(by_task.items())},
        "examples": [_example(r) for r in found[:EXAMPLES]],
        "answer_logprob_gain": _gain(scored, samples),
    }


def answered(controls: Sequence[SampleRecord]) -> list[SampleRecord]:
    """The controls graded without an error that scored above their scoring method's chance
    (``ScoringEntry.answered_above``: 0 for most, found an answer or part of one without the
    context) and did not refuse (``refused``), the highest-scoring first. Their scores stay the
    task's own (RULER's, LongBench's), for comparability; only this count reads refusals."""
    floors = {name: _chance(name) for name in {r.scoring for r in controls}}
    found = (r for r in controls if r.error is None and r.score > floors[r.scoring] and not refused(r))
    return sorted(found, key=lambda r: (-r.score, r.sample_id))


def _chance(scoring: str) -> float:
    try:
        entry = SCORING.find(scoring)
    except SpecError:  # a plugin's method that no longer loads: its records still count as graded
        return 0.0
    return 0.0 if entry is None else entry.answered_above


def refused(record: SampleRecord) -> bool:
    """Whether a control declined or said it found nothing (``REFUSAL_PHRASES``) and names no gold
    answer as a whole word: a refusal that a metric scores above 0 answered nothing. RULER's
    containment finds qa_2's "no" inside "I could not find the answer", and a token F1 credits the
    words a refusal shares with the answer ("the", "in")."""
    if not declines(record.output):
        return False
    said = lowered(record.output)
    return not any(_whole(lowered(answer)).search(said) for answer in record.answers if answer.strip())


def _whole(phrase: str) -> re.Pattern[str]:
    """``phrase`` as a whole word or words: no letter or digit on either side ("no" is not in "not")."""
    return re.compile(rf"(?<!\w){re.escape(phrase)}(?!\w)")


def answered_share(control: Mapping[str, Any]) -> float | None:
    """The share of a summary's graded controls (``control_summary``) answered without the context:
    the figure to give with their count. Their mean score is another (a partial credit above 0 is
    answered); None where none was graded."""
    return control["answered"] / control["n"] if control["n"] else None


@dataclass(frozen=True)
class ControlCount:
    """A run's no-context controls in two numbers: those graded, and those of them ``answered``."""

    graded: int
    answered: int

    def to_json(self) -> dict[str, int]:
        return dataclasses.asdict(self)


def control_count(controls: Sequence[SampleRecord]) -> ControlCount | None:
    """The run's controls counted; None for a run without any (made with --no-control, or before
    fathom asked controls), which is not a run whose controls all failed."""
    if not controls:
        return None
    return ControlCount(sum(1 for r in controls if r.error is None), len(answered(controls)))


def _example(record: SampleRecord) -> dict[str, Any]:
    return {
        "sample_id": record.sample_id,
        "question": record.question,
        "answers": list(record.answers),
        "output": record.output,
        "score": record.score,
    }


def _gain(controls: Sequence[SampleRecord], samples: Sequence[SampleRecord]) -> list[dict[str, Any]]:
    """Per length, the mean of log p(gold answer) with the context minus without it, in nats, over
    the samples where both were read: how much the context tells the model, a continuous signal
    that falls where the model stops using the context, whatever its greedy answers."""
    without = {r.sample_id.removeprefix(f"{CONTROL}|"): r.answer_logprob for r in controls}
    by_length: dict[int, list[float]] = defaultdict(list)
    for record in samples:
        with_context, alone = record.answer_logprob, without.get(record.sample_id)
        if record.error is None and with_context is not None and alone is not None:
            by_length[record.length].append(with_context - alone)
    return [
        {"length": length, "pairs": len(gains), "mean_nats": math.fsum(gains) / len(gains)}
        for length, gains in sorted(by_length.items())
    ]


# compare.json's names for a control task's verdicts: "improved" would read as good news, where a
# checkpoint answering more questions without their context has memorised them or trained on them.
CONTROL_VERDICTS = {"improved": "higher", "regressed": "lower", "unchanged": "unchanged"}
# A control's pairs each way, in those words: fewer answered without the context, and more.
CONTROL_WORDS = (CONTROL_VERDICTS["regressed"], CONTROL_VERDICTS["improved"])


@dataclass(frozen=True)
class ControlComparison:
    """Two runs' no-context controls compared question by question, as a suite's tasks are
    (``fathom.analysis.pairing.compare_tasks``): per task the exact sign test, Holm's correction
    over the tasks (a family of its own, apart from the cells': the controls ask whether the model
    knows the answers without the context, not whether it finds them in it), and the paired
    difference with a 95% bootstrap interval; pooled over all questions beside, reported only.

    ``base`` or ``new`` is None for a run without controls; nothing is compared then (``overall``
    is None), nor where the runs share no control that both graded."""

    base: ControlCount | None = None
    new: ControlCount | None = None
    left_out_errors: int = 0  # control pairs with an error in either run
    left_out_unpaired: int = 0  # controls in one run only, or of another item under one id
    overall: PairedTest | None = None  # over the questions, each one pair
    ci_low: float = 0.0  # of the mean of new minus base over the questions
    ci_high: float = 0.0
    tasks: tuple[TaskComparison, ...] = ()

    @property
    def flagged(self) -> list[TaskComparison]:
        """The tasks whose questions the new run answers significantly more often without their
        context than the base run: a sign that it memorised them, or that they leaked into its
        training data, so its scores on them are no evidence of using the context."""
        return [task for task in self.tasks if task.verdict == "improved"]

    def to_json(self) -> dict[str, Any]:
        overall = None
        if self.overall is not None:
            overall = {
                **self.overall.to_json(),
                "difference_ci_low": self.ci_low,
                "difference_ci_high": self.ci_high,
            }
        return {
            "base": None if self.base is None else self.base.to_json(),
            "new": None if self.new is None else self.new.to_json(),
            "test": TEST,
            "correction": CORRECTION,
            "left_out": {"errors": self.left_out_errors, "unpaired": self.left_out_unpaired},
            "overall": overall,
            "tasks": [{**task.to_json(), "verdict": CONTROL_VERDICTS[task.verdict]} for task in self.tasks],
            "flagged": [task.task for task in self.flagged],
        }


def compare_controls(base: RunRecords, new: RunRecords, alpha: float) -> ControlComparison:
    """The runs' controls paired by sample id (``twins``: refused where twins' prompts differ) and
    compared; counted alone where either run has none."""
    counts = control_count(base.controls), control_count(new.controls)
    if not (base.controls and new.controls):
        return ControlComparison(*counts)
    pairs, other_items, unpaired = twins(
        dataclasses.replace(base, samples=base.controls), dataclasses.replace(new, samples=new.controls)
    )
    graded = graded_pairs(pairs)
    left_out = len(pairs) - len(graded), unpaired + other_items
    if not graded:
        return ControlComparison(*counts, *left_out)
    # A suite's item asked at several length limits is one control prompt at each (the context, which
    # the limit cuts, is what the control leaves out): one question, so one pair. Elsewhere every
    # sample asks a question of its own.
    item = item_key if is_suite_run(base.samples) else attrgetter("sample_id")
    questions = [pair for task_pairs in item_pairs(graded, item).values() for pair in task_pairs]
    low, high = bootstrap_interval(differences(questions))
    return ControlComparison(
        *counts, *left_out, paired_test(questions), low, high, compare_tasks(graded, alpha, item)
    )
