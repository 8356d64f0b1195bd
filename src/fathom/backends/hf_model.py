"""A Hugging Face model folder or GGUF file: its tokenizer, window and fingerprint, without torch.

The hf and vllm backends share these. They need transformers but not torch, which only running a
model needs, so they import (and the vllm backend's stand-in engine tests run) without it.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fathom.errors import FathomError, MissingExtraError, SpecError, TokenizerError, first_line

try:
    import transformers
except ImportError:
    raise MissingExtraError("transformers", "hf") from None

# What transformers raises for a folder or file it cannot read as a model.
LOAD_ERRORS = (OSError, ImportError, ValueError, KeyError, TypeError, RuntimeError)


class TransformersTokenizer:
    """The Tokenizer protocol over a transformers (Rust-backed) tokenizer: the model's own."""

    def __init__(self, tokenizer: transformers.PreTrainedTokenizerBase, name: str) -> None:
        self.hf = tokenizer
        self.name = name
        template = tokenizer.chat_template
        # A tokenizer may ship several named templates; the one named "default" is the chat one.
        self.chat_template: str | None = template.get("default") if isinstance(template, dict) else template
        self.bos_token: str | None = tokenizer.bos_token
        self.eos_token: str | None = tokenizer.eos_token
        self.bos_id = _added_bos(tokenizer)
        # For the corpus cache's check of ids: the highest id counts, added tokens included.
        self.vocab_size: int = max(tokenizer.get_vocab().values(), default=-1) + 1
        self._identity = self._digest()

    @property
    def identity(self) -> str:
        return self._identity

    def _digest(self) -> str:
        backend = getattr(self.hf, "backend_tokenizer", None)
        if backend is None:
            raise TokenizerError(f"{self.name} has no Rust tokenizer; save the model with a tokenizer.json")
        spec = json.loads(backend.to_str())
        # Truncation and padding are call settings that transformers rewrites as it goes; fathom
        # uses neither, and keeping them would make the identity depend on the last call.
        spec.pop("truncation", None)
        spec.pop("padding", None)
        extras = [self.chat_template, self.bos_token, self.eos_token, self.bos_id]
        return hashlib.sha256(json.dumps([spec, extras], sort_keys=True).encode()).hexdigest()

    def encode(self, text: str) -> list[int]:
        return list(self.hf.encode(text, add_special_tokens=False, split_special_tokens=True, verbose=False))

    def encode_with_specials(self, text: str) -> list[int]:
        # No add_special_tokens: templates write BOS themselves and the prompt builder adds it once.
        return list(self.hf.encode(text, add_special_tokens=False, split_special_tokens=False, verbose=False))

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        encoded = self.hf(list(texts), add_special_tokens=False, split_special_tokens=True, verbose=False)
        return [list(ids) for ids in encoded["input_ids"]]

    def decode(self, ids: Sequence[int]) -> str:
        # Clean-up would drop spaces before punctuation and break the round trip through encode.
        return str(self.hf.decode(list(ids), skip_special_tokens=False, clean_up_tokenization_spaces=False))


def _added_bos(tokenizer: transformers.PreTrainedTokenizerBase) -> int | None:
    """The BOS id if the tokenizer puts it before text by itself (add_bos_token or its post-processor)."""
    bos = tokenizer.bos_token_id
    with_specials = tokenizer.encode("a", add_special_tokens=True)
    plain = tokenizer.encode("a", add_special_tokens=False)
    return bos if isinstance(bos, int) and with_specials[:1] == [bos] and plain[:1] != [bos] else None


def model_source(path: Path, needs: Sequence[str] = ("gguf",)) -> tuple[Path, dict[str, str]]:
    """The folder that transformers reads and, for a GGUF file, the file's name in it."""
    if path.is_file() and path.suffix != ".gguf":
        raise SpecError(f"'{path}' is neither a .gguf file nor a model folder; give one of those")
    folder, gguf = (path.parent, {"gguf_file": path.name}) if path.is_file() else (path, {})
    for module in needs if gguf else ():
        if importlib.util.find_spec(module) is None:
            raise MissingExtraError(module, "hf")
    return folder, gguf


def load_tokenizer(path: Path) -> transformers.PreTrainedTokenizerBase:
    """The model's own tokenizer, from its folder or its GGUF file."""
    folder, gguf = model_source(path)
    try:
        return transformers.AutoTokenizer.from_pretrained(folder, local_files_only=True, **gguf)
    except LOAD_ERRORS as exc:
        raise FathomError(f"transformers cannot load '{path}': {first_line(exc)}") from None


def model_window(path: Path) -> dict[str, int]:
    """The window of the model at ``path`` (see ``config_window``), from its config alone."""
    folder, gguf = model_source(path)
    try:
        config = transformers.AutoConfig.from_pretrained(folder, local_files_only=True, **gguf)
    except LOAD_ERRORS as exc:
        raise FathomError(f"transformers cannot read the config of '{path}': {first_line(exc)}") from None
    return config_window(config.get_text_config())


def config_window(config: Any) -> dict[str, int]:
    """The trained window and, for scaled RoPE (YaRN, Llama 3), the window before scaling."""
    window = {}
    if isinstance(getattr(config, "max_position_embeddings", None), int):
        window["max_position_embeddings"] = config.max_position_embeddings
    rope = getattr(config, "rope_parameters", None) or getattr(config, "rope_scaling", None) or {}
    # transformers 5 keeps one parameter set per attention type in hybrid models (Gemma 3).
    for params in [rope, *(v for v in rope.values() if isinstance(v, dict))]:
        if isinstance(params.get("original_max_position_embeddings"), int):
            window["original_max_position_embeddings"] = params["original_max_position_embeddings"]
    return window


def fingerprint(path: Path) -> dict[str, str]:
    """The GGUF file's sha256, or for a folder its config and the weight files' names and sizes
    (hashing many gigabytes of weights would take minutes)."""
    if path.is_file():
        with path.open("rb") as file:
            return {"gguf_sha256": hashlib.file_digest(file, "sha256").hexdigest()}
    digest = hashlib.sha256((path / "config.json").read_bytes())
    for weights in sorted(path.glob("*.safetensors")) + sorted(path.glob("*.bin")):
        digest.update(f"{weights.name}:{weights.stat().st_size}".encode())
    return {"folder_sha256": digest.hexdigest()}
