"""The openai backend against a hostile or broken server (http_faults, on 127.0.0.1): every attempt
ends by its deadline however the server stalls, every request by max_wait, no reply fills memory,
an echoed key reaches no record, and streamed answers come as they finish.

No verdict depends on the machine's speed. A deadline is shown by what it ended (a timeout's error,
an attempt the server saw, a request the server still holds when the client has let it go), and by
a lower bound on the wait; an upper bound, where there is one, is ten times the deadline or half
what the wrong wait would take, far past anything a loaded machine adds. Where a test needs one
request to finish before another, the server holds the other until the test releases it: no race
on a clock.
"""

from __future__ import annotations

import re
import signal
import threading
import time

import pytest
from http_faults import HELD_AT_MOST, KEY, FaultServer, request

from fathom.backends.jsonhttp import KEY_REMOVED, KeyRefused
from fathom.backends.openai import OpenAIBackend
from fathom.records import Completion

BOUND = 10  # times a deadline that only a wait past it reaches, however loaded the machine
# Longer than the server holds a request: a client that waits for its reply gets it (and the test
# sees ``let_go``) rather than timing out.
NEVER = HELD_AT_MOST + 60
TIMED_OUT = re.compile(r"backend_error: timeout: no complete reply within ([\d.]+) s \((\d+) attempts?\)")


# The scripted server, and a fast backoff with an API key in the environment, for every test here.
pytestmark = pytest.mark.usefixtures("fast_and_keyed")


def backend(server: FaultServer, options: str) -> OpenAIBackend:
    return OpenAIBackend(f"m@{server.url}?{options}", "cl100k_base")


def only(server: FaultServer, script: list[str], options: str) -> tuple[Completion, float]:
    """One request, whose attempts meet ``script``; its completion and the time it took."""
    server.scripts = [script]
    api = backend(server, options)
    started = time.monotonic()
    (completion,) = api.generate([request()])
    return completion, time.monotonic() - started


def no_http_threads() -> bool:
    return not any(thread.name == "fathom-http" for thread in threading.enumerate())


@pytest.mark.parametrize("fault", ["500", "truncated", "reset"])
def test_a_failed_attempt_is_retried_and_the_next_answers(server: FaultServer, fault: str) -> None:
    server.retry_after = "0"
    completion, _ = only(server, [fault], "retries=2")
    assert completion.error is None and completion.text.strip().startswith("One of the special")
    assert server.actions() == {fault: 1, "ok": 1}


@pytest.mark.parametrize(
    ("fault", "named"),
    [
        ("truncated", "RemoteProtocolError: peer closed connection without sending complete message body"),
        ("reset", "RemoteProtocolError: Server disconnected"),
        ("malformed", "malformed JSON in a reply of 29 bytes"),
        ("deep", "malformed JSON in a reply of 200000 bytes"),
        ("gzip", "DecodingError: "),
    ],
)
def test_a_broken_reply_is_named_in_the_error_once_attempts_run_out(
    server: FaultServer, fault: str, named: str
) -> None:
    completion, _ = only(server, [fault] * 2, "retries=2")
    assert completion.error is not None and completion.error.startswith(f"backend_error: {named}")
    assert completion.error.endswith("(2 attempts)") and server.actions() == {fault: 2}


def test_a_429_waits_as_long_as_retry_after_says(server: FaultServer) -> None:
    server.retry_after = "0.5"
    completion, _ = only(server, ["429"], "retries=2")
    assert completion.error is None
    (_, _, refused), (_, _, answered) = server.arrivals
    assert answered - refused >= 0.5  # not the milliseconds of the tests' backoff


def test_a_retry_after_past_max_wait_ends_the_request_at_once(server: FaultServer) -> None:
    server.retry_after = "3600"
    # Waiting out max_wait (or the Retry-After) would take 60 s or more: at once is far less.
    completion, seconds = only(server, ["429"], "retries=5&max_wait=60")
    assert completion.error == "backend_error: HTTP 429 (1 attempt)" and seconds < 60 / 2


def test_a_silent_server_costs_each_attempt_its_timeout(server: FaultServer) -> None:
    completion, seconds = only(server, ["hang"] * 2, "timeout=0.5&retries=2")
    assert completion.error == "backend_error: timeout: no complete reply within 0.5 s (2 attempts)"
    assert 1.0 <= seconds < BOUND * 1.0
    assert server.actions() == {"hang": 2} and not server.let_go.is_set()


