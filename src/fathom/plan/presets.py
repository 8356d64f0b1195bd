"""Named architectures of common families, copied from each model's published ``config.json``.

The parameter counts that follow from these shapes match the published ones (Llama 3.1 8B:
8,030,261,248; Llama 2 7B: 6,738,415,616; Mixtral 8x7B: 46.7B in all, 12.9B active);
tests/test_plan.py checks them, and the two small models fathom runs against their GGUF files.
"""

from __future__ import annotations

import dataclasses

from fathom.plan.arch import Architecture

_HF = "https://huggingface.co/{}/blob/main/config.json"


def _llama(name: str, repo: str, layers: int, hidden: int, heads: int, intermediate: int) -> Architecture:
    """Llama 3.1: 8 KV heads of 128, a 128,256-token vocabulary, a 128k window."""
    return Architecture(
        name, layers, hidden, heads, 8, 128, intermediate, 128256, context=131072, source=_HF.format(repo)
    )


_LLAMA_70B = _llama("llama-3.1-70b", "meta-llama/Llama-3.1-70B", 80, 8192, 64, 28672)

PRESETS: dict[str, Architecture] = {
    a.name: a
    for a in (
        _llama("llama-3.1-8b", "meta-llama/Llama-3.1-8B", 32, 4096, 32, 14336),
        _LLAMA_70B,
        # Llama 3.3 70B is Llama 3.1 70B's architecture, trained further.
        dataclasses.replace(
            _LLAMA_70B, name="llama-3.3-70b", source=_HF.format("meta-llama/Llama-3.3-70B-Instruct")
        ),
        _llama("llama-3.1-405b", "meta-llama/Llama-3.1-405B", 126, 16384, 128, 53248),
        # Llama 2: the models of the engines' published benchmarks (docs/plan.md's calibration);
        # the 7B has as many KV heads as query heads, the 70B 8.
        Architecture(
            "llama-2-7b", 32, 4096, 32, 32, 128, 11008, 32000, context=4096,
            source=_HF.format("meta-llama/Llama-2-7b-hf"),
        ),
        Architecture(
            "llama-2-70b", 80, 8192, 64, 8, 128, 28672, 32000, context=4096,
            source=_HF.format("meta-llama/Llama-2-70b-hf"),
        ),
        Architecture(
            "qwen2.5-7b", 28, 3584, 28, 4, 128, 18944, 152064, context=32768,
            source=_HF.format("Qwen/Qwen2.5-7B-Instruct"),
        ),
        Architecture(
            "qwen2.5-72b", 80, 8192, 64, 8, 128, 29568, 152064, context=32768,
            source=_HF.format("Qwen/Qwen2.5-72B-Instruct"),
        ),
        # v0.3: v0.1's 4k sliding window is gone (sliding_window: null).
        Architecture(
            "mistral-7b", 32, 4096, 32, 8, 128, 14336, 32768, context=32768,
            source=_HF.format("mistralai/Mistral-7B-Instruct-v0.3"),
        ),
        # A mixture of experts: 8 MLPs per layer, 2 run per token.
        Architecture(
            "mixtral-8x7b", 32, 4096, 32, 8, 128, 14336, 32000, experts=8, experts_used=2, context=32768,
            source=_HF.format("mistralai/Mixtral-8x7B-v0.1"),
        ),
        # Gemma 2: every other layer (21 of 42, 23 of 46) attends to the last 4,096 positions only.
        Architecture(
            "gemma-2-9b", 42, 3584, 16, 8, 256, 14336, 256000, tied_embeddings=True,
            sliding_window=4096, sliding_layers=21, context=8192, source=_HF.format("google/gemma-2-9b"),
        ),
        Architecture(
            "gemma-2-27b", 46, 4608, 32, 16, 128, 36864, 256000, tied_embeddings=True,
            sliding_window=4096, sliding_layers=23, context=8192, source=_HF.format("google/gemma-2-27b"),
        ),
        # The two models fathom runs here (fathom models): SmolLM2-135M and Gemma 3 270M, whose
        # layers attend to the last 512 positions five times in six.
        Architecture(
            "smollm2-135m", 30, 576, 9, 3, 64, 1536, 49152, tied_embeddings=True, context=8192,
            source=_HF.format("HuggingFaceTB/SmolLM2-135M-Instruct"),
        ),
        Architecture(
            "gemma-3-270m", 18, 640, 4, 1, 256, 2048, 262144, tied_embeddings=True,
            sliding_window=512, sliding_layers=15, context=32768, source=_HF.format("google/gemma-3-270m"),
        ),
    )
}  # fmt: skip
