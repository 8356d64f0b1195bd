"""A plan as people read it (a table by length, the totals, the assumptions) and as JSON (every cell)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from fathom.plan.arch import DTYPE_BYTES, Architecture
from fathom.plan.calibration import calibration_json, calibration_line
from fathom.plan.costs import USABLE
from fathom.plan.gpus import GPUS, NODE_GPUS
from fathom.plan.presets import PRESETS
from fathom.plan.prompts import PromptCost
from fathom.plan.sweep import Plan, Tally
from fathom.spec import RunSpec
from fathom.units import format_count

GIB = 1 << 30
FORMAT = "fathom-plan/1"


def gib(value: float) -> str:
    return f"{value / GIB:.1f} GiB" if value >= GIB else f"{value / (1 << 20):.0f} MiB"


def amount(value: float) -> str:
    """A count in decimal steps: 8.03B (10^9), 8.62M (10^6), 23.4k (10^3)."""
    for suffix, scale in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(value) >= scale:
            return f"{value / scale:.3g}{suffix}"
    return f"{value:.3g}"


def duration(hours: float) -> str:
    if hours < 1 / 60:
        return f"{hours * 3600:.1f} s"
    return f"{hours * 60:.1f} min" if hours < 1 else f"{hours:.2f} h"


def sweep_line(spec: RunSpec, prompts: Sequence[PromptCost]) -> str:
    """``8 x 11 x 3 prompts + 264 controls, 8.62M tokens, longest 131072 + 32 new``."""
    asked = [p for p in prompts if not p.cell.control]
    controls = len(prompts) - len(asked)
    per = len(asked) // (len(spec.lengths) * spec.samples)
    even = per * len(spec.lengths) * spec.samples == len(asked) and per > 0
    grid = f"{len(spec.lengths)} x {per} x {spec.samples}" if even else str(len(asked))
    longest = max(prompts, key=lambda p: p.tokens + p.new_tokens)
    tokens = sum(p.tokens for p in prompts)
    return (
        f"{grid} prompts" + (f" + {controls} controls" if controls else "") + f", {amount(tokens)} tokens, "
        f"longest {longest.tokens} + {longest.new_tokens} new"
    )


def plan_text(plan: Plan) -> list[str]:
    arch, setup, total = plan.arch, plan.setup, plan.total
    gpu = setup.gpu
    stored = setup.weights_dtype or ("as stored" if arch.stored_bytes else "bf16")
    per_token = arch.kv_bytes_per_token(DTYPE_BYTES[setup.kv_dtype])
    repeated = total.cached_tokens / max(total.prompt_tokens, 1)
    return [
        f"plan: {plan.spec.task}, {sweep_line(plan.spec, plan.swept.prompts)}",
        f"model: {arch.name}: {amount(arch.params)} parameters ({amount(arch.active_params)} active), "
        f"weights {gib(plan.weights_bytes)} ({stored}), KV cache {per_token / 1024:.0f} KiB a token "
        f"({setup.kv_dtype})",
        *_window_lines(plan),
        f"GPU: {setup.gpus} x {gpu.label}: {gpu.bf16_flops / 1e12:.0f} TFLOP/s bf16, "
        f"{gpu.bandwidth / 1e12:.4g} TB/s; assumed: {setup.utilisation:.0%} of the peak in a prefill "
        f"(MFU), {setup.decode_utilisation:.0%} of the bandwidth in decoding, one sequence at a time",
        calibration_line(setup),
        f"prompts: {plan.swept.method}",
        "",
        *_table(plan.rows, total),
        _LEGEND,
        "",
        f"prefix cache (--order {plan.order}): {repeated:.0%} of prompt tokens repeat the previous "
        f"prompt's prefix, saving {total.saving:.0%} of the prefill FLOPs (prefill "
        f"{duration(total.prefill_hours)}; {duration(total.prefill_hours_uncached)} without a prefix "
        "cache, as the hf backend runs)",
        _fit_line(plan),
        _activations_line(plan),
        _time_line(plan),
    ]


def _window_lines(plan: Plan) -> list[str]:
    """A warning naming the lengths past the trained window, where the architecture gives one (a
    preset, config.json's max_position_embeddings, a GGUF's context_length): none otherwise."""
    window = plan.arch.context
    if window is None or not plan.beyond_window:
        return []
    lengths = ", ".join(format_count(length) for length in plan.beyond_window)
    return [
        f"warning: lengths beyond {plan.arch.name}'s trained window of {window:,} tokens: "
        f"{lengths} (a run marks their samples beyond_window: scores there measure extrapolation, "
        "not recall within the window)"
    ]


_COLUMNS = (
    "length",
    "prompts",
    "tokens",
    "cached",
    "PFLOP",
    "KV/prompt",
    "memory",
    "TP",
    "prefill",
    "decode",
)
# What the table's columns hold, printed under it.
_LEGEND = (
    "cached: the share of prompt tokens that repeat the previous prompt's prefix; PFLOP: the prefill "
    "with them cached; KV/prompt, memory (+ weights), TP: the row's longest prompt; prefill, decode: "
    "GPU time (on TP GPUs, a TP-th of it in wall time)"
)


def _table(rows: Sequence[Tally], total: Tally) -> list[str]:
    priced = total.cost is not None
    header = (*_COLUMNS, "cost") if priced else _COLUMNS
    body = [(*_row(row), f"{row.cost or 0:,.2f}") if priced else _row(row) for row in (*rows, total)]
    widths = [max(len(str(r[i])) for r in (header, *body)) for i in range(len(header))]
    return ["  ".join(str(v).rjust(w) for v, w in zip(r, widths, strict=True)) for r in (header, *body)]


def _row(row: Tally) -> tuple[str, ...]:
    label = format_count(int(row.label)) if row.label.isdigit() else row.label
    return (
        label,
        str(row.prompts),
        amount(row.prompt_tokens),
        f"{row.cached_tokens / max(row.prompt_tokens, 1):.0%}",
        _pflop(row.prefill_flops_cached),
        gib(row.kv_bytes),
        gib(row.memory_bytes),
        str(row.tp) if row.tp else f">{NODE_GPUS}",
        duration(row.prefill_hours),
        duration(row.decode_hours),
    )


def _pflop(flops: float) -> str:
    value = flops / 1e15
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def _fit_line(plan: Plan) -> str:
    usable, total = USABLE * plan.setup.gpu.memory, plan.total
    need = f"weights {gib(plan.weights_bytes)} + KV {gib(total.kv_bytes)} of the longest prompt"
    if plan.tp is None:
        return (
            f"does not fit one node: no tensor-parallel degree up to {NODE_GPUS} that divides the "
            f"{plan.arch.heads} query heads holds {need} ({NODE_GPUS} GPUs: {gib(NODE_GPUS * usable)} usable)"
        )
    where = "one GPU holds" if plan.tp == 1 else f"tensor parallelism over {plan.tp} GPUs holds"
    line = f"fits: {where} {need} ({gib(plan.tp * usable)} usable: {USABLE:.0%} of the memory)"
    if plan.tp > 1:  # how fathom's own backends shard a model over that many
        line += f"; run it with vllm:...?tp={plan.tp}, or hf:...?device_map=auto over {plan.tp} visible GPUs"
    return line


def _activations_line(plan: Plan) -> str:
    """The longest prompt's prefill activations: what is counted and what is not, and whether weights,
    KV cache and activations together pass the memory of the GPUs that hold the prompt."""
    chunks, longest = plan.chunking, max(c.prompt_tokens for c in plan.cells)
    scores = " (with their fp32 scores against the cache)" if chunks.scores else ""
    line = (
        f"activations: {gib(plan.activations_bytes)} at the peak of the longest prompt's prefill, "
        f"{chunks.chunk(longest):,} tokens a pass ({chunks.source}): the residual stream and its normed "
        f"copy, then the larger of the MLP's gate, up and product and attention's q, k, v{scores}, in "
        f"{chunks.dtype}, and the last token's logits; not counted: "
        + ("" if chunks.scores else "attention scores (fused), ")
        + "the CUDA context, the allocator's slack"
    )
    if chunks.tokens is None:
        line += "; hf runs batch= prompts at once (8 on a GPU): as many times these and the KV cache"
    if plan.tp is not None:
        need = plan.weights_bytes + plan.total.kv_bytes + plan.activations_bytes
        memory = plan.tp * plan.setup.gpu.memory
        line += f"; weights + KV + activations {gib(need)} of {gib(memory)}"
        if need > memory:
            line += ": more than the GPUs hold, expect out of memory"
    return line


def _time_line(plan: Plan) -> str:
    total, setup = plan.total, plan.setup
    text = (
        f"time: {total.gpu_hours:.3g} GPU-hours (prefill {duration(total.prefill_hours)}, decode "
        f"{duration(total.decode_hours)})"
    )
    if total.wall_hours is None:
        need = f"{plan.tp} GPUs" if plan.tp else "more than one node"
        return text + f"; no wall time or cost: one replica needs {need}, --gpus gives {setup.gpus}"
    gpus = f"{setup.gpus} GPU" + ("s" if setup.gpus > 1 else "")
    text += f", {duration(total.wall_hours)} of wall time on {gpus}"
    if total.cost is not None:
        text += f"; cost {total.cost:,.2f} ({setup.price:g} a GPU-hour)"
    return text


def plan_json(plan: Plan) -> dict[str, Any]:
    arch = plan.arch
    return {
        "format": FORMAT,
        "spec": plan.spec.to_json(),
        "order": plan.order,
        "prompts": plan.swept.method,
        "architecture": {
            **dataclasses.asdict(arch),
            "params": arch.params,
            "active_params": arch.active_params,
        },
        "setup": dataclasses.asdict(plan.setup),
        "assumptions": {
            "usable_memory_share": USABLE,
            "node_gpus": NODE_GPUS,
            "decode_batch": 1,
            "calibration": calibration_json(),
        },
        "weights_bytes": plan.weights_bytes,
        "tp": plan.tp,
        "fits_one_gpu": plan.tp == 1,
        # The lengths past the architecture's trained window; null where the window is unknown.
        "beyond_window": None if plan.arch.context is None else list(plan.beyond_window),
        # The longest prompt's prefill: its peak activations and the backend's chunk they are of.
        "activations": {"bytes": plan.activations_bytes, **dataclasses.asdict(plan.chunking)},
        "rows": [_tally_json(row) for row in plan.rows],
        "total": _tally_json(plan.total),
        "cells": [dataclasses.asdict(cell) for cell in plan.cells],
    }


def _tally_json(row: Tally) -> dict[str, Any]:
    return {**dataclasses.asdict(row), "gpu_hours": row.gpu_hours, "saving": row.saving}


def list_text() -> list[str]:
    lines = ["architectures (--arch NAME; or a config.json, a model folder or a .gguf file):"]
    for arch in PRESETS.values():
        lines.append(f"  {arch.name:<15} {_arch_line(arch)}")
    lines.append("GPUs (--gpu NAME), dense peaks from the vendors' datasheets:")
    for gpu in GPUS.values():
        fp8 = f"{gpu.fp8_flops / 1e12:,.0f}" if gpu.fp8_flops else "no"
        lines.append(
            f"  {gpu.name:<10} {gpu.label}: {gpu.bf16_flops / 1e12:,.0f} TFLOP/s bf16, {fp8} fp8, "
            f"{gpu.bandwidth / 1e12:.4g} TB/s"
        )
    return lines


def _arch_line(arch: Architecture) -> str:
    moe = f", {arch.experts} experts ({arch.experts_used} a token)" if arch.experts else ""
    window = (
        f", {arch.sliding_layers} layers windowed to {arch.sliding_window}" if arch.sliding_layers else ""
    )
    context = f", context {format_count(arch.context)}" if arch.context else ""
    return (
        f"{amount(arch.params)} parameters{moe}, {arch.layers} layers, {arch.kv_heads} KV "
        f"head{'s' if arch.kv_heads > 1 else ''} of "
        f"{arch.head_dim}{window}, KV {arch.kv_bytes_per_token(2) / 1024:.0f} KiB a token in bf16{context}"
    )
