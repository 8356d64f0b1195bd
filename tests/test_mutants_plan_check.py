"""The plan's check of a real backend (``fathom.plan.check``) where no test with a GPU reaches it: the
memory a device has, read through stand-ins for torch's CUDA calls, and a transformers config's
values read under the arithmetic's names."""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from test_plan import SMOLLM2

from fathom.errors import SpecError
from fathom.plan import calibration, check
from fathom.plan.prompts import PromptCost, SweepPrompts
from fathom.plan.readers import from_config
from fathom.records import Cell
from fathom.spec import RunSpec

HOST = float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
GPU_BYTES = 80 * (1 << 30)


@pytest.fixture
def one_gpu(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """torch sees CUDA, and cuda:0 holds 80 GiB; the devices asked about are logged."""
    asked: list[Any] = []

    def properties(device: Any) -> SimpleNamespace:
        asked.append(device)
        assert device == torch.device("cuda:0")
        return SimpleNamespace(total_memory=GPU_BYTES)

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_properties", properties)
    return asked


def test_a_cpu_device_has_the_hosts_memory() -> None:
    assert check._device_memory(torch.device("cpu")) == (HOST, "host RAM")


def test_a_cuda_device_has_its_gpus_memory(one_gpu: list[Any]) -> None:
    assert check._device_memory(torch.device("cuda:0")) == (float(GPU_BYTES), "GPU memory (cuda:0)")
    assert one_gpu == [torch.device("cuda:0")]


def test_vllm_reads_the_first_gpus_memory_where_torch_sees_cuda(one_gpu: list[Any]) -> None:
    assert check._cuda_memory() == (float(GPU_BYTES), "GPU memory (cuda:0)")
    assert one_gpu == [torch.device("cuda:0")]


def test_vllm_reads_the_hosts_memory_where_torch_sees_no_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert check._cuda_memory() == (HOST, "host RAM")


class _Config:
    """A transformers config in GPT-2's names: its attribute map answers the standard ones."""

    n_layer, n_embd = 12, 768

    def to_dict(self) -> dict[str, Any]:
        return {"n_layer": 12, "n_embd": 768, "model_type": "gpt2"}

    @property
    def num_hidden_layers(self) -> int:
        return self.n_layer

    @property
    def hidden_size(self) -> int:
        return self.n_embd


def test_a_configs_values_are_its_own_and_the_standard_names_it_answers() -> None:
    assert check._config_values(_Config()) == {
        "n_layer": 12,
        "n_embd": 768,
        "model_type": "gpt2",
        "num_hidden_layers": 12,
        "hidden_size": 768,
        # Names the config does not answer are None.
        "num_attention_heads": None,
        "intermediate_size": None,
        "vocab_size": None,
        "num_key_value_heads": None,
        "head_dim": None,
    }


def test_the_calibration_names_its_sources_in_order_and_each_engines_weights() -> None:
    # The sources as the plan's line names them, and the weights each engine ran: TensorRT-LLM's A100
    # engines in FP16, its H100 ones in FP8; gpt-fast in bf16 but for its int8 row; NIM in FP8.
    assert calibration.calibration_json()["sources"] == [
        "MInference",
        "TensorRT-LLM",
        "NVIDIA NIM",
        "gpt-fast",
    ]
    weights = [
        (m.source, m.gpu, m.weights_dtype) for m in calibration.MEASUREMENTS if m.source != "MInference"
    ]
    assert weights == [
        ("TensorRT-LLM", "a100-80gb", None),
        ("TensorRT-LLM", "a100-80gb", None),
        ("TensorRT-LLM", "h100", "fp8"),
        ("TensorRT-LLM", "h100", "fp8"),
        ("NVIDIA NIM", "h100", "fp8"),
        ("gpt-fast", "a100-80gb", None),
        ("gpt-fast", "a100-80gb", None),
        ("gpt-fast", "a100-80gb", None),
        ("gpt-fast", "a100-80gb", "int8"),
        ("NVIDIA NIM", "h100", "fp8"),
        ("NVIDIA NIM", "h100", "fp8"),
    ]


# TINY of tests/test_plan.py as a transformers config: 2 layers, hidden 8, 2 query heads and 1 KV
# head of 4, an MLP of 16, 10 words. Its parameters by hand: per layer q and o 8 x 8, k and v 8 x 4
# (192), the MLP 3 x 8 x 16 (384) and two norms of 8; the tied embedding 10 x 8, the final norm 8:
# 80 + 2 x (192 + 384 + 16) + 8 = 1,272.
TINY_CONFIG = {
    "_name_or_path": "tiny",
    "model_type": "llama",
    "num_hidden_layers": 2,
    "hidden_size": 8,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "head_dim": 4,
    "intermediate_size": 16,
    "vocab_size": 10,
}
TINY_PARAMS = 1_272


class _TinyConfig:
    def to_dict(self) -> dict[str, Any]:
        return dict(TINY_CONFIG)

    def __getattr__(self, name: str) -> Any:
        return TINY_CONFIG[name]


def _hf_backend(device: str, dtype: torch.dtype, batch: int) -> Any:
    """A TransformersBackend as its check reads it, with no model loaded: its name, dtype, device,
    batch, and a model whose config is TINY's."""
    from fathom.backends.hf import TransformersBackend

    backend = object.__new__(TransformersBackend)
    backend.name = "hf:tiny"
    backend.model = SimpleNamespace(config=SimpleNamespace(get_text_config=_TinyConfig))
    backend.dtype, backend.device, backend.batch = dtype, torch.device(device), batch
    return backend


def test_an_hf_backend_holds_its_configs_weights_in_its_dtype_and_a_batch_of_prompts(
    one_gpu: list[Any],
) -> None:
    capacity = check._capacity("hf", _hf_backend("cuda:0", torch.bfloat16, 8))
    assert capacity is not None
    arch = capacity.arch
    assert (arch.name, arch.source, arch.layers, arch.kv_heads, arch.head_dim, arch.params) == (
        "tiny",
        "hf:tiny",
        2,
        1,
        4,
        TINY_PARAMS,
    )
    # bf16: 2 bytes a weight and a KV value; 8 prompts at once; 90% of the GPU's 80 GiB.
    assert capacity == check.Capacity(arch, 2.0 * TINY_PARAMS, 2.0, 8, 0.9 * GPU_BYTES, "GPU memory (cuda:0)")
    on_cpu = check._capacity("hf", _hf_backend("cpu", torch.float32, 1))
    assert on_cpu == check.Capacity(arch, 4.0 * TINY_PARAMS, 4.0, 1, 0.9 * HOST, "host RAM")


@pytest.fixture
def vllm_module(monkeypatch: pytest.MonkeyPatch) -> type:
    """fathom.backends.vllm stood in by a module of one class: the real one imports vllm, which the
    test machines lack, and the check reads only the backend's path and options."""

    class VLLMBackend:
        pass

    monkeypatch.setitem(sys.modules, "fathom.backends.vllm", SimpleNamespace(VLLMBackend=VLLMBackend))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    return VLLMBackend


@pytest.mark.parametrize(("dtype", "size"), [("float32", 4.0), ("auto", 2.0), ("float16", 2.0)])
def test_a_vllm_backend_holds_its_folders_weights_in_the_share_of_memory_it_is_given(
    vllm_module: type, tmp_path: Path, dtype: str, size: float
) -> None:
    (tmp_path / "config.json").write_text(json.dumps(TINY_CONFIG))
    backend = vllm_module()
    backend.path = tmp_path
    backend.options = SimpleNamespace(dtype=dtype, gpu_memory_utilization=0.25, tp=2)
    capacity = check._capacity("vllm", backend)
    assert capacity is not None
    assert (capacity.arch.source, capacity.arch.params) == (str(tmp_path / "config.json"), TINY_PARAMS)
    # One sequence; a quarter of each of 2 GPUs' memory (here the host's: torch sees no CUDA).
    assert capacity == check.Capacity(capacity.arch, size * TINY_PARAMS, size, 1, 0.5 * HOST, "host RAM")


def test_a_backend_of_another_kind_has_no_capacity_the_check_reads() -> None:
    assert check._capacity("openai", _hf_backend("cpu", torch.float32, 1)) is None


@SMOLLM2
def test_a_llamacpp_backend_holds_its_files_bytes_and_an_f16_cache_in_the_hosts_memory() -> None:
    import llama_cpp

    from fathom.backends.llamacpp import LlamaCppBackend
    from fathom.backends.local_models import resolve_model_path

    path = resolve_model_path("smollm2")
    backend = object.__new__(LlamaCppBackend)
    backend.path = path
    with contextlib.redirect_stderr(io.StringIO()):
        backend.llm = llama_cpp.Llama(str(path), vocab_only=True, verbose=False)
    capacity = check._capacity("llamacpp", backend)
    assert capacity is not None
    assert (capacity.arch.source, capacity.arch.params) == (str(path), 134_515_008)
    # The file's own weight bytes (Q4_1, as llama.cpp counts them), 2 bytes a KV value (f16), one
    # sequence, 90% of the host's memory.
    assert capacity == check.Capacity(capacity.arch, 96_576_768.0, 2.0, 1, 0.9 * HOST, "host RAM")


MIB = 1 << 20
# Two prompts by hand: 5 and 7 tokens with 3 new each, so 8 and 10 tokens of context.
SWEPT = SweepPrompts(
    (PromptCost(Cell("niah", 5, 0.0, 0), 5, 0, 3), PromptCost(Cell("niah", 7, 0.0, 0), 7, 0, 3)), "by hand"
)
SPEC = RunSpec("niah", "hf:tiny", "char", (5, 7), (0.0,), 1)
SWEEP = "plan: 2 x 1 x 1 prompts, 12 tokens, longest 7 + 3 new"


def _checked(
    monkeypatch: pytest.MonkeyPatch, limit: int, memory: float, sequences: int = 2, keep: bool = False
) -> str | None:
    """check_run's line for SWEPT on an hf backend of ``limit`` tokens, holding 1 GiB of weights and
    1 MiB of KV cache a token for each of ``sequences`` prompts at once, in ``memory`` bytes."""
    tiny = from_config(TINY_CONFIG, "tiny")
    # TINY's 2 layers x 1 KV head x 4 x (K and V) = 16 values a token: 65,536 bytes each is 1 MiB.
    capacity = check.Capacity(tiny, float(1 << 30), 65_536.0, sequences, memory, "GPU memory (cuda:0)")
    monkeypatch.setattr(check, "sweep_prompts", lambda *args, **kwargs: SWEPT)
    monkeypatch.setattr(check, "_capacity", lambda kind, backend: capacity)
    backend = SimpleNamespace(name="hf:tiny", max_prompt_tokens=limit)
    return check.check_run(SPEC, None, backend, keep_too_long=keep)  # type: ignore[arg-type]


def test_a_sweep_whose_longest_prompt_fills_the_context_exactly_is_checked_for_memory(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # 10 tokens for each of 2 prompts at once: 20 MiB.
    line = f"{SWEEP} (KV 20 MiB + weights 1.0 GiB of 2.0 GiB GPU memory (cuda:0)); fits"
    assert _checked(monkeypatch, 10, 2 * (1 << 30)) == line
    # Said on stderr only when asked.
    assert capsys.readouterr() == ("", "")
    backend = SimpleNamespace(name="hf:tiny", max_prompt_tokens=10)
    assert check.check_run(SPEC, None, backend, say=True) == line  # type: ignore[arg-type]
    assert capsys.readouterr() == ("", line + "\n")


def test_prompts_past_the_context_kept_leave_the_cache_to_those_that_fit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A limit of 8: the 8-token prompt fits exactly, the 10-token one does not.
    assert _checked(monkeypatch, 8, 2 * (1 << 30), keep=True) == (
        f"{SWEEP}; 1 exceed the backend's 8 tokens and will be recorded as too_long "
        "(KV 16 MiB + weights 1.0 GiB of 2.0 GiB GPU memory (cuda:0)); fits"
    )
    # A limit of 7: none fits, and none reaches the cache.
    assert _checked(monkeypatch, 7, 2 * (1 << 30), keep=True) == (
        f"{SWEEP}; 2 exceed the backend's 7 tokens and will be recorded as too_long "
        "(KV 0 MiB + weights 1.0 GiB of 2.0 GiB GPU memory (cuda:0)); fits"
    )


def test_weights_and_cache_filling_the_memory_exactly_fit_and_a_byte_less_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    exactly = float((1 << 30) + 20 * MIB)
    assert _checked(monkeypatch, 10, exactly) == (
        f"{SWEEP} (KV 20 MiB + weights 1.0 GiB of 1.0 GiB GPU memory (cuda:0)); fits"
    )
    with pytest.raises(SpecError) as refused:
        _checked(monkeypatch, 10, exactly - 1)
    assert str(refused.value) == (
        f"{SWEEP}: the KV cache of 10 tokens (2 prompts at once) and the weights, KV 20 MiB + weights "
        "1.0 GiB, exceed the 1.0 GiB of GPU memory (cuda:0) this run may use: use shorter --lengths "
        "(fathom plan estimates what a sweep needs)"
    )
    # One prompt at a time: 10 MiB, and the refusal names no batch.
    with pytest.raises(SpecError) as alone:
        _checked(monkeypatch, 10, (1 << 30) + 10 * MIB - 1, sequences=1)
    assert "the KV cache of 10 tokens and the weights, KV 10 MiB + weights 1.0 GiB, exceed" in str(
        alone.value
    )


def test_a_prompt_filling_the_context_exactly_is_not_one_the_refusal_counts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A limit of 8: the 8-token prompt fits, its length is named as one to keep.
    with pytest.raises(SpecError) as refused:
        _checked(monkeypatch, 8, 2 * (1 << 30))
    assert str(refused.value) == (
        "1 of 2 prompts exceed the backend's context of 8 tokens (the longest: 7 prompt tokens + 3 new, "
        "at length 7): keep the lengths that fit (--lengths 5), or pass --keep-too-long to record them as "
        "too_long, unanswered"
    )


def test_a_capped_backend_is_asked_about_the_largest_budget_any_sample_asks_for() -> None:
    from test_mrcr import task as mrcr_task

    made = mrcr_task("char", (2048,), (2,))
    budgets = [made.prepare(cell).max_new_tokens for cell in made.cells()]
    assert len(set(budgets)) > 1  # each sample's budget is its own answer's
    asked: list[int] = []

    class Capped:
        name = "anthropic:stand-in"

        def output_refusal(self, new_tokens: int) -> str | None:
            asked.append(new_tokens)
            return None

    check.check_output(made.spec, made, Capped())  # type: ignore[arg-type]
    assert asked == [max(budgets)]


def test_the_calibration_json_whole() -> None:
    # 14 of the 16 measurements within 25% at the defaults (tests/test_plan_calibration.py holds the count).
    assert calibration.calibration_json() == {
        "prefill_utilisation": 0.5,
        "decode_utilisation": 0.6,
        "tolerance": 0.25,
        "within": 14,
        "measurements": 16,
        "sources": ["MInference", "TensorRT-LLM", "NVIDIA NIM", "gpt-fast"],
        "table": "docs/plan.md",
    }


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [
        (1765.56, "1,766 s"),
        (100.0, "100 s"),
        (99.94, "99.9 s"),
        (1.5, "1.5 s"),
        (1.0, "1 s"),
        (0.999, "999 ms"),
    ],
)
def test_the_calibration_tables_times_are_seconds_from_one_and_whole_from_a_hundred(
    seconds: float, shown: str
) -> None:
    assert calibration._time(seconds) == shown


def test_the_calibration_line_whole_and_with_a_plans_own_assumptions() -> None:
    from fathom.plan.costs import Setup
    from fathom.plan.gpus import GPUS

    line = (
        "calibrated: the defaults (50% MFU, 60% of the bandwidth) put the plan within 25% of 14 of 16 "
        "published prefill and decode times (MInference, TensorRT-LLM, NVIDIA NIM, gpt-fast; docs/plan.md)"
    )
    assert calibration.calibration_line(Setup(GPUS["h100"])) == line
    own = Setup(GPUS["h100"], decode_utilisation=0.7)
    assert calibration.calibration_line(own) == line + "; this plan assumes its own"


def test_a_backend_named_with_colons_past_its_kind_is_checked_as_its_kind(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(check, "sweep_prompts", lambda *args, **kwargs: SWEPT)
    backend = SimpleNamespace(name="openai:model@http://127.0.0.1:8000/v1", max_prompt_tokens=10)
    line = check.check_run(SPEC, None, backend)  # type: ignore[arg-type]
    assert line == f"{SWEEP}; memory not checked: the server's own"


def test_the_refusal_names_the_longest_prompt_with_its_new_tokens_and_every_length_that_fits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # 5 + 3 and 6 + 0 tokens fit 8; 7 + 3 (the longest, 10) and 9 + 0 do not.
    swept = SweepPrompts(
        tuple(
            PromptCost(Cell("niah", length, 0.0, 0), tokens, 0, new)
            for length, tokens, new in ((5, 5, 3), (6, 6, 0), (7, 7, 3), (9, 9, 0))
        ),
        "by hand",
    )
    monkeypatch.setattr(check, "sweep_prompts", lambda *args, **kwargs: swept)
    spec = RunSpec("niah", "hf:tiny", "char", (5, 6, 7, 9), (0.0,), 1)
    for limit, keep in ((8, "--lengths 5,6"), (5, "shorter --lengths")):
        backend = SimpleNamespace(name="hf:tiny", max_prompt_tokens=limit)
        with pytest.raises(SpecError) as refused:
            check.check_run(spec, None, backend)  # type: ignore[arg-type]
        over = 2 if limit == 8 else 4
        assert str(refused.value) == (
            f"{over} of 4 prompts exceed the backend's context of {limit} tokens (the longest: 7 prompt "
            f"tokens + 3 new, at length 7): keep the lengths that fit ({keep}), or pass --keep-too-long to "
            "record them as too_long, unanswered"
        )
