"""fathom's tasks as inspect_ai tasks: ``inspect eval fathom/niah -T lengths=4k,8k ...``, and
``fathom/ruler``, ``fathom/suite``, ``fathom/state``, ``fathom/babi``, ``fathom/listing``, ``fathom/mrcr``.

Registered with inspect through the entry point ``[project.entry-points.inspect_ai] fathom =
"fathom.integrations.inspect_tasks"``: inspect imports this module when a task name starts with
``fathom/``, so inspect_ai is imported here at the top, and nowhere else in fathom at import time.

Each task's samples are the cells of a fathom run of the same options (``inspect_spec``), built by
fathom's generators and counted with the tokenizer ``-T tokenizer=`` names: a sample's input is the
prompt as the messages fathom sends a chat backend (system, user; mrcr's earlier turns between them;
no answer prefix, as fathom's openai backend sends none unless told), its answer budget its own (a
long-output sample's grows with its answer), its target the answers, its metadata fathom's cell and run
identity, which ``fathom import-inspect`` reads back. The scorer is fathom's grader on the answer
alone (reasoning set apart as fathom's backends set it apart), with inspect's accuracy and stderr.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection
from typing import Any

import numpy as np
from inspect_ai import Task, task
from inspect_ai._util.error import PrerequisiteError  # the pinned version's (the extra), as below
from inspect_ai._util.package import get_installed_package_name
from inspect_ai.dataset import MemoryDataset
from inspect_ai.dataset import Sample as InspectSample
from inspect_ai.model import (
    ChatMessage,
    ChatMessageAssistant,
    ChatMessageSystem,
    ChatMessageUser,
    GenerateConfig,
)
from inspect_ai.scorer import (
    Metric,
    SampleScore,
    Score,
    Scorer,
    Target,
    Value,
    accuracy,
    mean,
    metric,
    scorer,
    stderr,
)
from inspect_ai.solver import Generate, Solver, TaskState, solver

from fathom.errors import FathomError, SpecError
from fathom.integrations.inspect_answers import completion_of
from fathom.integrations.inspect_spec import inspect_spec
from fathom.prompts import ChatPrompt, chat_prompt
from fathom.prompts.tokenizers import Tokenizer, load_tokenizer
from fathom.registry import create_task
from fathom.run.grading import answer_grade
from fathom.spec import RunSpec
from fathom.tasks import control, probe
from fathom.tasks.babi_draw import TASKS as BABI_TASKS
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
    name = _one_task("ruler", "RULER's", options, RULER_TASKS)
    return fathom_task(name, options)


@task(name=_named("babi"))
def babi(**options: Any) -> Task:
    """bAbI-style stories in a haystack, qa1-qa5 (``-T task=qa1`` for one alone), as ``fathom run babi``."""
    name = _one_task("babi", "the bAbI-style", options, BABI_TASKS)
    return fathom_task(name if name == "babi" else f"babi:{name}", options)


def _one_task(family: str, whose: str, options: dict[str, Any], tasks: Collection[str]) -> str:
    """The ``-T task=`` option taken out of ``options``: one of a family's ``tasks``, or the family whole."""
    name = str(options.pop("task", family))
    if name != family and name not in tasks:
        raise TaskOptionError(
            f"fathom/{family} runs {whose} tasks: -T task= one of {family}, {', '.join(tasks)}"
        )
    return name


@task(name=_named("state"))
def state(**options: Any) -> Task:
    """State tracking: a list's operations through a haystack (``-T ops=4,16,64``), as ``fathom run state``
    builds them."""
    return fathom_task("state", options)


@task(name=_named("listing"))
def listing(**options: Any) -> Task:
    """Long outputs: every matching log record's id (``-T items=8,32``), each answer's budget its own."""
    return fathom_task("listing", options)


@task(name=_named("mrcr"))
def mrcr(**options: Any) -> Task:
    """Multi-round co-reference (``-T repeats=2,4``): the conversation as inspect's messages, in turns."""
    return fathom_task("mrcr", options)


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
        # As the runner plans a run: its probes and no-context controls first where -T control=true.
        for cell in probe.plan(made, spec.control):
            sample = control.prepared(made, cell)
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
        # With controls, inspect's accuracy is the samples' alone, and the controls' mean grade apart.
        metrics=[samples_accuracy(), samples_stderr(), controls_mean()] if spec.control else None,
    )


def _inspect_sample(spec: RunSpec, tokenizer: Tokenizer, sample: Sample) -> InspectSample:
    cell, prompt, needles = sample.cell, sample.prompt, sample.needles
    # As fathom's runner hands a chat backend its prompt: the task's own messages (mrcr's conversation),
    # else one message made of the text around the context.
    chat = sample.chat() if sample.chat else chat_prompt(tokenizer, sample.text, prompt, sample.question)
    placements = needles.placements if needles is not None and prompt.needles else ()
    facts = {
        "run": spec.sha256,  # the run's identity: the spec that ``eval.metadata`` holds whole
        "sample_id": cell.id,
        "task": cell.task,
        "length": cell.length,
        "depth": cell.depth,
        "sample": cell.sample,
        "control": cell.control,  # a no-context control (or a low-overlap item's probe): -T control=true
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
    return InspectSample(
        input=_messages(chat), target=list(sample.answers), id=cell.id, metadata={KEY: facts}
    )


def _messages(chat: ChatPrompt) -> list[ChatMessage]:
    """The messages fathom's openai backend sends: the system prompt where there is one, the earlier
    turns, the user's message; no answer prefix (not every provider continues an assistant message)."""
    messages: list[ChatMessage] = [ChatMessageSystem(content=chat.system)] if chat.system else []
    for role, content in chat.turns:
        messages.append(
            ChatMessageUser(content=content) if role == "user" else ChatMessageAssistant(content=content)
        )
    messages.append(ChatMessageUser(content=chat.user))
    return messages


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


def _over(of: Metric, controls: bool) -> Metric:
    """``of`` over the run's samples alone, or over its controls and probes alone (``controls``)."""

    def compute(scores: list[SampleScore]) -> Value:
        kept = [s for s in scores if (s.sample_metadata or {})[KEY]["control"] is controls]
        return of(kept)  # type: ignore[arg-type]  # Metric's union names its old form too, over Scores

    return compute


@metric
def samples_accuracy() -> Metric:
    """inspect's accuracy over the samples alone, the controls left out."""
    return _over(accuracy(), False)


@metric
def samples_stderr() -> Metric:
    """inspect's standard error of that accuracy."""
    return _over(stderr(), False)


@metric
def controls_mean() -> Metric:
    """The controls' and probes' mean grade: what the model answers without the context."""
    return _over(mean(), True)
