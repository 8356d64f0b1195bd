"""The activations of a prefill: the peak transient memory of one forward pass over the chunk of
prompt tokens a backend evaluates at once, beside the weights and KV cache the plan counts.

Each backend's chunk, as fathom runs it (docs/plan.md says where each number comes from):
- llama.cpp evaluates ``batch`` tokens a call (fathom's 512) in physical batches of n_ubatch,
  llama-cpp-python's 512: the chunk is the smaller. Its intermediate tensors are fp32, and without
  ``flash_attn=1`` (fathom's default) each layer holds the chunk's attention scores against the cache.
- vLLM prefills in chunks of ``max_num_batched_tokens``: for its offline ``LLM`` class, which fathom's
  vllm backend is, 16,384 on a GPU of 70 GiB or more but an A100, else 8,192. Flash attention.
- transformers (hf) prefills the whole prompt in one pass; ``attn=eager`` holds the scores, sdpa
  and flash attention fuse them.
A plan for any other backend (a simulation, an HTTP server) is priced as fathom's vllm backend.
"""

from __future__ import annotations

from dataclasses import dataclass

from fathom.backends.base import split_options
from fathom.backends.settings import MOST_BATCH_TOKENS, count, flag, parse_settings
from fathom.plan.arch import DTYPE_BYTES, Architecture
from fathom.plan.gpus import Gpu

LLAMACPP_UBATCH = 512  # llama-cpp-python's n_ubatch, which fathom leaves as it is
# vLLM's LLM class: max_num_batched_tokens on a large GPU, and on the rest (vllm/engine/arg_utils.py).
VLLM_CHUNK_LARGE, VLLM_CHUNK = 16384, 8192
_LARGE_GPU = 70 * (1 << 30)


@dataclass(frozen=True)
class Chunking:
    """How a backend prefills: ``tokens`` at a time (None: the whole prompt at once), activations in
    ``dtype``, whether the attention scores are materialised (not fused), and where the chunk comes
    from, as the plan's line says it."""

    tokens: int | None
    dtype: str
    scores: bool
    source: str

    def chunk(self, prompt_tokens: int) -> int:
        return prompt_tokens if self.tokens is None else min(self.tokens, prompt_tokens)


def chunking(model: str, gpu: Gpu) -> Chunking:
    """The chunk of the backend ``model`` names (``llamacpp:...?batch=256&flash_attn=1``, ``hf:...``),
    with the settings it gives that change it."""
    kind, _, rest = model.partition(":")
    options = split_options(rest)[1]
    if kind == "llamacpp":
        read = {"batch": count(LLAMACPP_UBATCH, most=MOST_BATCH_TOKENS), "flash_attn": flag(False)}
        given = parse_settings(kind, read, {k: v for k, v in options.items() if k in read})
        tokens = min(given["batch"], LLAMACPP_UBATCH)
        return Chunking(tokens, "fp32", not given["flash_attn"], "llama.cpp's n_ubatch")
    if kind == "hf":
        return Chunking(None, "bf16", options.get("attn") == "eager", "hf: the whole prompt")
    large = gpu.memory >= _LARGE_GPU and "A100" not in gpu.label
    assumed = "" if kind == "vllm" else ", assumed: no llamacpp or hf model named"
    return Chunking(
        VLLM_CHUNK_LARGE if large else VLLM_CHUNK, "bf16", False, f"vllm's max_num_batched_tokens{assumed}"
    )


def prefill_activations(arch: Architecture, chunking: Chunking, prompt_tokens: int) -> float:
    """The peak activations of the prefill of a prompt of ``prompt_tokens``: its last chunk, which
    attends to the whole prompt."""
    return arch.activation_bytes(
        chunking.chunk(prompt_tokens), prompt_tokens, DTYPE_BYTES[chunking.dtype], chunking.scores
    )
