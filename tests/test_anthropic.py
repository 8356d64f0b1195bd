"""The anthropic backend (the official SDK's client, carried by fathom's HTTP window) against a fake
Messages API on 127.0.0.1 (messages_api): never the real service. Runs through the CLI, the request's
shape, the provider's counts as the records' lengths, thinking kept out of the answer, each fault,
the refusals before any work, and the key in no file nor message."""

from __future__ import annotations

import html
import json
import re
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from http_faults import KEY, request
from messages_api import MessagesServer, counted, keyed_messages_serving

from fathom.backends.anthropic import AnthropicBackend
from fathom.backends.base import Request
from fathom.cli import SAMPLE_ERRORS, main
from fathom.errors import FathomError, MissingExtraError, SpecError
from fathom.prompts.builder import ChatPrompt
from fathom.records import THINKING
from fathom.registry import BACKEND

pytest.importorskip("anthropic")  # the extra; CI installs it

SWEEP = ("--lengths", "1k,2k", "--depths", "2", "--samples", "1", "--no-control", "--no-progress")


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[MessagesServer]:
    with keyed_messages_serving(monkeypatch) as server:
        yield server


def run_cli(model: str, folder: Path, *args: str) -> int:
    return main(["run", "niah", "--model", model, "--run-dir", str(folder), *SWEEP, *args])


def records(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (folder / "samples.jsonl").read_text().splitlines()]


def assert_key_nowhere(folder: Path, *outputs: str) -> None:
    for path in folder.rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path
    for output in outputs:
        assert KEY not in output


