"""One registry for tasks and backends, by name; factories import their modules lazily.

Third-party packages add their own through the entry-point groups ``fathom.tasks`` and
``fathom.backends`` (each entry point loads a factory with the signature below).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Any

from fathom.backends.base import Backend
from fathom.errors import SpecError
from fathom.prompts.tokenizers import Tokenizer
from fathom.spec import RunSpec
from fathom.tasks.base import Task
from fathom.tasks.ruler.catalogue import ALL_VARIANTS as RULER_TASKS

TaskFactory = Callable[[RunSpec, Tokenizer], Task]
# (the part after "prefix:", the tokenizer the user named or "auto")
BackendFactory = Callable[[str, str], Backend]


def _niah(spec: RunSpec, tokenizer: Tokenizer) -> Task:
    from fathom.tasks.niah import NiahTask

    return NiahTask(spec, tokenizer)


def _sim(rest: str, tokenizer: str) -> Backend:
    from fathom.backends.sim import SimulatedBackend
    from fathom.prompts.tokenizers import load_tokenizer

    # A simulated model has no vocabulary of its own: it counts with the one named, cl100k by default.
    return SimulatedBackend(rest, load_tokenizer("cl100k_base" if tokenizer == "auto" else tokenizer))


def _lazy(module: str, name: str) -> BackendFactory:
    """A factory that imports the backend's module (and its heavy dependencies) only when used."""

    def factory(rest: str, tokenizer: str) -> Backend:
        backend: Backend = getattr(importlib.import_module(module), name)(rest, tokenizer)
        return backend

    return factory


def _perplexity(spec: RunSpec, tokenizer: Tokenizer) -> Task:
    from fathom.tasks.perplexity import PerplexityTask

    return PerplexityTask(spec, tokenizer)


def _ruler(spec: RunSpec, tokenizer: Tokenizer) -> Task:
    from fathom.tasks.ruler.suite import RulerTask

    return RulerTask(spec, tokenizer)


# "ruler" runs the thirteen RULER tasks; each one also runs alone by its name.
TASKS: dict[str, TaskFactory] = {
    "niah": _niah,
    "perplexity": _perplexity,
    "ruler": _ruler,
    **dict.fromkeys(RULER_TASKS, _ruler),
}
BACKENDS: dict[str, BackendFactory] = {
    "sim": _sim,
    "llamacpp": _lazy("fathom.backends.llamacpp", "LlamaCppBackend"),
    "hf": _lazy("fathom.backends.hf", "TransformersBackend"),
    "vllm": _lazy("fathom.backends.vllm", "VLLMBackend"),
    "openai": _lazy("fathom.backends.openai", "OpenAIBackend"),
}


def takes_depths(task: str) -> bool:
    """Whether the task sweeps needle depths (niah), draws them per sample (RULER's tasks) or has
    none (perplexity)."""
    return task not in ("ruler", "perplexity") and task not in RULER_TASKS


def _plugins(group: str) -> dict[str, Callable[..., Any]]:
    return {ep.name: ep.load() for ep in entry_points(group=group)}


def task_names() -> list[str]:
    return sorted({*TASKS, *(ep.name for ep in entry_points(group="fathom.tasks"))})


def create_task(spec: RunSpec, tokenizer: Tokenizer) -> Task:
    factory = TASKS.get(spec.task) or _plugins("fathom.tasks").get(spec.task)
    if factory is None:
        raise SpecError(f"unknown task '{spec.task}': use one of {', '.join(task_names())}")
    task: Task = factory(spec, tokenizer)
    return task


def create_backend(model: str, tokenizer: str) -> Backend:
    """A backend from ``prefix:rest``, e.g. ``sim:cliff?window=8k``."""
    prefix, found, rest = model.partition(":")
    factory = BACKENDS.get(prefix) or _plugins("fathom.backends").get(prefix)
    if not found or factory is None:
        known = ", ".join(f"{name}:..." for name in sorted(BACKENDS))
        raise SpecError(f"unknown model '{model}': name it as backend:model, with backend one of {known}")
    backend: Backend = factory(rest, tokenizer)
    return backend
