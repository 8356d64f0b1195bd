"""fathom's graders as lm-evaluation-harness metrics, for the folders ``fathom export-lm-eval`` writes.

Each folder's ``utils.py`` is a few lines that import this module inside lm-eval's process and hand
lm-eval ``load_docs`` (its ``custom_dataset``) and ``process_results``; the grading itself stays here,
in fathom, so a folder never holds a copy of a grader that could drift from the run's.

A doc names its grader as data (``grader_of``): a scoring method by name (contains, exact, all, any,
mrcr, ...: ``fathom.registry.score``, plugins' too), or one of the tasks' own graders in
``TASK_GRADERS`` with its keywords (babi's story labels and question). Its metrics are the run's
record's: ``score`` is the grade, 0 where the answer commits to a look-alike needle (a distractor's
value), as ``fathom.run.recording`` scores it; ``lured`` is 1 where the answer commits to a look-alike
or names another key's value (RULER's multi-key tasks), as the record's ``lured`` says. lm-eval takes
the mean of each over a task's docs.
"""

from __future__ import annotations

import functools
import importlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from fathom.errors import FathomError
from fathom.registry import score
from fathom.run.grading import placed_needles
from fathom.scoring import Grader, committed_lures, found_in
from fathom.tasks import babi, listing, state
from fathom.tasks.base import Sample

# The tasks' own graders a doc may name (each reads the answer and the references; babi's its story's
# labels and question too): a closed table, so that a doc names a grader and never a function to import.
TASK_GRADERS: dict[str, Grader] = {"babi": babi.grade, "listing": listing.grade, "state": state.grade}
# What ``process_results`` returns for each doc, each averaged by lm-eval (the YAMLs' metric_list), and
# whether more of it is better.
METRICS = {"score": True, "lured": False}


class ExportedGraderError(FathomError):
    """A sample whose grader cannot be named in a doc, or a doc whose grader is none fathom knows."""


def grader_of(sample: Sample) -> dict[str, Any]:
    """The sample's grader as a doc names it: ``{"method": NAME}`` or ``{"task": NAME, "keywords":
    {...}}``; a grader of a plugin's or a real suite's own is refused (it is no data)."""
    if sample.grader is None:
        return {"method": sample.scoring}
    given = sample.grader
    function, keywords = (
        (given.func, dict(given.keywords)) if isinstance(given, functools.partial) else (given, {})
    )
    name = next((name for name, known in TASK_GRADERS.items() if known is function), None)
    if name is None:
        raise ExportedGraderError(
            f"task '{sample.cell.task}' grades with a grader of its own that an lm-eval folder cannot name "
            f"(fathom names {', '.join(TASK_GRADERS)}'s and the scoring methods')"
        )
    return {"task": name, "keywords": keywords}


def grading_facts(sample: Sample) -> dict[str, Any]:
    """What a doc holds to be graded as the run grades the sample: the references, the grader, the
    look-alike values that zero a score (its needles' lures) and those only flagged (RULER's other keys)."""
    needles = placed_needles(sample)
    return {
        "answers": list(sample.answers),
        "grader": grader_of(sample),
        "lures": list(needles.lures) if needles is not None else [],
        "look_alikes": list(sample.look_alikes),
    }


def grade(facts: Mapping[str, Any], output: str) -> dict[str, float]:
    """One doc's metrics (``METRICS``) for the model's ``output``, from its ``grading_facts``."""
    answers: Sequence[str] = facts["answers"]
    grader = facts["grader"]
    if "method" in grader:
        graded = score(grader["method"], output, answers)
    elif grader.get("task") in TASK_GRADERS:
        graded = TASK_GRADERS[grader["task"]](output, answers, **grader.get("keywords", {}))
    else:
        raise ExportedGraderError(f"a doc names a grader fathom does not know: {json.dumps(grader)[:200]}")
    lured = committed_lures(output, facts["lures"], answers)
    flagged = found_in(output, facts["look_alikes"])
    return {"score": 0.0 if lured else graded.value, "lured": float(bool(lured or flagged))}


def process_results(doc: Mapping[str, Any], results: Sequence[str]) -> dict[str, float]:
    """lm-eval's ``process_results`` of a generate_until task: the doc and the model's one generation."""
    return grade(json.loads(doc["fathom"]), results[0])


def load_docs(folder: Path, docs: str, **_metadata: Any) -> Any:
    """lm-eval's ``custom_dataset``: the folder's JSONL named ``docs`` as a DatasetDict of one ``test``
    split, each line's fathom facts kept as one JSON string (so that Arrow need not find one schema for
    every task's facts). lm-eval passes its task metadata beside ``docs``; none of it is read."""
    path = folder / docs
    if Path(docs).name != docs or path.suffix != ".jsonl":
        raise ExportedGraderError(f"docs '{docs}' is no JSONL file of the folder '{folder}'")
    rows = []
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            doc = json.loads(line)
            rows.append(
                {"prompt": doc["prompt"], "target": doc["target"], "fathom": json.dumps(doc["fathom"])}
            )
    datasets = importlib.import_module("datasets")  # lm-eval's own dependency, there where this runs
    return datasets.DatasetDict({"test": datasets.Dataset.from_list(rows)})
