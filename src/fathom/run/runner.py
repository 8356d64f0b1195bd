"""A run: plan the cells, skip the finished ones, build, generate, score, append.

Every sample's record is on disk as soon as its answer is scored, so a crashed or killed run
resumes where it stopped by running the same command again, having lost at most the samples in
flight. The files derived from the records are the report stage's: ``fathom.report.derive.run_spec``
runs a spec, then derives them.
"""

from __future__ import annotations

import hashlib
import math
import random
import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path

import numpy as np

from fathom.backends.base import (
    Backend,
    BatchSized,
    Request,
    answers_closed_book,
)
from fathom.errors import SpecError
from fathom.plan.check import check_run
from fathom.prompts import Prompt, chat_prompt, length_tolerance
from fathom.prompts.tokenizers import Tokenizer
from fathom.records import AnyRecord, Cell, Completion, ErrorKind, PerplexityRecord, SampleRecord, cap_answer
from fathom.registry import answering_spec, check_backend, check_spec, create_backend, create_task
from fathom.run.clock import BackendClock
from fathom.run.grading import answer_grade, odd_name_score, placed_needles
from fathom.run.labels import check_labels
from fathom.run.manifest import manifest
from fathom.run.progress import RunProgress
from fathom.run.store import RunFolder
from fathom.run.writer import RecordWriter, RunResult
from fathom.scoring import found_in
from fathom.spec import RunSpec
from fathom.tasks import control, probe
from fathom.tasks.base import Document, Sample, Task

Write = Callable[[AnyRecord], None]


def default_run_dir(spec: RunSpec, root: Path) -> Path:
    """A folder name that the same spec always maps to, so re-running a command resumes it (with
    other transport settings too: ``answering_spec``)."""
    spec = answering_spec(spec)
    model = re.sub(r"[^A-Za-z0-9]+", "-", spec.model).strip("-")[:48]
    return root / f"{spec.task}-{model}-{spec.sha256[:8]}"


ORDERS = ("prefix", "shuffled")
BATCH_SIZE = 16


def run(
    spec: RunSpec,
    run_dir: Path,
    show_progress: bool = True,
    order: str = "prefix",
    keep_too_long: bool = False,
    labels: Mapping[str, str] | None = None,
) -> RunResult:
    """Run (or resume) a spec into ``run_dir``. ``order`` "prefix" sends prompts that share the
    longest prefixes one after another, so a backend's prefix cache can reuse them; "shuffled" is
    the naive order, for measuring what that saves. Neither changes any answer. ``keep_too_long``
    records prompts longer than the backend's context as ``too_long`` where the sweep is refused.
    ``labels`` go into the manifest (``fathom.run.labels``; a resume without them keeps the folder's)."""
    started = time.perf_counter()
    labels = check_labels(labels or {})
    folder = RunFolder(run_dir)
    folder.claim()  # a second writer is refused now, not after the preparation's minutes
    try:
        backend, task, loading = prepare(spec, order, say=show_progress, keep_too_long=keep_too_long)
    except BaseException:
        folder.close()
        raise
    tokenizer = backend.tokenizer

    def planned() -> Iterator[Cell]:
        return probe.plan(task, spec.control)

    with folder:
        folder.start(manifest(spec, tokenizer, task, backend, sum(1 for _ in planned()), labels))
        done = folder.finished_ids()

        def todo() -> Iterator[Cell]:
            return (cell for cell in planned() if cell.id not in done)

        cells: Iterable[Cell] = todo()
        if order == "shuffled":
            shuffled = list(cells)
            random.Random(spec.seed).shuffle(shuffled)
            cells = shuffled
        progress = RunProgress(f"{spec.task} {spec.model}", todo(), enabled=show_progress)
        write = RecordWriter(folder, progress)
        clock = BackendClock(backend)
        try:
            size = backend.requests_per_call if isinstance(backend, BatchSized) else BATCH_SIZE
            for batch in cell_batches(cells, size):
                run_batch(spec, clock, task, batch, write)
        finally:
            progress.close()
        return write.result(len(done), time.perf_counter() - started, loading + clock.seconds)


