"""Tasks, backends and scoring methods by name: fathom's own and plugins' found the same way.

A plugin is a package with entry points in the groups ``fathom.tasks``, ``fathom.backends`` and
``fathom.scorers``. An entry point's name is the name users type, and it loads a TaskEntry, a
BackendEntry or a ScoringEntry: the types of fathom's own entries below. So the listings, the help
and the "unknown name" messages show both, and a plugin's task has its options checked like niah's.

- A plugin is imported only when one of its names is asked for, or when all are listed (``fathom
  models``). A plugin that fails to import, or that loads something other than an entry, breaks only
  its own names: a listing reports it as a warning, and asking for it by name is an error.
- A name means one thing, so a plugin's name is refused when it is also a built-in's or another
  plugin's. Names are not namespaced, because the name is what a run's spec and records keep. The
  built-in stays usable; a name that two plugins claim works for neither until one is uninstalled.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import sys
from collections.abc import Sequence
from urllib.parse import unquote_plus

from fathom.backends.base import (
    Backend,
    BackendEntry,
    BackendFactory,
    Scorer,
    Thinking,
    cannot_score,
    split_options,
)
from fathom.backends.reasoning import THINK_TAGS, tags_refusal
from fathom.errors import SpecError
from fathom.prompts.tokenizers import Tokenizer
from fathom.records import Score
from fathom.registry.plugins import BUILT_IN as BUILT_IN
from fathom.registry.plugins import Kind, close_match
from fathom.scoring import SCORERS, ScoringEntry, grade
from fathom.spec import RunSpec
from fathom.tasks.babi_draw import TASKS as BABI_TASKS
from fathom.tasks.base import Task, TaskEntry, TaskFactory
from fathom.tasks.ruler.catalogue import ALL_VARIANTS as RULER_TASKS


def _task(module: str, name: str) -> TaskFactory:
    """A factory that imports the task's module only when a run asks for it (a start imports no task
    it does not run)."""

    def factory(spec: RunSpec, tokenizer: Tokenizer) -> Task:
        task: Task = getattr(importlib.import_module(module), name)(spec, tokenizer)
        return task

    return factory


def _sim(rest: str, tokenizer: str) -> Backend:
    from fathom.backends.sim import SimulatedBackend
    from fathom.prompts.tokenizers import load_tokenizer

    # A simulated model has no vocabulary of its own: it counts with the one named, cl100k by default.
    return SimulatedBackend(rest, load_tokenizer("cl100k_base" if tokenizer == "auto" else tokenizer))


def _sim_judge(rest: str, tokenizer: str) -> Backend:
    from fathom.backends.sim_judge import SimulatedJudge
    from fathom.prompts.tokenizers import load_tokenizer

    return SimulatedJudge(rest, load_tokenizer("cl100k_base" if tokenizer == "auto" else tokenizer))


def _lazy(module: str, name: str) -> BackendFactory:
    """A factory that imports the backend's module (and its heavy dependencies) only when used."""

    def factory(rest: str, tokenizer: str) -> Backend:
        backend: Backend = getattr(importlib.import_module(module), name)(rest, tokenizer)
        return backend

    return factory


# The options of every task that builds prompts from a corpus and grades the answers.
_PROMPT_KNOBS = ("corpus", "template", "system_prompt", "scoring", "max_new_tokens")
_RULER_TASK = TaskEntry(
    _task("fathom.tasks.ruler.suite", "RulerTask"),
    "one RULER task alone",
    depths="drawn",
    knobs=(*_PROMPT_KNOBS, "fill"),
)
_BABI_TASK = TaskEntry(
    _task("fathom.tasks.babi", "BabiTask"),
    "bAbI-style stories (qa1-qa5) spread through a haystack, answered in a word (babi:qa1 ... alone)",
    depths="drawn",
    knobs=("corpus", "template", "system_prompt", "max_new_tokens"),
)

