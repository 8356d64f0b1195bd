"""A run: plan the cells, skip the finished ones, build, generate, score, append.

The prompts are built on a worker thread ahead of the requests (``fathom.run.stream``), in the plan's
order, and flow to the backend as one stream (a Pulling backend's window reads them as it has room)
or in batches (any other), so the model never waits for fathom to build. Every sample's record is
on disk as soon as its answer is scored, so a crashed or killed run resumes where it stopped by
running the same command again, having lost at most the samples in flight. The files derived from
the records are the report stage's: ``fathom.report.derive.run_spec`` runs a spec, then derives them.

What is checked where: a prompt is built to its target length by construction (``prompts.builder``).
Its count as the backend sees it (``_request``, on the worker) is ``len(ids)`` for ids and chat
backends (the ids are what an ids backend reads; a chat server re-templates, which no count of ours
sees), and for a text backend the decoded text encoded again, the one count that can differ from the
ids'. Either is held to the target within ``length_tolerance``, and to the backend's limit.
"""

from __future__ import annotations

import hashlib
import itertools
import random
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import numpy as np

from fathom.backends.base import (
    Backend,
    BatchSized,
    Pulling,
    Request,
    answers_closed_book,
)
from fathom.errors import SpecError
from fathom.plan.check import check_output, check_run
from fathom.prompts import chat_prompt, length_tolerance
from fathom.records import AnyRecord, Cell, ErrorKind, PerplexityRecord, SampleRecord
from fathom.registry import answering_spec, check_backend, check_spec, create_backend, create_task
from fathom.run.clock import BackendClock
from fathom.run.labels import check_labels
from fathom.run.manifest import manifest
from fathom.run.progress import RunProgress
from fathom.run.recording import failed, sample_record
from fathom.run.store import RunFolder
from fathom.run.stream import HELD_PROMPTS, Ahead, BuiltSample, Ready
from fathom.run.writer import RecordWriter, RunResult
from fathom.spec import RunSpec
from fathom.tasks import control, probe
from fathom.tasks.base import Document, Sample, Task

Write = Callable[[AnyRecord], None]
Finish = Callable[[Ready, AnyRecord], None]  # a record written for a prompt made ready
Item = TypeVar("Item")


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
        prepared = prepare(spec, order, say=show_progress, keep_too_long=keep_too_long)
    except BaseException:
        folder.close()
        raise
    backend, task = prepared.backend, prepared.task
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
            answer_cells(spec, clock, task, cells, write)
        finally:
            progress.close()
        return write.result(len(done), time.perf_counter() - started, prepared.loading + clock.seconds)


@dataclass(frozen=True)
class Prepared:
    """A run made ready: its backend and task, the seconds loading the model took, and the plan's
    line (None for a simulated backend)."""

    backend: Backend
    task: Task
    loading: float
    plan: str | None


def prepare(spec: RunSpec, order: str = "prefix", say: bool = False, keep_too_long: bool = False) -> Prepared:
    """The run's backend and task, with everything checked that can be before the run folder is
    touched: a bad name, setting or length, or a sweep whose KV cache or prompts cannot fit
    (``fathom.plan.check``; ``say`` prints its line), leaves no folder behind."""
    if order not in ORDERS:
        raise SpecError(f"unknown order '{order}': use one of {', '.join(ORDERS)}")
    check_spec(spec)
    started = time.perf_counter()
    backend = create_backend(spec.model, spec.tokenizer)
    loading = time.perf_counter() - started
    task = create_task(spec, backend.tokenizer)
    check_backend(spec, backend)
    check_output(spec, task, backend)
    _check_closed_book(task, spec, backend)
    _check_shortest(task, min(spec.lengths))
    return Prepared(backend, task, loading, check_run(spec, task, backend, say, keep_too_long))


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


def batches(items: Iterable[Item], size: int, cell_of: Callable[[Item], Cell]) -> Iterator[list[Item]]:
    """Items (cells, or what is built of them: ``cell_of`` names the cell) in batches of at most
    ``size`` (16, or a BatchSized backend's) and BATCH_TOKENS (a longer cell alone). A backend that
    takes longer runs orders each itself: the controls that open the run go apart, so that it still
    answers them first, as the progress expects."""
    batch: list[Item] = []
    tokens, opening = 0, size > BATCH_SIZE
    for item in items:
        cell = cell_of(item)
        full = len(batch) == size or tokens + cell.length > BATCH_TOKENS
        if batch and (full or (opening and not cell.control)):
            yield batch
            batch, tokens = [], 0
        batch.append(item)
        tokens += cell.length
        opening = opening and cell.control
    if batch:
        yield batch


def answer_all(spec: RunSpec, clock: BackendClock, ahead: Ahead, write: Write, size: int) -> None:
    """Every prompt ``ahead`` builds answered, each record written as it comes and its prompt then let
    go: a Pulling backend's samples as one stream, anything else in batches of ``size``. A build that
    failed is raised once the prompts built before it are answered and written."""

    def finish(ready: Ready, record: AnyRecord) -> None:
        write(record)
        ahead.done(ready)

    pulling = isinstance(clock.backend, Pulling)
    while (first := ahead.peek()) is not None:
        if pulling and isinstance(first, BuiltSample):
            _pull(spec, clock, ahead.samples(), finish)
            continue
        for batch in batches(ahead.alike(), size, lambda ready: ready.cell):
            _answer(spec, clock, batch, finish)
    if ahead.failure is not None:
        raise ahead.failure


