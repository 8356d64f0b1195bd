"""fathom's tasks as inspect_ai tasks: ``inspect eval fathom/niah -T lengths=4k,8k ...``.

Registered with inspect through the entry point ``[project.entry-points.inspect_ai] fathom =
"fathom.integrations.inspect_tasks"``: inspect imports this module when a task name starts with
``fathom/``, so inspect_ai is imported here at the top, and nowhere else in fathom at import time.

Each task's samples are the cells of a fathom run of the same options (``inspect_spec``), built by
fathom's generators and counted with the tokenizer ``-T tokenizer=`` names: a sample's input is the
prompt as the messages fathom sends a chat backend (system, user; no answer prefix, as fathom's openai
backend sends none unless told), its target the answers, its metadata fathom's cell and run
identity, which ``fathom import-inspect`` reads back. The scorer is fathom's grader on the answer
alone (reasoning set apart as fathom's backends set it apart), with inspect's accuracy and stderr.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
from inspect_ai import Task, task
from inspect_ai._util.error import PrerequisiteError  # the pinned version's (the extra), as below
from inspect_ai._util.package import get_installed_package_name
from inspect_ai.dataset import MemoryDataset
from inspect_ai.dataset import Sample as InspectSample
from inspect_ai.model import (
    ChatMessage,
    ChatMessageSystem,
    ChatMessageUser,
    GenerateConfig,
)
from inspect_ai.scorer import Score, Scorer, Target, accuracy, scorer, stderr
from inspect_ai.solver import Generate, Solver, TaskState, solver

from fathom.errors import FathomError, SpecError
from fathom.integrations.inspect_answers import completion_of
from fathom.integrations.inspect_spec import inspect_spec
from fathom.prompts import chat_prompt
from fathom.prompts.tokenizers import Tokenizer, load_tokenizer
from fathom.registry import create_task
from fathom.run.grading import answer_grade
from fathom.spec import RunSpec
from fathom.tasks.base import Sample
from fathom.tasks.ruler.catalogue import ALL_VARIANTS as RULER_TASKS
from fathom.tasks.suites.catalogue import SUITE_NAMES
from fathom.version import __version__

# The key of fathom's metadata, on each sample and on the task (the log's ``eval.metadata``).
KEY = "fathom"
_NO_IDS = np.zeros(0, dtype=np.int32)


def _named(name: str) -> str:
    """The name to register ``name`` under so that inspect lists it as ``fathom/NAME``: inspect prefixes
    the package's name itself where it finds fathom installed (site-packages, or an editable install
    whose distribution is named as the package), and an editable install of fathom-eval is neither."""
    return name if get_installed_package_name(_named) == "fathom" else f"fathom/{name}"


class TaskOptionError(SpecError, PrerequisiteError):
    """A fathom task that cannot be made as asked (a bad -T option, a corpus or tokenizer not found):
    a SpecError to Python callers, and one line on inspect's command line, which prints a
    PrerequisiteError's message without a traceback."""

    def __init__(self, message: str) -> None:
        SpecError.__init__(self, message)
        self.message = f"fathom: error: {message}"


@task(name=_named("niah"))
def niah(**options: Any) -> Task:
    """fathom's needle in a haystack: the options of ``fathom run niah`` (lengths, depths, samples,
    needle, distractors, needles, split_distance, corpus, ...) as ``-T`` options, and tokenizer."""
    return fathom_task("niah", options)


@task(name=_named("ruler"))
def ruler(**options: Any) -> Task:
    """RULER's 13 tasks (``-T task=vt`` for one alone), as ``fathom run ruler`` builds them."""
    name = str(options.pop("task", "ruler"))
    if name != "ruler" and name not in RULER_TASKS:
        raise TaskOptionError(
            f"fathom/ruler runs RULER's tasks: -T task= one of ruler, {', '.join(RULER_TASKS)}"
        )
    return fathom_task(name, options)


@task(name=_named("suite"))
def suite(**options: Any) -> Task:
    """A real suite from its official files: ``-T suite=longbench data=DIR`` (suite_tasks, truncate)."""
    name = str(options.pop("suite", ""))
    if name not in SUITE_NAMES:
        raise TaskOptionError(f"fathom/suite needs -T suite= one of {', '.join(SUITE_NAMES)}, not '{name}'")
    return fathom_task(name, options)


