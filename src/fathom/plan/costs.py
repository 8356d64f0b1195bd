"""What one prompt costs on a GPU: the memory it needs, the tensor-parallel degree that holds it,
and its prefill and decode time.

The model of the machine, stated once (docs/plan.md says why each holds, and when not):
- a prefill is compute-bound: its FLOPs at ``utilisation`` (MFU) of the GPU's dense peak;
- decoding is bandwidth-bound, one sequence at a time: each new token reads the active weights and
  the KV cache so far, at ``decode_utilisation`` of the memory bandwidth;
- tensor parallelism over ``tp`` GPUs divides both times by ``tp`` (communication left out);
- a GPU can fill ``USABLE`` of its memory with weights and KV cache: the rest is the runtime's
  (CUDA context, activations of a chunked prefill, the allocator's slack), as vLLM's default
  ``gpu_memory_utilization`` of 0.9 leaves it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from fathom.errors import SpecError
from fathom.plan.arch import DTYPE_BYTES, Architecture
from fathom.plan.gpus import NODE_GPUS, Gpu

USABLE = 0.9
# The shares of the peaks a plan assumes unless told otherwise: chosen so that the plan lands within
# 25% of most published measurements of real prefills and decodes (calibration.py holds them, with
# their sources; docs/plan.md shows the table).
PREFILL_MFU = 0.5
DECODE_BANDWIDTH = 0.6
KV_DTYPES = ("bf16", "fp16", "fp8")
WEIGHT_DTYPES = ("bf16", "fp16", "fp8", "int8", "int4")


@dataclass(frozen=True)
class Setup:
    """The machine and the assumptions a plan prices a sweep with."""

    gpu: Gpu
    gpus: int = 1
    price: float | None = None  # per GPU-hour; None: no cost, GPU-hours only
    utilisation: float = PREFILL_MFU  # MFU of a prefill
    decode_utilisation: float = DECODE_BANDWIDTH  # share of the memory bandwidth a decode step reaches
    kv_dtype: str = "bf16"
    weights_dtype: str | None = None  # None: as the model file stores them (a GGUF), else bf16

    def __post_init__(self) -> None:
        if self.gpus < 1:
            raise SpecError(f"--gpus must be at least 1, got {self.gpus}")
        if self.price is not None and not (math.isfinite(self.price) and self.price >= 0):
            raise SpecError(f"--price is per GPU-hour and cannot be negative, got {self.price}")
        for flag, value in (
            ("--utilisation", self.utilisation),
            ("--decode-utilisation", self.decode_utilisation),
        ):
            if not 0 < value <= 1:
                raise SpecError(f"{flag} is a share of the peak in (0, 1], got {value}")
        if self.kv_dtype not in DTYPE_BYTES:
            raise SpecError(f"unknown --kv-dtype '{self.kv_dtype}': use one of {', '.join(KV_DTYPES)}")
        if self.weights_dtype is not None and self.weights_dtype not in DTYPE_BYTES:
            raise SpecError(
                f"unknown --weights-dtype '{self.weights_dtype}': use one of {', '.join(WEIGHT_DTYPES)}"
            )

    @property
    def weight_rate(self) -> float:
        """FLOP/s with the weights: FP8 weights run on FP8 tensor cores where the GPU has them."""
        fp8 = self.gpu.fp8_flops if self.weights_dtype == "fp8" else None
        return (fp8 or self.gpu.bf16_flops) * self.utilisation


def weights_bytes(arch: Architecture, setup: Setup) -> float:
    """The weights as stored: the model file's own bytes (a quantised GGUF), else parameters x dtype."""
    if setup.weights_dtype is None and arch.stored_bytes is not None:
        return float(arch.stored_bytes)
    return arch.params * DTYPE_BYTES[setup.weights_dtype or "bf16"]


def kv_bytes(arch: Architecture, setup: Setup, tokens: int) -> float:
    return arch.kv_bytes_per_token(DTYPE_BYTES[setup.kv_dtype]) * tokens


def tp_degree(need: float, arch: Architecture, gpu: Gpu) -> int | None:
    """The smallest power of two up to a node's GPUs whose usable memory holds ``need`` bytes and
    that divides the query heads (vLLM's condition); None if no degree in one node does."""
    for tp in (1, 2, 4, 8):
        if tp <= NODE_GPUS and need <= tp * USABLE * gpu.memory and arch.heads % tp == 0:
            return tp
    return None


def prefill_seconds(arch: Architecture, setup: Setup, length: int, cached: int, tp: int) -> float:
    """Compute-bound: weight FLOPs at the weights' rate, attention at BF16's (the engines keep
    attention in 16 bits even with FP8 weights)."""
    attention = arch.attention_flops(length, cached) / (setup.gpu.bf16_flops * setup.utilisation)
    return (arch.weight_flops(length - cached) / setup.weight_rate + attention) / tp


def decode_seconds(arch: Architecture, setup: Setup, length: int, new_tokens: int, tp: int) -> float:
    """Bandwidth-bound: new token j (from 0) reads the active weights and the KV cache of
    ``length + j`` tokens; summed, the cache reads are those of new x length + new(new-1)/2 tokens."""
    if new_tokens <= 0:
        return 0.0
    active = weights_bytes(arch, setup) * arch.active_params / arch.params
    cache_tokens = new_tokens * length + new_tokens * (new_tokens - 1) // 2
    read = new_tokens * active + kv_bytes(arch, setup, cache_tokens)
    return read / (setup.gpu.bandwidth * setup.decode_utilisation * tp)
