"""transformers in-process: a model folder or a GGUF file, fed the prompt's exact token ids.

The ids go to ``model.generate`` untouched: nothing re-tokenises, pads or truncates them, so the
model reads exactly the prompt that was counted. Batches hold prompts of one length, so no padding
(and no attention mask over padding) changes what any prompt's numbers look like. The model's
tokenizer, window and fingerprint come from ``hf_model``, which the vllm backend shares.
"""

from __future__ import annotations

import functools
import importlib.util
import inspect
import itertools
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

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
from fathom.backends.reasoning import THINK_TAGS, split_completion, tags_refusal, tags_setting
from fathom.backends.replies import engine_error
from fathom.backends.settings import MOST_BATCH, choice, or_auto, parse_settings, text, unless_auto, whole
from fathom.errors import FathomError, MissingExtraError, SpecError, first_line
from fathom.records import Completion, ErrorKind, FirstToken

try:
    import torch
    import transformers
except ImportError:
    raise MissingExtraError("torch/transformers", "hf") from None

# After torch and transformers, so that a missing one names them both.
from fathom.backends.hf_model import (
    LOAD_ERRORS,
    TransformersTokenizer,
    config_window,
    fingerprint,
    load_tokenizer,
    model_source,
)

_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
# Learned absolute position tables (GPT-2's wpe, OPT's embed_positions), which end at the window.
_POSITION_TABLES = {"wpe", "embed_positions", "position_embeddings"}
_GREEDY = {"do_sample": False, "num_beams": 1, "min_new_tokens": 1}
# Tokens per forward step when scoring. Each step turns a SCORE_CHUNK x vocabulary block of logits
# into float32 log-probabilities (0.5 GB for Llama 3's 128k vocabulary at 1024): beside the KV
# cache, that block is what scoring holds, so a 32k-token sequence fits where its full logits
# (16 GB) would not. Tests shrink it.
SCORE_CHUNK = 1024


