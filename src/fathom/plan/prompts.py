"""The sweep's prompts as a plan counts them: each one's tokens, its new tokens, and the prefix it
shares with the prompt before it in the run's order (what a prefix cache, vLLM's or llama.cpp's,
does not compute again).

Where the sweep is small enough the prompts are built, exactly as the run builds them, and the
shared prefixes are counted token by token (as benchmarks/bench_offsets.py's
``shared_prefix_share`` does): fathom slices a tokenised corpus, so 264 NIAH prompts of 1k to 128k
take about a second. Past ``BUILD_TOKENS``, or ``BUILD_SECONDS`` of building, they are estimated
from the task's structure instead, with one prompt built per task variant to measure its fixed parts
(RULER's fill, which lands below each length by a varying share, is estimated as filling it: an
upper bound). A task whose answer budget is each sample's own (listing's and mrcr's, sized by the
answer) has every sample built for its budget even then: one variant's budget is not another
sample's, and a check of the longest (a backend's context, a cap on its replies) must see each.
"""

from __future__ import annotations

import dataclasses
import functools
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from fathom.prompts.haystack.index import Ids
from fathom.records import Cell
from fathom.registry import TASK
from fathom.spec import RunSpec
from fathom.tasks import control
from fathom.tasks.base import Sample, Task

# Prompt tokens up to which a sweep is built rather than estimated (512 MB of ids at most, one
# prompt held at a time), and the time building may take before the estimate takes over.
BUILD_TOKENS = 1 << 27
BUILD_SECONDS = 20.0


@dataclass(frozen=True)
class PromptCost:
    cell: Cell
    tokens: int
    cached: int  # leading tokens equal to the previous prompt's: a prefix cache holds them
    new_tokens: int  # the answer's budget (0 for a perplexity document, which is only scored)


@dataclass(frozen=True)
class SweepPrompts:
    prompts: tuple[PromptCost, ...]
    method: str  # how the counts were found, said in the plan's output


def run_order(spec: RunSpec, task: Task, order: str) -> list[Cell]:
    """The cells as ``fathom.run.runner.run`` sends them: the controls first, then the task's
    cells in its own order, or all of them shuffled by the run's seed."""
    cells = list(control.plan(task.cells, spec.control))
    if order == "shuffled":
        random.Random(spec.seed).shuffle(cells)
    return cells


def sweep_prompts(spec: RunSpec, task: Task, order: str, build: bool = True) -> SweepPrompts:
    """The run's prompts, built or estimated; each sample's new tokens are its answer's budget and the
    thinking budget before it (``--thinking-budget``), as the run asks for both."""
    counted = _counted(spec, task, order, build)
    if not spec.thinking_budget:
        return counted
    more = spec.thinking_budget
    prompts = tuple(
        dataclasses.replace(p, new_tokens=p.new_tokens + more) if p.new_tokens else p for p in counted.prompts
    )
    return dataclasses.replace(counted, prompts=prompts)


def _counted(spec: RunSpec, task: Task, order: str, build: bool) -> SweepPrompts:
    cells = run_order(spec, task, order)
    target = sum(cell.length for cell in cells if not cell.control)
    reason = "the run's check reads no prompts" if not build else f"{target:,} prompt tokens"
    if build and target <= BUILD_TOKENS:
        started = time.perf_counter()
        built = _built(task, cells, started + BUILD_SECONDS)
        if built is not None:
            seconds = time.perf_counter() - started
            return SweepPrompts(
                built, f"built: all {len(built)} prompts, shared prefixes counted ({seconds:.1f} s)"
            )
        reason = f"building took over {BUILD_SECONDS:.0f} s"
    per_sample = getattr(task, "budget_per_sample", False)
    estimated = _estimated(spec, task, cells, per_sample)
    if spec.fill == "ruler":
        reason += "; RULER's fill counted as filling each length, an upper bound"
    if per_sample:
        reason += "; each sample built for its own answer budget"
    return SweepPrompts(estimated, f"estimated from the target lengths and the task's structure ({reason})")


def _ids(task: Task, cell: Cell) -> tuple[Ids, Sample | None]:
    """A cell's prompt as the run builds it (a control: its sample's prompt without the context)."""
    item = task.prepare(control.sample_cell(cell))
    if isinstance(item, Sample):
        sample = control.without_context(item, cell) if cell.control else item
        return sample.prompt.ids, sample
    return item.ids, None


