"""An architecture from what the user has: a preset's name, a Hugging Face ``config.json`` (or the
model folder holding one), or a GGUF file's metadata.

GGUF metadata is read with llama-cpp-python where it is installed (it loads the vocabulary only:
under a second, and it counts the parameters and weight bytes exactly), else with the ``gguf``
package, which parses every array of the header into Python objects first (4 s for SmolLM2's and
18 s for Gemma 3's 262k-token vocabulary on this project's 2-core machines).
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import io
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fathom.errors import MissingExtraError, SpecError
from fathom.plan.arch import Architecture
from fathom.plan.presets import PRESETS
from fathom.safe_files import read_bounded

# config.json's names for what the arithmetic cannot do without.
CONFIG_MOST = 16 << 20  # bytes read of a config.json, at most: a model's is a few KB
_REQUIRED = ("num_hidden_layers", "hidden_size", "num_attention_heads", "intermediate_size", "vocab_size")
# Gemma 3 (and llama.cpp's reading of it) makes five layers in six sliding-window ones.
_GEMMA3_PATTERN = 6


def load_architecture(text: str) -> Architecture:
    """``--arch``: a preset's name, a config.json or model folder, or a .gguf file."""
    preset = PRESETS.get(text.lower())
    if preset is not None:
        return preset
    path = Path(text).expanduser()
    if path.is_dir():
        path = path / "config.json"
        if not path.is_file():
            raise SpecError(f"no config.json in '{text}': give a model folder, a config.json or a .gguf file")
    if not path.is_file():
        raise SpecError(
            f"unknown architecture '{text}': use one of {', '.join(PRESETS)} (fathom plan --list), "
            "or a config.json, a model folder or a .gguf file"
        )
    with path.open("rb") as handle:
        magic = handle.read(4)
    return read_gguf(path) if magic == b"GGUF" else read_config(path)


