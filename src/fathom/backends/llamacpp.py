"""llama.cpp in process: a GGUF model reads the exact prompt ids and answers greedily, with at least
one token: where its first choice is to end (EOS, end of turn), the best other token comes first.

Consecutive prompts of a sweep share long prefixes (the same haystack up to the earlier needle);
llama-cpp-python's ``Llama.generate`` keeps the KV cache of the longest prefix shared with the
previous prompt and evaluates only the rest, so the runner's prefix order pays off here.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from functools import cached_property
from pathlib import Path
from typing import Any, NamedTuple

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
from fathom.backends.llamacpp_vocab import LlamaCppTokenizer, load_llama
from fathom.backends.local_models import resolve_model_path
from fathom.backends.reasoning import THINK_TAGS, split_completion, tags_refusal, tags_setting
from fathom.backends.replies import ENGINE_CHARS, bounded
from fathom.backends.settings import MOST_BATCH_TOKENS, MOST_CONTEXT, count, flag, parse_settings, whole
from fathom.errors import MissingExtraError, SpecError
from fathom.records import Completion, ErrorKind, FirstToken

try:
    import llama_cpp
except ImportError:
    raise MissingExtraError("llama-cpp-python", "llamacpp") from None

# Greedy decoding as llama-cpp-python's generate takes it; reset=True reuses the cache of the longest
# prefix shared with the previous prompt and evaluates the rest.
_GREEDY: dict[str, Any] = {"top_k": 1, "temp": 0.0, "repeat_penalty": 1.0, "reset": True}
_SETTINGS = {
    # 0, when not given: the context the model was trained for
    "n_ctx": count(0, most=MOST_CONTEXT, example="16k"),
    "threads": whole(os.cpu_count() or 1, least=1, most=4096, unit="threads"),
    "batch": count(512, most=MOST_BATCH_TOKENS, example="512"),
    "seed": whole(0, most=2**32 - 1),  # llama.cpp keeps it in 32 bits
    "flash_attn": flag(False),
    "think_tags": THINK_TAGS,
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


def threads_note(given: Mapping[str, str], threads: int) -> str | None:
    """The line that says how many threads llama.cpp runs on when ``threads`` was not ``given`` (every
    core, where other work slows each of its steps), and how to set it; None when it was."""
    if "threads" in given:
        return None
    return (
        f"llamacpp: {threads} threads, one per core (llama.cpp's default); on a busy machine fewer "
        "can be faster: set them with ?threads=N"
    )


class _Answer(NamedTuple):
    """What greedy decoding gave: the text, the tokens generated (the end's too), why it ended, when
    the first token came (``time.perf_counter``; None if none did), and what that token was."""

    text: str
    tokens: int
    finish: str
    first_at: float | None
    first: FirstToken


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
        self.think_tags = values["think_tags"]
        self.llm = self._load(values["n_ctx"])
        if (note := threads_note(options, self.threads)) is not None:
            print(note, file=sys.stderr)  # beside the plan's line: a busy machine's run looks hung without it
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
            # End-of-generation tokens cannot come first. Part of the identity, as it changes answers:
            # a run from before it resumes only with the fathom that began it.
            "first_token": FirstToken.FORCED.value,
            "flash_attn": params.flash_attn_type == llama_cpp.LLAMA_FLASH_ATTN_TYPE_ENABLED,
            "kv_types": [params.type_k, params.type_v],
            "swa_full": True,
            **tags_setting(self.think_tags),
        }

    def take_thinking(self, budget: int) -> str | None:
        """A budget is the larger max new tokens asked: the model spends the sum as it will."""
        return tags_refusal(self.name, self.think_tags)

    def build(self) -> dict[str, Any]:
        """llama.cpp's version and the CPU features its kernels were built for and use."""
        info = llama_cpp.llama_print_system_info()
        text = info.decode("utf-8", "replace") if isinstance(info, bytes) else str(info)
        return {"llama_cpp_version": llama_cpp.__version__, "system_info": text.strip(" |")}

    def generate(self, requests: Sequence[Request]) -> list[Completion]:
        return [completion for _, completion in self.stream(requests)]

    def stream(self, requests: Sequence[Request]) -> Iterator[tuple[int, Completion]]:
        """Each answer as it is made (a Streamer): written before the next prompt is read, so a kill
        loses no answer already paid for in compute."""
        for index, request in enumerate(requests):
            yield index, self._complete(request)

    def _complete(self, request: Request) -> Completion:
        started, ids = time.perf_counter(), request.ids.tolist()
        limit = self.llm.n_ctx()
        if len(ids) + request.max_new_tokens > limit:
            reason = ErrorKind.TOO_LONG.error(
                f"{len(ids)} prompt tokens + {request.max_new_tokens} new exceed n_ctx {limit}"
            )
            return Completion("", len(ids), 0, "error", 0.0, error=reason)
        try:
            answer = self._greedy(ids, request)
        except Exception as exc:  # one failed request is recorded as such; the run goes on
            self.llm.reset()  # type: ignore[no-untyped-call]  # drop a half-evaluated prompt
            elapsed = time.perf_counter() - started
            error = ErrorKind.BACKEND_ERROR.error(bounded(str(exc), ENGINE_CHARS))
            return Completion("", len(ids), 0, "error", elapsed, error=error)
        ended = time.perf_counter()
        # The first token comes once the prompt is evaluated (less the prefix its cache kept).
        prefill = (answer.first_at if answer.first_at is not None else ended) - started
        completion = Completion(
            answer.text,
            len(ids),
            answer.tokens,
            answer.finish,
            ended - started,
            prefill_s=prefill,
            decode_s=ended - started - prefill,
            first_token=answer.first,
        )
        completion = split_completion(completion, self.tokenizer, self.think_tags)
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
            error = ErrorKind.BACKEND_ERROR.error(bounded(str(exc), ENGINE_CHARS))
            return failed_scores(error, time.perf_counter() - started)
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

    def _greedy(self, ids: list[int], request: Request) -> _Answer:
        """The greedy answer to ``ids`` (which hold the BOS where the model wants one), up to the
        request's new tokens or stop strings."""
        generated: list[int] = []
        first_at, first = None, FirstToken.FORCED
        for token in itertools.islice(self._tokens(ids), request.max_new_tokens):
            first_at = time.perf_counter() if first_at is None else first_at
            if self.tokenizer.is_end(token):
                # An end first would be forcing gone wrong: said so, not passed off as forced.
                first = FirstToken.END if not generated else first
                return _Answer(self.tokenizer.decode(generated), len(generated) + 1, "stop", first_at, first)
            generated.append(token)
            text = self.tokenizer.decode(generated)
            stops = [at for stop in request.stop if (at := text.find(stop)) >= 0]
            if stops:
                return _Answer(text[: min(stops)], len(generated), "stop", first_at, first)
        return _Answer(self.tokenizer.decode(generated), len(generated), "length", first_at, first)

    def _tokens(self, ids: list[int]) -> Iterator[int]:
        """Greedy tokens after ``ids``, the first never an end of generation: where the model's first
        choice is to end, the best token that is not an end comes first, and decoding goes on from it.
        Greedy picks the same first token as suppressing the end tokens would (vLLM's and transformers'
        min tokens), at no cost to any other answer: only the one token is evaluated again."""
        stream = self.llm.generate(ids, **_GREEDY)
        first = next(stream, None)
        if first is not None and self.tokenizer.is_end(first):
            stream.close()
            first = self._best_not_end()
            stream = self.llm.generate([*ids, first], **_GREEDY)  # the prompt's cache is kept
        if first is not None:
            yield first
            yield from stream

    def _best_not_end(self) -> int:
        """The most likely token after the last one evaluated that does not end generation."""
        row = llama_cpp.llama_get_logits_ith(self.llm.ctx, -1)
        logits = np.ctypeslib.as_array(row, shape=(self.llm.n_vocab(),))
        # Best first; the ends are a handful of tokens, so the first few of the order hold the answer.
        return int(next(t for t in np.argsort(-logits, kind="stable") if not self.tokenizer.is_end(int(t))))
