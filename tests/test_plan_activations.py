"""fathom plan's activations (issue #33): the peak transient memory of one prefill pass over the
backend's chunk, counted by hand for Llama 3 8B, and the line that says what is counted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fathom.cli import main
from fathom.errors import SpecError
from fathom.plan.activations import Chunking, chunking, prefill_activations
from fathom.plan.arch import Architecture
from fathom.plan.gpus import GPUS
from fathom.plan.presets import PRESETS

# Llama 3 8B's config.json: hidden 4096, intermediate 14336, vocab 128256, 32 layers, 32 query heads
# and 8 KV heads of 128.
LLAMA_3_8B = Architecture(
    "llama-3-8b", layers=32, hidden=4096, heads=32, kv_heads=8, head_dim=128, intermediate=14336, vocab=128256
)
K128 = 131072
LOGITS = 4 * 128256  # the last token's, fp32: 513,024


def test_hf_prefills_a_128k_prompt_in_one_pass_whose_mlp_is_the_peak() -> None:
    # Residual and normed copy: 2 x 131072 x 4096 x 2 bytes = 2,147,483,648. The MLP's gate, up and
    # product: 3 x 131072 x 14336 x 2 = 11,274,289,152, more than q, k, v's 131072 x (32 + 16) x 128
    # x 2 = 1,610,612,736. With the logits: 13,422,285,824 bytes (12.5 GiB).
    hf = chunking("hf:folder", GPUS["h100"])
    assert hf == Chunking(None, "bf16", False, "hf: the whole prompt")
    assert prefill_activations(LLAMA_3_8B, hf, K128) == 2_147_483_648 + 11_274_289_152 + LOGITS
    assert 2_147_483_648 + 11_274_289_152 + LOGITS == 13_422_285_824


def test_llama_cpp_holds_the_scores_of_its_512_token_chunk_against_the_whole_cache() -> None:
    # fp32. Residual and copy: 2 x 512 x 4096 x 4 = 16,777,216. Attention: q, k, v 512 x 48 x 128 x 4
    # = 12,582,912 plus the scores 32 heads x 512 x 131072 x 4 = 8,589,934,592, more than the MLP's
    # 3 x 512 x 14336 x 4 = 88,080,384.
    llama = chunking("llamacpp:model.gguf", GPUS["h100"])
    assert llama == Chunking(512, "fp32", True, "llama.cpp's n_ubatch")
    expected = 16_777_216 + 12_582_912 + 8_589_934_592 + LOGITS
    assert prefill_activations(LLAMA_3_8B, llama, K128) == expected == 8_619_807_744
    # Flash attention fuses the scores: the MLP is the peak.
    fused = chunking("llamacpp:model.gguf?flash_attn=1", GPUS["h100"])
    assert prefill_activations(LLAMA_3_8B, fused, K128) == 16_777_216 + 88_080_384 + LOGITS


def test_vllm_s_chunk_is_its_llm_class_default_for_the_gpu() -> None:
    # 16,384 on an H100 (80 GB: over 70 GiB, not an A100): 2 x 16384 x 4096 x 2 = 268,435,456 and
    # 3 x 16384 x 14336 x 2 = 1,409,286,144. 8,192 on an A100 of 80 GB and on an L40S of 48 GB.
    h100 = chunking("vllm:folder", GPUS["h100"])
    assert h100.tokens == 16384 and not h100.scores
    assert prefill_activations(LLAMA_3_8B, h100, K128) == 268_435_456 + 1_409_286_144 + LOGITS
    assert (
        chunking("vllm:folder", GPUS["a100-80gb"]).tokens == chunking("vllm:f", GPUS["l40s"]).tokens == 8192
    )
    # A prompt shorter than the chunk is one pass of its own length.
    assert prefill_activations(LLAMA_3_8B, h100, 1000) == 2 * 1000 * 4096 * 2 + 3 * 1000 * 14336 * 2 + LOGITS


def test_the_settings_that_change_the_chunk_are_read_and_a_bad_one_refused() -> None:
    h100 = GPUS["h100"]
    assert chunking("llamacpp:m.gguf?batch=256", h100).tokens == 256  # n_ubatch is at most n_batch
    assert chunking("llamacpp:m.gguf?batch=4k&threads=2", h100).tokens == 512
    assert chunking("hf:folder?attn=eager", h100).scores
    assert "assumed" in chunking("sim:cliff", h100).source and "assumed" in chunking("", h100).source
    with pytest.raises(SpecError, match=r"llamacpp setting 'batch' must be a whole number .*, not '0'"):
        chunking("llamacpp:m.gguf?batch=0", h100)


def plan(capsys: pytest.CaptureFixture[str], *options: str) -> str:
    argv = ["plan", "niah", "--arch", "llama-3.1-8b", "--lengths", "128k", "--depths", "1", "--samples", "1"]
    assert main([*argv, *options]) == 0
    return next(line for line in capsys.readouterr().out.splitlines() if line.startswith("activations:"))


def test_the_plan_says_what_it_counts_and_the_total_beside_the_memory(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Llama 3.1 8B (Llama 3 8B's shape) with hf at 128k on an H100: weights 8,030,261,248 x 2 bytes
    = 14.96 GiB, KV 131,104 tokens x 128 KiB = 16.00 GiB, activations 12.50 GiB: 43.5 GiB of 74.5."""
    assert PRESETS["llama-3.1-8b"].params == 8_030_261_248
    line = plan(capsys, "--model", "hf:folder", "--json", str(tmp_path / "plan.json"))
    assert line.startswith(
        "activations: 12.5 GiB at the peak of the longest prompt's prefill, 131,072 tokens"
    )
    assert "not counted: attention scores (fused), the CUDA context, the allocator's slack" in line
    assert line.endswith("weights + KV + activations 43.5 GiB of 74.5 GiB")
    written = json.loads((tmp_path / "plan.json").read_text())["activations"]
    assert written == {"bytes": 13_422_285_824, "tokens": None, "dtype": "bf16", "scores": False,
                       "source": "hf: the whole prompt"}  # fmt: skip


def test_eager_attention_at_128k_is_named_out_of_memory(capsys: pytest.CaptureFixture[str]) -> None:
    # The scores alone: 32 heads x 131072^2 x 4 bytes = 2 TiB.
    line = plan(capsys, "--model", "hf:folder?attn=eager")
    assert "(with their fp32 scores against the cache)" in line and "not counted: the CUDA" in line
    assert line.endswith(": more than the GPUs hold, expect out of memory")