def _built(task: Task, cells: Sequence[Cell], deadline: float) -> tuple[PromptCost, ...] | None:
    previous: Ids = np.zeros(0, dtype=np.int32)
    prompts = []
    for cell in cells:
        if time.perf_counter() > deadline:
            return None
        ids, sample = _ids(task, cell)
        n = min(len(ids), len(previous))
        differ = np.flatnonzero(ids[:n] != previous[:n])
        shared = int(differ[0]) if len(differ) else n
        # An engine computes at least the last position again, for the next token's logits.
        cached = min(shared, len(ids) - 1)
        prompts.append(PromptCost(cell, len(ids), cached, sample.max_new_tokens if sample else 0))
        previous = ids
    return tuple(prompts)


@dataclass(frozen=True)
class _Shape:
    """A task variant's fixed parts, from one of its prompts: the tokens before the context (template,
    instruction), those after it (question, answer prefix), the target tokens a prompt leaves
    unused (RULER's answer budget), and the answer's budget."""

    head: int
    tail: int
    unused: int
    new_tokens: int


def _shapes(task: Task, cells: Sequence[Cell]) -> dict[str, _Shape]:
    shortest: dict[str, Cell] = {}
    for cell in cells:
        known = shortest.get(cell.task)
        if not cell.control and (known is None or cell.length < known.length):
            shortest[cell.task] = cell
    shapes = {}
    for name, cell in shortest.items():
        ids, sample = _ids(task, cell)
        if sample is None:
            shapes[name] = _Shape(0, 0, cell.length - len(ids), 0)
        else:
            prompt = sample.prompt
            tail = len(ids) - prompt.head_tokens - prompt.context_tokens
            shapes[name] = _Shape(prompt.head_tokens, tail, cell.length - len(ids), sample.max_new_tokens)
    return shapes


def _estimated(spec: RunSpec, task: Task, cells: Sequence[Cell], per_sample: bool) -> tuple[PromptCost, ...]:
    """Each prompt its target length less what its variant leaves unused; a control its variant's
    head and tail. Consecutive prompts of one variant share its head; with one haystack for every
    sample (--haystack-offset start, which every length reads from its start) they also share the
    haystack up to the earlier of their needles. Each prompt's new tokens are its variant's, or with
    ``per_sample`` its own sample's budget."""
    shapes = _shapes(task, cells)
    if spec.fill == "ruler":
        # RULER's fill falls short of each length by up to a step of its units, a share that varies
        # with the length: the shortest's shortfall would say little of the others'. Counted as
        # filled instead, less the answer's budget: no prompt is longer.
        shapes = {name: dataclasses.replace(shape, unused=shape.new_tokens) for name, shape in shapes.items()}
    one_haystack = "haystack_offset" in TASK.entry(spec.task).knobs and spec.haystack_offset == "start"
    budget = _budgets(task) if per_sample else None
    prompts: list[PromptCost] = []
    for cell in cells:
        shape = shapes[cell.task]
        tokens = shape.head + shape.tail if cell.control else max(cell.length - shape.unused, 1)
        shared = 0
        before = prompts[-1] if prompts else None
        if before is not None and before.cell.task == cell.task:
            shared = shape.head
            here, there = _needle(cell, tokens, shape), _needle(before.cell, before.tokens, shape)
            if one_haystack and here is not None and there is not None:
                shared += min(here, there)
            shared = min(shared, before.tokens, tokens - 1)
        prompts.append(PromptCost(cell, tokens, shared, shape.new_tokens if budget is None else budget(cell)))
    return tuple(prompts)


def _budgets(task: Task) -> Callable[[Cell], int]:
    """Each cell's answer budget, for a task that sizes it by each sample's answer: read off the
    sample, built (a control's is its sample's: built once for both)."""

    @functools.cache
    def of_sample(sample: Cell) -> int:
        item = task.prepare(sample)
        return item.max_new_tokens if isinstance(item, Sample) else 0

    return lambda cell: of_sample(control.sample_cell(cell))


def _needle(cell: Cell, tokens: int, shape: _Shape) -> int | None:
    """Where a prompt's needle lands, in haystack tokens: its depth of the context."""
    if cell.control or cell.depth is None:
        return None
    return int(cell.depth * (tokens - shape.head - shape.tail))