def read_config(path: Path) -> Architecture:
    try:
        config = json.loads(read_bounded(path, CONFIG_MOST, "a config.json", user_file=True).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SpecError(f"cannot read '{path}' as a config.json ({exc})") from None
    if not isinstance(config, dict):
        raise SpecError(f"'{path}' holds no JSON object: give a model's config.json")
    return from_config(config, str(path))


def from_config(config: Mapping[str, Any], source: str) -> Architecture:
    """A Hugging Face config: the language model's own (``text_config``) where it nests one."""
    nested = config.get("text_config")
    values = {**config, **nested} if isinstance(nested, dict) else dict(config)
    missing = [key for key in _REQUIRED if not _whole(values.get(key))]
    if missing:
        raise SpecError(f"{source} lacks {', '.join(missing)}: the plan's arithmetic needs them")
    layers, hidden, heads = values["num_hidden_layers"], values["hidden_size"], values["num_attention_heads"]
    experts = values.get("num_local_experts") or values.get("num_experts") or 0
    window, sliding = _config_sliding(values, layers)
    return Architecture(
        name=str(values.get("_name_or_path") or Path(source).parent.name or values.get("model_type")),
        layers=layers,
        hidden=hidden,
        heads=heads,
        kv_heads=values.get("num_key_value_heads") or heads,
        head_dim=values.get("head_dim") or hidden // heads,
        intermediate=values["intermediate_size"],
        vocab=values["vocab_size"],
        # transformers' own default when a config leaves it out.
        tied_embeddings=bool(values.get("tie_word_embeddings", True)),
        experts=experts,
        experts_used=values.get("num_experts_per_tok") or 0 if experts else 0,
        sliding_window=window,
        sliding_layers=sliding,
        context=values.get("max_position_embeddings"),
        source=source,
    )


def _config_sliding(values: Mapping[str, Any], layers: int) -> tuple[int | None, int]:
    """The sliding window and how many layers use it: as ``layer_types`` lists them, else by family."""
    window = values.get("sliding_window")
    if not _whole(window) or values.get("use_sliding_window") is False:
        return None, 0
    types = values.get("layer_types")
    if isinstance(types, list):
        return window, sum(kind == "sliding_attention" for kind in types)
    family = str(values.get("model_type", ""))
    pattern = values.get("sliding_window_pattern") or _GEMMA3_PATTERN
    return window, _family_sliding(family, layers, pattern) if family.startswith("gemma") else layers


def _family_sliding(family: str, layers: int, pattern: int = _GEMMA3_PATTERN) -> int:
    """Gemma 2 alternates sliding and global layers from the first; Gemma 3 makes every
    ``pattern``-th layer global. Other families: none counted (full attention, an upper bound)."""
    if family.startswith("gemma2"):
        return (layers + 1) // 2
    if family.startswith("gemma3"):
        return layers - layers // pattern
    return 0


def read_gguf(path: Path) -> Architecture:
    try:
        if importlib.util.find_spec("llama_cpp") is not None:
            import llama_cpp

            with contextlib.redirect_stderr(io.StringIO()):  # llama.cpp logs despite verbose=False
                llm = llama_cpp.Llama(str(path), vocab_only=True, verbose=False)
            return from_llama(llm, str(path))
        if importlib.util.find_spec("gguf") is not None:
            return _from_gguf_package(path)
    except (ValueError, OSError) as exc:
        raise SpecError(f"cannot read the GGUF file '{path}' ({exc})") from None
    raise MissingExtraError("llama-cpp-python (or gguf), to read a GGUF file's metadata,", "llamacpp")


def from_llama(llm: Any, source: str) -> Architecture:
    """From a llama-cpp-python ``Llama`` (a loaded model, or its vocabulary only)."""
    import llama_cpp

    meta = {key: value for key, value in llm.metadata.items() if isinstance(value, str)}
    shape = from_gguf_metadata(meta, int(llm.n_vocab()), source)
    exact = int(llama_cpp.llama_model_n_params(llm.model))
    # The metadata says nothing of a shared output head: the exact count tells (one fewer
    # vocabulary x hidden matrix).
    untied = dataclasses.replace(shape, tied_embeddings=False).params
    tied = abs(exact - untied + shape.vocab * shape.hidden) < abs(exact - untied)
    return _exact(shape, tied, exact, int(llama_cpp.llama_model_size(llm.model)))


def _exact(shape: Architecture, tied: bool, params: int, stored: int) -> Architecture:
    return dataclasses.replace(shape, tied_embeddings=tied, exact_params=params, stored_bytes=stored)


def _from_gguf_package(path: Path) -> Architecture:
    import gguf

    reader = gguf.GGUFReader(path)
    # Scalars only, read from the raw parts (every gguf version has them): a string's bytes, or a
    # number's one-element array. The vocabulary is the one array needed, and only its length.
    meta: dict[str, object] = {}
    for key, field in reader.fields.items():
        if not field.types or not field.data or field.types[0] == gguf.GGUFValueType.ARRAY:
            continue
        value = field.parts[field.data[0]]
        string = field.types[0] == gguf.GGUFValueType.STRING
        meta[key] = bytes(value).decode("utf-8", "replace") if string else value[0].item()
    tokens = reader.fields.get("tokenizer.ggml.tokens")
    shape = from_gguf_metadata(meta, len(tokens.data) if tokens is not None else 0, str(path))
    names = {tensor.name for tensor in reader.tensors}
    params = sum(int(tensor.n_elements) for tensor in reader.tensors)
    stored = sum(int(tensor.n_bytes) for tensor in reader.tensors)
    return _exact(shape, "output.weight" not in names, params, stored)


def from_gguf_metadata(meta: Mapping[str, Any], vocab: int, source: str) -> Architecture:
    """From a GGUF's key-value metadata (values as numbers, or as llama.cpp's strings)."""
    family = str(meta.get("general.architecture", ""))
    if not family:
        raise SpecError(f"{source} has no general.architecture: is it a model's GGUF?")

    def number(key: str) -> int | None:
        value = meta.get(f"{family}.{key}")
        try:
            return int(value) if value is not None else None
        except (TypeError, ValueError):
            return None  # a per-layer array: not a shape this arithmetic reads

    needed = ("block_count", "embedding_length", "feed_forward_length", "attention.head_count")
    missing = [f"{family}.{key}" for key in needed if number(key) is None]
    vocab = number("vocab_size") or vocab
    if missing or not vocab:
        raise SpecError(f"{source} lacks {', '.join(missing or [f'{family}.vocab_size'])}: the plan needs it")
    layers, hidden, heads = number("block_count"), number("embedding_length"), number("attention.head_count")
    assert layers is not None and hidden is not None and heads is not None  # checked above
    experts = number("expert_count") or 0
    window = number("attention.sliding_window")
    sliding = _family_sliding(family, layers) if window else 0
    return Architecture(
        name=str(meta.get("general.name") or Path(source).stem),
        layers=layers,
        hidden=hidden,
        heads=heads,
        kv_heads=number("attention.head_count_kv") or heads,
        head_dim=number("attention.key_length") or hidden // heads,
        intermediate=number("feed_forward_length") or 0,
        vocab=vocab,
        experts=experts,
        experts_used=number("expert_used_count") or 0 if experts else 0,
        sliding_window=window if sliding else None,
        sliding_layers=sliding,
        context=number("context_length"),
        source=source,
    )


def _whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0
