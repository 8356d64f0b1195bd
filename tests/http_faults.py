"""A scripted OpenAI-compatible server on 127.0.0.1, for the openai backend's tests: it answers like a
model that finds the needle, after the faults scripted for each prompt (timeouts, hangs, drips,
429, 500, malformed, truncated and oversized bodies, resets, a refused or echoed key)."""

from __future__ import annotations

import hashlib
import json
import re
import socket
import struct
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np
import pytest

from fathom.backends import jsonhttp
from fathom.backends.base import Request
from fathom.prompts import ChatPrompt

KEY = "sk-test-PLANTED-0b7f3c9e1d"
NEEDLE = re.compile(r"One of the special magic numbers for [\w-]+ is: \d+\.")
DRIP_GAP = 0.2  # seconds between the bytes of a dripped reply
# A held request's longest wait for release, should a test forget it, or a client never leave it: far
# past what a loaded machine takes to get on to the release (seconds), so only a hang reaches it.
HELD_AT_MOST = 120.0


class FaultServer(ThreadingHTTPServer):
    """Prompts get the scripts in ``scripts`` in the order they first arrive (each a list of
    faults, one per attempt, then success), so outcomes do not depend on how requests interleave.

    "hang" holds a request, sending nothing, until ``release`` is set (``held`` is set meanwhile,
    ``let_go`` once a held request's wait is over): the test decides when it ends, never a clock.
    """

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), FaultHandler)
        self.scripts: list[list[str]] = []
        self.assigned: dict[str, list[str]] = {}
        self.attempts: Counter[str] = Counter()
        self.arrivals: list[tuple[str, str, float]] = []  # prompt digest, behaviour, time
        self.bodies: list[dict[str, Any]] = []
        self.auth: set[str | None] = set()
        self.refuse_after: int | None = None  # 401 once this many completions succeeded
        self.retry_after = "1"  # the Retry-After of 429 and 500
        self.answered = 0
        self.dripped = 0  # bytes sent by drips
        self.held, self.release, self.let_go = threading.Event(), threading.Event(), threading.Event()
        self.lock = threading.Lock()
        # Its model's first choice is to end: it answers nothing unless min_tokens forces a token,
        # which the server "honours", "refuses" (HTTP 400, as OpenAI's API does) or "ignores".
        self.ends_at_once = False
        self.min_tokens = "honours"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"

    def behaviour(self, body: dict[str, Any]) -> tuple[str, str]:
        prompt = json.dumps(body.get("prompt", body.get("messages")))
        digest = hashlib.sha256(prompt.encode()).hexdigest()
        with self.lock:
            self.bodies.append(body)
            if digest not in self.assigned:
                self.assigned[digest] = self.scripts.pop(0) if self.scripts else []
            script = self.assigned[digest]
            attempt = self.attempts[digest]
            self.attempts[digest] += 1
            action = script[attempt] if attempt < len(script) else "ok"
            if action == "ok" and self.refuse_after is not None and self.answered >= self.refuse_after:
                action = "401"
            self.answered += action == "ok"
            self.arrivals.append((digest, action, time.monotonic()))
        return action, prompt

    def actions(self) -> Counter[str]:
        return Counter(action for _, action, _ in self.arrivals)

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # clients that timed out leave broken pipes behind: expected here


def word_logprob(word: str) -> float:
    """The log-probability that the scripted server gives each of its tokens (words here)."""
    return -len(word) / 10


def echoed(prompt: str, action: str) -> dict[str, Any]:
    """The prompt echoed in OpenAI's legacy logprobs shape, one token per word (with the space
    before it), then one generated token; ``action`` may break it as servers do."""
    # vLLM lists the BOS that it puts before the prompt, and counts its text in the offsets.
    words = [*["<|begin_of_text|>"] * (action == "bos"), *re.findall(r"\s*\S+", prompt), " more"]
    offsets = [sum(map(len, words[:i])) for i in range(len(words))]
    values: list[float | None] = [None, *map(word_logprob, words[1:])]  # OpenAI gives the first none
    if action == "none":
        values[2] = None
    logprobs = {"tokens": words, "text_offset": offsets, "token_logprobs": values, "top_logprobs": None}
    if action == "shifted":  # llama-cpp-python without BOS: the new token has no entry
        logprobs = {key: value[:-1] if value else value for key, value in logprobs.items()}
    choice = {"text": prompt + " more", "logprobs": None if action == "nologprobs" else logprobs}
    return {
        "choices": [{**choice, "finish_reason": "length"}],
        "usage": {"prompt_tokens": len(words) - 1, "completion_tokens": 1},
    }


def answer(text: str, chat: bool, finish: str = "stop", tokens: int = 12) -> bytes:
    choice = {"message": {"role": "assistant", "content": text}} if chat else {"text": text}
    reply = {
        "choices": [{**choice, "finish_reason": finish}],
        "usage": {"prompt_tokens": 1000, "completion_tokens": tokens},
    }
    return json.dumps(reply).encode()