def answer_cells(spec: RunSpec, clock: BackendClock, task: Task, cells: Iterable[Cell], write: Write) -> None:
    """Every cell's prompt built ahead on a worker (``Ahead``) and answered (``answer_all``), each record
    written as it comes: a local run's cells, and those fed to a Ray replica's stream, shard after
    shard (``fathom.run.replica``)."""
    backend = clock.backend
    size = backend.requests_per_call if isinstance(backend, BatchSized) else BATCH_SIZE
    # A batch is whole before it is sent: room for it, however many a backend takes at once.
    ahead = Ahead(cells, lambda cell: _build(spec, backend, task, cell), max(HELD_PROMPTS, size))
    try:
        answer_all(spec, clock, ahead, write, size)
    finally:
        ahead.close()


def _build(spec: RunSpec, backend: Backend, task: Task, cell: Cell) -> Ready:
    """A cell made ready: its document, or its sample with the request to send and its count checked."""
    item = control.prepared(task, cell)  # on the build's worker thread
    if isinstance(item, Document):
        return item
    return BuiltSample(item, *_request(backend, item, spec.answer_logprob, spec.thinking_budget or 0))


def _answer(spec: RunSpec, clock: BackendClock, batch: Sequence[Ready], finish: Finish) -> None:
    """Generate the batch's samples and score its documents."""
    _generate(spec, clock, [ready for ready in batch if isinstance(ready, BuiltSample)], finish)
    documents = [ready for ready in batch if isinstance(ready, Document)]
    for document, record in zip(documents, _score(spec, clock, documents), strict=True):
        finish(document, record)


def _generate(spec: RunSpec, clock: BackendClock, samples: Sequence[BuiltSample], finish: Finish) -> None:
    to_send: list[BuiltSample] = []
    for built in samples:
        if built.refusal is None:
            to_send.append(built)
        else:
            finish(built, _refused(spec, clock.backend, built, built.refusal))
    if to_send:
        for index, completion in clock.stream([built.request for built in to_send]):
            built = to_send[index]
            finish(built, sample_record(spec, clock.backend, built.sample, built.actual, completion))


def _pull(spec: RunSpec, clock: BackendClock, samples: Iterator[BuiltSample], finish: Finish) -> None:
    """The samples as one stream, read by the backend as its window has room: their refusals are
    written as the backend's reader meets them (on its thread), each answer as it comes (on this
    one), one at a time, and none once the stream is over (a reader left behind by an interrupt)."""
    backend, lock, over = clock.backend, threading.Lock(), threading.Event()
    sent: dict[int, BuiltSample] = {}

    def locked(built: BuiltSample, record: AnyRecord) -> None:
        with lock:
            if not over.is_set():
                finish(built, record)

    def requests() -> Iterator[Request]:
        numbers = itertools.count()  # the backend's indices: the order it reads them in
        for built in samples:
            if built.refusal is None:
                sent[next(numbers)] = built
                yield built.request
            else:
                locked(built, _refused(spec, backend, built, built.refusal))

    try:
        for index, completion in clock.stream(requests()):
            built = sent.pop(index)
            locked(built, sample_record(spec, backend, built.sample, built.actual, completion))
    finally:
        with lock:
            over.set()


def _refused(spec: RunSpec, backend: Backend, built: BuiltSample, reason: str) -> SampleRecord:
    """The record of a sample not sent, for ``reason``."""
    return sample_record(spec, backend, built.sample, built.actual, failed(reason, built.actual))


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


def _request(
    backend: Backend, sample: Sample, answer_logprob: bool, thinking: int = 0
) -> tuple[Request, int, str | None]:
    """The request for a sample, its verified token count, and why it must not be sent, if so (on the
    build's worker thread: the re-encoding of a text backend's prompt is the costly part of a build).
    Its new tokens are the thinking budget's, then the sample's answer budget."""
    prompt, tokenizer = sample.prompt, backend.tokenizer
    text, chat, actual = None, None, len(prompt.ids)
    if backend.input == "text":
        # Text backends re-tokenise: count the text the way they will see it.
        text = tokenizer.decode(prompt.ids.tolist())
        actual = len(tokenizer.encode_with_specials(text))
    elif backend.input == "chat":
        chat = (
            sample.chat()
            if sample.chat
            else chat_prompt(tokenizer, sample.text, sample.prompt, sample.question)
        )
    refusal, new = None, thinking + sample.max_new_tokens
    # A prompt sized below its target (RULER's fill) is held to the length it was built at, as
    # closely as an exact prompt is held to its target.
    built = prompt.target_tokens if prompt.fills_target else len(prompt.ids)
    if abs(actual - built) > length_tolerance(prompt.target_tokens):
        below = "" if prompt.fills_target else f" (built at {built}, RULER's fill)"
        refusal = ErrorKind.LENGTH_MISMATCH.error(
            f"{actual} tokens for a target of {prompt.target_tokens}{below}"
        )
    elif backend.max_prompt_tokens is not None and actual + new > backend.max_prompt_tokens:
        refusal = ErrorKind.TOO_LONG.error(
            f"{actual} prompt tokens + {new} new exceed the backend's limit of {backend.max_prompt_tokens}"
        )
    context = (prompt.head_tokens, prompt.head_tokens + prompt.context_tokens)
    # The first answer as it would follow the answer prefix, one space on.
    gold = np.asarray(tokenizer.encode(" " + sample.answers[0]), dtype=np.int32) if answer_logprob else None
    request = Request(
        sample.cell.id,
        prompt.ids,
        new,
        text,
        chat,
        query_keys=sample.query_keys,
        context=context,
        patterns=sample.patterns,
        question=sample.question,
        continuation=gold,
    )
    return request, actual, refusal
