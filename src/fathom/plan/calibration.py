"""The plan's times beside published measurements: what the default utilisations are calibrated on.

Each ``Measurement`` is one figure a paper or an engine's own benchmark page published for a real
prefill or decode, with its model, GPUs, lengths and source; ``checks`` prices each one as
``fathom plan`` would and gives the ratio plan / measured. The defaults ``PREFILL_MFU`` and
``DECODE_BANDWIDTH`` (costs.py) are chosen so the plan lands within ``TOLERANCE`` of most of them;
docs/plan.md's table is ``calibration_table()``, and tests/test_plan_calibration.py holds the
table, the count and the defaults together, so a change to the formulas or the defaults that moves
the plan away from the measurements fails there.

Only figures read in their source are here, as published (seconds, or tokens/s turned into seconds
a token). Prompts under 2,048 tokens are left out: their time is mostly the engine's fixed cost per
request (scheduling, launches, the HTTP round trip), which the plan does not model.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from fathom.plan.costs import DECODE_BANDWIDTH, PREFILL_MFU, Setup, decode_seconds, prefill_seconds
from fathom.plan.gpus import gpu_named
from fathom.plan.presets import PRESETS

TOLERANCE = 0.25  # the plan is "within" when plan / measured is in [0.75, 1.25]
DOCS = "docs/plan.md"


@dataclass(frozen=True)
class Measurement:
    """One published time. ``seconds``: of the prefill (time to the first token) for ``"prefill"``,
    of one new token (the mean over ``new_tokens``) for ``"decode"``."""

    phase: str  # "prefill" or "decode"
    model: str  # as the source names it
    arch: str  # the preset of the same shape
    gpu: str  # a --gpu name
    gpus: int  # the tensor-parallel degree it ran at
    weights_dtype: str | None  # None: bf16 or fp16
    prompt_tokens: int
    new_tokens: int  # decode: the tokens generated, over which the KV cache grows; prefill: 0
    seconds: float
    engine: str  # the engine and setting, and what the plan leaves out of it
    source: str  # short, for the plan's line
    reference: str  # where the figure is: the paper and table, or the page


@dataclass(frozen=True)
class Check:
    measurement: Measurement
    planned: float  # seconds, as the measurement counts them

    @property
    def ratio(self) -> float:
        """plan / measured: above 1 the plan is pessimistic."""
        return self.planned / self.measurement.seconds

    @property
    def within(self) -> bool:
        return abs(self.ratio - 1) <= TOLERANCE


_MINFERENCE = (
    "MInference 1.0 (Jiang et al., 2024, arXiv:2407.02490): experiments/README.md, End-to-End "
    "Benchmark, FlashAttention-2 column; https://github.com/microsoft/MInference/blob/main/experiments/README.md"
)
_TRTLLM = (
    "TensorRT-LLM docs/source/performance.md, Low Latency tables (v0.5 data; LLaMA 7B/70B are "
    "Llama 2): https://github.com/NVIDIA/TensorRT-LLM/blob/138f96d45f90b9667426f7c47297d8c06bafac73/"
    "docs/source/performance.md"
)
_NIM = (
    "NVIDIA NIM LLM benchmarking, Performance, Llama-3.3-70b-instruct, NIM 1.8.0, 2 x H100 80G, fp8 "
    "TP2, concurrency 1: https://docs.nvidia.com/nim/benchmarking/llm/1.0.0/performance.md"
)
_GPT_FAST = (
    "gpt-fast README, Benchmarks (A100-80GB power-limited to 330 W, batch 1, a 5-token prompt, "
    "generate.py's 200 new tokens): https://github.com/pytorch-labs/gpt-fast/blob/"
    "0f925b5d4ce457b89a7ca6c9ce50f42bf2576945/README.md"
)


def _minference(tokens: int, seconds: float) -> Measurement:
    return Measurement(
        "prefill", "LLaMA-3-8B-Instruct-Gradient-1048k", "llama-3.1-8b", "a100-80gb", 1, None, tokens, 0,
        seconds, "transformers + FlashAttention-2, bf16, no KV cache kept", "MInference", _MINFERENCE,
    )  # fmt: skip


def _trtllm(arch: str, gpu: str, tp: int, seconds: float) -> Measurement:
    fp8 = gpu == "h100"  # the H100 engines were built in FP8 (weights and KV cache), the A100's in FP16
    engine = "TensorRT-LLM 0.5, batch 1, " + ("FP8 weights and KV cache" if fp8 else "FP16")
    model = {"llama-2-7b": "LLaMA 7B", "llama-2-70b": "LLaMA 70B"}[arch]
    weights = "fp8" if fp8 else None
    return Measurement(
        "prefill", model, arch, gpu, tp, weights, 2048, 0, seconds, engine, "TensorRT-LLM", _TRTLLM
    )


def _nim(phase: str, prompt: int, new: int, seconds: float) -> Measurement:
    engine = "NIM 1.8.0 (TensorRT-LLM), FP8, " + ("time to first token" if phase == "prefill" else "ITL")
    return Measurement(
        phase, "Llama-3.3-70B-Instruct", "llama-3.3-70b", "h100", 2, "fp8", prompt, new, seconds, engine,
        "NVIDIA NIM", _NIM,
    )  # fmt: skip


def _gpt_fast(arch: str, tp: int, weights: str | None, tokens_per_second: float) -> Measurement:
    model = {"llama-2-7b": "Llama-2-7B", "llama-2-70b": "Llama-2-70B"}[arch]
    engine = "gpt-fast (torch.compile), " + ("int8 weight-only" if weights == "int8" else "bf16")
    return Measurement(
        "decode", model, arch, "a100-80gb", tp, weights, 5, 200, 1 / tokens_per_second, engine, "gpt-fast",
        _GPT_FAST,
    )  # fmt: skip


MEASUREMENTS: tuple[Measurement, ...] = (
    # Long prefills: one A100, full attention, 50k to 1M tokens.
    _minference(50_000, 8.52933),
    _minference(100_000, 24.88319),
    _minference(200_000, 79.39184),
    _minference(500_000, 456.78353),
    _minference(1_000_000, 1765.56387),
    # Short prefills at batch 1 (1st token latency, ms).
    _trtllm("llama-2-7b", "a100-80gb", 1, 0.133),
    _trtllm("llama-2-70b", "a100-80gb", 4, 0.377),
    _trtllm("llama-2-7b", "h100", 1, 0.036),
    _trtllm("llama-2-70b", "h100", 4, 0.109),
    _nim("prefill", 5000, 0, 0.40677),  # of a 5,000 in, 500 out request
    # Decoding one sequence: tokens/s at batch 1, and the inter-token latency at concurrency 1.
    _gpt_fast("llama-2-7b", 1, None, 104.9),
    _gpt_fast("llama-2-70b", 2, None, 21.32),
    _gpt_fast("llama-2-70b", 8, None, 62.50),
    _gpt_fast("llama-2-70b", 1, "int8", 19.13),
    _nim("decode", 5000, 500, 0.01858),
    _nim("decode", 500, 2000, 0.01891),
)


def planned_seconds(measurement: Measurement, utilisation: float, decode_utilisation: float) -> float:
    """What ``fathom plan`` says for the measurement's setting: a prefill's wall time on its GPUs, or
    the mean seconds of one new token."""
    m = measurement
    arch = PRESETS[m.arch]
    setup = Setup(
        gpu_named(m.gpu), m.gpus, None, utilisation, decode_utilisation, weights_dtype=m.weights_dtype
    )
    if m.phase == "prefill":
        return prefill_seconds(arch, setup, m.prompt_tokens, 0, m.gpus)
    return decode_seconds(arch, setup, m.prompt_tokens, m.new_tokens, m.gpus) / m.new_tokens


def checks(
    utilisation: float = PREFILL_MFU, decode_utilisation: float = DECODE_BANDWIDTH
) -> tuple[Check, ...]:
    return tuple(Check(m, planned_seconds(m, utilisation, decode_utilisation)) for m in MEASUREMENTS)


def within_count(found: Sequence[Check]) -> int:
    return sum(check.within for check in found)


def sources() -> list[str]:
    return list(dict.fromkeys(m.source for m in MEASUREMENTS))


def calibration_line(setup: Setup) -> str:
    """The plan's line that says which measurements its defaults follow, and whether this plan's do."""
    found = checks()
    line = (
        f"calibrated: the defaults ({PREFILL_MFU:.0%} MFU, {DECODE_BANDWIDTH:.0%} of the bandwidth) put the "
        f"plan within {TOLERANCE:.0%} of {within_count(found)} of {len(found)} published prefill and decode "
        f"times ({', '.join(sources())}; {DOCS})"
    )
    if (setup.utilisation, setup.decode_utilisation) != (PREFILL_MFU, DECODE_BANDWIDTH):
        line += "; this plan assumes its own"
    return line


def calibration_json() -> dict[str, Any]:
    found = checks()
    return {
        "prefill_utilisation": PREFILL_MFU,
        "decode_utilisation": DECODE_BANDWIDTH,
        "tolerance": TOLERANCE,
        "within": within_count(found),
        "measurements": len(found),
        "sources": sources(),
        "table": DOCS,
    }


def _time(seconds: float) -> str:
    if seconds >= 100:
        return f"{seconds:,.0f} s"
    return f"{seconds:.3g} s" if seconds >= 1 else f"{seconds * 1000:.3g} ms"


def calibration_table() -> list[str]:
    """docs/plan.md's table, one line a measurement; the references are numbered under it."""
    references = list(dict.fromkeys(m.reference for m in MEASUREMENTS))
    lines = [
        "| | model (`--arch`) | GPUs | engine, setting | prompt + new | measured | plan | plan / measured |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for check in checks():
        m = check.measurement
        what = "prefill" if m.phase == "prefill" else "decode, a token"
        gpus = f"{m.gpus} x {gpu_named(m.gpu).label}"
        lengths = f"{m.prompt_tokens:,}" + (f" + {m.new_tokens:,}" if m.phase == "decode" else "")
        mark = "" if check.within else " ✗"
        number = references.index(m.reference) + 1
        lines.append(
            f"| {what} [{number}] | {m.model} (`{m.arch}`) | {gpus} | {m.engine} | {lengths} | "
            f"{_time(m.seconds)} | {_time(check.planned)} | {check.ratio:.2f}{mark} |"
        )
    lines.append("")
    lines.extend(f"[{number}] {reference}" for number, reference in enumerate(references, 1))
    return lines
