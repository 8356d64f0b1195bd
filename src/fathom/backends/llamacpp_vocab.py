"""A GGUF model's own tokenizer, through llama.cpp (``fathom.backends.llamacpp`` runs the model), and
the digest of its vocabulary that the run's identity holds."""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import io
import mmap
import struct
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fathom.errors import MissingExtraError, TokenizerError

try:
    import llama_cpp
except ImportError:
    raise MissingExtraError("llama-cpp-python", "llamacpp") from None

# GGUF value types of fixed size, by type code; 8 is a string and 9 an array.
_GGUF_SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
_GGUF_STRING, _GGUF_ARRAY = 8, 9


def _skip_value(data: mmap.mmap, offset: int, kind: int) -> int:
    """The offset just past a GGUF value of type ``kind`` that starts at ``offset``."""
    if kind in _GGUF_SIZES:
        return offset + _GGUF_SIZES[kind]
    if kind == _GGUF_STRING:
        return offset + 8 + int(struct.unpack_from("<Q", data, offset)[0])
    if kind == _GGUF_ARRAY:
        item_kind, count = struct.unpack_from("<IQ", data, offset)
        offset += 12
        # Refused before the loop below walks it: a crafted count would keep it busy for minutes.
        least = _GGUF_SIZES.get(item_kind, 12 if item_kind == _GGUF_ARRAY else 8)
        if count * least > len(data) - offset:
            raise ValueError(f"an array of {count} values runs past the end of the file")
        if item_kind in _GGUF_SIZES:
            return int(offset + count * _GGUF_SIZES[item_kind])
        for _ in range(count):
            offset = _skip_value(data, offset, item_kind)
        return offset
    raise ValueError(f"unknown GGUF value type {kind}")


def tokenizer_digest(path: Path) -> str:
    """sha256 over the GGUF's ``tokenizer.*`` entries (tokens, merges, token types, pre-tokenizer,
    chat template, BOS/EOS and add_bos), as stored: the quantisations of one model share it.

    llama.cpp's own metadata API leaves out arrays (the vocabulary itself), so the header is read
    here. The llama.cpp version and ``load_llama``'s override change ids too, and are included.
    """
    entries = []
    try:
        with path.open("rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
            magic, version, _tensors, count = struct.unpack_from("<4sIQQ", data, 0)
            if magic != b"GGUF" or version < 2:
                raise ValueError("not a GGUF file of version 2 or later")
            offset = 24
            for _ in range(count):
                start, key_size = offset, struct.unpack_from("<Q", data, offset)[0]
                key = data[offset + 8 : offset + 8 + key_size]
                (kind,) = struct.unpack_from("<I", data, offset + 8 + key_size)
                offset = _skip_value(data, offset + 12 + key_size, kind)
                if key.startswith(b"tokenizer."):
                    entries.append(data[start:offset])
    except (OSError, ValueError, struct.error) as exc:
        raise TokenizerError(f"cannot read the tokenizer of '{path}' ({exc}); give a GGUF file") from None
    digest = hashlib.sha256(f"llamacpp-tokenizer|{llama_cpp.__version__}|no-space-prefix|".encode())
    for entry in sorted(entries):
        digest.update(len(entry).to_bytes(8, "big") + entry)
    return digest.hexdigest()


class LlamaCppTokenizer:
    """The model's own tokenizer, through llama.cpp, from a ``Llama`` that ``load_llama`` loaded
    (``vocab_only=True`` loads no weights).

    Ids go through the C API directly: llama-cpp-python's ``detokenize`` drops every piece longer
    than 32 bytes (whitespace runs, long words in Gemma's vocabulary), which would break decoding.
    """

    def __init__(self, llm: llama_cpp.Llama) -> None:
        self._llm = llm  # owns the vocabulary that the pointer below refers to
        self._vocab = llama_cpp.llama_model_get_vocab(llm.model)
        self._size = llama_cpp.llama_vocab_n_tokens(self._vocab)
        self.vocab_size: int = self._size
        path = Path(llm.model_path)
        self.name = f"llamacpp:{path}"
        self.chat_template: str | None = llm.metadata.get("tokenizer.chat_template")
        bos, eos = llama_cpp.llama_vocab_bos(self._vocab), llama_cpp.llama_vocab_eos(self._vocab)
        self.bos_token = self._text(bos)
        self.eos_token = self._text(eos)
        adds_bos = llama_cpp.llama_vocab_get_add_bos(self._vocab)
        self.bos_id: int | None = bos if adds_bos and bos >= 0 else None
        self._identity = tokenizer_digest(path)

    def _text(self, token: int) -> str | None:
        """A special token's string, or None where the vocabulary has no such token (id -1)."""
        return self.decode([token]) if token >= 0 else None

    @property
    def identity(self) -> str:
        return self._identity

    def is_end(self, token: int) -> bool:
        """Whether ``token`` ends generation (EOS, end of turn, ...)."""
        return bool(llama_cpp.llama_vocab_is_eog(self._vocab, token))

    def encode(self, text: str) -> list[int]:
        return self._tokenize(text, special=False)

    def encode_with_specials(self, text: str) -> list[int]:
        return self._tokenize(text, special=True)

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        return [self.encode(text) for text in texts]

    def decode(self, ids: Sequence[int]) -> str:
        if ids and not 0 <= min(ids) <= max(ids) < self._size:  # llama.cpp aborts the process
            raise TokenizerError(f"ids outside the vocabulary of {self._size} tokens of {self.name}")
        tokens = (llama_cpp.llama_token * len(ids))(*ids)
        size = 8 * len(ids) + 16
        for _ in range(2):  # a negative result is the size needed: grow once
            text = ctypes.create_string_buffer(size)
            # Specials are rendered as text and nothing is stripped, so decode inverts encode.
            n = llama_cpp.llama_detokenize(self._vocab, tokens, len(ids), text, size, False, True)
            if n >= 0:
                return text.raw[:n].decode("utf-8", errors="replace")
            size = -n
        raise TokenizerError(f"llama.cpp could not decode {len(ids)} tokens with {self.name}")

    def _tokenize(self, text: str, special: bool) -> list[int]:
        data = text.encode("utf-8")
        size = len(data) + 2  # no more tokens than bytes, plus a prefix space some vocabularies add
        for _ in range(2):
            tokens = (llama_cpp.llama_token * size)()
            n = llama_cpp.llama_tokenize(self._vocab, data, len(data), tokens, size, False, special)
            if n >= 0:
                return list(tokens[:n])
            size = -n
        raise TokenizerError(f"llama.cpp could not tokenize {len(data)} bytes with {self.name}")


def load_llama(path: Path, **params: Any) -> llama_cpp.Llama:
    """A quiet ``Llama`` whose tokenizer adds no space before text.

    Some SentencePiece vocabularies (Llama 2, Mistral) make llama.cpp put a space before every
    piece of text it encodes; spliced prompts would then hold spaces that their decoded text does
    not, so the ids could not survive a round trip. llama-cpp-python maps ggml's log levels one
    off: despite verbose=False it prints warnings (and hides errors), so its output is dropped.
    """
    overrides: dict[str, bool | int | float | str] = {"tokenizer.ggml.add_space_prefix": False}
    with contextlib.redirect_stderr(io.StringIO()):
        return llama_cpp.Llama(str(path), kv_overrides=overrides, verbose=False, **params)
