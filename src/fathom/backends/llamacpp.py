"""llama.cpp in process: a GGUF model reads the exact prompt ids and answers greedily.

Consecutive prompts of a sweep share long prefixes (the same haystack up to the earlier needle);
llama-cpp-python's ``Llama.generate`` keeps the KV cache of the longest prefix shared with the
previous prompt and evaluates only the rest, so the runner's prefix order pays off here.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import io
import itertools
import mmap
import os
import struct
import time
from collections.abc import Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from fathom.backends.base import (
    InputKind,
    Request,
    ScoreRequest,
    TokenScores,
    failed_scores,
    split_options,
    with_continuation,
)
from fathom.backends.local_models import resolve_model_path
from fathom.backends.settings import count, flag, parse_settings, whole
from fathom.errors import MissingExtraError, SpecError, TokenizerError
from fathom.records import Completion, ErrorKind

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


_SETTINGS = {
    "n_ctx": count(0, example="16k"),  # 0, when not given: the context the model was trained for
    "threads": whole(os.cpu_count() or 1, least=1, most=4096, unit="threads"),
    "batch": count(512, example="512"),
    "seed": whole(0, most=2**32 - 1),  # llama.cpp keeps it in 32 bits
    "flash_attn": flag(False),
}


def _model_file(target: str) -> Path:
    """The GGUF file named, checked here: llama.cpp's own error says only that loading failed."""
    path = resolve_model_path(target)
    if path.is_dir():
        raise SpecError(f"'{path}' is a folder: give the .gguf model file itself")
    try:
        with path.open("rb") as handle:
            magic = handle.read(4)
    except OSError as exc:
        raise SpecError(f"cannot read '{path}' ({exc.strerror}); check its permissions") from None
    if magic != b"GGUF":
        raise SpecError(f"'{path}' is not a GGUF file: llamacpp needs a .gguf model file")
    return path