TASKS: dict[str, TaskEntry] = {
    "niah": TaskEntry(
        _task("fathom.tasks.niah", "NiahTask"),
        "needles (one, several, split, among distractors) at each depth of haystacks of each length",
        depths="swept",
        knobs=(
            *_PROMPT_KNOBS,
            "needle",
            "distractors",
            "needles",
            "split_distance",
            "haystack_offset",
            "needle_style",
            "domains",
            "literal_distractor",
            "relations",
            "needle_orders",
            "question_templates",
            "perplexity",
            "answer_logprob",
        ),
    ),
    "perplexity": TaskEntry(
        _task("fathom.tasks.perplexity", "PerplexityTask"),
        "scores corpus documents, generates nothing",
        knobs=("corpus",),
        needs_scores=True,
    ),
    "ruler": dataclasses.replace(_RULER_TASK, summary="the 13 RULER tasks"),
    **dict.fromkeys(RULER_TASKS, _RULER_TASK),
    **{
        name: TaskEntry(
            _task("fathom.tasks.suites.task", "SuiteRun"),
            f"{summary}, from the suite's official files (--data DIR)",
            knobs=("template", "system_prompt", "max_new_tokens", "data", "suite_tasks", "truncate"),
        )
        for name, summary in (
            ("longbench", "LongBench's 21 tasks"),
            ("longbench-e", "LongBench-E's 13 tasks in length buckets"),
            ("longbench-v2", "LongBench v2's multiple-choice questions"),
            ("infinitebench", "InfiniteBench's 12 tasks"),
        )
    },
    "state": TaskEntry(
        _task("fathom.tasks.state", "StateTask"),
        "a list's final state after operations spread through a haystack, decoys among them (--ops)",
        depths="drawn",
        knobs=("corpus", "template", "system_prompt", "max_new_tokens", "ops"),
    ),
    "listing": TaskEntry(
        _task("fathom.tasks.listing", "ListingTask"),
        "every log record matching a condition, one a line: an answer that grows with the input (--items)",
        depths="drawn",
        knobs=("corpus", "template", "system_prompt", "max_new_tokens", "items"),
    ),
    "mrcr": TaskEntry(
        _task("fathom.tasks.mrcr", "MrcrTask"),
        "multi-round co-reference: one of a chat's repeated pieces of writing, reproduced (--repeats)",
        depths="drawn",
        knobs=("corpus", "template", "system_prompt", "max_new_tokens", "repeats"),
    ),
    "babi": _BABI_TASK,
    **{
        f"babi:{task}": dataclasses.replace(_BABI_TASK, summary=f"bAbI's {task} alone") for task in BABI_TASKS
    },
}

BACKENDS: dict[str, BackendEntry] = {
    "llamacpp": BackendEntry(
        _lazy("fathom.backends.llamacpp", "LlamaCppBackend"),
        "llama.cpp in process: a GGUF file or a small model's shorthand",
        packages=("llama_cpp",),
        extra="llamacpp",
        scores=True,
        think_tags=True,
    ),
    "hf": BackendEntry(
        _lazy("fathom.backends.hf", "TransformersBackend"),
        "transformers: a model folder, a GGUF file or a small model's shorthand",
        packages=("torch", "transformers", "gguf", "accelerate"),
        extra="hf",
        scores=True,
        think_tags=True,
    ),
    "vllm": BackendEntry(
        _lazy("fathom.backends.vllm", "VLLMBackend"),
        "vLLM's offline engine (GPUs): a model folder",
        packages=("vllm", "transformers"),
        extra="vllm",
        scores=True,
        think_tags=True,
    ),
    "openai": BackendEntry(
        _lazy("fathom.backends.openai", "OpenAIBackend"),
        "an OpenAI-compatible server, MODEL@URL (log-probabilities where it returns prompt logprobs)",
        scores=True,
        transport=frozenset({"concurrency", "timeout", "retries", "max_wait", "api_key_env"}),
    ),
    "anthropic": BackendEntry(
        _lazy("fathom.backends.anthropic", "AnthropicBackend"),
        "Anthropic's Messages API through its SDK, MODEL[@URL] (lengths: the provider's token counts)",
        packages=("anthropic",),
        extra="anthropic",
        transport=frozenset({"concurrency", "timeout", "retries", "max_wait", "api_key_env"}),
    ),
    "sim": BackendEntry(_sim, "simulated models that read the prompt", scores=True),
    "sim-judge": BackendEntry(_sim_judge, "a simulated LLM judge (--judge), gullible outside its blocks"),
}


