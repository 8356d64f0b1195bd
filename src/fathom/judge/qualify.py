"""Qualifying a judge: the judge grades a qualification set (``fathom.prompts.qualify_sets``), and
its verdicts are set beside the hand-written labels (``fathom.analysis.qualification``).

``fathom judge --qualify --judge J`` needs no run folder; ``fathom judge RUN --qualify --judge J``
also appends each result to the run's qualifications.jsonl (under the run folder's lock, as
judgements are), where the report finds it for the run's judge of the same identity and rubric.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from tqdm import tqdm

from fathom.analysis.qualification import qualification_numbers
from fathom.errors import SpecError
from fathom.judge.runner import ROLES, check_judges, judge_cases, load_judge
from fathom.judgement import QualificationRecord
from fathom.prompts.judging import Rubric, load_rubric
from fathom.prompts.qualify_sets import QualifySet, load_set
from fathom.run.judgements import QualificationWriter
from fathom.run.store import RunFolder


def check_qualification(judges: Sequence[str], rubric_name: str, set_name: str, folder: Path | None) -> None:
    """What can be checked before any judge is loaded: the judges' names, a binary rubric, the set,
    and the run folder where one is named."""
    if not judges:
        raise SpecError("--qualify needs a judge: name it with --judge")
    check_judges(judges, rubric_name)
    rubric = load_rubric(rubric_name)
    if rubric.kind != "binary":
        raise SpecError(
            f"--rubric {rubric.label} is {rubric.kind}: a qualification set is labelled right or wrong, so "
            "qualify a judge under a binary rubric (qa-correctness)"
        )
    load_set(set_name)
    if folder is not None:
        RunFolder(folder).read_manifest()


def qualify(
    spec: str, rubric: Rubric, qualify_set: QualifySet, retries: int = 2, show_progress: bool = True
) -> QualificationRecord:
    """The judge named ``spec`` on every item of the set, under ``rubric``."""
    judge = load_judge(ROLES[0], spec)
    items = qualify_set.items
    scores: dict[str, int | None] = {}
    with tqdm(total=len(items), desc=f"qualifying {spec}", unit="answer", disable=not show_progress) as bar:
        for record in judge_cases(judge, rubric, items, retries):
            scores[record.sample_id] = record.score
            bar.update()
    passed = [_passes(scores[item.sample_id], rubric) for item in items]
    numbers = qualification_numbers(
        [item.category for item in items],
        [item.label for item in items],
        passed,
        qualify_set.adversarial,
        qualify_set.thresholds,
    )
    return QualificationRecord(
        judge=spec,
        judge_identity=judge.identity,
        rubric=rubric.label,
        rubric_sha256=rubric.sha256,
        set=qualify_set.label,
        set_sha256=qualify_set.sha256,
        verdicts={item.sample_id: scores[item.sample_id] for item in items},
        **numbers,
    )


def _passes(score: int | None, rubric: Rubric) -> bool | None:
    return None if score is None else score >= rubric.passing


def record_qualifications(folder: Path, records: Sequence[QualificationRecord]) -> None:
    """Append ``records`` to the run folder's qualifications.jsonl, holding its lock."""
    run = RunFolder(folder)
    run.hold()
    try:
        writer = QualificationWriter(folder)
        try:
            for record in records:
                writer.append(record)
        finally:
            writer.close()
    finally:
        run.close()