def test_max_wait_bounds_a_request_across_all_its_attempts(server: FaultServer) -> None:
    completion, seconds = only(server, ["hang"] * 100, "timeout=0.6&retries=100&max_wait=1")
    timed_out = TIMED_OUT.fullmatch(completion.error or "")
    assert timed_out is not None, completion.error
    deadline, attempts = float(timed_out[1]), int(timed_out[2])
    # The second attempt has what the first left of max_wait: at most 0.4 s. On a machine slow
    # enough to spend that between them there is no second attempt; never a third.
    assert attempts in (1, 2) and deadline <= (0.6 if attempts == 1 else 0.4)
    assert server.actions() == {"hang": attempts}
    assert 1.0 <= seconds < BOUND * 1.0


def test_a_reply_dripped_a_byte_at_a_time_is_cut_at_the_timeout(server: FaultServer) -> None:
    # The reply would take over 20 s at a byte per 0.2 s, and no single read waits 1 s.
    completion, seconds = only(server, ["drip"], "timeout=1&retries=1")
    assert completion.error == "backend_error: timeout: no complete reply within 1 s (1 attempt)"
    assert 1.0 <= seconds < BOUND * 1.0
    assert server.dripped >= 1  # it was sending when the client cut it


def test_an_oversized_reply_is_refused_for_its_request_and_not_retried(server: FaultServer) -> None:
    completion, _ = only(server, ["huge"], "retries=3")
    assert completion.error is not None and completion.error.startswith("rejected: the reply is over 8 MiB")
    assert server.actions() == {"huge": 1}


def test_a_key_the_server_echoes_reaches_no_completion(server: FaultServer) -> None:
    server.scripts = [["echo"], ["refuse-echo"]]
    api = backend(server, "concurrency=1")  # one at a time: the scripts go out in order
    echoed, refused = api.generate([request("first"), request("second")])
    assert server.auth == {f"Bearer {KEY}"}  # the server had the key to echo
    assert echoed.text == f"You sent Bearer {KEY_REMOVED}."
    assert echoed.finish_reason == f"Bearer {KEY_REMOVED}"
    assert refused.error == f"rejected: HTTP 400: bad request; Authorization: Bearer {KEY_REMOVED}"
    assert KEY not in repr((echoed, refused))


def test_stream_yields_each_completion_as_it_finishes(server: FaultServer) -> None:
    server.scripts = [["hang"]]  # for whichever request arrives first
    api = backend(server, f"concurrency=2&timeout={NEVER}")
    stream = api.stream([request("one"), request("two")])
    first, _ = next(stream)
    assert server.held.wait(HELD_AT_MOST)  # the other is held until released
    held = 0 if server.bodies[0]["prompt"] == "one" else 1
    assert first == 1 - held
    server.release.set()
    assert [index for index, _ in stream] == [held]


def test_stream_yields_every_index_exactly_once(server: FaultServer) -> None:
    server.scripts = [["500"], ["400"], ["malformed", "malformed"], ["truncated"], [], ["429"]] * 2
    server.retry_after = "0"
    api = backend(server, "concurrency=3&retries=2")
    done = list(api.stream([request(f"question {i}") for i in range(12)]))
    assert sorted(index for index, _ in done) == list(range(12))
    errors = [completion.error for _, completion in done if completion.error]
    assert (
        sorted(errors)
        == ["backend_error: malformed JSON in a reply of 29 bytes (2 attempts)"] * 2
        + ["rejected: HTTP 400: This model's maximum context length is 4096 tokens"] * 2
    )


def test_closing_the_stream_cancels_the_requests_in_flight(server: FaultServer) -> None:
    server.scripts = [["hang"]]
    api = backend(server, f"concurrency=2&timeout={NEVER}")
    stream = api.stream([request("one"), request("two")])
    next(stream)  # the one not held
    assert server.held.wait(HELD_AT_MOST)
    stream.close()
    # Closed while the server still holds the other: the client did not wait for its reply.
    assert not server.let_go.is_set() and no_http_threads()


def test_a_fatal_error_stops_the_requests_in_flight(server: FaultServer) -> None:
    server.scripts = [["hang"], ["401"]]
    api = backend(server, f"concurrency=2&timeout={NEVER}")
    with pytest.raises(KeyRefused, match="refused the API key in \\$OPENAI_API_KEY"):
        api.generate([request("one"), request("two")])
    assert not server.let_go.is_set() and no_http_threads()


def test_ctrl_c_stops_the_requests_in_flight(server: FaultServer) -> None:
    server.scripts = [["hang"]]
    api = backend(server, f"timeout={NEVER}")

    def interrupt_once_held() -> None:
        # To the main thread itself, as a terminal's Ctrl-C reaches a process whose other threads
        # are busy: os.kill lets the kernel hand the signal to any thread, and one taken by another
        # thread leaves the main thread asleep in its wait, raising nothing until the reply comes.
        if server.held.wait(HELD_AT_MOST):
            signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)

    threading.Thread(target=interrupt_once_held, daemon=True).start()
    with pytest.raises(KeyboardInterrupt):
        api.generate([request()])
    assert not server.let_go.is_set() and no_http_threads()
