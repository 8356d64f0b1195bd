"""The plan's check of a real backend (``fathom.plan.check``) where no test with a GPU reaches it: the
memory a device has, read through stand-ins for torch's CUDA calls, and a transformers config's
values read under the arithmetic's names."""

from __future__ import annotations

import os
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from fathom.plan import calibration, check

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
