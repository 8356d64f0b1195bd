"""fathom.plan pinned at its edges, written against the survivors of mutation testing
(docs/mutation.md): each of a Setup's bounds visited from both sides with its message read whole, and
a plan's rows (the controls apart, one per length, the total) each priced on the sweep's degree."""

from __future__ import annotations

import dataclasses
import math

import pytest
from test_plan import ROUND, TINY

from fathom.errors import SpecError
from fathom.plan.activations import Chunking, chunking
from fathom.plan.costs import USABLE, Setup, decode_seconds, prefill_seconds, weights_bytes
from fathom.plan.gpus import GPUS
from fathom.plan.prompts import PromptCost, SweepPrompts
from fathom.plan.sweep import plan_prompts
from fathom.records import Cell
from fathom.spec import RunSpec


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"gpus": 0}, "--gpus must be at least 1, got 0"),
        ({"price": -0.01}, "--price is per GPU-hour and cannot be negative, got -0.01"),
        ({"price": math.inf}, "--price is per GPU-hour and cannot be negative, got inf"),
        ({"price": math.nan}, "--price is per GPU-hour and cannot be negative, got nan"),
        ({"utilisation": 0.0}, "--utilisation is a share of the peak in (0, 1], got 0.0"),
        ({"utilisation": 1.001}, "--utilisation is a share of the peak in (0, 1], got 1.001"),
        ({"decode_utilisation": 0.0}, "--decode-utilisation is a share of the peak in (0, 1], got 0.0"),
        ({"decode_utilisation": 1.001}, "--decode-utilisation is a share of the peak in (0, 1], got 1.001"),
        ({"kv_dtype": "int3"}, "unknown --kv-dtype 'int3': use one of bf16, fp16, fp8"),
        ({"weights_dtype": "int3"}, "unknown --weights-dtype 'int3': use one of bf16, fp16, fp8, int8, int4"),
    ],
)
def test_a_setup_out_of_bounds_is_refused_whole(changes: dict[str, object], message: str) -> None:
    with pytest.raises(SpecError) as refused:
        Setup(ROUND, **changes)  # type: ignore[arg-type]
    assert str(refused.value) == message


def test_a_setup_at_its_bounds_is_taken() -> None:
    setup = Setup(ROUND, gpus=1, price=0.0, utilisation=1.0, decode_utilisation=1.0, kv_dtype="fp8")
    assert (setup.gpus, setup.price, setup.utilisation, setup.decode_utilisation) == (1, 0.0, 1.0, 1.0)
    assert (
        Setup(ROUND, utilisation=1e-9, decode_utilisation=1e-9, weights_dtype="int4").weights_dtype == "int4"
    )


def test_a_plans_rows_are_the_controls_then_each_length_then_the_total_on_the_sweeps_degree() -> None:
    prompts = (
        PromptCost(Cell("niah", 5, None, 0, control=True), 3, 0, 1),
        PromptCost(Cell("niah", 5, 0.0, 0), 5, 0, 3),
        PromptCost(Cell("niah", 5, 1.0, 1), 5, 3, 3),
        PromptCost(Cell("niah", 7, 0.0, 0), 7, 0, 3),
    )
    spec = RunSpec("niah", "", "auto", (5, 7), (0.0, 1.0), 1)
    plan = plan_prompts(spec, SweepPrompts(prompts, "by hand"), TINY, Setup(ROUND, gpus=2), "prefix")
    counts = [
        (row.label, row.prompts, row.prompt_tokens, row.cached_tokens, row.new_tokens) for row in plan.rows
    ]
    assert counts == [("controls", 1, 3, 0, 1), ("5", 2, 10, 3, 6), ("7", 1, 7, 0, 3)]
    total = plan.total
    assert (total.label, total.prompts, total.prompt_tokens, total.cached_tokens, total.new_tokens) == (
        "total",
        4,
        20,
        3,
        10,
    )
    # One GPU holds each prompt: two replicas, so each row's wall time is half its GPU time.
    assert plan.tp == 1
    for row in (*plan.rows, plan.total):
        assert row.wall_hours == pytest.approx(row.gpu_hours / 2)
    assert plan.order == "prefix"
    cell = plan.cells[2]
    assert (cell.task, cell.length, cell.depth, cell.sample, cell.control) == ("niah", 5, 1.0, 1, False)
    assert (cell.prompt_tokens, cell.cached_tokens, cell.new_tokens) == (5, 3, 3)
    # TINY's cache: 2 layers x 1 KV head x 4 dimensions x 2 (keys, values) x 2 bytes = 32 bytes a
    # token, for the prompt and its new tokens.
    assert cell.kv_bytes == 32 * (5 + 3)


