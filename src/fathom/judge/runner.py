"""Judging a run: each answered sample's answer put to one or two LLM judges under a rubric.

``judge_run`` reads the run folder's answers, checks the judges against the model under test,
records the judges in the manifest and appends one ``JudgementRecord`` per sample and judge to
judgements.jsonl. A verdict already there (same prompt, answer, judge and rubric) is not asked for
again; a judgement that ended in an error is. A reply that is no verdict is asked for again with the
reason, ``retries`` times, then recorded as an error: never a silent score.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tqdm import tqdm

from fathom.backends.base import Backend, Request
from fathom.errors import SpecError
from fathom.judge.lineage import family, same_model
from fathom.judge.verdicts import Malformed, parse_verdict
from fathom.judgement import JudgementRecord, answer_sha256
from fathom.manifest import JudgeIdentity, Manifest, identity_sha256
from fathom.prompts import ChatPrompt, PromptText, frame
from fathom.prompts.judging import (
    PROMPT_VERSION,
    VERDICT_PREFIX,
    Rubric,
    judge_prompt,
    load_rubric,
    retry_note,
)
from fathom.prompts.templates import ChatTemplate, resolve_template
from fathom.records import SampleRecord, cap_answer
from fathom.registry import BACKEND, create_backend
from fathom.run.judgements import JudgementWriter
from fathom.run.store import RunFolder

ROLES = ("judge", "judge2")
VERDICT_TOKENS = 96  # a score and a sentence of reason, with room to spare
BATCH = 8

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class JudgingResult:
    judged: int  # verdicts written now
    reused: int  # verdicts already in judgements.jsonl
    errors: int  # judgements written now without a readable verdict


@dataclass(frozen=True)
class _Judge:
    identity: JudgeIdentity
    backend: Backend
    template: ChatTemplate  # the judge's own (its tokenizer's, where it has one), resolved once


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


def judge_run(
    folder: Path, judges: Sequence[str], rubric_name: str, retries: int = 2, show_progress: bool = True
) -> JudgingResult:
    """Judge every answered sample of the run in ``folder`` with ``judges`` (one or two backend
    specs, as ``--model`` takes them) under the rubric named."""
    if not 1 <= len(judges) <= len(ROLES):
        raise SpecError("name one judge (--judge) or two (--judge and --judge2)")
    if retries < 0:
        raise SpecError(f"--judge-retries {retries} is below 0: give 0 or more attempts after the first")
    rubric = load_rubric(rubric_name)
    run = RunFolder(folder)
    manifest = run.read_manifest()
    samples = [r for r in run.latest() if isinstance(r, SampleRecord) and not r.control and r.error is None]
    if not samples:
        raise SpecError(f"run folder '{folder}' holds no answered sample to judge")
    chosen = [_make_judge(role, spec, manifest, rubric) for role, spec in zip(ROLES, judges, strict=False)]
    if len(chosen) == 2 and same_model(
        judges[0], chosen[0].identity.settings, judges[1], chosen[1].identity.settings
    ):
        raise SpecError(
            f"--judge2 {judges[1]} is the same model as --judge: agreement of a model with itself "
            "measures nothing; name a judge of another family"
        )
    run.hold()
    try:
        for judge in chosen:
            run.rewrite_manifest(run.read_manifest().judged_by(judge.identity))
        writer = JudgementWriter(folder)
        try:
            return _judge_all(writer, chosen, rubric, samples, retries, show_progress)
        finally:
            writer.close()
    finally:
        run.close()


def _make_judge(role: str, spec: str, manifest: Manifest, rubric: Rubric) -> _Judge:
    """The judge's backend, refused if it is the model under test, with a warning if it is of its
    family."""
    tested = manifest.identity.backend
    tested_spec = manifest.spec.model
    backend = create_backend(spec, "auto")
    settings = backend.settings()
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
    identity = JudgeIdentity(
        role=role,
        name=spec,
        settings=settings,
        identity=identity_sha256({"backend": backend.name, "settings": settings, "prompt": PROMPT_VERSION}),
        family=judge_family,
        tested_family=tested_family,
        rubric=rubric.label,
        rubric_sha256=rubric.sha256,
        rubric_kind=rubric.kind,
        scale=rubric.scale,
        passing=rubric.passing,
    )
    return _Judge(identity, backend, resolve_template("auto", backend.tokenizer))


def _judge_all(
    writer: JudgementWriter,
    judges: Sequence[_Judge],
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
            for start in range(0, len(mine), BATCH):
                for record in _judge_batch(judge, rubric, mine[start : start + BATCH], retries):
                    writer.append(record)
                    errors += record.error is not None
                    bar.update()
    return JudgingResult(len(todo) - errors, len(judges) * len(samples) - len(todo), errors)


def _key(judge: _Judge, rubric: Rubric, sample: SampleRecord) -> tuple[str, str, str, str]:
    return (sample.prompt_sha256, answer_sha256(sample.output), judge.identity.identity, rubric.sha256)


def _judge_batch(
    judge: _Judge, rubric: Rubric, samples: Sequence[SampleRecord], retries: int
) -> list[JudgementRecord]:
    """Each sample's judgement: asked once, then again with the reason for those whose reply was
    no verdict, up to ``retries`` more times."""
    prompts = {s.sample_id: judge_prompt(rubric, s.question, s.answers, s.output) for s in samples}
    results: dict[str, JudgementRecord] = {}
    notes: dict[str, str] = {}
    pending = list(samples)
    for attempt in range(1, retries + 2):
        requests = [
            _request(judge, s.sample_id, prompts[s.sample_id] + notes.get(s.sample_id, "")) for s in pending
        ]
        started = time.perf_counter()
        completions = judge.backend.generate(requests)
        latency = (time.perf_counter() - started) / max(len(pending), 1)
        still = []
        for sample, completion in zip(pending, completions, strict=True):
            reply, _ = cap_answer(completion.text)
            score, reason, error = None, "", completion.error
            if error is None:
                try:
                    verdict = parse_verdict(reply, rubric)
                    score, reason = verdict.score, verdict.reason
                except Malformed as exc:
                    error = f"malformed: {exc}"
                    notes[sample.sample_id] = retry_note(str(exc))
                    still.append(sample)
            results[sample.sample_id] = JudgementRecord(
                sample_id=sample.sample_id,
                prompt_sha256=sample.prompt_sha256,
                answer_sha256=answer_sha256(sample.output),
                role=judge.identity.role,
                judge=judge.identity.name,
                judge_identity=judge.identity.identity,
                rubric=rubric.label,
                rubric_sha256=rubric.sha256,
                score=score,
                reason=reason,
                reply=reply,
                attempts=attempt,
                latency_s=round(latency, 4),
                error=error,
            )
        pending = still
        if not pending:
            break
    return [results[s.sample_id] for s in samples]


def _request(judge: _Judge, sample_id: str, text: str) -> Request:
    """The judge's prompt in the judge's own chat template, its reply opened with the verdict's
    first key."""
    backend, tokenizer = judge.backend, judge.backend.tokenizer
    head, tail = frame(tokenizer, judge.template, PromptText(text, "", VERDICT_PREFIX), "")
    ids = np.concatenate([head, tail])
    chat = ChatPrompt(None, text, VERDICT_PREFIX) if backend.input == "chat" else None
    decoded = tokenizer.decode(ids.tolist()) if backend.input == "text" else None
    return Request(f"judge|{sample_id}", ids, VERDICT_TOKENS, decoded, chat, stop=("\n",))