def test_a_run_records_the_providers_counts_and_says_how_close_they_came(
    fake: MessagesServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fake.scripts = [["429", "529"], ["500"]]  # each retried: Retry-After of 1 s, then success
    folder = tmp_path / "run"
    assert run_cli(f"anthropic:claude-test@{fake.root}?timeout=5&retries=3", folder) == 0
    assert fake.bad == []
    rows = records(folder)
    assert len(rows) == 4 and all(r["score"] == 1.0 and r["error"] is None for r in rows)
    assert all(r["finish_reason"] == "stop" for r in rows)
    # Each record's length is the provider's count (the fake's: a token per 4 characters), not the
    # stand-in's (cl100k_base, which built each prompt at its target exactly).
    assert sorted(r["actual_tokens"] for r in rows) == sorted(fake.counts[1:])  # [0]: the probe's
    assert all(r["actual_tokens"] != r["target_tokens"] for r in rows)
    assert fake.actions() == {"ok": 4, "429": 1, "529": 1, "500": 1}
    # Retry-After: 1 was honoured, not replaced by the (tiny) backoff: the 429's prompt came back
    # about a second later (a loaded machine only adds to it).
    (refused, overloaded) = [when for _, action, when in fake.arrivals if action in ("429", "529")]
    assert overloaded - refused >= 0.9
    out = capsys.readouterr()
    # summary.json says so, from the records: per length, the least and largest ratio of the
    # provider's count to the target (here a token per 4 characters against cl100k's ~4.5: above 1).
    counted = json.loads((folder / "summary.json").read_text())["provider_counts"]
    assert counted["counted_by"] == "provider: count_tokens (prompts built with cl100k_base)"
    ratios = {n: sorted(r["actual_tokens"] / n for r in rows if r["length"] == n) for n in (1024, 2048)}
    assert [(c["length"], c["prompts"], c["ratio_min"], c["ratio_max"]) for c in counted["lengths"]] == [
        (n, 2, round(low, 4), round(high, 4)) for n, (low, high) in ratios.items()
    ]
    assert counted["prompts"] == 4 and all(c["ratio_min"] > 1 for c in counted["lengths"])
    (said,) = [line for line in out.out.splitlines() if line.startswith("lengths are the provider's")]
    assert said.startswith(
        "lengths are the provider's counts, by count_tokens (prompts built with cl100k_base): 4 prompts "
        "came to "
    )
    assert f'<p class="lengths">{html.escape(said)}</p>' in (folder / "report.html").read_text()

    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["backend"]["exact_lengths"] is False and manifest["backend"]["input"] == "chat"
    settings = manifest["identity"]["backend"]["settings"]
    assert settings["counted_by"] == "provider: count_tokens (prompts built with cl100k_base)"
    assert settings["thinking"] == "default" and settings["max_tokens"] == "each sample's max_new_tokens"
    assert "thinking" not in fake.bodies[0]  # the model's default: none asked for
    transport = manifest["backend"]["transport"]
    assert transport == {
        "concurrency": 8,
        "timeout": 5.0,
        "retries": 3,
        "max_wait": 1800.0,
        "api_key_env": "ANTHROPIC_API_KEY",
    }
    assert transport.keys() == BACKEND.entry("anthropic").transport
    assert manifest["identity"]["spec"]["model"] == f"anthropic:claude-test@{fake.root}"
    assert fake.auth == {KEY}
    assert_key_nowhere(folder, out.out, out.err)


def test_an_exhausted_sample_fails_alone_and_is_redone_on_resume_with_other_transport(
    fake: MessagesServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fake.scripts = [["500", "500"]]  # as many faults as attempts
    folder = tmp_path / "run"
    assert run_cli(f"anthropic:claude-test@{fake.root}?retries=2&concurrency=1", folder) == SAMPLE_ERRORS
    (failed,) = [r for r in records(folder) if r["error"] is not None]
    assert failed["error"] == "backend_error: HTTP 500 (2 attempts)"
    assert failed["actual_tokens"] == failed["target_tokens"]  # no answer: the stand-in's count
    # The failed sample's stand-in count is no provider's: left out of how close the counts came.
    assert json.loads((folder / "summary.json").read_text())["provider_counts"]["prompts"] == 3
    # How requests travel is outside the identity: the run resumes with other settings.
    assert run_cli(f"anthropic:claude-test@{fake.root}?retries=5&concurrency=3", folder) == 0
    rows = records(folder)
    assert len(rows) == 5 and rows[4]["sample_id"] == failed["sample_id"] and rows[4]["error"] is None
    assert "samples written: 1, already done: 3" in capsys.readouterr().out
    # The resumed run's summary counts the four, from the records; so does fathom report, made anew.
    summary = folder / "summary.json"
    assert json.loads(summary.read_text())["provider_counts"]["prompts"] == 4
    summary.unlink()
    assert main(["report", str(folder)]) == 0
    assert json.loads(summary.read_text())["provider_counts"]["prompts"] == 4
    assert "lengths are the provider's counts, by count_tokens" in capsys.readouterr().out


def test_thinking_is_sent_with_its_budget_and_kept_out_of_the_answer(fake: MessagesServer) -> None:
    backend = AnthropicBackend(f"claude-test@{fake.root}?thinking=1024&max_output=2048", "cl100k_base")
    (completion,) = backend.generate([request()])
    assert completion.error is None and fake.bad == []
    assert completion.text == " One of the special magic numbers for a-b is: 1234567."  # no thinking in it
    (body,) = fake.bodies
    # max_tokens: the thinking budget plus the request's answer budget (8).
    assert body["max_tokens"] == 1032 and body["thinking"] == {"type": "enabled", "budget_tokens": 1024}
    assert body["system"] == "Be brief."
    assert completion.prompt_tokens == counted(body)
    assert backend.settings()["thinking"] == 1024


def test_a_multi_turn_prompt_goes_as_its_messages_in_order_and_is_counted_whole(fake: MessagesServer) -> None:
    turns = (("user", "Write a poem about tapirs."), ("assistant", "Tapirs wander."))
    chat = ChatPrompt("Be brief.", "Repeat the poem about tapirs.", "Answer:", turns)
    asked = Request("m1", np.zeros(12, dtype=np.int32), 8, chat=chat)
    (completion,) = AnthropicBackend(f"claude-test@{fake.root}", "cl100k_base").generate([asked])
    assert completion.error is None and fake.bad == []
    (body,) = fake.bodies
    assert body["system"] == "Be brief." and body["messages"] == [
        {"role": "user", "content": "Write a poem about tapirs."},
        {"role": "assistant", "content": "Tapirs wander."},
        {"role": "user", "content": "Repeat the poem about tapirs."},
    ]
    # The fake's count: (9 + 26 + 14 + 29 characters) // 4 = 19 tokens, the record's length.
    assert completion.prompt_tokens == 19


def test_thinking_off_is_sent_as_disabled(fake: MessagesServer) -> None:
    backend = AnthropicBackend(f"claude-test@{fake.root}?thinking=off", "cl100k_base")
    (completion,) = backend.generate([request()])
    assert completion.error is None and fake.bad == []
    (body,) = fake.bodies
    assert body["thinking"] == {"type": "disabled"} and body["max_tokens"] == 8


def test_an_answer_past_max_output_is_refused_before_it_is_asked(fake: MessagesServer) -> None:
    backend = AnthropicBackend(f"claude-test@{fake.root}?thinking=2040&max_output=2048", "cl100k_base")
    (completion,) = backend.generate([request()])  # 2040 + 8 fits: 2048
    assert completion.error is None
    backend = AnthropicBackend(f"claude-test@{fake.root}?thinking=2041&max_output=2048", "cl100k_base")
    (completion,) = backend.generate([request()])  # 2041 + 8: one past
    assert completion.error == "rejected: thinking 2041 + answer 8 tokens exceed max_output 2048"
    assert len(fake.bodies) == 1


@pytest.mark.parametrize(
    ("fault", "reason"),
    [
        ("hang", "backend_error: timeout: no complete reply within 2 s (1 attempt)"),
        ("429", "backend_error: HTTP 429 (1 attempt)"),
        ("529", "backend_error: HTTP 529 (1 attempt)"),
        ("500", "backend_error: HTTP 500 (1 attempt)"),
        ("malformed", "backend_error: malformed JSON in a reply (1 attempt)"),
        ("huge", "rejected: the reply is over 8 MiB"),
        ("400", "rejected: HTTP 400: no: 400"),
    ],
)
def test_each_fault_is_named_in_the_error(fake: MessagesServer, fault: str, reason: str) -> None:
    fake.scripts = [[fault]]
    backend = AnthropicBackend(f"claude-test@{fake.root}?retries=1&timeout=2", "cl100k_base")
    (completion,) = backend.generate([request()])
    assert completion.error is not None and completion.error.startswith(reason), completion.error
    assert completion.text == "" and completion.finish_reason == "error"


def test_overload_retried_within_max_wait_and_max_wait_bounds_every_attempt(fake: MessagesServer) -> None:
    """The HTTP backend's deadlines: a 529's Retry-After (1 s) past max_wait (0.5 s) ends the request
    after one attempt; a server that hangs costs each attempt its timeout, and all of them max_wait."""
    fake.scripts = [["529"] * 100]
    backend = AnthropicBackend(
        f"claude-test@{fake.root}?retries=100&max_wait=0.5&concurrency=1", "cl100k_base"
    )
    (overloaded,) = backend.generate([request()])
    assert overloaded.error == "backend_error: HTTP 529 (1 attempt)" and fake.actions() == {"529": 1}
    fake.scripts = [["hang"] * 100]
    started = time.perf_counter()
    backend = AnthropicBackend(
        f"claude-test@{fake.root}?timeout=0.6&retries=100&max_wait=1&concurrency=1", "cl100k_base"
    )
    (hung,) = backend.generate([request("again")])
    timed_out = re.fullmatch(
        r"backend_error: timeout: no complete reply within ([\d.]+) s \((\d+) attempts?\)", hung.error or ""
    )
    assert timed_out is not None, hung.error
    # The second attempt has what the first left of max_wait: at most 0.4 s; never a third.
    assert int(timed_out[2]) in (1, 2) and time.perf_counter() - started < 10


def test_a_reply_cut_inside_its_thinking_is_still_thinking(fake: MessagesServer) -> None:
    fake.scripts = [["think-cut"]]
    backend = AnthropicBackend(f"claude-test@{fake.root}?thinking=1024&max_output=2048", "cl100k_base")
    (completion,) = backend.generate([request()])
    # The thinking block alone, cut at max_tokens: no answer, 19 tokens of reasoning (cl100k's count,
    # as test_thinking counts the fake's thinking).
    assert (completion.text, completion.finish_reason, completion.reasoning_tokens) == ("", THINKING, 19)
    assert completion.error is None and fake.bad == []


def test_max_tokens_is_a_length_finish(fake: MessagesServer) -> None:
    fake.scripts = [["cut"]]
    (completion,) = AnthropicBackend(f"claude-test@{fake.root}", "cl100k_base").generate([request()])
    assert completion.finish_reason == "length" and completion.error is None


def test_the_key_is_scrubbed_from_answers_and_refusals(fake: MessagesServer) -> None:
    fake.scripts = [["echo"], ["refuse-echo"]]
    backend = AnthropicBackend(f"claude-test@{fake.root}?concurrency=1", "cl100k_base")
    echoed, refused = backend.generate([request("first"), request("second")])
    assert echoed.text == "You sent [API key removed]."
    assert refused.error == "rejected: HTTP 400: bad request; Authorization: Bearer [API key removed]"


def test_a_refused_key_stops_the_run_with_one_line(
    fake: MessagesServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fake.scripts = [["401"]]
    assert run_cli(f"anthropic:claude-test@{fake.root}?concurrency=1", tmp_path / "run") == 2
    err = capsys.readouterr().err
    assert err.strip().splitlines() == [
        "fathom: error: the server refused the API key in $ANTHROPIC_API_KEY (HTTP 401): set "
        "$ANTHROPIC_API_KEY to a key it accepts"
    ]
    assert_key_nowhere(tmp_path, err)


@pytest.mark.parametrize(
    ("model", "message"),
    [
        ("claude-test@{root}?thinking=1023", "anthropic setting 'thinking' must be default, off, or a whole"),
        ("claude-test@{root}?thinking=0", "of at least 1024 (the API's least budget_tokens), not '0'"),
        (
            "claude-test@{root}?thinking=32000",
            "anthropic setting 'thinking' must be below max_output (32000)",
        ),
        ("claude-test@{root}?thinking=4096&max_output=4096", "must be below max_output (4096)"),
        ("claude-test@{root}?temperature=1", "anthropic has no setting 'temperature=1'"),
        ("claude-test@{root}?api_key_env=NO_SUCH_KEY", "needs an API key in $NO_SUCH_KEY"),
        ("claude-test@http://user:pw@127.0.0.1:1", "put no credentials in the URL: give the key in"),
        ("claude-test@{root}/missing", "(HTTP 404): check that the URL is the API's root"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_no_run_folder(
    fake: MessagesServer, tmp_path: Path, capsys: pytest.CaptureFixture[str], model: str, message: str
) -> None:
    folder = tmp_path / "run"
    assert run_cli("anthropic:" + model.format(root=fake.root), folder) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and message in err, err
    assert not folder.exists() and fake.bodies == []


def test_a_server_that_cannot_count_and_a_dead_one_are_refused(
    fake: MessagesServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fake.count_status = 404
    assert run_cli(f"anthropic:claude-test@{fake.root}", tmp_path / "a") == 2
    assert "/v1/messages/count_tokens (HTTP 404)" in capsys.readouterr().err
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        free = probe.getsockname()[1]
    with pytest.raises(FathomError, match=f"no server answers at http://127.0.0.1:{free}"):
        AnthropicBackend(f"claude-test@http://127.0.0.1:{free}", "cl100k_base")
    assert not (tmp_path / "a").exists()


def test_a_missing_key_is_refused_before_any_request(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    # A port nothing listens on: the refusal comes before any connection is tried.
    with pytest.raises(SpecError, match=r"needs an API key in \$ANTHROPIC_API_KEY"):
        AnthropicBackend("claude-test@http://127.0.0.1:9", "auto")


def test_without_the_sdk_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setitem(sys.modules, "anthropic", None)  # import anthropic: ImportError
    with pytest.raises(
        MissingExtraError, match=r"the anthropic SDK is not installed; install it with: .*\[anthropic\]"
    ):
        AnthropicBackend("claude-test@http://127.0.0.1:9", "auto")
