"""Judging a run: each answered sample's answer put to one or two LLM judges under a rubric.

``judge_run`` reads the run folder's answers, checks the judges against the model under test,
records the judges in the manifest and appends one ``JudgementRecord`` per sample and judge to
judgements.jsonl. A verdict already there (same prompt, answer, judge and rubric) is not asked for
again; a judgement that ended in an error is. A reply that is no verdict is asked for again with the
problem (in fathom's words, never the reply's), ``retries`` times, then recorded as an error: never a
silent score. Each judgement is appended as soon as it is final, so a kill re-pays only the requests
that were in flight.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np
from tqdm import tqdm

from fathom.backends.base import Backend, BatchSized, Request
from fathom.errors import SpecError
from fathom.judge.lineage import family, same_model
from fathom.judge.verdicts import Malformed, parse_verdict
from fathom.judgement import JudgementRecord, answer_sha256
from fathom.manifest import JudgeIdentity, Manifest, identity_sha256
from fathom.prompts import ChatPrompt, PromptText, frame
from fathom.prompts.judging import (
    PROMPT_VERSION,
    JudgePrompt,
    Rubric,
    Unreadable,
    judge_prompt,
    load_rubric,
    retry_note,
)
from fathom.prompts.templates import ChatTemplate, resolve_template
from fathom.records import Completion, SampleRecord, cap_answer
from fathom.registry import BACKEND, create_backend
from fathom.run.clock import BackendClock
from fathom.run.judgements import JudgementWriter
from fathom.run.store import RunFolder

ROLES = ("judge", "judge2")
VERDICT_TOKENS = 96  # a score and a sentence of reason, with room to spare
BATCH = 8
# Each retry is paid for, and a judge that gives no verdict in eleven tries will not in twelve.
MOST_RETRIES = 10

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class JudgingResult:
    judged: int  # verdicts written now
    reused: int  # verdicts already in judgements.jsonl
    errors: int  # judgements written now without a readable verdict


@dataclass(frozen=True)
class Judge:
    role: str  # "judge" or "judge2"
    name: str  # as named, e.g. llamacpp:gemma3-270m
    identity: str  # a hash of its backend, settings and PROMPT_VERSION, which its judgements carry
    backend: Backend
    template: ChatTemplate  # the judge's own (its tokenizer's, where it has one), resolved once


class Case(Protocol):
    """What a judge is shown of one answer: a run's ``SampleRecord``, or a qualification item."""

    @property
    def sample_id(self) -> str: ...
    @property
    def prompt_sha256(self) -> str: ...
    @property
    def question(self) -> str: ...
    @property
    def answers(self) -> tuple[str, ...]: ...
    @property
    def output(self) -> str: ...


def check_judges(judges: Sequence[str], rubric_name: str) -> None:
    """What can be checked of the judges before a run, without loading them: the rubric, and that
    each names a backend fathom has."""
    if judges:
        load_rubric(rubric_name)
    for spec in judges:
        prefix, colon, _ = spec.partition(":")
        if not colon or BACKEND.find(prefix) is None:
            known = ", ".join(BACKEND.names())
            raise SpecError(f"unknown judge '{spec}': name it as backend:model, with backend one of {known}")


def check_retries(retries: int) -> None:
    """Refuse a number of retries below 0 or above MOST_RETRIES."""
    if not 0 <= retries <= MOST_RETRIES:
        raise SpecError(
            f"--judge-retries {retries} is outside 0 to {MOST_RETRIES}: give the attempts after the first, "
            f"{MOST_RETRIES} at most (each is paid for)"
        )


def judge_run(
    folder: Path, judges: Sequence[str], rubric_name: str, retries: int = 2, show_progress: bool = True
) -> JudgingResult:
    """Judge every answered sample of the run in ``folder`` with ``judges`` (one or two backend
    specs, as ``--model`` takes them) under the rubric named."""
    if not 1 <= len(judges) <= len(ROLES):
        raise SpecError("name one judge (--judge) or two (--judge and --judge2)")
    check_retries(retries)
    rubric = load_rubric(rubric_name)
    run = RunFolder(folder)
    manifest = run.read_manifest()
    samples = [r for r in run.latest() if isinstance(r, SampleRecord) and not r.control and r.error is None]
    if not samples:
        raise SpecError(f"run folder '{folder}' holds no answered sample to judge")
    chosen = [load_judge(role, spec) for role, spec in zip(ROLES, judges, strict=False)]
    identities = [_checked(judge, manifest, rubric) for judge in chosen]
    if len(chosen) == 2 and same_model(judges[0], identities[0].settings, judges[1], identities[1].settings):
        raise SpecError(
            f"--judge2 {judges[1]} is the same model as --judge: agreement of a model with itself "
            "measures nothing; name a judge of another family"
        )
    run.hold()
    try:
        for identity in identities:
            run.rewrite_manifest(run.read_manifest().judged_by(identity))
        writer = JudgementWriter(folder)
        try:
            return _judge_all(writer, chosen, rubric, samples, retries, show_progress)
        finally:
            writer.close()
    finally:
        run.close()


def load_judge(role: str, spec: str) -> Judge:
    """The judge named ``spec`` (a backend spec, as ``--model`` takes it), loaded."""
    backend = create_backend(spec, "auto")
    identity = identity_sha256(
        {"backend": backend.name, "settings": backend.settings(), "prompt": PROMPT_VERSION}
    )
    return Judge(role, spec, identity, backend, resolve_template("auto", backend.tokenizer))


