"""At least one token: the openai backend asks for it (min_tokens) where the server takes it, drops the
field once a server refuses it and says so, and records what came first; the failures analysis
counts a model that stopped before any token apart from one that answered blank."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from http_faults import FaultServer, request

from fathom.analysis.failures import FAILURE_KINDS, failure_counts, failure_kind
from fathom.backends.openai import FIRST_TOKEN, OpenAIBackend
from fathom.cli import main
from fathom.records import FirstToken, SampleRecord
from fathom.report.html.page import FAILURE_LABELS, esc

pytestmark = pytest.mark.usefixtures("fast_and_keyed")

SWEEP = ("--tokenizer", "cl100k_base", "--lengths", "1k", "--depths", "3", "--samples", "1", "--no-control")


def records(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (folder / "samples.jsonl").read_text().splitlines()]


def run(server: FaultServer, folder: Path, options: str = "") -> int:
    model = f"openai:m@{server.url}?concurrency=1{options}"
    return main(["run", "niah", "--model", model, "--run-dir", str(folder), "--no-progress", *SWEEP])


@pytest.mark.parametrize("endpoint", ["completions", "chat"])
def test_min_tokens_is_sent_and_a_model_that_would_end_at_once_answers(
    server: FaultServer, endpoint: str
) -> None:
    server.ends_at_once = True
    backend = OpenAIBackend(f"m@{server.url}?endpoint={endpoint}", "cl100k_base")
    (answer,) = backend.generate([request()])
    assert server.bodies[0]["min_tokens"] == 1
    assert answer.text.strip() and answer.first_token == FirstToken.FORCED
    assert backend.settings()["first_token"] == FIRST_TOKEN


def test_a_server_that_refuses_min_tokens_is_asked_without_it_and_the_records_say_so(
    server: FaultServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server.ends_at_once, server.min_tokens = True, "refuses"
    assert run(server, tmp_path / "run") == 0
    done = records(tmp_path / "run")
    assert len(done) == 3 and all(r["error"] is None for r in done)
    # Refused once, then never sent again; each answer asked again without it.
    sent = ["min_tokens" in body for body in server.bodies]
    assert sent == [True, False, False, False]
    assert [r["first_token"] for r in done] == ["end"] * 3 and {r["output"] for r in done} == {""}
    err = capsys.readouterr().err
    assert err.count("refused min_tokens") == 1
    assert "Unrecognized request argument supplied: min_tokens" in err and "not forced" in err
    page = (tmp_path / "run" / "report.html").read_text()
    assert f'data-samples="failure stopped"><summary>{esc(FAILURE_LABELS["stopped"])}: 3</summary>' in page


def test_a_refusing_server_whose_model_answers_records_unforced_answers(
    server: FaultServer, tmp_path: Path
) -> None:
    server.min_tokens = "refuses"
    assert run(server, tmp_path / "run") == 0
    done = records(tmp_path / "run")
    assert [r["first_token"] for r in done] == ["unforced"] * 3 and all(r["score"] == 1.0 for r in done)


def test_a_server_that_takes_min_tokens_but_ends_at_once_is_not_taken_at_its_word(
    server: FaultServer, tmp_path: Path
) -> None:
    server.ends_at_once, server.min_tokens = True, "ignores"
    assert run(server, tmp_path / "run") == 0
    assert all("min_tokens" in body for body in server.bodies)
    assert [r["first_token"] for r in records(tmp_path / "run")] == ["end"] * 3


def test_another_refusal_is_an_error_of_its_sample_and_min_tokens_stays(server: FaultServer) -> None:
    server.scripts = [["400"]]  # a prompt too long: no word of min_tokens
    backend = OpenAIBackend(f"m@{server.url}?concurrency=1", "cl100k_base")
    refused, answered = backend.generate([request("one"), request("two")])
    assert refused.error is not None and refused.error.startswith("rejected: HTTP 400: This model's")
    assert answered.error is None and all(body["min_tokens"] == 1 for body in server.bodies)


# --- the failures analysis --------------------------------------------------------------------------


def record(**changes: Any) -> SampleRecord:
    base = SampleRecord(
        sample_id="niah|L1024|D0.5000|S0", task="niah", length=1024, depth=0.5, sample=0, seed=0,
        prompt_sha256="0" * 64, target_tokens=1024, actual_tokens=1024, needle_kind="number",
        needle_token_offsets=(500,), needle_depths=(0.5,), question="Which number?", answers=("1234567",),
        output="", finish_reason="stop", score=0.0, matched=(), scoring="contains", latency_s=0.1,
        beyond_window=False,
    )  # fmt: skip
    return dataclasses.replace(base, **changes)


@pytest.mark.parametrize(
    ("changes", "kind"),
    [
        ({"first_token": "end"}, "stopped"),
        ({"first_token": "forced", "output": " \n"}, "empty"),  # answered, in whitespace
        ({"first_token": "unforced", "output": " "}, "empty"),
        ({"first_token": None}, "empty"),  # a record that does not say why (schema 7 and before)
        ({"first_token": "end", "beyond_window": True}, "beyond_window"),  # the first that applies
        ({"first_token": "end", "error": "backend_error: HTTP 500"}, "error"),
        ({"first_token": "forced", "output": "7654321"}, "wrong_answer"),
    ],
)
def test_stopped_before_any_token_is_a_failure_of_its_own(changes: dict[str, Any], kind: str) -> None:
    assert failure_kind(record(**changes)) == kind


def test_stopped_and_empty_are_counted_apart() -> None:
    samples = [record(first_token="end"), record(first_token="end"), record(output=" ", first_token="forced")]
    counts = failure_counts(samples)
    assert (counts["stopped"], counts["empty"]) == (2, 1)
    assert FAILURE_KINDS.index("stopped") == FAILURE_KINDS.index("empty") - 1