def prepare(
    spec: RunSpec, order: str = "prefix", say: bool = False, keep_too_long: bool = False
) -> tuple[Backend, Task, float]:
    """The run's backend and task, and the seconds loading the model took, with everything checked
    that can be before the run folder is touched: a bad name, setting or length, or a sweep whose
    KV cache or prompts cannot fit (``fathom.plan.check``; ``say`` prints its line), leaves no folder
    behind."""
    if order not in ORDERS:
        raise SpecError(f"unknown order '{order}': use one of {', '.join(ORDERS)}")
    check_spec(spec)
    started = time.perf_counter()
    backend = create_backend(spec.model, spec.tokenizer)
    loading = time.perf_counter() - started
    task = create_task(spec, backend.tokenizer)
    check_backend(spec, backend)
    _check_closed_book(task, spec, backend)
    _check_shortest(task, min(spec.lengths))
    check_run(spec, task, backend, say, keep_too_long)
    return backend, task, loading


def _check_closed_book(task: Task, spec: RunSpec, backend: Backend) -> None:
    """Refuse, before any work, a low-overlap run whose probes (``fathom.tasks.probe``) the backend
    cannot answer: one that says it has no knowledge to answer from (``ClosedBook``)."""
    if not answers_closed_book(backend) and probe.asks_probes(task, spec.control):
        raise SpecError(
            f"backend '{backend.name}' cannot answer closed-book, and a low-overlap run asks each item's "
            "fact alone (its probe): use --no-control (no probes, no controls) or a backend that can"
        )


def _check_shortest(task: Task, shortest: int) -> None:
    """Build one prompt of the shortest length for each task: a length below the prompt's own
    overhead fails here, before any sample is generated."""
    seen: set[str] = set()
    for cell in task.cells():
        if cell.length == shortest and cell.task not in seen:
            seen.add(cell.task)
            task.prepare(cell)


# The most tokens (by the cells' lengths) in a batch, whose prompts are all built before the first is
# sent and kept until the last is answered: 2^24 tokens are 64 MiB of ids, and as much again as text.
BATCH_TOKENS = 1 << 24


def cell_batches(cells: Iterable[Cell], size: int) -> Iterator[list[Cell]]:
    """Cells in batches of at most ``size`` (16, or a BatchSized backend's) and BATCH_TOKENS (a longer
    cell alone). A backend that takes longer runs orders each itself (openai): the controls that open
    the run go apart, so that it still answers them first, as the progress expects."""
    batch: list[Cell] = []
    tokens, opening = 0, size > BATCH_SIZE
    for cell in cells:
        full = len(batch) == size or tokens + cell.length > BATCH_TOKENS
        if batch and (full or (opening and not cell.control)):
            yield batch
            batch, tokens = [], 0
        batch.append(cell)
        tokens += cell.length
        opening = opening and cell.control
    if batch:
        yield batch


def run_batch(spec: RunSpec, clock: BackendClock, task: Task, cells: Sequence[Cell], write: Write) -> None:
    """Generate the batch's samples and score its documents, writing each record as it is done."""
    prepared = [_prepare(task, cell) for cell in cells]
    _generate(spec, clock, [item for item in prepared if isinstance(item, Sample)], write)
    for record in _score(spec, clock, [item for item in prepared if isinstance(item, Document)]):
        write(record)


def _prepare(task: Task, cell: Cell) -> Sample | Document:
    if not cell.control or cell.probe is not None:  # a probe is its own sample, asked of the task
        return task.prepare(cell)
    sample = task.prepare(control.sample_cell(cell))
    if not isinstance(sample, Sample):
        raise TypeError(f"control cell {cell.id} is not a sample's")
    return control.without_context(sample, cell)


def _generate(spec: RunSpec, clock: BackendClock, samples: Sequence[Sample], write: Write) -> None:
    backend = clock.backend
    to_send: list[tuple[Sample, int, Request]] = []
    for sample in samples:
        request, actual, refusal = _request(backend, sample, spec.answer_logprob)
        if refusal is None:
            to_send.append((sample, actual, request))
        else:
            write(_record(spec, backend, sample, actual, _failed(refusal, actual)))
    if to_send:
        for index, completion in clock.stream([request for _, _, request in to_send]):
            sample, actual, _ = to_send[index]
            write(_record(spec, backend, sample, actual, completion))