class FaultHandler(BaseHTTPRequestHandler):
    server: FaultServer

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self.server.auth.add(self.headers.get("Authorization"))
        self._send(200, {"object": "list", "data": [{"id": "m", "object": "model"}]})

    def do_POST(self) -> None:
        auth = self.headers.get("Authorization")
        self.server.auth.add(auth)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if not self.path.startswith("/v1/"):
            return self._send(404, {"error": {"message": "Not Found"}})
        action, prompt = self.server.behaviour(body)
        chat = self.path.endswith("/chat/completions")
        if action == "hang":
            self.server.held.set()
            self.server.release.wait(HELD_AT_MOST)
            self.server.let_go.set()
        elif action == "reset":
            # Linger 0: closing sends a TCP reset instead of a response.
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.close_connection = True
            return None
        elif action in ("429", "500", "401", "400"):
            status = int(action)
            message = "This model's maximum context length is 4096 tokens" if status == 400 else "no"
            return self._send(
                status, {"error": {"message": message}}, {"Retry-After": self.server.retry_after}
            )
        elif action == "refuse-echo":  # a refusal that quotes the request's headers
            return self._send(400, {"error": {"message": f"bad request; Authorization: {auth}"}})
        elif action == "echo":  # an answer that quotes them
            return self._raw(answer(f"You sent {auth}.", chat, finish=str(auth)))
        elif action == "malformed":
            return self._raw(b'{"choices": [{"text": "One of')
        elif action == "deep":  # valid JSON's start, nested past any parser's stack
            return self._raw(b"[" * 200_000)
        elif action == "gzip":  # says gzip, is not
            return self._raw(answer(" 1234567.", chat), {"Content-Encoding": "gzip"})
        elif action == "huge":  # a well-formed answer past the client's cap on replies
            return self._raw(answer(" " + "x" * (jsonhttp.MAX_REPLY_BYTES + 1), chat))
        elif action == "missing":
            return self._send(200, {"id": "cmpl-1", "object": "text_completion"})
        if "min_tokens" in body and self.server.min_tokens == "refuses":
            message = "Unrecognized request argument supplied: min_tokens"
            return self._send(400, {"error": {"message": message, "type": "invalid_request_error"}})
        if self.server.ends_at_once and not ("min_tokens" in body and self.server.min_tokens == "honours"):
            return self._raw(answer("", chat, tokens=1))  # its one token: the end
        if body.get("echo"):
            return self._send(200, echoed(body["prompt"], action))
        found = NEEDLE.search(prompt)
        data = answer(" " + (found[0] if found else "I do not know."), chat)
        if action == "truncated":  # the connection closes mid-reply
            return self._raw(data[: len(data) // 2], length=len(data))
        if action == "drip":
            return self._drip(data)
        return self._raw(data)

    def _send(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        self._raw(json.dumps(payload).encode(), headers, status=status)

    def _raw(
        self, data: bytes, headers: dict[str, str] | None = None, length: int | None = None, status: int = 200
    ) -> None:
        """A reply whose Content-Length may promise more than the body has: a truncated reply."""
        self._head(status, len(data) if length is None else length, headers)
        self.wfile.write(data)

    def _head(self, status: int, length: int, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for name, value in {"Content-Type": "application/json", **(headers or {})}.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(length))
        self.end_headers()

    def _drip(self, data: bytes) -> None:
        """The reply a byte every DRIP_GAP seconds, each byte flushed, until the client leaves or
        the test ends. The first byte goes with the head: a reply under way, however slow the machine."""
        self._head(200, len(data))
        for byte in data:
            self.wfile.write(bytes([byte]))
            self.wfile.flush()
            with self.server.lock:
                self.server.dripped += 1
            if self.server.release.wait(DRIP_GAP):
                return


def request(text: str = "One of the special magic numbers for a-b is: 1234567. Question?") -> Request:
    chat = ChatPrompt("Be brief.", text, "Answer:")
    return Request("s1", np.zeros(12, dtype=np.int32), 8, text=text, chat=chat)


@contextmanager
def serving(kind: type[FaultServer] = FaultServer) -> Iterator[FaultServer]:
    fault = kind()
    thread = threading.Thread(target=fault.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield fault
    finally:
        fault.release.set()  # held requests and drips end
        fault.shutdown()
        fault.server_close()
        thread.join(timeout=5)


@pytest.fixture
def server() -> Iterator[FaultServer]:
    with serving() as fault:
        yield fault


@pytest.fixture
def fast_and_keyed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Backoff of milliseconds, and a key the server must never echo into a record."""
    monkeypatch.setattr(jsonhttp, "BACKOFF_BASE", 0.001)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")  # a proxy from the environment must not see these
