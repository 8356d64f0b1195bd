"""A sample's record, made of its prompt and the backend's answer: graded, capped, its needles'
surroundings and log-probabilities kept as the records hold them."""

from __future__ import annotations

import math

from fathom.backends.base import Backend, Counting
from fathom.prompts import Prompt
from fathom.prompts.tokenizers import Tokenizer
from fathom.records import Completion, SampleRecord, cap_answer
from fathom.run.grading import answer_grade, odd_name_score, placed_needles
from fathom.scoring import found_in
from fathom.spec import RunSpec
from fathom.tasks.base import Sample


def failed(reason: str, prompt_tokens: int) -> Completion:
    return Completion("", prompt_tokens, 0, "error", 0.0, error=reason)


def sample_record(
    spec: RunSpec, backend: Backend, sample: Sample, actual: int, completion: Completion
) -> SampleRecord:
    cell, prompt = sample.cell, sample.prompt
    if isinstance(backend, Counting) and backend.provider_counts and completion.error is None:
        actual = completion.prompt_tokens  # the provider's count of the prompt it read
    graded, lured = answer_grade(sample, completion.text)  # the whole answer, before any cut
    output, output_bytes = cap_answer(completion.text)
    window = backend.trained_window
    needles = placed_needles(sample)
    # RULER's other keys' values are flagged, not scored: its own metric stays comparable with RULER's.
    flagged = found_in(completion.text, sample.look_alikes) if prompt.needles else ()
    overlap = needles.overlap if needles is not None else None
    source = sample.source
    return SampleRecord(
        sample_id=cell.id,
        task=cell.task,
        length=cell.length,
        depth=cell.depth,
        sample=cell.sample,
        seed=spec.seed,
        prompt_sha256=prompt.sha256,
        target_tokens=prompt.target_tokens,
        actual_tokens=actual,
        needle_kind=sample.kind,
        needle_token_offsets=tuple(n.token_offset for n in prompt.needles),
        needle_depths=tuple(round(n.depth, 6) for n in prompt.needles),
        question=sample.question,
        answers=sample.answers,
        output=output,
        output_bytes=output_bytes,
        finish_reason=completion.finish_reason,
        score=graded.value if completion.error is None and not lured else 0.0,
        matched=graded.matched,
        scoring=graded.method,
        latency_s=round(completion.latency_s, 6),
        prefill_s=None if completion.prefill_s is None else round(completion.prefill_s, 6),
        decode_s=None if completion.decode_s is None else round(completion.decode_s, 6),
        first_token=completion.first_token,
        extracted=graded.extracted and cap_answer(graded.extracted)[0],
        beyond_window=window is not None and actual > window,
        max_new_tokens=sample.max_new_tokens,
        error=completion.error,
        answer_logprobs=rounded(completion.continuation_logprobs),
        answer_error=completion.continuation_error or non_finite(completion.continuation_logprobs),
        needle_context=needle_context(backend.tokenizer, prompt),
        control=cell.control,
        probe=cell.probe,
        latent_items=sample.latent_items,
        odd_name_score=odd_name_score(sample),
        literal_neighbours=sample.literal_neighbours,
        needle_forms=() if needles is None else needles.forms,
        reasoning_tokens=completion.reasoning_tokens,
        reasoning=completion.reasoning if spec.keep_reasoning else None,
        needle_roles=() if needles is None else tuple(p.role for p in needles.placements),
        needle_values=() if needles is None else tuple(p.value for p in needles.placements),
        lured=lured or flagged,
        haystack_offset=sample.haystack_offset,
        redraws=sample.redraws,
        haystack_similarity=sample.similarity,
        overlap_words=None if overlap is None else overlap[0],
        overlap_rouge1=None if overlap is None else round(overlap[1], 4),
        item_id=None if source is None else source.item_id,
        item_groups=() if source is None else source.groups,
        original_tokens=None if source is None else source.original_tokens,
        truncated=source is not None and source.truncated,
    )


# Tokens of prompt kept on each side of a needle: a sentence or two, enough to see what surrounded it.
NEEDLE_CONTEXT_TOKENS = 40


def needle_context(tokenizer: Tokenizer, prompt: Prompt) -> tuple[str, ...]:
    """For each needle, the prompt's text from ``NEEDLE_CONTEXT_TOKENS`` before its first token to as
    many after its last one, decoded with the run's tokenizer (what the model read there)."""
    ids, reach = prompt.ids, NEEDLE_CONTEXT_TOKENS
    return tuple(
        tokenizer.decode(ids[max(0, n.token_offset - reach) : n.token_offset + n.tokens + reach].tolist())
        for n in prompt.needles
    )


def rounded(values: tuple[float, ...] | None) -> tuple[float, ...] | None:
    return None if values is None or non_finite(values) else tuple(round(v, 5) for v in values)


def non_finite(values: tuple[float, ...] | None) -> str | None:
    """Why log-probabilities are not recorded, where one is NaN or infinite (JSON holds neither)."""
    finite = values is None or all(math.isfinite(v) for v in values)
    return None if finite else "the backend gave a log-probability that is not a finite number"
