"""A run: plan the cells, skip the finished ones, build, generate, score, append, derive.

Every finished sample is on disk before the next batch starts, so a crashed or killed run resumes
where it stopped by running the same command again.
"""

from __future__ import annotations

import hashlib
import platform
import random
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

import fathom
from fathom import control
from fathom.backends.base import Backend, Request, TokenScores, score_request, scorer
from fathom.errors import SpecError
from fathom.progress import Progress
from fathom.prompts import Prompt, chat_prompt, length_tolerance
from fathom.records import AnyRecord, Cell, Completion, PerplexityRecord, SampleRecord
from fathom.registry import create_backend, create_task
from fathom.report import derive
from fathom.scoring import check_method, score
from fathom.spec import RunSpec
from fathom.store import RunFolder
from fathom.tasks.base import Document, Sample, Task
from fathom.tokenizers import Tokenizer

MANIFEST_SCHEMA = 1


@dataclass(frozen=True)
class RunResult:
    folder: Path
    written: int
    skipped: int
    errors: int
    seconds: float  # wall time of the run
    backend_seconds: float  # of which the model's own work: loading it, and inside generate

    @property
    def harness_share(self) -> float:
        """The part of the run that was fathom's, not the model's."""
        return 1.0 - self.backend_seconds / self.seconds if self.seconds > 0 else 0.0


def default_run_dir(spec: RunSpec, root: Path) -> Path:
    """A folder name that the same spec always maps to, so re-running a command resumes it."""
    model = re.sub(r"[^A-Za-z0-9]+", "-", spec.model).strip("-")[:48]
    return root / f"{spec.task}-{model}-{spec.sha256[:8]}"


ORDERS = ("prefix", "shuffled")


BATCH_SIZE = 16


def run(spec: RunSpec, run_dir: Path, show_progress: bool = True, order: str = "prefix") -> RunResult:
    """Run (or resume) a spec into ``run_dir``. ``order`` "prefix" sends prompts that share the
    longest prefixes one after another, so a backend's prefix cache can reuse them; "shuffled" is
    the naive order, for measuring what that saves. Neither changes any answer."""
    started = time.perf_counter()
    if spec.scoring is not None:
        check_method(spec.scoring)
    backend = create_backend(spec.model, spec.tokenizer)
    loading = time.perf_counter() - started
    tokenizer = backend.tokenizer
    task = create_task(spec, tokenizer)
    if spec.perplexity or spec.answer_logprob or spec.task == "perplexity":
        scorer(backend)  # a backend that cannot score fails here, before any work
    folder = RunFolder(run_dir)
    planned = control.plan(task.cells(), spec.control)
    folder.start(manifest(spec, tokenizer, task, backend, len(planned)))
    done = folder.finished_ids()
    todo = [cell for cell in planned if cell.id not in done]
    if order == "shuffled":
        random.Random(spec.seed).shuffle(todo)
    elif order != "prefix":
        raise SpecError(f"unknown order '{order}': use one of {', '.join(ORDERS)}")
    _check_shortest(task, todo)
    progress = Progress(len(todo), f"{spec.task} {spec.model}", enabled=show_progress)
    errors, clock = 0, _BackendClock(backend)
    with folder:
        for batch in _batches(todo, getattr(backend, "requests_per_call", BATCH_SIZE)):
            for record in _run_batch(spec, clock, task, batch):
                folder.append(record)
                errors += record.error is not None
            progress.advance(len(batch))
    progress.finish()
    derive(folder)
    seconds = time.perf_counter() - started
    return RunResult(run_dir, len(todo), len(done), errors, seconds, loading + clock.seconds)


class _BackendClock:
    """The backend, with the time spent inside generate and score added up."""

    def __init__(self, backend: Backend) -> None:
        self.backend, self.seconds = backend, 0.0

    def generate(self, requests: Sequence[Request]) -> list[Completion]:
        started = time.perf_counter()
        try:
            return self.backend.generate(requests)
        finally:
            self.seconds += time.perf_counter() - started

    def score(self, documents: Sequence[Document]) -> list[TokenScores]:
        asks = [score_request(self.backend, d.cell.id, d.ids, 1) for d in documents]
        started = time.perf_counter()
        try:
            return scorer(self.backend).score(asks)
        finally:
            self.seconds += time.perf_counter() - started


def _check_shortest(task: Task, todo: Sequence[Cell]) -> None:
    """Build every prompt of the shortest length first: a length below the prompt's own overhead
    fails here, before any sample is generated."""
    if todo:
        shortest = min(cell.length for cell in todo)
        for cell in todo:
            if cell.length == shortest and not cell.control:
                task.prepare(cell)


def _batches(cells: Sequence[Cell], size: int) -> Iterator[Sequence[Cell]]:
    """Cells in groups of ``size``, each written to disk before the next starts: a backend that
    batches or overlaps requests gets 16 at a time; one that runs them one by one sets
    ``requests_per_call = 1``, so an interrupt loses only the sample in progress, not up to 15 long
    ones already answered."""
    for start in range(0, len(cells), size):
        yield cells[start : start + size]