class TransformersBackend:
    """``hf:PATH?dtype=&attn=&device=&batch=&device_map=&kv=``: PATH a .gguf file, a model folder or
    a shorthand (``smollm2``); the model's own tokenizer counts every prompt."""

    input: InputKind = "ids"
    exact_lengths = True

    def __init__(self, rest: str, tokenizer: str) -> None:
        target, options = split_options(rest)
        if tokenizer != "auto":
            raise SpecError(f"hf: models count with their own tokenizer; drop --tokenizer {tokenizer}")
        values = parse_settings("hf", _SETTINGS, options)
        self.name = f"hf:{target}"
        self.path = resolve_model_path(target)
        self.device = torch.device(
            unless_auto(values["device"], "cuda" if torch.cuda.is_available() else "cpu")
        )
        gpu = self.device.type == "cuda"
        # CPUs lack fast bfloat16 matrix kernels; GPUs run it at full speed in half the memory.
        self.dtype = _DTYPES[unless_auto(values["dtype"], "bfloat16" if gpu else "float32")]
        self.batch = unless_auto(values["batch"], 8 if gpu else 1)
        attn = _attention(values["attn"], self.device, self.dtype)
        # device_map shards the model's layers over the visible GPUs (accelerate's placement), for a
        # model whose weights and KV cache do not fit one (fathom plan says when); the prompt then
        # enters where the embeddings are.
        self.device_map: str = values["device_map"]
        placement = self.device if self.device_map == "none" else self.device_map
        self.model, hf_tokenizer = _load(self.path, self.dtype, attn, placement)
        if self.device_map != "none":
            self.device = next(self.model.get_input_embeddings().parameters()).device
        self.kv: str = values["kv"]
        self.think_tags = values["think_tags"]
        self._cache = _quantized_cache(self.kv)
        self.tokenizer = TransformersTokenizer(hf_tokenizer, f"hf:{self.path}")
        config = self.model.config.get_text_config()
        self.window = config_window(config)
        self.trained_window: int | None = self.window.get("max_position_embeddings")
        # Rotary and ALiBi models run past their window (the cliff being measured); a learned
        # position table has no rows there, so such prompts are refused rather than crash.
        learned = any(
            isinstance(module, torch.nn.Embedding) and name.rsplit(".", 1)[-1] in _POSITION_TABLES
            for name, module in self.model.named_modules()
        )
        self.max_prompt_tokens: int | None = self.trained_window if learned else None
        eos = self.model.generation_config.eos_token_id
        eos = hf_tokenizer.eos_token_id if eos is None else eos  # folders without a generation config
        self._eos: list[int] = [eos] if isinstance(eos, int) else list(eos or [])
        pad = self.model.generation_config.pad_token_id
        self._pad = pad if isinstance(pad, int) else (self._eos or [0])[0]

    def settings(self) -> dict[str, Any]:
        return {
            "model": str(self.path),
            **self._fingerprint,
            "transformers": transformers.__version__,
            "torch": torch.__version__,
            "dtype": str(self.dtype).removeprefix("torch."),
            "attention": self.model.config._attn_implementation,
            "device": str(self.device),
            "device_map": self.device_map,
            "kv": self.kv,
            "decoding": _GREEDY,
            "batch": self.batch,
            "window": self.window,
            **tags_setting(self.think_tags),
        }

    def take_thinking(self, budget: int) -> str | None:
        """A budget is the larger max new tokens asked: the model spends the sum as it will."""
        return tags_refusal(self.name, self.think_tags)

    @functools.cached_property
    def _fingerprint(self) -> dict[str, str]:
        return fingerprint(self.path)

    def generate(self, requests: Sequence[Request]) -> list[Completion]:
        done: dict[int, Completion] = {}
        for group in _groups(requests, self.batch):
            batch = [requests[index] for index in group]
            done.update(zip(group, self._run_batch(batch), strict=True))
        return attach_continuations(self, requests, [done[index] for index in range(len(requests))])

    def _run_batch(self, batch: list[Request]) -> list[Completion]:
        """One ``generate`` call, so one prefill per prompt; a failure (out of memory, say) fails
        this batch's samples and lets the run go on."""
        started = time.perf_counter()
        try:
            new_tokens = self._generate_ids(batch)
        except Exception as exc:  # any model error must cost only its samples, not the sweep
            error, latency = self._failure(exc), time.perf_counter() - started
            return [Completion("", len(r.ids), 0, "error", latency, error=error) for r in batch]
        # Every prompt of a batch waits for the whole batch: that is each one's latency.
        latency = time.perf_counter() - started
        return [self._completion(r, new, latency) for r, new in zip(batch, new_tokens, strict=True)]

    def _failure(self, exc: Exception) -> str:
        """The error to record for a failed model call (out of memory, say), after freeing what
        the failed call left cached on the GPU so that the next one can start afresh."""
        if self.device.type == "cuda":
            torch.cuda.empty_cache()
        return ErrorKind.BACKEND_ERROR.error(engine_error(exc))

    def score(self, requests: Sequence[ScoreRequest]) -> list[TokenScores]:
        return [self._score(request) for request in requests]

    def _score(self, request: ScoreRequest) -> TokenScores:
        if not 1 <= request.start < len(request.ids):
            raise ValueError(f"cannot score from token {request.start} of {len(request.ids)}")
        limit = self.max_prompt_tokens
        if limit is not None and len(request.ids) > limit:
            return failed_scores(
                ErrorKind.TOO_LONG.error(f"{len(request.ids)} tokens exceed the backend's limit of {limit}")
            )
        started = time.perf_counter()
        ids = torch.from_numpy(request.ids.astype(np.int64)).to(self.device)
        try:
            logprobs = token_logprobs(self.model, ids, request.start, SCORE_CHUNK)
        except Exception as exc:  # as in _run_batch: a failure costs only this request
            return failed_scores(self._failure(exc), time.perf_counter() - started)
        return TokenScores(logprobs.numpy(), request.start, time.perf_counter() - started)

    def _generate_ids(self, batch: list[Request]) -> list[list[int]]:
        ids = torch.from_numpy(np.stack([r.ids for r in batch]).astype(np.int64)).to(self.device)
        first = batch[0]  # the batch shares max_new_tokens and stop strings (see _groups)
        # A fresh config rather than the model's: greedy means no repetition penalty or other extras.
        decoding = transformers.GenerationConfig(  # type: ignore[no-untyped-call]
            **_GREEDY,
            max_new_tokens=first.max_new_tokens,
            eos_token_id=self._eos or None,
            pad_token_id=self._pad,
            **self._cache,
        )
        stop = [_StopStrings(self.tokenizer, first.stop, ids.shape[1])] if first.stop else []
        with torch.inference_mode():
            # mypy reads generate through nn.Module.__getattr__, as a Tensor.
            out = cast(Any, self.model).generate(
                input_ids=ids,
                attention_mask=torch.ones_like(ids),
                generation_config=decoding,
                stopping_criteria=transformers.StoppingCriteriaList(stop),
            )
        new: list[list[int]] = out[:, ids.shape[1] :].tolist()
        return new

    def _completion(self, request: Request, new: list[int], latency: float) -> Completion:
        """The answer up to EOS or the first stop string; what follows a finished row is padding."""
        end = next((k for k, token in enumerate(new) if token in self._eos), None)
        kept = new if end is None else new[:end]
        text = self._text(kept)
        count, reason = (len(new), "length") if end is None else (end + 1, "stop")
        cut = _stop_at(text, request.stop)
        if cut is not None:
            count = next(k for k in range(1, len(kept) + 1) if _stop_at(self._text(kept[:k]), request.stop))
            text, reason = text[:cut], "stop"
        # min_new_tokens=1 keeps end-of-sequence from coming first.
        completion = Completion(text, len(request.ids), count, reason, latency, first_token=FirstToken.FORCED)
        return split_completion(completion, self.tokenizer, self.think_tags)

    def _text(self, ids: list[int]) -> str:
        decode = self.tokenizer.hf.decode
        return str(decode(ids, skip_special_tokens=True, clean_up_tokenization_spaces=False))


