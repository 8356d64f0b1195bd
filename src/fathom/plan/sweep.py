"""A sweep's plan: every prompt's tokens, FLOPs, KV cache, memory and time, by length and in all."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from fathom.plan.activations import Chunking, chunking, prefill_activations
from fathom.plan.arch import Architecture
from fathom.plan.costs import Setup, decode_seconds, kv_bytes, prefill_seconds, tp_degree, weights_bytes
from fathom.plan.prompts import PromptCost, SweepPrompts
from fathom.spec import RunSpec

HOUR = 3600.0


@dataclass(frozen=True)
class CellPlan:
    """One prompt. Times are GPU-seconds: on ``tp`` GPUs a prompt takes a ``tp``-th of them."""

    id: str
    task: str
    length: int
    depth: float | None
    sample: int
    control: bool
    prompt_tokens: int
    cached_tokens: int
    new_tokens: int
    prefill_flops: float  # the whole prompt
    prefill_flops_cached: float  # what is left to compute with the previous prompt's prefix cached
    kv_bytes: float  # the cache of the prompt and its new tokens
    memory_bytes: float  # weights + KV cache
    tp: int | None  # the smallest degree that holds this prompt alone
    prefill_seconds: float  # with the prefix cache
    prefill_seconds_uncached: float
    decode_seconds: float


@dataclass(frozen=True)
class Tally:
    """A group of prompts (one length, the controls, or all) added up."""

    label: str
    prompts: int
    prompt_tokens: int
    cached_tokens: int
    new_tokens: int
    prefill_flops: float
    prefill_flops_cached: float
    longest: int  # prompt + new tokens of the longest prompt
    kv_bytes: float  # of the longest prompt
    memory_bytes: float
    tp: int | None
    prefill_hours: float  # GPU-hours, with the prefix cache
    prefill_hours_uncached: float
    decode_hours: float
    wall_hours: float | None  # on all the GPUs, as replicas of ``tp``; None if none holds the sweep
    cost: float | None  # the GPUs rented for the wall time, where a price was given

    @property
    def gpu_hours(self) -> float:
        return self.prefill_hours + self.decode_hours

    @property
    def saving(self) -> float:
        """The share of prefill FLOPs that the prefix cache saves."""
        return 1.0 - self.prefill_flops_cached / self.prefill_flops if self.prefill_flops else 0.0


@dataclass(frozen=True)
class Plan:
    spec: RunSpec
    arch: Architecture
    setup: Setup
    order: str
    swept: SweepPrompts  # the prompts counted, and how
    weights_bytes: float
    tp: int | None  # the sweep's degree: the largest any prompt needs
    cells: tuple[CellPlan, ...]
    rows: tuple[Tally, ...]  # the controls, then one per length
    total: Tally
    # The lengths whose prompts exceed the architecture's trained window (``arch.context``): a run's
    # samples there are marked beyond_window, their scores extrapolation. Empty where it is unknown.
    beyond_window: tuple[int, ...]
    # How the backend that ``spec.model`` names prefills, and the peak activations of the longest
    # prompt's prefill (``fathom.plan.activations``): beside the memory above, not in it.
    chunking: Chunking
    activations_bytes: float


def plan_prompts(spec: RunSpec, swept: SweepPrompts, arch: Architecture, setup: Setup, order: str) -> Plan:
    weights = weights_bytes(arch, setup)
    cells = tuple(_cell(p, arch, setup, weights) for p in swept.prompts)
    tp = _degree(cells)
    controls = [c for c in cells if c.control]
    rows = [_tally("controls", controls, tp, setup)] if controls else []
    for length in spec.lengths:
        group = [c for c in cells if c.length == length and not c.control]
        if group:
            rows.append(_tally(str(length), group, tp, setup))
    total = _tally("total", cells, tp, setup)
    beyond = _beyond_window(cells, arch.context)
    chunks = chunking(spec.model, setup.gpu)
    activations = prefill_activations(arch, chunks, max(c.prompt_tokens for c in cells))
    return Plan(
        spec, arch, setup, order, swept, weights, tp, cells, tuple(rows), total, beyond, chunks, activations
    )


def _beyond_window(cells: Sequence[CellPlan], window: int | None) -> tuple[int, ...]:
    """The lengths with a prompt longer than ``window``, as a run marks a sample beyond_window (its
    prompt tokens over the trained window; a control's short prompt never is)."""
    if window is None:
        return ()
    return tuple(sorted({c.length for c in cells if c.prompt_tokens > window}))


def _cell(prompt: PromptCost, arch: Architecture, setup: Setup, weights: float) -> CellPlan:
    cell, tokens, cached = prompt.cell, prompt.tokens, prompt.cached
    kv = kv_bytes(arch, setup, tokens + prompt.new_tokens)
    return CellPlan(
        id=cell.id,
        task=cell.task,
        length=cell.length,
        depth=cell.depth,
        sample=cell.sample,
        control=cell.control,
        prompt_tokens=tokens,
        cached_tokens=cached,
        new_tokens=prompt.new_tokens,
        prefill_flops=arch.prefill_flops(tokens),
        prefill_flops_cached=arch.prefill_flops(tokens, cached),
        kv_bytes=kv,
        memory_bytes=weights + kv,
        tp=tp_degree(weights + kv, arch, setup.gpu),
        prefill_seconds=prefill_seconds(arch, setup, tokens, cached, 1),
        prefill_seconds_uncached=prefill_seconds(arch, setup, tokens, 0, 1),
        decode_seconds=decode_seconds(arch, setup, tokens, prompt.new_tokens, 1),
    )


def _degree(cells: Sequence[CellPlan]) -> int | None:
    """The degree that holds every one of ``cells``; None if one needs more than a node."""
    degrees = [c.tp for c in cells]
    return None if None in degrees else max((d for d in degrees if d is not None), default=1)


def _tally(label: str, cells: Sequence[CellPlan], tp: int | None, setup: Setup) -> Tally:
    def total(values: Iterable[float]) -> float:
        return float(sum(values))

    longest = max(cells, key=lambda c: (c.prompt_tokens + c.new_tokens, c.kv_bytes))
    gpu_seconds = total(c.prefill_seconds + c.decode_seconds for c in cells)
    # Replicas of ``tp`` GPUs each take prompts in turn; GPUs left over idle (and are paid for).
    replicas = setup.gpus // tp if tp is not None else 0
    wall = gpu_seconds / (replicas * tp) / HOUR if replicas and tp else None
    cost = wall * setup.gpus * setup.price if wall is not None and setup.price is not None else None
    return Tally(
        label=label,
        prompts=len(cells),
        prompt_tokens=sum(c.prompt_tokens for c in cells),
        cached_tokens=sum(c.cached_tokens for c in cells),
        new_tokens=sum(c.new_tokens for c in cells),
        prefill_flops=total(c.prefill_flops for c in cells),
        prefill_flops_cached=total(c.prefill_flops_cached for c in cells),
        longest=longest.prompt_tokens + longest.new_tokens,
        kv_bytes=longest.kv_bytes,
        memory_bytes=longest.memory_bytes,
        tp=_degree(cells),
        prefill_hours=total(c.prefill_seconds for c in cells) / HOUR,
        prefill_hours_uncached=total(c.prefill_seconds_uncached for c in cells) / HOUR,
        decode_hours=total(c.decode_seconds for c in cells) / HOUR,
        wall_hours=wall,
        cost=cost,
    )