TASK = Kind("task", "fathom.tasks", TaskEntry, TASKS)
BACKEND = Kind("backend", "fathom.backends", BackendEntry, BACKENDS)
SCORING = Kind("scoring", "fathom.scorers", ScoringEntry, SCORERS)


# The RunSpec fields that every task reads, or that concern the run rather than the task. Every other
# field but depths is a knob, which a task takes only by naming it in its entry's ``knobs``; a new
# field is refused by every task until one declares it.
EVERY_TASK = frozenset(
    {"task", "model", "tokenizer", "lengths", "samples", "seed", "control"}
    | {"thinking_budget", "keep_reasoning"}  # every task's answers may be reasoned
)
_DEFAULTS = {field.name: field.default for field in dataclasses.fields(RunSpec)}
KNOBS = tuple(name for name in _DEFAULTS if name not in EVERY_TASK and name != "depths")
# A knob whose option is not its field's name with dashes: one that is on unless turned off.
_FLAGS = {"truncate": "--no-truncate"}
# Why a knob means nothing to the tasks that do not take it, where its name does not say.
_WHY = {
    "fill": "RULER's sizing rule steps through a RULER task's own units, its noise lines, essay words "
    "or documents; niah, perplexity and the real suites have none, and fill or cut their prompts to "
    "the length"
}


def check_spec(spec: RunSpec) -> None:
    """Refuse, before any work, a spec whose task or scoring method does not exist, or that sets an
    option its task does not take."""
    _check_options(spec, TASK.entry(spec.task))
    if spec.model.partition(":")[0] == "sim-judge":  # it answers judge prompts only: every score would be 0
        raise SpecError(
            f"'{spec.model}' is a simulated judge, not a model to test: give it as --judge, and a model "
            "under test as --model (e.g. sim:cliff)"
        )
    if spec.scoring is not None:
        SCORING.entry(spec.scoring)
    _check_think_tags(spec)


def _check_think_tags(spec: RunSpec) -> None:
    """Refuse a thinking budget that a backend reading think blocks off the text is told, by
    ``think_tags=off``, not to look for: from the model's name alone, before a model is loaded (its
    ``take_thinking`` says the same after, for a backend made otherwise)."""
    prefix, _, rest = spec.model.partition(":")
    entry = BACKEND.find(prefix) if spec.thinking_budget is not None else None
    if entry is None or not entry.think_tags:
        return
    target, options = split_options(rest)
    try:
        tags = THINK_TAGS.read(options["think_tags"]) if "think_tags" in options else THINK_TAGS.default
    except ValueError:
        return  # the backend refuses the value itself, before it loads anything
    if (why := tags_refusal(f"{prefix}:{target}", tags)) is not None:
        raise _budget_refused(why)


def _budget_refused(why: str) -> SpecError:
    return SpecError(f"{why}: drop --thinking-budget, or give one it can honour")


def _check_options(spec: RunSpec, entry: TaskEntry) -> None:
    if unknown := sorted(set(entry.knobs) - set(KNOBS)):
        raise SpecError(
            f"task '{spec.task}' declares knobs that are no RunSpec option, {', '.join(unknown)}: "
            f"use some of {', '.join(KNOBS)}"
        )
    if entry.depths == "swept" and not spec.depths:
        raise SpecError("no depths given: pass a count (--depths 11) or a list (--depths 0,0.5,1)")
    if entry.depths != "swept" and spec.depths:
        placed = {
            "drawn": "draws needle depths per sample, as RULER does, and records where they landed",
            "none": "places no needles",
        }[entry.depths]
        raise SpecError(f"'{spec.task}' {placed}; drop --depths (it applies to {_takers('depths')})")
    for knob in KNOBS:
        if knob not in entry.knobs and getattr(spec, knob) != _DEFAULTS[knob]:
            flag = _FLAGS.get(knob, "--" + knob.replace("_", "-"))
            alone = f" (for {knob} alone: fathom run {knob})" if knob in TASKS else ""
            why = f" ({_WHY[knob]})" if knob in _WHY else ""
            raise SpecError(
                f"{flag} goes with {_takers(knob)} runs, not '{spec.task}'{why}: drop {flag}{alone}"
            )