def cache_argument(model: Any) -> str:
    """The name the model's forward pass gives its KV cache, in and out: ``cache`` from
    transformers 5.24 on (``past_key_values`` there warns of its removal), ``past_key_values``
    before. Read from the class, so a wrapped or patched ``forward`` does not hide it."""
    parameters = inspect.signature(type(model).forward).parameters
    return "cache" if "cache" in parameters else "past_key_values"


def token_logprobs(model: Any, ids: torch.Tensor, start: int, chunk: int) -> torch.Tensor:
    """log p(ids[t] | ids[:t]) for t >= start, as float64 on the CPU: one forward pass over the
    sequence, ``chunk`` tokens at a time through the KV cache, each chunk's logits reduced to the
    log-probabilities of the actual next tokens before the next chunk runs."""
    scored = []
    cache = None  # the model makes the cache that suits it (sliding windows, say) on the first step
    cache_name = cache_argument(model)
    # The last token predicts nothing that is scored, so it is never fed.
    with torch.inference_mode():
        for begin in range(0, len(ids) - 1, chunk):
            end = min(begin + chunk, len(ids) - 1)
            # Position p predicts token p + 1: the rows from start - 1 on are needed.
            keep = end - max(begin, start - 1)
            # logits_to_keep=n computes the head for the last n rows only (0 would mean all).
            step = ids[None, begin:end]
            out = model(input_ids=step, use_cache=True, logits_to_keep=max(keep, 1), **{cache_name: cache})
            cache = out[cache_name]
            if keep > 0:
                logprobs = torch.log_softmax(out.logits[0, -keep:].float(), dim=-1)
                targets = ids[end - keep + 1 : end + 1, None]
                scored.append(logprobs.gather(1, targets)[:, 0].to("cpu", torch.float64))
    return torch.cat(scored)