def _score(spec: RunSpec, clock: BackendClock, documents: Sequence[Document]) -> list[PerplexityRecord]:
    backend = clock.backend
    limit, window = backend.max_prompt_tokens, backend.trained_window
    refusals = {
        d.cell.id: ErrorKind.TOO_LONG.error(f"{len(d.ids)} tokens exceed the backend's limit of {limit}")
        for d in documents
        if limit is not None and len(d.ids) > limit
    }
    to_send = [d for d in documents if d.cell.id not in refusals]
    results = dict(zip((d.cell.id for d in to_send), clock.score(to_send) if to_send else [], strict=True))
    records = []
    for document in documents:
        scores = results.get(document.cell.id)
        error = refusals.get(document.cell.id) if scores is None else scores.error
        # Text backends score their own tokens: count what they read.
        read = scores.first_position + len(scores.logprobs) if scores and error is None else len(document.ids)
        records.append(
            PerplexityRecord(
                sample_id=document.cell.id,
                task=document.cell.task,
                length=document.cell.length,
                sample=document.cell.sample,
                seed=spec.seed,
                corpus=document.corpus,
                corpus_offset=document.corpus_offset,
                ids_sha256=hashlib.sha256(document.ids.tobytes()).hexdigest(),
                target_tokens=document.cell.length,
                actual_tokens=read,
                first_position=scores.first_position if scores else 1,
                logprobs=tuple(round(float(x), 5) for x in scores.logprobs) if scores else (),
                latency_s=round(scores.latency_s, 6) if scores else 0.0,
                beyond_window=window is not None and read > window,
                error=error,
            )
        )
    return records


def _request(backend: Backend, sample: Sample, answer_logprob: bool) -> tuple[Request, int, str | None]:
    """The request for a sample, its verified token count, and why it must not be sent, if so."""
    prompt, tokenizer = sample.prompt, backend.tokenizer
    text, chat, actual = None, None, len(prompt.ids)
    if backend.input == "text":
        # Text backends re-tokenise: count the text the way they will see it.
        text = tokenizer.decode(prompt.ids.tolist())
        actual = len(tokenizer.encode_with_specials(text))
    elif backend.input == "chat":
        chat = chat_prompt(tokenizer, sample.text, sample.prompt, sample.question)
    refusal = None
    # A prompt sized below its target (RULER's fill) is held to the length it was built at, as
    # closely as an exact prompt is held to its target.
    built = prompt.target_tokens if prompt.fills_target else len(prompt.ids)
    if abs(actual - built) > length_tolerance(prompt.target_tokens):
        below = "" if prompt.fills_target else f" (built at {built}, RULER's fill)"
        refusal = ErrorKind.LENGTH_MISMATCH.error(
            f"{actual} tokens for a target of {prompt.target_tokens}{below}"
        )
    elif backend.max_prompt_tokens is not None and actual + sample.max_new_tokens > backend.max_prompt_tokens:
        refusal = ErrorKind.TOO_LONG.error(
            f"{actual} prompt tokens + {sample.max_new_tokens} new exceed the backend's "
            f"limit of {backend.max_prompt_tokens}"
        )
    context = (prompt.head_tokens, prompt.head_tokens + prompt.context_tokens)
    # The first answer as it would follow the answer prefix, one space on.
    gold = np.asarray(tokenizer.encode(" " + sample.answers[0]), dtype=np.int32) if answer_logprob else None
    request = Request(
        sample.cell.id,
        prompt.ids,
        sample.max_new_tokens,
        text,
        chat,
        query_keys=sample.query_keys,
        context=context,
        patterns=sample.patterns,
        question=sample.question,
        continuation=gold,
    )
    return request, actual, refusal


def _failed(reason: str, prompt_tokens: int) -> Completion:
    return Completion("", prompt_tokens, 0, "error", 0.0, error=reason)


def _record(
    spec: RunSpec, backend: Backend, sample: Sample, actual: int, completion: Completion
) -> SampleRecord:
    cell, prompt = sample.cell, sample.prompt
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
        answer_logprobs=_rounded(completion.continuation_logprobs),
        answer_error=completion.continuation_error or _non_finite(completion.continuation_logprobs),
        needle_context=needle_context(backend.tokenizer, prompt),
        control=cell.control,
        probe=cell.probe,
        latent_items=sample.latent_items,
        odd_name_score=odd_name_score(sample),
        literal_neighbours=sample.literal_neighbours,
        needle_forms=() if needles is None else needles.forms,
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


def _rounded(values: tuple[float, ...] | None) -> tuple[float, ...] | None:
    return None if values is None or _non_finite(values) else tuple(round(v, 5) for v in values)


def _non_finite(values: tuple[float, ...] | None) -> str | None:
    """Why log-probabilities are not recorded, where one is NaN or infinite (JSON holds neither)."""
    finite = values is None or all(math.isfinite(v) for v in values)
    return None if finite else "the backend gave a log-probability that is not a finite number"