def test_a_prompts_memory_is_the_weights_and_its_cache_and_its_degree_the_least_that_holds_both() -> None:
    # Room on one GPU for the weights (bf16) and 100 bytes more: less than the 256-byte cache.
    weights = TINY.params * 2
    gpu = dataclasses.replace(ROUND, memory=(weights + 100) / USABLE)
    swept = SweepPrompts((PromptCost(Cell("niah", 5, 0.5, 0), 5, 0, 3),), "by hand")
    spec = RunSpec("niah", "", "auto", (5,), (0.5,), 1)
    plan = plan_prompts(spec, swept, TINY, Setup(gpu, gpus=1, price=1.0), "prefix")
    (cell,) = plan.cells
    assert (cell.memory_bytes, cell.tp) == (weights + 256, 2)
    # One GPU of the two a replica needs: no wall time, no cost.
    assert (plan.total.tp, plan.total.wall_hours, plan.total.cost) == (2, None, None)
    # Its prefill, nothing cached: TINY's 12,640 FLOPs for 5 tokens at half of 1 TFLOP/s.
    assert (
        plan.total.prefill_hours_uncached == plan.total.prefill_hours == pytest.approx(12_640 / 0.5e12 / 3600)
    )


def test_a_rows_longest_prompt_counts_its_new_tokens() -> None:
    prompts = (PromptCost(Cell("niah", 8, 0.0, 0), 6, 0, 3), PromptCost(Cell("niah", 8, 1.0, 0), 7, 0, 1))
    spec = RunSpec("niah", "", "auto", (8,), (0.0, 1.0), 1)
    plan = plan_prompts(spec, SweepPrompts(prompts, "by hand"), TINY, Setup(ROUND), "prefix")
    assert (plan.total.longest, plan.total.kv_bytes) == (6 + 3, 32 * 9)  # not the 7 + 1 of the other


def test_a_mixture_of_experts_holds_the_mlps_of_each_expert_a_token_is_routed_to() -> None:
    moe = dataclasses.replace(TINY, experts=4, experts_used=2)
    # 3 new tokens, 2 bytes a value: the stream 2 x 3 x 8 x 2 = 96; two experts' MLPs
    # 3 x 3 x 2 x 16 x 2 = 576, above attention's 3 x (2 + 2) x 4 x 2 = 96; the logits 4 x 10 = 40.
    assert moe.activation_bytes(3, 3, 2, scores=False) == 96 + 576 + 40


def test_a_llamacpp_models_chunk_is_read_past_a_colon_in_its_path_and_its_batch_bounded() -> None:
    h100 = GPUS["h100"]
    assert chunking("llamacpp:C:/models/m.gguf", h100).tokens == 512  # llama.cpp's, not vllm's
    assert chunking("llamacpp:m.gguf?batch=1M", h100).tokens == 512
    with pytest.raises(SpecError, match=r"^llamacpp setting 'batch' must be a whole number .*, not '2M'"):
        chunking("llamacpp:m.gguf?batch=2M", h100)


def test_vllms_chunk_is_the_large_one_from_70_gib_and_an_assumed_backend_says_so() -> None:
    at = dataclasses.replace(GPUS["h100"], memory=70 * (1 << 30))
    below = dataclasses.replace(at, memory=at.memory - 1)
    assert chunking("vllm:folder", at) == Chunking(16384, "bf16", False, "vllm's max_num_batched_tokens")
    assert chunking("vllm:folder", below).tokens == 8192
    assumed = "vllm's max_num_batched_tokens, assumed: no llamacpp or hf model named"
    assert chunking("sim:cliff", at) == Chunking(16384, "bf16", False, assumed)


def test_a_model_files_own_bytes_are_its_weights_unless_a_dtype_is_asked() -> None:
    stored = dataclasses.replace(TINY, stored_bytes=1000)
    assert weights_bytes(stored, Setup(ROUND)) == 1000.0
    assert weights_bytes(stored, Setup(ROUND, weights_dtype="fp16")) == TINY.params * 2


def test_costs_of_a_cached_prefill_and_of_no_and_one_new_token_by_hand() -> None:
    setup = Setup(ROUND)  # half of 1 TFLOP/s; 0.6 of 1 GB/s
    # With 3 of 5 tokens cached, TINY's prefill is 5,344 FLOPs (tests/test_plan.py works it out).
    assert prefill_seconds(TINY, setup, 5, 3, 1) == pytest.approx(5_344 / 0.5e12)
    assert decode_seconds(TINY, setup, 5, 0, 1) == 0.0
    # One new token reads the weights (bf16) and the cache of the 5 prompt tokens (32 bytes each).
    assert decode_seconds(TINY, setup, 5, 1, 1) == pytest.approx((TINY.params * 2 + 32 * 5) / 0.6e9)