def fathom_task(name: str, options: dict[str, Any]) -> Task:
    """The inspect task of fathom task ``name`` with ``options``: every cell's sample built now."""
    try:
        spec = inspect_spec(name, options)
        tokenizer = load_tokenizer(spec.tokenizer)
        made = create_task(spec, tokenizer)
        samples: list[InspectSample] = []
        grading: dict[str, Sample] = {}
        for cell in made.cells():
            sample = made.prepare(cell)
            if not isinstance(sample, Sample):
                raise SpecError(f"fathom/{name}'s cell {cell.id} scores a document; inspect's models answer")
            samples.append(_inspect_sample(spec, tokenizer, sample))
            grading[cell.id] = _for_grading(sample)
    except FathomError as exc:
        raise TaskOptionError(str(exc)) from None
    identity = {
        "spec": spec.to_json(),
        "tokenizer": {"name": tokenizer.name, "sha256": tokenizer.identity},
        "task": made.identity(),
        "fathom_version": __version__,
    }
    return Task(
        dataset=MemoryDataset(samples, name=f"fathom/{name}"),
        solver=answer(),
        scorer=grade(grading, tokenizer),
        config=GenerateConfig(temperature=0.0),  # fathom decodes greedily
        metadata={KEY: identity},
    )


def _inspect_sample(spec: RunSpec, tokenizer: Tokenizer, sample: Sample) -> InspectSample:
    cell, prompt, needles = sample.cell, sample.prompt, sample.needles
    # A prompt of one message, as niah's, RULER's and the suites' are (mrcr's conversations, built as
    # several turns, are not offered here).
    chat = chat_prompt(tokenizer, sample.text, prompt, sample.question)
    messages: list[ChatMessage] = [ChatMessageSystem(content=chat.system)] if chat.system else []
    messages.append(ChatMessageUser(content=chat.user))
    placements = needles.placements if needles is not None and prompt.needles else ()
    facts = {
        "run": spec.sha256,  # the run's identity: the spec that ``eval.metadata`` holds whole
        "sample_id": cell.id,
        "task": cell.task,
        "length": cell.length,
        "depth": cell.depth,
        "sample": cell.sample,
        "target_tokens": prompt.target_tokens,
        "actual_tokens": len(prompt.ids),
        "prompt_sha256": prompt.sha256,
        "needle_kind": sample.kind,
        "needle_roles": [p.role for p in placements],
        "needle_values": [p.value for p in placements],
        "answers": list(sample.answers),
        "scoring": sample.scoring,
        "max_new_tokens": sample.max_new_tokens,
    }
    return InspectSample(input=messages, target=list(sample.answers), id=cell.id, metadata={KEY: facts})


def _for_grading(sample: Sample) -> Sample:
    """What the scorer keeps of a sample: all but its prompt's ids (its needles' places stay), so that
    an eval holds its prompts once, as inspect's samples' text."""
    return dataclasses.replace(sample, prompt=dataclasses.replace(sample.prompt, ids=_NO_IDS), chat=None)


@solver
def answer() -> Solver:
    """inspect's generate, with each sample's answer budget fathom's (niah's 32 tokens, RULER's own)."""

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        return await generate(state, max_tokens=state.metadata[KEY]["max_new_tokens"])

    return solve


@scorer(metrics=[accuracy(), stderr()])
def grade(samples: dict[str, Sample], tokenizer: Tokenizer) -> Scorer:
    """fathom's grade of the answer (the scoring method or the task's own metric, 0 for an answer that
    commits to a distractor): 1 or 0, or the F1 or similarity a metric gives."""

    async def score(state: TaskState, target: Target) -> Score:
        sample = samples[str(state.sample_id)]
        answer = completion_of(state.output, tokenizer).text
        graded, lured = answer_grade(sample, answer)
        return Score(
            value=0.0 if lured else graded.value,
            answer=answer,
            explanation=f"{graded.method}: matched {list(graded.matched)}"
            + (f", committed to distractors {list(lured)}" if lured else ""),
        )

    return score
