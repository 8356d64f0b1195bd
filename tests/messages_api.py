"""A fake of Anthropic's Messages API on 127.0.0.1, for the anthropic backend's tests: it checks each
request's shape (the key as SDK 2.14.0 sends it, its anthropic-version, the body's fields), counts prompts at
``count_tokens`` (a token per 4 characters of the messages and system prompt, so tests compute it by
hand), and answers like a model that finds the needle, with a thinking block before the text when
thinking is asked, after the faults scripted for each prompt (http_faults' scripting: 429 with
Retry-After, 529 overloaded, 500, malformed JSON, a hang, an over-long body, a refusal, a key echoed,
a reply cut inside its thinking)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from http_faults import HELD_AT_MOST, KEY, NEEDLE, FaultHandler, FaultServer, serving

from fathom.backends import jsonhttp

THINKING = "Let me look for the number. It is 9999999, no: keep looking."
# What SDK 2.14.0 sends: its API version, and the key as a bearer token (not x-api-key, as older SDKs).
VERSION = "2026-10-21"


def counted(body: dict[str, Any]) -> int:
    """The fake's count of a prompt: a token per 4 characters of its messages' and system's text."""
    text = (body.get("system") or "") + "".join(m["content"] for m in body["messages"])
    return max(1, len(text) // 4)


class MessagesServer(FaultServer):
    """FaultServer's scripts, applied to /v1/messages (count_tokens always answers, unless
    ``count_status`` says otherwise); ``bad`` collects what was wrong with any request's shape."""

    def __init__(self) -> None:
        super().__init__()
        self.RequestHandlerClass = MessagesHandler
        self.count_status = 200
        self.counts: list[int] = []  # each count_tokens reply's, in order
        self.bad: list[str] = []

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class MessagesHandler(FaultHandler):
    server: MessagesServer

    def do_POST(self) -> None:
        key = self.headers.get("Authorization", "").removeprefix("Bearer ") or None
        self.server.auth.add(key)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self._check(key, body)
        if self.path == "/v1/messages/count_tokens":
            if self.server.count_status != 200:
                return self._send(self.server.count_status, _error("not_found_error", "Not found"))
            self.server.counts.append(counted(body))
            return self._send(200, {"input_tokens": counted(body)})
        if self.path != "/v1/messages":
            return self._send(404, _error("not_found_error", "Not found"))
        action, prompt = self.server.behaviour(body)
        if action == "hang":
            self.server.held.set()
            self.server.release.wait(HELD_AT_MOST)
            self.server.let_go.set()
        elif action in ("429", "529", "500", "401", "400"):
            kind = {"429": "rate_limit_error", "529": "overloaded_error"}.get(action, "api_error")
            headers = {"retry-after": self.server.retry_after}
            return self._send(int(action), _error(kind, f"no: {action}"), headers)
        elif action == "refuse-echo":  # a refusal that quotes the request's key
            return self._send(
                400, _error("invalid_request_error", f"bad request; Authorization: Bearer {key}")
            )
        elif action == "malformed":
            return self._raw(b'{"content": [{"type": "text", "text": "One of')
        elif action == "huge":
            return self._raw(_reply(" " + "x" * (jsonhttp.MAX_REPLY_BYTES + 1), body))
        elif action == "think-cut":  # max_tokens reached inside the thinking: no text block at all
            return self._raw(_reply(None, body, "max_tokens"))
        found = NEEDLE.search(prompt)
        text = f"You sent {key}." if action == "echo" else " " + (found[0] if found else "I do not know.")
        return self._raw(_reply(text, body, "max_tokens" if action == "cut" else "end_turn"))

    def _check(self, key: str | None, body: dict[str, Any]) -> None:
        bad = self.server.bad
        if self.headers.get("Authorization") != f"Bearer {KEY}" or "x-api-key" in self.headers:
            bad.append(f"key: Authorization {self.headers.get('Authorization')!r}")
        if self.headers.get("anthropic-version") != VERSION:
            bad.append(f"anthropic-version {self.headers.get('anthropic-version')!r}")
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages or messages[-1].get("role") != "user":
            bad.append(f"messages {messages!r}")
        if body.get("model") != "claude-test":
            bad.append(f"model {body.get('model')!r}")
        if self.path != "/v1/messages":
            return
        thinking = body.get("thinking") or {}
        if {"temperature", "top_p", "top_k"} & body.keys():  # the API of SDK 2.14.0 has none
            bad.append(f"sampling settings in {sorted(body)}")
        if "budget_tokens" in thinking and not 1024 <= thinking["budget_tokens"] < body["max_tokens"]:
            bad.append(f"thinking {thinking!r} with max_tokens {body['max_tokens']}")


def _error(kind: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}}


def _reply(text: str | None, body: dict[str, Any], stop: str = "end_turn") -> bytes:
    blocks = [] if text is None else [{"type": "text", "text": text}]
    if body.get("thinking", {}).get("type") == "enabled":
        blocks.insert(0, {"type": "thinking", "thinking": THINKING, "signature": "sig"})
    reply = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": body.get("model"),
        "content": blocks,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": counted(body), "output_tokens": 12},
    }
    return json.dumps(reply).encode()


@contextmanager
def messages_serving() -> Iterator[MessagesServer]:
    with serving(MessagesServer) as fake:
        assert isinstance(fake, MessagesServer)
        yield fake


@contextmanager
def keyed_messages_serving(monkeypatch: pytest.MonkeyPatch) -> Iterator[MessagesServer]:
    """The fake served as a run meets it: the key in $ANTHROPIC_API_KEY, no proxy between, and the
    retries' backoff made short so a fault's retries take milliseconds."""
    monkeypatch.setattr(jsonhttp, "BACKOFF_BASE", 0.001)
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    with messages_serving() as server:
        yield server