def _checked(judge: Judge, manifest: Manifest, rubric: Rubric) -> JudgeIdentity:
    """The judge as the manifest lists it; refused if it is the model under test, with a warning if
    it is of its family."""
    role, spec = judge.role, judge.name
    tested = manifest.identity.backend
    tested_spec = manifest.spec.model
    settings = judge.backend.settings()
    if same_model(spec, settings, tested_spec, tested.settings):
        raise SpecError(
            f"--{role} {spec} is the model under test ({tested_spec}): a model grading its own answers "
            "is no judge; name a model of another family"
        )
    judge_family, tested_family = family(spec, settings), family(tested_spec, tested.settings)
    if judge_family is not None and judge_family == tested_family:
        log.warning(
            "--%s %s is of the %s family, as the model under test (%s) is: a judge of the same "
            "lineage tends to favour its own kind; a judge of another family is more trustworthy",
            role,
            spec,
            judge_family,
            tested_spec,
        )
    return JudgeIdentity(
        role=role,
        name=spec,
        settings=settings,
        identity=judge.identity,
        family=judge_family,
        tested_family=tested_family,
        rubric=rubric.label,
        rubric_sha256=rubric.sha256,
        rubric_kind=rubric.kind,
        scale=rubric.scale,
        passing=rubric.passing,
    )


def _judge_all(
    writer: JudgementWriter,
    judges: Sequence[Judge],
    rubric: Rubric,
    samples: Sequence[SampleRecord],
    retries: int,
    show_progress: bool,
) -> JudgingResult:
    done = {r.key for r in writer.existing if r.error is None}
    todo = [
        (judge, sample) for judge in judges for sample in samples if _key(judge, rubric, sample) not in done
    ]
    errors = 0
    with tqdm(total=len(todo), desc="judging", unit="answer", disable=not show_progress) as bar:
        for judge in judges:
            mine = [sample for j, sample in todo if j is judge]
            for record in judge_cases(judge, rubric, mine, retries):
                writer.append(record)
                errors += record.error is not None
                bar.update()
    return JudgingResult(len(todo) - errors, len(judges) * len(samples) - len(todo), errors)


def _key(judge: Judge, rubric: Rubric, sample: SampleRecord) -> tuple[str, str, str, str]:
    return (sample.prompt_sha256, answer_sha256(sample.output), judge.identity, rubric.sha256)


def judge_cases(
    judge: Judge, rubric: Rubric, cases: Sequence[Case], retries: int
) -> Iterator[JudgementRecord]:
    """Each case's judgement, yielded as soon as it is final (a verdict, or an error once its
    retries are spent), so that a kill loses only the requests in flight. Cases go to the judge
    ``requests_per_call`` at a time (a BatchSized backend's; BATCH otherwise), and each reply is
    read as it comes (a Streamer's as each is answered, so its window of requests stays full)."""
    backend = judge.backend
    size = backend.requests_per_call if isinstance(backend, BatchSized) else BATCH
    for start in range(0, len(cases), size):
        yield from _judge_batch(judge, rubric, cases[start : start + size], retries)


def _judge_batch(
    judge: Judge, rubric: Rubric, cases: Sequence[Case], retries: int
) -> Iterator[JudgementRecord]:
    """Each case's judgement as it is final: asked once, then again with the problem (in fathom's
    words) for those whose reply was no verdict, up to ``retries`` more times."""
    prompts = {c.sample_id: judge_prompt(rubric, c.question, c.answers, c.output) for c in cases}
    notes: dict[str, Unreadable] = {}
    pending = list(cases)
    for attempt in range(1, retries + 2):
        requests = [
            _request(judge, c.sample_id, prompts[c.sample_id], notes.get(c.sample_id)) for c in pending
        ]
        still = []
        for index, completion in BackendClock(judge.backend).stream(requests):
            case = pending[index]
            record, problem = _judgement(judge, rubric, case, prompts[case.sample_id], completion, attempt)
            if problem is not None and attempt <= retries:
                notes[case.sample_id] = problem
                still.append(case)
            else:
                yield record
        pending = still
        if not pending:
            return


def _judgement(
    judge: Judge, rubric: Rubric, case: Case, prompt: JudgePrompt, completion: Completion, attempt: int
) -> tuple[JudgementRecord, Unreadable | None]:
    """The judgement a reply makes, and why it is no verdict where it is none."""
    reply, _ = cap_answer(completion.text)
    score, reason, error, problem = None, "", completion.error, None
    if error is None:
        try:
            verdict = parse_verdict(reply, rubric, prompt.marker)
            score, reason = verdict.score, verdict.reason
        except Malformed as exc:
            problem = exc.problem
            error = f"malformed: {problem.value}"
    record = JudgementRecord(
        sample_id=case.sample_id,
        prompt_sha256=case.prompt_sha256,
        answer_sha256=answer_sha256(case.output),
        role=judge.role,
        judge=judge.name,
        judge_identity=judge.identity,
        rubric=rubric.label,
        rubric_sha256=rubric.sha256,
        score=score,
        reason=reason,
        reply=reply,
        attempts=attempt,
        latency_s=round(completion.latency_s, 4),
        error=error,
    )
    return record, problem


def _request(judge: Judge, sample_id: str, prompt: JudgePrompt, problem: Unreadable | None) -> Request:
    """The judge's prompt (and, on a retry, what was wrong with its last reply, in fathom's words)
    in the judge's own chat template, its reply opened with the verdict's first key."""
    backend, tokenizer = judge.backend, judge.backend.tokenizer
    text = prompt.text + ("" if problem is None else retry_note(problem))
    head, tail = frame(tokenizer, judge.template, PromptText(text, "", prompt.opening), "")
    ids = np.concatenate([head, tail])
    chat = ChatPrompt(None, text, prompt.opening) if backend.input == "chat" else None
    decoded = tokenizer.decode(ids.tolist()) if backend.input == "text" else None
    return Request(f"judge|{sample_id}", ids, VERDICT_TOKENS, decoded, chat, stop=("\n",))
