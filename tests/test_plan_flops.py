"""The plan's prefill FLOPs against the operations a real model runs: a randomly initialised Llama of
a small grouped-query shape in transformers, its forward pass counted by torch's FLOP counter.

The counter counts every matrix product (q/k/v/o, the gated MLP, the output head on the last
position, QK^T and AV) and no elementwise work, which the plan leaves out too. Attention differs by
one known factor: the counter charges every (query, key) pair, the causal mask's skipped half
included, where the plan counts the L(L+1)/2 pairs a causal kernel computes.
"""

from __future__ import annotations

import pytest

from fathom.plan.readers import from_config

torch = pytest.importorskip("torch", reason="pip install '.[hf]'")
transformers = pytest.importorskip("transformers", reason="pip install '.[hf]'")

CONFIG = {
    "num_hidden_layers": 2,
    "hidden_size": 256,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "head_dim": 32,
    "intermediate_size": 512,
    "vocab_size": 1000,
    "max_position_embeddings": 1024,
    "tie_word_embeddings": False,
}


@pytest.mark.parametrize("length", [128, 512])
def test_the_prefill_flops_are_the_matrix_products_a_real_forward_pass_runs(length: int) -> None:
    from torch.utils.flop_counter import FlopCounterMode

    config = transformers.LlamaConfig(**CONFIG, attn_implementation="eager")
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config).eval()
    arch = from_config(CONFIG, "a small Llama")
    ids = torch.randint(0, CONFIG["vocab_size"], (1, length))
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        model(ids, logits_to_keep=1)
    counted = counter.get_total_flops()
    # The weights: 2 FLOPs per multiply-add, every token through both layers (q, k, v, o of 8 + 2
    # heads of 32; gate, up, down of 512), and the head once.
    per_token = 2 * 2 * (256 * 32 * 2 * (8 + 2) + 3 * 256 * 512)
    assert arch.weight_flops(length) == per_token * length + 2 * 1000 * 256
    # Attention as counted: QK^T and AV, 2 FLOPs x 32 per pair, all L x L pairs, 8 query heads, 2 layers.
    assert counted - arch.weight_flops(length) == 2 * 8 * 2 * (2 * 32 * length * length)
    # The plan's causal count is that times (L + 1) / 2L.
    assert arch.attention_flops(length) * 2 * length == (counted - arch.weight_flops(length)) * (length + 1)
