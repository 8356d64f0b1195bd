"""fathom.plan.text pinned whole, written against the survivors of mutation testing (docs/mutation.md,
sixth round): a plan of values chosen by hand (not priced by the arithmetic, which tests/test_plan.py
checks) read back line by line, each line's branches taken and not, each number's format at its
boundaries, the JSON and the list of presets and GPUs."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from test_plan import TINY

from fathom.plan import text
from fathom.plan.activations import Chunking
from fathom.plan.calibration import calibration_json
from fathom.plan.costs import Setup
from fathom.plan.gpus import GPUS
from fathom.plan.presets import PRESETS
from fathom.plan.prompts import PromptCost, SweepPrompts
from fathom.plan.sweep import CellPlan, Plan, Tally
from fathom.records import Cell
from fathom.spec import RunSpec

MIB, GIB = 1 << 20, 1 << 30


@pytest.mark.parametrize(
    ("value", "shown"),
    [(GIB, "1.0 GiB"), (GIB - 1, "1024 MiB"), (1.5 * GIB, "1.5 GiB"), (512 * MIB, "512 MiB"), (0, "0 MiB")],
)
def test_bytes_are_gib_from_one_gib_and_mib_below(value: float, shown: str) -> None:
    assert text.gib(value) == shown


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (1e12, "1T"),
        (999e9, "999B"),
        (1e9, "1B"),
        (8.03e9, "8.03B"),
        (1e6, "1M"),
        (23_400, "23.4k"),
        (1000, "1k"),
        (999, "999"),
        (-2500, "-2.5k"),
        (0.5, "0.5"),
    ],
)
def test_counts_are_in_decimal_steps_from_each_step_up(value: float, shown: str) -> None:
    assert text.amount(value) == shown


@pytest.mark.parametrize(
    ("hours", "shown"),
    [
        (0.01, "36.0 s"),
        # Just below a minute, and a tenth of a second's rounding away from 60.0.
        (59.5 / 3600, "59.5 s"),
        (59.949 / 3600, "59.9 s"),
        (1 / 60, "1.0 min"),
        (0.5, "30.0 min"),
        (1.0, "1.00 h"),
        (2.5, "2.50 h"),
    ],
)
def test_durations_are_seconds_below_a_minute_minutes_below_an_hour_then_hours(
    hours: float, shown: str
) -> None:
    assert text.duration(hours) == shown


@pytest.mark.parametrize(
    ("flops", "shown"),
    [(1.5e15, "1.5"), (1.375e15, "1.38"), (99.94e15, "99.9"), (100e15, "100"), (12_345.6e15, "12,346")],
)
def test_petaflops_have_three_figures_below_a_hundred_and_none_after_the_point_from_it(
    flops: float, shown: str
) -> None:
    assert text._pflop(flops) == shown


def prompt(length: int, tokens: int, new: int, control: bool = False) -> PromptCost:
    return PromptCost(Cell("niah", length, None if control else 0.0, 0, control=control), tokens, 0, new)


def test_a_sweeps_line_gives_its_grid_where_the_prompts_fill_it_evenly() -> None:
    spec = RunSpec("niah", "", "auto", (5, 7), (0.0, 1.0), 2)
    even = [prompt(5, 5, 3)] * 4 + [prompt(7, 7, 3)] * 4 + [prompt(5, 2, 1, control=True)]
    # 8 prompts over 2 lengths and 2 samples: 2 each; 48 + 2 tokens.
    assert text.sweep_line(spec, even) == "2 x 2 x 2 prompts + 1 controls, 50 tokens, longest 7 + 3 new"
    # 3 over 4 (a length and sample each) is no grid, nor is 1 (none each).
    assert text.sweep_line(spec, even[3:6]) == "3 prompts, 19 tokens, longest 7 + 3 new"
    assert text.sweep_line(spec, even[:1]) == "1 prompts, 5 tokens, longest 5 + 3 new"
    # 5 over 4 fills each once and one more: no grid; controls alone fill none.
    assert text.sweep_line(spec, even[:5]) == "5 prompts, 27 tokens, longest 7 + 3 new"
    assert text.sweep_line(spec, even[-1:]) == "0 prompts + 1 controls, 2 tokens, longest 2 + 1 new"
    # The longest is the most tokens with the new ones, the first of a tie.
    assert text.sweep_line(spec, [prompt(7, 7, 3), prompt(7, 8, 2), prompt(7, 9, 0)]) == (
        "3 prompts, 24 tokens, longest 7 + 3 new"
    )
    assert text.sweep_line(spec, [prompt(5, 1500, 0), prompt(5, 1000, 0)]) == (
        "2 prompts, 2.5k tokens, longest 1500 + 0 new"
    )


def tally(label: str, **values: Any) -> Tally:
    """A tally of round values: 3 prompts of 3,000 tokens, half of them cached, 2 PFLOP of prefill
    (1.5 with the cache), 512 MiB of cache in 2.5 GiB, on 1 GPU, 36 s of prefill and 30 min of
    decoding."""
    base: dict[str, Any] = dict(
        label=label, prompts=3, prompt_tokens=3000, cached_tokens=1500, new_tokens=96, prefill_flops=2e15,
        prefill_flops_cached=1.5e15, longest=1056, kv_bytes=512 * MIB, memory_bytes=2.5 * GIB, tp=1,
        prefill_hours=0.01, prefill_hours_uncached=0.02, decode_hours=0.5, wall_hours=0.25, cost=None,
    )  # fmt: skip
    return Tally(**{**base, **values})


def test_the_table_right_aligns_each_column_and_adds_the_cost_where_there_is_one() -> None:
    rows = [tally("1024"), tally("controls", tp=None, prompt_tokens=0, cached_tokens=0)]
    assert text._table(rows, tally("total", cost=1234.5)) == [
        "  length  prompts  tokens  cached  PFLOP  KV/prompt   memory  TP  prefill    decode      cost",
        "      1k        3      3k     50%    1.5    512 MiB  2.5 GiB   1   36.0 s  30.0 min      0.00",
        "controls        3       0      0%    1.5    512 MiB  2.5 GiB  >8   36.0 s  30.0 min      0.00",
        "   total        3      3k     50%    1.5    512 MiB  2.5 GiB   1   36.0 s  30.0 min  1,234.50",
    ]
    assert text._table([tally("2048", cost=3.0)], tally("total")) == [
        "length  prompts  tokens  cached  PFLOP  KV/prompt   memory  TP  prefill    decode",
        "    2k        3      3k     50%    1.5    512 MiB  2.5 GiB   1   36.0 s  30.0 min",
        " total        3      3k     50%    1.5    512 MiB  2.5 GiB   1   36.0 s  30.0 min",
    ]


ARCH = PRESETS["llama-3.1-8b"]  # 8,030,261,248 parameters; 128 KiB of bf16 cache a token
H100 = GPUS["h100"]  # 80 GB: 72 GB usable, 67.1 GiB


def plan(**changes: Any) -> Plan:
    """A plan of two prompts whose every number is chosen, not priced: weights 16 GiB, the longest
    prompt's cache 1 GiB and activations 512 MiB; a prefill of 15 min (20 without the cache, which
    saves a quarter of 4 PFLOP) and 45 min of decoding, on one of 2 H100s at 2.5 a GPU-hour."""
    total = tally(
        "total", prompts=2, prompt_tokens=10, cached_tokens=3, prefill_flops=4e15, prefill_flops_cached=3e15,
        kv_bytes=GIB, prefill_hours=0.25, prefill_hours_uncached=1 / 3, decode_hours=0.75, wall_hours=0.5,
        cost=2.5,
    )  # fmt: skip
    cells = tuple(
        CellPlan(
            f"niah|L5|D{d}|S0", "niah", 5, d, 0, False, 5, c, 3, 1e15, 1e15, GIB, 17 * GIB, 1, 1.0, 2.0, 3.0
        )
        for d, c in ((0.0, 0), (1.0, 3))
    )
    values: dict[str, Any] = dict(
        spec=RunSpec("niah", "vllm:folder", "auto", (5,), (0.0, 1.0), 1),
        arch=ARCH,
        setup=Setup(H100, gpus=2, price=2.5),
        order="prefix",
        swept=SweepPrompts((prompt(5, 5, 3), prompt(5, 5, 3)), "by hand"),
        weights_bytes=16.0 * GIB,
        tp=1,
        cells=cells,
        rows=(dataclasses.replace(total, label="5"),),
        total=total,
        beyond_window=(),
        chunking=Chunking(16384, "bf16", False, "vllm's max_num_batched_tokens"),
        activations_bytes=512.0 * MIB,
    )
    return Plan(**{**values, **changes})


def test_a_plans_text_line_by_line() -> None:
    lines = text.plan_text(plan())
    assert lines[:3] == [
        "plan: niah, 1 x 2 x 1 prompts, 10 tokens, longest 5 + 3 new",
        "model: llama-3.1-8b: 8.03B parameters (8.03B active), weights 16.0 GiB (bf16), KV cache 128 KiB a "
        "token (bf16)",
        "GPU: 2 x NVIDIA H100 SXM 80 GB: 989 TFLOP/s bf16, 3.35 TB/s; assumed: 50% of the peak in a prefill "
        "(MFU), 60% of the bandwidth in decoding, one sequence at a time",
    ]
    assert lines[3].startswith("calibrated: the defaults (50% MFU, 60% of the bandwidth) put the plan within")
    assert not lines[3].endswith("this plan assumes its own")
    assert lines[4:6] == ["prompts: by hand", ""]
    assert lines[6:9] == [
        "length  prompts  tokens  cached  PFLOP  KV/prompt   memory  TP   prefill    decode  cost",
        "     5        2      10     30%      3    1.0 GiB  2.5 GiB   1  15.0 min  45.0 min  2.50",
        " total        2      10     30%      3    1.0 GiB  2.5 GiB   1  15.0 min  45.0 min  2.50",
    ]
    assert lines[9:] == [
        "cached: the share of prompt tokens that repeat the previous prompt's prefix; PFLOP: the prefill "
        "with them cached; KV/prompt, memory (+ weights), TP: the row's longest prompt; prefill, decode: "
        "GPU time (on TP GPUs, a TP-th of it in wall time)",
        "",
        "prefix cache (--order prefix): 30% of prompt tokens repeat the previous prompt's prefix, saving 25% "
        "of the prefill FLOPs (prefill 15.0 min; 20.0 min without a prefix cache, as the hf backend runs)",
        "fits: one GPU holds weights 16.0 GiB + KV 1.0 GiB of the longest prompt (67.1 GiB usable: 90% of "
        "the memory)",
        "activations: 512 MiB at the peak of the longest prompt's prefill, 5 tokens a pass (vllm's "
        "max_num_batched_tokens): the residual stream and its normed copy, then the larger of the MLP's "
        "gate, up and product and attention's q, k, v, in bf16, and the last token's logits; not counted: "
        "attention scores (fused), the CUDA context, the allocator's slack; weights + KV + activations "
        "17.5 GiB of 74.5 GiB",
        "time: 1 GPU-hours (prefill 15.0 min, decode 45.0 min), 30.0 min of wall time on 2 GPUs; cost 2.50 "
        "(2.5 a GPU-hour)",
    ]


def test_a_plans_stored_weights_and_its_own_assumptions_are_named() -> None:
    stored = dataclasses.replace(ARCH, stored_bytes=1000)
    setup = Setup(H100, price=2.5, utilisation=0.4, decode_utilisation=0.7, kv_dtype="fp8")
    lines = text.plan_text(plan(arch=stored, setup=setup))
    assert lines[1].endswith("weights 16.0 GiB (as stored), KV cache 64 KiB a token (fp8)")
    assert "assumed: 40% of the peak in a prefill (MFU), 70% of the bandwidth in decoding" in lines[2]
    assert lines[3].endswith("; this plan assumes its own")
    fp8 = text.plan_text(plan(arch=stored, setup=Setup(H100, price=2.5, weights_dtype="fp8")))
    assert "weights 16.0 GiB (fp8)" in fp8[1]


def test_lengths_past_the_trained_window_are_warned_of_where_the_window_is_known() -> None:
    window = dataclasses.replace(ARCH, context=4096)
    assert text._window_lines(plan(arch=window, beyond_window=(8192, 16384))) == [
        "warning: lengths beyond llama-3.1-8b's trained window of 4,096 tokens: 8k, 16k (a run marks their "
        "samples beyond_window: scores there measure extrapolation, not recall within the window)"
    ]
    assert text._window_lines(plan(arch=window)) == []
    unknown = dataclasses.replace(ARCH, context=None)
    assert text._window_lines(plan(arch=unknown, beyond_window=(8192,))) == []
    assert text.plan_text(plan(arch=window, beyond_window=(8192,)))[2].startswith("warning: lengths beyond")


def test_the_fit_line_for_one_gpu_several_and_none() -> None:
    need = "weights 16.0 GiB + KV 1.0 GiB of the longest prompt"
    assert text._fit_line(plan(tp=2)) == (
        f"fits: tensor parallelism over 2 GPUs holds {need} (134.1 GiB usable: 90% of the memory); run it "
        "with vllm:...?tp=2, or hf:...?device_map=auto over 2 visible GPUs"
    )
    assert text._fit_line(plan(tp=None)) == (
        f"does not fit one node: no tensor-parallel degree up to 8 that divides the 32 query heads holds "
        f"{need} (8 GPUs: 536.4 GiB usable)"
    )


def test_the_activations_line_for_each_backends_chunk_and_the_memory_it_ends_in() -> None:
    llama = Chunking(512, "fp32", True, "llama.cpp's n_ubatch")
    long_cells = tuple(
        dataclasses.replace(c, prompt_tokens=n) for c, n in zip(plan().cells, (3000, 1000), strict=True)
    )
    assert text._activations_line(plan(chunking=llama, cells=long_cells, tp=None)) == (
        "activations: 512 MiB at the peak of the longest prompt's prefill, 512 tokens a pass (llama.cpp's "
        "n_ubatch): the residual stream and its normed copy, then the larger of the MLP's gate, up and "
        "product and attention's q, k, v (with their fp32 scores against the cache), in fp32, and the last "
        "token's logits; not counted: the CUDA context, the allocator's slack"
    )
    # hf's whole prompt at once, on 2 GPUs of 8.75 GiB: weights, cache and activations fill them exactly.
    hf = Chunking(None, "bf16", False, "hf: the whole prompt")
    exactly = dataclasses.replace(H100, memory=8.75 * GIB)
    line = text._activations_line(plan(chunking=hf, cells=long_cells, tp=2, setup=Setup(exactly, gpus=2)))
    assert line.endswith(
        "3,000 tokens a pass (hf: the whole prompt): the residual stream and its normed copy, then the "
        "larger of the MLP's gate, up and product and attention's q, k, v, in bf16, and the last token's "
        "logits; not counted: attention scores (fused), the CUDA context, the allocator's slack; hf runs "
        "batch= prompts at once (8 on a GPU): as many times these and the KV cache; weights + KV + "
        "activations 17.5 GiB of 17.5 GiB"
    )
    short = dataclasses.replace(H100, memory=8.75 * GIB - 1)
    over = text._activations_line(plan(chunking=hf, tp=2, setup=Setup(short, gpus=2)))
    assert over.endswith(
        "; weights + KV + activations 17.5 GiB of 17.5 GiB: more than the GPUs hold, expect out of memory"
    )


def test_the_time_line_with_and_without_a_wall_time_and_a_cost() -> None:
    total = plan().total
    spent = "time: 1 GPU-hours (prefill 15.0 min, decode 45.0 min)"
    priced = dataclasses.replace(total, cost=1234.5)
    assert text._time_line(plan(setup=Setup(H100, gpus=1, price=2.5), total=priced)) == (
        f"{spent}, 30.0 min of wall time on 1 GPU; cost 1,234.50 (2.5 a GPU-hour)"
    )
    unpriced = dataclasses.replace(total, cost=None)
    assert text._time_line(plan(total=unpriced)) == f"{spent}, 30.0 min of wall time on 2 GPUs"
    no_wall = dataclasses.replace(total, wall_hours=None, cost=None)
    assert text._time_line(plan(total=no_wall, tp=None)) == (
        f"{spent}; no wall time or cost: one replica needs more than one node, --gpus gives 2"
    )
    assert text._time_line(plan(total=no_wall, tp=4)) == (
        f"{spent}; no wall time or cost: one replica needs 4 GPUs, --gpus gives 2"
    )
    halves = dataclasses.replace(total, prefill_hours=0.25, decode_hours=0.5)
    assert text._time_line(plan(total=halves)).startswith(
        "time: 0.75 GPU-hours (prefill 15.0 min, decode 30.0 min)"
    )


def test_a_plans_json_holds_every_number_as_chosen() -> None:
    chosen = plan()
    rows = [
        {**dataclasses.asdict(row), "gpu_hours": 1.0, "saving": 0.25}
        for row in (chosen.rows[0], chosen.total)
    ]
    assert text.plan_json(chosen) == {
        "format": "fathom-plan/1",
        "spec": chosen.spec.to_json(),
        "order": "prefix",
        "prompts": "by hand",
        "architecture": {
            **dataclasses.asdict(ARCH),
            "params": 8_030_261_248,
            "active_params": 8_030_261_248,
        },
        "setup": {
            "gpu": dataclasses.asdict(H100),
            "gpus": 2,
            "price": 2.5,
            "utilisation": 0.5,
            "decode_utilisation": 0.6,
            "kv_dtype": "bf16",
            "weights_dtype": None,
        },
        "assumptions": {
            "usable_memory_share": 0.9,
            "node_gpus": 8,
            "decode_batch": 1,
            "calibration": calibration_json(),
        },
        "weights_bytes": 16.0 * GIB,
        "tp": 1,
        "fits_one_gpu": True,
        "beyond_window": [],
        "activations": {
            "bytes": 512.0 * MIB,
            "tokens": 16384,
            "dtype": "bf16",
            "scores": False,
            "source": "vllm's max_num_batched_tokens",
        },
        "rows": rows[:1],
        "total": rows[1],
        "cells": [dataclasses.asdict(cell) for cell in chosen.cells],
    }
    unknown = text.plan_json(plan(arch=dataclasses.replace(ARCH, context=None), tp=2, beyond_window=(8,)))
    assert (unknown["beyond_window"], unknown["fits_one_gpu"]) == (None, False)
    assert text.plan_json(plan(beyond_window=(8, 16)))["beyond_window"] == [8, 16]


def test_the_list_names_each_preset_and_gpu_with_its_shape() -> None:
    lines = text.list_text()
    assert len(lines) == 1 + len(PRESETS) + 1 + len(GPUS)
    assert lines[0] == "architectures (--arch NAME; or a config.json, a model folder or a .gguf file):"
    assert lines[1 + len(PRESETS)] == "GPUs (--gpu NAME), dense peaks from the vendors' datasheets:"
    # Gemma 3 270M: 18 layers x 1 KV head x 256 x (K and V) x 2 bytes = 18 KiB a token.
    assert (
        "  gemma-3-270m    268M parameters, 18 layers, 1 KV head of 256, 15 layers windowed to 512, KV 18 "
        "KiB a token in bf16, context 32k" in lines
    )
    assert (
        "  mixtral-8x7b    46.7B parameters, 8 experts (2 a token), 32 layers, 8 KV heads of 128, KV 128 "
        "KiB a token in bf16, context 32k" in lines
    )
    assert lines[-6:-4] == [
        "  h100       NVIDIA H100 SXM 80 GB: 989 TFLOP/s bf16, 1,979 fp8, 3.35 TB/s",
        "  h200       NVIDIA H200 SXM 141 GB: 989 TFLOP/s bf16, 1,979 fp8, 4.8 TB/s",
    ]
    assert "  a100-40gb  NVIDIA A100 SXM 40 GB: 312 TFLOP/s bf16, no fp8, 1.555 TB/s" in lines
    # A shape with no window and no known context says neither.
    # TINY: untied embeddings 2 x 10 x 8, 2 layers of 192 + 384 + 16, the final norm 8: 1,352.
    assert text._arch_line(TINY) == "1.35k parameters, 2 layers, 1 KV head of 4, KV 0 KiB a token in bf16"


# A GPU whose figures sit on a rounding boundary: 1.5 and 3.5 TFLOP/s, 1.1875 TB/s (each exact in
# binary), so that a division by anything but 10^12 rounds them the other way.
ODD = dataclasses.replace(
    H100, name="odd", label="an odd GPU", bf16_flops=1.5e12, fp8_flops=3.5e12, bandwidth=1.1875e12
)


def test_a_gpus_peaks_are_shown_in_tflops_and_tbs_exactly(monkeypatch: pytest.MonkeyPatch) -> None:
    line = text.plan_text(plan(setup=Setup(ODD, gpus=2, price=2.5)))[2]
    assert line.startswith("GPU: 2 x an odd GPU: 2 TFLOP/s bf16, 1.188 TB/s; assumed:")
    monkeypatch.setattr(text, "GPUS", {"odd": ODD})
    assert text.list_text()[-1] == "  odd        an odd GPU: 2 TFLOP/s bf16, 4 fp8, 1.188 TB/s"


def test_a_cache_of_more_than_512_kib_a_token_is_shown_in_whole_kib() -> None:
    # 40 layers x 32 KV heads x 128 x (K and V) x 2 bytes = 655,360 bytes: 640 KiB a token.
    wide = dataclasses.replace(ARCH, layers=40, kv_heads=32)
    assert text.plan_text(plan(arch=wide))[1].endswith("KV cache 640 KiB a token (bf16)")
    assert ", 40 layers, 32 KV heads of 128, KV 640 KiB a token in bf16, context 128k" in text._arch_line(
        wide
    )
    # Two KV heads are heads.
    assert "2 layers, 2 KV heads of 4" in text._arch_line(dataclasses.replace(TINY, kv_heads=2))