class _StopStrings(transformers.StoppingCriteria):
    """Stops a row once its new text holds a stop string (transformers' own ``stop_strings`` also
    matches one that begins in the prompt's last tokens)."""

    def __init__(self, tokenizer: TransformersTokenizer, stop: Sequence[str], prompt_tokens: int) -> None:
        self.tokenizer, self.stop, self.prompt_tokens = tokenizer, stop, prompt_tokens

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor, **kwargs: Any) -> torch.Tensor:
        texts = self.tokenizer.hf.batch_decode(input_ids[:, self.prompt_tokens :], skip_special_tokens=True)
        return torch.tensor([_stop_at(t, self.stop) is not None for t in texts], device=input_ids.device)


def _stop_at(text: str, stop: Sequence[str]) -> int | None:
    found = [at for at in (text.find(s) for s in stop if s) if at >= 0]
    return min(found) if found else None


def _groups(requests: Sequence[Request], size: int) -> list[list[int]]:
    """Request indices in batches of at most ``size``, sorted by length; a batch shares its prompt
    length (no padding), its max_new_tokens and its stop strings."""

    def key(index: int) -> tuple[int, int, tuple[str, ...]]:
        request = requests[index]
        return len(request.ids), request.max_new_tokens, request.stop

    groups = []
    for _, same in itertools.groupby(sorted(range(len(requests)), key=key), key=key):
        members = list(same)
        groups += [members[start : start + size] for start in range(0, len(members), size)]
    return groups


def _load(
    path: Path, dtype: torch.dtype, attn: str, device: torch.device | str
) -> tuple[transformers.PreTrainedModel, transformers.PreTrainedTokenizerBase]:
    """The model on ``device``, or placed by accelerate's ``device_map`` strategy (a string)."""
    folder, gguf = model_source(path, ("gguf", "accelerate"))  # transformers needs both to read a GGUF
    tokenizer = load_tokenizer(path)
    try:
        model = transformers.AutoModelForCausalLM.from_pretrained(
            folder, local_files_only=True, dtype=dtype, attn_implementation=attn, device_map=device, **gguf
        )
    except LOAD_ERRORS as exc:
        raise FathomError(f"transformers cannot load '{path}': {first_line(exc)}") from None
    return model, tokenizer  # from_pretrained leaves the model in eval mode


_SETTINGS = {
    "dtype": choice("auto", *_DTYPES),
    "attn": choice("auto", "sdpa", "eager", "flash_attention_2", "flash_attention_3", "flex_attention"),
    # torch.device itself reads cuda:128 as cuda:-128: device numbers stop at 99 here.
    "device": text("auto", r"auto|cpu|mps|cuda(:[0-9]{1,2})?", "auto, cpu, mps, cuda or cuda:N"),
    "batch": or_auto(whole(None, least=1, most=MOST_BATCH)),
    "device_map": choice("none", "auto", "balanced", "balanced_low_0", "sequential"),
    # The KV cache's values: the model's dtype, or quantized (optimum-quanto) to fit longer prompts.
    "kv": choice("model", "int8", "int4"),
    "think_tags": THINK_TAGS,
}


def _quantized_cache(kv: str) -> dict[str, Any]:
    """GenerationConfig's fields for a KV cache of ``kv`` values (none for the model's own dtype)."""
    if kv == "model":
        return {}
    if importlib.util.find_spec("optimum") is None or importlib.util.find_spec("optimum.quanto") is None:
        raise SpecError(f"hf: kv={kv} quantizes the KV cache with optimum-quanto: pip install optimum-quanto")
    bits = {"int8": 8, "int4": 4}[kv]
    return {"cache_implementation": "quantized", "cache_config": {"backend": "quanto", "nbits": bits}}


def _attention(value: str, device: torch.device, dtype: torch.dtype) -> str:
    # FlashAttention 2 runs only in half precision on CUDA, and only if its package imports.
    if value != "auto" or device.type != "cuda" or dtype == torch.float32:
        return "sdpa" if value == "auto" else value
    try:
        import flash_attn  # noqa: F401
    except ImportError:
        return "sdpa"
    return "flash_attention_2"