def _run_batch(spec: RunSpec, clock: _BackendClock, task: Task, cells: Sequence[Cell]) -> list[AnyRecord]:
    """The batch's records, in the order of its cells: samples generated, documents scored."""
    prepared = [_prepare(task, cell) for cell in cells]
    samples = [item for item in prepared if isinstance(item, Sample)]
    documents = [item for item in prepared if isinstance(item, Document)]
    done: dict[str, AnyRecord] = {}
    for record in _generate(spec, clock, samples) + _score(spec, clock, documents):
        done[record.sample_id] = record
    return [done[cell.id] for cell in cells]


def _prepare(task: Task, cell: Cell) -> Sample | Document:
    if not cell.control:
        return task.prepare(cell)
    sample = task.prepare(control.sample_cell(cell))
    if not isinstance(sample, Sample):
        raise TypeError(f"control cell {cell.id} is not a sample's")
    return control.without_context(sample, cell)


def _generate(spec: RunSpec, clock: _BackendClock, samples: Sequence[Sample]) -> list[SampleRecord]:
    backend = clock.backend
    requests, counts, refusals = [], [], []
    for sample in samples:
        request, actual, refusal = _request(backend, sample, spec.answer_logprob)
        requests.append(request)
        counts.append(actual)
        refusals.append(refusal)
    to_send = [r for r, refusal in zip(requests, refusals, strict=True) if refusal is None]
    answers = iter(clock.generate(to_send) if to_send else [])
    records = []
    for sample, actual, refusal in zip(samples, counts, refusals, strict=True):
        completion = next(answers) if refusal is None else _failed(refusal, actual)
        records.append(_record(spec, backend, sample, actual, completion))
    return records


def _score(spec: RunSpec, clock: _BackendClock, documents: Sequence[Document]) -> list[PerplexityRecord]:
    backend = clock.backend
    limit, window = backend.max_prompt_tokens, backend.trained_window
    refusals = {
        d.cell.id: f"too_long: {len(d.ids)} tokens exceed the backend's limit of {limit}"
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
    if abs(actual - prompt.target_tokens) > length_tolerance(prompt.target_tokens):
        refusal = f"length_mismatch: {actual} tokens for a target of {prompt.target_tokens}"
    elif backend.max_prompt_tokens is not None and actual + sample.max_new_tokens > backend.max_prompt_tokens:
        refusal = (
            f"too_long: {actual} prompt tokens + {sample.max_new_tokens} new exceed the backend's "
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
        continuation=gold,
    )
    return request, actual, refusal


def _failed(reason: str, prompt_tokens: int) -> Completion:
    return Completion("", prompt_tokens, 0, "error", 0.0, error=reason)


def _record(
    spec: RunSpec, backend: Backend, sample: Sample, actual: int, completion: Completion
) -> SampleRecord:
    cell, prompt = sample.cell, sample.prompt
    graded = score(sample.scoring, completion.text, sample.answers)
    window = backend.trained_window
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
        output=completion.text,
        finish_reason=completion.finish_reason,
        score=graded.value if completion.error is None else 0.0,
        matched=graded.matched,
        scoring=graded.method,
        latency_s=round(completion.latency_s, 6),
        beyond_window=window is not None and actual > window,
        max_new_tokens=sample.max_new_tokens,
        error=completion.error,
        answer_logprobs=_rounded(completion.continuation_logprobs),
        answer_error=completion.continuation_error,
        needle_context=needle_context(backend.tokenizer, prompt),
        control=cell.control,
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
    return None if values is None else tuple(round(v, 5) for v in values)


def manifest(
    spec: RunSpec, tokenizer: Tokenizer, task: Task, backend: Backend, planned: int
) -> dict[str, Any]:
    """The resolved run: ``identity`` decides the prompts and answers and must match to resume."""
    return {
        "schema": MANIFEST_SCHEMA,
        "identity": {
            "spec": spec.to_json(),
            "tokenizer": {"name": tokenizer.name, "sha256": tokenizer.identity},
            "task": task.identity(),
            "backend": {"name": backend.name, "settings": backend.settings()},
        },
        # Outside the identity, which decides whether a run resumes: how many samples make the run
        # complete, so 'fathom runs' can tell a partial run without rebuilding its task.
        "planned": planned,
        "backend": {
            "input": backend.input,
            "exact_lengths": backend.exact_lengths,
            "trained_window": backend.trained_window,
            "max_prompt_tokens": backend.max_prompt_tokens,
        },
        "environment": {
            "fathom_version": fathom.__version__,
            **source_revision(Path(fathom.__file__).parent),
            "python": sys.version.split()[0],
            "platform": platform.platform(),
            "host": socket.gethostname(),
            "created": datetime.now(UTC).isoformat(timespec="seconds"),
        },
    }


def source_revision(folder: Path) -> dict[str, Any]:
    """The commit that ``folder`` (fathom's package) is checked out from, and whether the files under
    it differ from that commit (edited, added or deleted): a run made from uncommitted code must not
    pass for one made from the commit it names. Both None outside a git checkout."""
    sha = _git(folder, "rev-parse", "HEAD")
    if not sha:
        return {"git_sha": None, "git_dirty": None}
    changes = _git(folder, "status", "--porcelain", "--", ".")  # only this folder, not the whole repo
    return {"git_sha": sha, "git_dirty": None if changes is None else bool(changes)}


def _git(folder: Path, *args: str) -> str | None:
    try:
        out = subprocess.run(
            ["git", *args],
            cwd=folder,
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip()
