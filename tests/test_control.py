"""The no-context control: every question asked again with its context cut out of the prompt."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from fathom import BackendEntry, registry
from fathom.analysis.select import control_records, split_records
from fathom.backends.base import Completion, Request
from fathom.backends.sim import SimulatedBackend
from fathom.cli import main
from fathom.prompts import chat_prompt
from fathom.prompts.tokenizers import load_tokenizer
from fathom.records import SampleRecord
from fathom.registry import create_task
from fathom.report.derive import run_spec
from fathom.run.store import RunFolder
from fathom.spec import RunSpec
from fathom.tasks import control
from fathom.tasks.base import Sample

SPEC = RunSpec(
    task="niah",
    model="sim:perfect",
    tokenizer="cl100k_base",
    lengths=(512, 1024),
    depths=(0.0, 1.0),
    samples=3,
    answer_logprob=True,
)


def records(folder: Path) -> tuple[list[SampleRecord], list[SampleRecord]]:
    latest = RunFolder(folder).latest()
    return split_records(latest)[0], control_records(latest)


def summary(folder: Path) -> dict[str, object]:
    data: dict[str, object] = json.loads((folder / "summary.json").read_text())
    return data


def test_every_sample_gets_a_control_that_differs_only_in_the_context(runs: Path) -> None:
    run_spec(SPEC, runs / "a", show_progress=False)
    samples, controls = records(runs / "a")
    assert len(samples) == len(controls) == 12
    assert {c.sample_id for c in controls} == {f"control|{s.sample_id}" for s in samples}
    assert all(s.score == 1.0 for s in samples) and all(c.score == 0.0 for c in controls)
    assert all(c.needle_token_offsets == () and c.actual_tokens < 100 for c in controls)

    tokenizer = load_tokenizer("cl100k_base")
    task = create_task(SPEC, tokenizer)
    cell = list(task.cells())[5]
    sample = task.prepare(cell)
    assert isinstance(sample, Sample)
    alone = control.without_context(sample, replace(cell, control=True))
    full, short = sample.prompt, alone.prompt
    end = full.head_tokens + full.context_tokens
    assert np.array_equal(short.ids, np.concatenate([full.ids[: full.head_tokens], full.ids[end:]]))
    first, count = full.needles[0].token_offset, full.needles[0].tokens
    needle_text = tokenizer.decode(full.ids[first : first + count].tolist())
    text = tokenizer.decode(short.ids.tolist())
    assert sample.question in text and needle_text not in text
    assert alone.answers == sample.answers and alone.cell.id == f"control|{cell.id}"
    # A chat server gets the same words around an empty context.
    chat = chat_prompt(tokenizer, alone.text, short, alone.question)
    assert chat.user == alone.text.before + alone.text.after.replace("{question}", alone.question)

    control_summary = summary(runs / "a")["control"]
    assert isinstance(control_summary, dict)
    assert (control_summary["n"], control_summary["mean"], control_summary["answered"]) == (12, 0.0, 0)
    assert summary(runs / "a")["samples"] == 12  # the grid holds the samples alone
    # The simulated model gives the gold answer p = 1e-6 per token when it finds it and far less
    # without the context: the context adds nats at every length.
    gains = control_summary["answer_logprob_gain"]
    assert [g["length"] for g in gains] == [512, 1024] and all(g["mean_nats"] > 5 for g in gains)


class _Memoriser(SimulatedBackend):
    """A model that answers every question with the famous San Francisco answer, context or not."""

    def generate(self, requests: Sequence[Request]) -> list[Completion]:
        answer = "Eat a sandwich and sit in Dolores Park on a sunny day."
        return [Completion(answer, len(r.ids), 12, "stop", 0.0) for r in requests]


def test_a_question_answered_without_the_context_is_flagged(
    runs: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    memoriser = lambda rest, _: _Memoriser(rest, load_tokenizer("cl100k_base"))  # noqa: E731
    monkeypatch.setitem(registry.BACKENDS, "memo", BackendEntry(memoriser, "a memoriser"))
    args = ["run", "niah", "--model", "memo:perfect", "--tokenizer", "cl100k_base", "--lengths", "512",
            "--depths", "0.5", "--samples", "3", "--needle", "sf", "--run-dir", str(runs / "memo"),
            "--no-progress"]  # fmt: skip
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "no-context control: 100.0% (3 of 3 questions answered without the context)" in out
    assert "warning" in out
    found = summary(runs / "memo")["control"]
    assert isinstance(found, dict) and found["answered"] == 3 and len(found["examples"]) == 3
    assert found["examples"][0]["question"] == "What is the best thing to do in San Francisco?"
    page = (runs / "memo" / "report.html").read_text()
    assert "Answered without the context (3; the first 3)" in page


def test_a_run_without_controls_is_another_run_and_has_none(runs: Path) -> None:
    assert "control" not in SPEC.to_json()  # on by default: runs from before controls keep their identity
    assert replace(SPEC, control=False).to_json()["control"] is False
    run_spec(replace(SPEC, control=False), runs / "none", show_progress=False)
    samples, controls = records(runs / "none")
    assert len(samples) == 12 and controls == []
    assert "control" not in summary(runs / "none")
    assert "No-context control" not in (runs / "none" / "report.html").read_text()


def test_resuming_a_run_from_before_controls_adds_only_its_controls(runs: Path) -> None:
    folder = runs / "old"
    run_spec(SPEC, folder, show_progress=False)
    path = folder / "samples.jsonl"
    lines = [line for line in path.read_text().splitlines() if '"control": true' not in line]
    path.write_text("".join(line + "\n" for line in lines))  # as a run made before controls existed
    result = run_spec(SPEC, folder, show_progress=False)
    assert (result.skipped, result.written) == (12, 12)
    assert len(records(folder)[1]) == 12


def test_a_ruler_suite_gets_its_controls_per_task(runs: Path) -> None:
    spec = RunSpec("vt", "sim:perfect", "cl100k_base", (1024,), (), 3, template="none")
    run_spec(spec, runs / "vt", show_progress=False)
    samples, controls = records(runs / "vt")
    assert len(controls) == len(samples) == 3 and all(c.task == "vt" for c in controls)
    found = summary(runs / "vt")
    assert found["kind"] == "ruler"
    assert isinstance(found["control"], dict) and list(found["control"]["by_task"]) == ["vt"]