class LlamaCppBackend:
    """``llamacpp:PATH_OR_SHORTHAND?n_ctx=16k&threads=4&batch=512&seed=0&flash_attn=0``.

    ``n_ctx`` defaults to the context the model was trained for and caps prompt + new tokens;
    ``threads`` to every core; ``batch`` is the number of prompt tokens evaluated per step;
    ``flash_attn=1`` fuses attention (for GPU builds; on a 2-core CPU it did not speed up a 6k-token
    prefill of SmolLM2, so it stays off by default: benchmarks/README.md).
    """

    def __init__(self, rest: str, tokenizer: str) -> None:
        target, options = split_options(rest)
        self.path = _model_file(target)
        if tokenizer not in ("auto", f"llamacpp:{self.path}"):
            raise SpecError(
                f"llamacpp models count with their own tokenizer, not '{tokenizer}': drop --tokenizer"
            )
        values = parse_settings("llamacpp", _SETTINGS, options)
        self.threads: int = values["threads"]
        self.batch: int = values["batch"]
        self.seed: int = values["seed"]
        self.flash_attn: bool = values["flash_attn"]
        self.llm = self._load(values["n_ctx"])
        self.name = f"llamacpp:{target}"
        self.tokenizer = LlamaCppTokenizer(self.llm)
        self.input: InputKind = "ids"
        self.exact_lengths = True
        self.trained_window: int | None = llama_cpp.llama_model_n_ctx_train(self.llm.model) or None
        self.max_prompt_tokens: int | None = self.llm.n_ctx()
        self.requests_per_call = 1  # it answers one at a time: the runner saves each as it ends

    def _load(self, n_ctx: int) -> llama_cpp.Llama:
        try:
            return load_llama(
                self.path,
                n_ctx=n_ctx,
                n_batch=self.batch,
                n_threads=self.threads,
                n_threads_batch=self.threads,
                seed=self.seed,
                flash_attn=self.flash_attn,
                # Without a full-size cache, sliding-window layers (Gemma 3) have already dropped
                # old positions that a reused prefix needs: answers silently change.
                swa_full=True,
            )
        except ValueError as exc:
            raise SpecError(
                f"llama.cpp cannot load '{self.path}' with n_ctx={n_ctx or 'trained'} ({exc}): "
                "give a GGUF model of an architecture it supports, or a smaller n_ctx if memory ran out"
            ) from None

    @cached_property
    def _file_sha256(self) -> str:
        digest = hashlib.sha256()
        with self.path.open("rb") as handle:
            while chunk := handle.read(1 << 20):
                digest.update(chunk)
        return digest.hexdigest()

    def settings(self) -> dict[str, Any]:
        params = self.llm.context_params
        return {
            "model_path": str(self.path),
            "model_sha256": self._file_sha256,
            "llama_cpp_version": llama_cpp.__version__,
            "n_ctx": self.max_prompt_tokens,
            "threads": self.threads,  # the order of float sums, and so near-ties, depends on these
            "batch": self.batch,
            "ubatch": params.n_ubatch,
            "seed": self.seed,
            "decoding": "greedy",
            "flash_attn": params.flash_attn_type == llama_cpp.LLAMA_FLASH_ATTN_TYPE_ENABLED,
            "kv_types": [params.type_k, params.type_v],
            "swa_full": True,
        }

    def build(self) -> dict[str, Any]:
        """llama.cpp's version and the CPU features its kernels were built for and use."""
        info = llama_cpp.llama_print_system_info()
        text = info.decode("utf-8", "replace") if isinstance(info, bytes) else str(info)
        return {"llama_cpp_version": llama_cpp.__version__, "system_info": text.strip(" |")}

    def generate(self, requests: Sequence[Request]) -> list[Completion]:
        return [self._complete(request) for request in requests]

    def _complete(self, request: Request) -> Completion:
        started, ids = time.perf_counter(), request.ids.tolist()
        limit = self.llm.n_ctx()
        if len(ids) + request.max_new_tokens > limit:
            reason = ErrorKind.TOO_LONG.error(
                f"{len(ids)} prompt tokens + {request.max_new_tokens} new exceed n_ctx {limit}"
            )
            return Completion("", len(ids), 0, "error", 0.0, error=reason)
        try:
            text, count, finish, first = self._greedy(ids, request)
        except Exception as exc:  # one failed request is recorded as such; the run goes on
            self.llm.reset()  # type: ignore[no-untyped-call]  # drop a half-evaluated prompt
            elapsed = time.perf_counter() - started
            return Completion(
                "", len(ids), 0, "error", elapsed, error=ErrorKind.BACKEND_ERROR.error(str(exc))
            )
        ended = time.perf_counter()
        # The first token comes once the prompt is evaluated (less the prefix its cache kept).
        prefill = (first if first is not None else ended) - started
        completion = Completion(
            text,
            len(ids),
            count,
            finish,
            ended - started,
            prefill_s=prefill,
            decode_s=ended - started - prefill,
        )
        if request.continuation is None:
            return completion
        # Right after the answer: the prompt is still in the cache, so this costs a few tokens.
        whole = np.concatenate([request.ids, request.continuation])
        return with_continuation(completion, self._score(ScoreRequest(request.sample_id, whole, len(ids))))

    def score(self, requests: Sequence[ScoreRequest]) -> list[TokenScores]:
        return [self._score(request) for request in requests]

    def _score(self, request: ScoreRequest) -> TokenScores:
        started, ids = time.perf_counter(), request.ids.tolist()
        if not 1 <= request.start < len(ids):
            raise ValueError(f"cannot score from token {request.start} of {len(ids)}")
        if len(ids) > self.llm.n_ctx():
            return failed_scores(
                ErrorKind.TOO_LONG.error(f"{len(ids)} tokens exceed n_ctx {self.llm.n_ctx()}")
            )
        try:
            logprobs = self._logprobs(ids, request.start)
        except Exception as exc:  # one failed request is recorded as such; the run goes on
            self.llm.reset()  # type: ignore[no-untyped-call]
            return failed_scores(ErrorKind.BACKEND_ERROR.error(str(exc)), time.perf_counter() - started)
        return TokenScores(logprobs, request.start, time.perf_counter() - started)

    def _logprobs(self, ids: list[int], start: int) -> np.ndarray:
        """log p(ids[t] | ids[:t]) for t >= start, from the logits of every evaluated position.

        ``Llama.eval`` keeps all logits only with ``logits_all=True``, which allocates n_ctx x
        vocabulary floats up front (34 GB for Gemma 3 at 32k); so this evaluates batch by batch
        with llama-cpp-python's batch and context objects (internal, hence the version pin) and
        reduces each batch's logits to log-probabilities at once. The cached prefix is reused up
        to the token before the first scored one, whose logits the cache does not hold.
        """
        llm = self.llm
        cached = llm.input_ids[: llm.n_tokens].tolist()
        common = next((i for i, (a, b) in enumerate(zip(cached, ids, strict=False)) if a != b), len(cached))
        position = min(common, len(ids), start - 1)
        llm._ctx.kv_cache_seq_rm(-1, position, -1)
        llm.n_tokens = position
        out = np.empty(len(ids) - start, dtype=np.float64)
        while position < len(ids):
            batch = ids[position : position + llm.n_batch]
            llm._batch.set_batch(batch=batch, n_past=position, logits_all=True)
            llm._ctx.decode(llm._batch)
            llm.input_ids[position : position + len(batch)] = batch
            llm.n_tokens = position + len(batch)
            # Row j predicts the token at position + j + 1: keep the rows whose target is scored.
            first = max(start - 1 - position, 0)
            last = min(len(batch), len(ids) - 1 - position)
            if first < last:
                pointer = llama_cpp.llama_get_logits(llm._ctx.ctx)
                logits = np.ctypeslib.as_array(pointer, shape=(len(batch), llm.n_vocab()))
                rows = logits[first:last]
                targets = np.asarray(ids[position + first + 1 : position + last + 1])
                # exp in float32 (a float64 copy of a batch of 262k-word rows took as long as
                # the model's own pass); each row's sum is accumulated in float64.
                peak = rows.max(axis=1)
                total = np.exp(rows - peak[:, None]).sum(axis=1, dtype=np.float64)
                norm = peak.astype(np.float64) + np.log(total)
                out[position + first + 1 - start : position + last + 1 - start] = (
                    rows[np.arange(len(rows)), targets] - norm
                )
            position += len(batch)
        return out

    def _greedy(self, ids: list[int], request: Request) -> tuple[str, int, str, float | None]:
        """The answer, the number of tokens generated, why generation ended, and when the first
        token came (``time.perf_counter``; None if none did)."""
        # reset=True reuses the cache of the longest prefix shared with the previous prompt and
        # evaluates the rest; the ids already hold the BOS where the model wants one.
        stream = self.llm.generate(ids, top_k=1, temp=0.0, repeat_penalty=1.0, reset=True)
        generated: list[int] = []
        first = None
        for token in itertools.islice(stream, request.max_new_tokens):
            first = time.perf_counter() if first is None else first
            if self.tokenizer.is_end(token):
                return self.tokenizer.decode(generated), len(generated) + 1, "stop", first
            generated.append(token)
            text = self.tokenizer.decode(generated)
            stops = [at for stop in request.stop if (at := text.find(stop)) >= 0]
            if stops:
                return text[: min(stops)], len(generated), "stop", first
        return self.tokenizer.decode(generated), len(generated), "length", first