def tasks_taking(option: str) -> list[str]:
    """fathom's own tasks that take a spec option: ``"depths"`` (those that sweep them) or a knob."""
    return [
        name
        for name, entry in TASKS.items()
        if (entry.depths == "swept" if option == "depths" else option in entry.knobs)
    ]


def _takers(option: str) -> str:
    names = tasks_taking(option)
    if not names:
        return "other tasks"
    return ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")


def create_task(spec: RunSpec, tokenizer: Tokenizer) -> Task:
    """The spec's task, its options checked against what the task's entry says it takes."""
    TASK.warn_if_claimed(spec.task)
    entry = TASK.entry(spec.task)
    _check_options(spec, entry)
    return entry.factory(spec, tokenizer)


def answering_spec(spec: RunSpec) -> RunSpec:
    """The spec as a run's identity holds it: its model without the settings its backend's entry
    calls ``transport`` (how requests travel, not what the model answers), in the order given and
    spelled as given. A run interrupted by timeouts resumes, in the same folder, with a longer one."""
    prefix, colon, rest = spec.model.partition(":")
    entry = BACKEND.find(prefix) if colon else None
    target, mark, query = rest.partition("?")
    if entry is None or not entry.transport or not mark:
        return spec
    kept = [pair for pair in query.split("&") if unquote_plus(pair.partition("=")[0]) not in entry.transport]
    model = f"{prefix}:{target}" + ("?" + "&".join(kept) if kept else "")
    return spec if model == spec.model else dataclasses.replace(spec, model=model)


def create_backend(model: str, tokenizer: str) -> Backend:
    """A backend from ``prefix:rest``, e.g. ``sim:cliff?window=8k``."""
    prefix, colon, rest = model.partition(":")
    entry = BACKEND.find(prefix) if colon else None
    if entry is None:
        known = ", ".join(f"{name}:..." for name in BACKEND.names())
        raise SpecError(
            f"unknown model '{model}'{close_match(prefix, BACKEND.names())}: name it as backend:model, "
            f"with backend one of {known}"
        )
    BACKEND.warn_if_claimed(prefix)
    return entry.factory(rest, tokenizer)


def check_backend(spec: RunSpec, backend: Backend) -> None:
    """Refuse, before any work, a backend that cannot read the log-probabilities the spec's task or
    its options (--perplexity, --answer-logprob) need, or honour the spec's thinking budget
    (``backends.base.Thinking``)."""
    needed = TASK.entry(spec.task).needs_scores or spec.perplexity or spec.answer_logprob
    if needed and not isinstance(backend, Scorer):
        able = [name for name, entry in BACKENDS.items() if entry.scores]
        raise SpecError(f"{cannot_score(backend)}: use one of {', '.join(able[:-1])} or {able[-1]}")
    if spec.thinking_budget is not None:
        if not isinstance(backend, Thinking):
            raise SpecError(
                f"backend '{backend.name}' reads no reasoning apart from its answers, so it cannot "
                "honour a thinking budget: drop --thinking-budget"
            )
        if (why := backend.take_thinking(spec.thinking_budget)) is not None:
            raise _budget_refused(why)


def score(method: str, output: str, references: Sequence[str]) -> Score:
    """Grade ``output`` against ``references`` (at least one) with the named scoring method."""
    return grade(_scoring(method, tuple(sys.path)), output, references)


@functools.lru_cache(maxsize=64)
def _scoring(method: str, path: tuple[str, ...]) -> ScoringEntry:
    # Looked up once per method (and sys.path, as in _scan), not once per record: a plugin's name
    # that clashes with a built-in's is then reported once.
    SCORING.warn_if_claimed(method)
    return SCORING.entry(method)
