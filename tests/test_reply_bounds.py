"""What fathom keeps of a server's reply: the API key scrubbed before any cut, wherever the cut
falls; every text a reply sets bounded; every number finite. Through the real HTTP path, against a
scripted server on 127.0.0.1 that plants the key where a test asks."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import quote

import numpy as np
import pytest
from http_faults import serving

from fathom.backends import jsonhttp, openai_replies
from fathom.backends.base import Request
from fathom.backends.openai import OpenAIBackend
from fathom.backends.replies import (
    CUT,
    ENGINE_CHARS,
    FINISH_CHARS,
    FRAGMENT,
    KEY_REMOVED,
    MESSAGE_CHARS,
    TRANSPORT_CHARS,
    bounded,
    engine_error,
    finite_json,
    scrub,
)
from fathom.cli import SAMPLE_ERRORS, main
from fathom.errors import RunFolderError
from fathom.records import ANSWER_BYTES
from fathom.run.appends import append_line

# Random-looking, as a real key is, with a character that URL-encoding changes.
KEY = "sk-proj-Zq8v3LmX9c2RtY7wK4pN1bHs6D+fU0e"
# What the client says before it quotes a broken header line: the key's offset in the error is
# this plus the padding before it.
BROKEN_HEADER = "RemoteProtocolError: illegal header line: bytearray(b'X"


def grams(text: str, size: int = 4) -> set[str]:
    return {text[i : i + size] for i in range(len(text) - size + 1)}


def assert_no_part_of_the_key(text: str) -> None:
    """Not the key, nor any four of its characters in a row (the padding around it holds none)."""
    found = sorted(gram for gram in grams(KEY) if gram in text)
    assert not found, (found, text)


class Planting(BaseHTTPRequestHandler):
    """Each prompt says what to do ("refuse 162": a 400 whose message holds the key at character
    162), so that one call sweeps the offsets; a prompt that says nothing gets ``orders``."""

    orders = "answer 0"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._send(200, json.dumps({"object": "list", "data": []}).encode())

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        said = re.search(r"(refuse|break|answer|finish|infinite) (\d+)", str(body.get("prompt")))
        found = said or re.fullmatch(r"(\w+) (\d+)", self.orders)
        assert found is not None
        what, at = found[1], int(found[2])
        if what == "refuse":
            message = "x" * at + KEY + " y" * 100
            return self._send(400, json.dumps({"error": {"message": message}}).encode())
        if what == "break":  # no HTTP: the client's own error quotes the line
            pad = "a" * (at - len(BROKEN_HEADER))
            self.wfile.write(f"HTTP/1.1 200 OK\r\nX{pad}{KEY}{'b' * 300}\r\n\r\n".encode())
            return None
        text, finish, timings = "ok", "stop", ""
        if what == "answer":
            text = "x" * at + KEY
        elif what == "finish":  # a finish reason of some megabytes, the key inside it
            finish = "f" * at + KEY + "g" * 7_000_000
        else:
            timings = ', "timings": {"prompt_ms": Infinity, "predicted_ms": NaN}'
        choice = json.dumps({"text": text, "finish_reason": finish})
        usage = '"usage": {"prompt_tokens": 1e999, "completion_tokens": 3}'
        return self._send(200, f'{{"choices": [{choice}], {usage}{timings}}}'.encode())

    def _send(self, status: int, data: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def url(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setattr(jsonhttp, "BACKOFF_BASE", 0.001)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    with serving() as server:
        server.RequestHandlerClass = Planting
        yield server.url


def ask(url: str, prompts: list[str]) -> list[Any]:
    backend = OpenAIBackend(f"m@{url}?retries=1&concurrency=8", "cl100k_base")
    requests = [Request(f"s{i}", np.zeros(4, dtype=np.int32), 8, text=text) for i, text in enumerate(prompts)]
    return backend.generate(requests)


# Scrubbing and cutting, alone.


def test_every_form_and_every_end_of_the_key_is_scrubbed() -> None:
    assert scrub(f"a {KEY} b {KEY}", KEY) == f"a {KEY_REMOVED} b {KEY_REMOVED}"
    assert scrub(f"a={quote(KEY, safe='')}&b", KEY) == f"a={KEY_REMOVED}&b"
    slashed = KEY.replace("+", "/")
    escaped = slashed.replace("/", "\\/")  # as raw JSON may write it
    assert scrub(f'{{"k": "{escaped}"}}', slashed) == f'{{"k": "{KEY_REMOVED}"}}'
    # A server that cut its own echo leaves the key's start at its end, or the key's end at its start.
    assert scrub(f"Bearer {KEY[:20]}", KEY) == f"Bearer {KEY_REMOVED}"
    assert scrub(f"{KEY[-12:]} was refused", KEY) == f"{KEY_REMOVED} was refused"
    assert scrub(f"{KEY[:10]}... was refused", KEY) == f"{KEY_REMOVED}... was refused"
    # Fewer than FRAGMENT characters of it reveal nothing, and are left.
    assert scrub(f"about {KEY[: FRAGMENT - 1]}", KEY) == f"about {KEY[: FRAGMENT - 1]}"
    assert scrub("nothing of it", KEY) == scrub("nothing of it", None) == "nothing of it"


@pytest.mark.parametrize("offset", range(150, 211))
def test_a_cut_never_leaves_a_part_of_the_key(offset: int) -> None:
    text = "x" * offset + KEY + "y" * 300
    cut = bounded(text, 200, KEY)
    assert len(cut) <= 200 and cut.endswith(CUT)
    assert_no_part_of_the_key(cut)


def test_an_engines_error_is_one_bounded_line() -> None:
    assert (
        engine_error(RuntimeError("CUDA out of memory\ntraceback...")) == "RuntimeError: CUDA out of memory"
    )
    assert engine_error(ValueError("")) == "ValueError"
    assert len(engine_error(RuntimeError("z" * 10_000))) == ENGINE_CHARS


def test_a_reply_is_read_with_no_number_that_is_not_finite() -> None:
    assert finite_json('{"a": NaN, "b": [Infinity, -Infinity, 1e999, -1e999, 1.5, 2]}') == {
        "a": None,
        "b": [None, None, None, None, 1.5, 2],
    }
    reply = {"timings": {"prompt_ms": 10**400, "predicted_ms": 20}}
    assert openai_replies.timings(reply) == (None, 0.02)  # an int too large for a float is no time
    assert openai_replies.token_count({"n": 10**30}, "n", 7) == 7
    assert openai_replies.token_count({"n": True}, "n", 7) == 7


# Through the HTTP client and the openai backend.


@pytest.mark.parametrize("cut", [MESSAGE_CHARS, TRANSPORT_CHARS])
def test_no_error_holds_a_part_of_the_key_wherever_the_cut_falls(url: str, cut: int) -> None:
    what = "refuse" if cut == MESSAGE_CHARS else "break"
    offsets = range(cut - 50, cut + 11)
    completions = ask(url, [f"{what} {at}" for at in offsets])
    for completion in completions:
        assert completion.error is not None
        assert_no_part_of_the_key(completion.error)
    # The key was there to leak: each error quotes the server up to its cut.
    first = completions[0].error
    assert KEY_REMOVED in first and first.count(CUT) == 1
    expected = "rejected: HTTP 400: " if what == "refuse" else "backend_error: RemoteProtocolError"
    assert first.startswith(expected)


def test_a_huge_finish_reason_is_scrubbed_then_cut(url: str) -> None:
    (cut, whole) = ask(url, [f"finish {FINISH_CHARS - 20}", "finish 2"])
    for completion in (cut, whole):
        assert completion.error is None and len(completion.finish_reason) == FINISH_CHARS
        assert_no_part_of_the_key(completion.finish_reason)
    assert whole.finish_reason.startswith("ff" + KEY_REMOVED)


def test_non_finite_timings_and_counts_are_absent(url: str) -> None:
    (completion,) = ask(url, ["infinite 0"])
    assert completion.error is None
    assert (completion.prefill_s, completion.decode_s) == (None, None)
    assert completion.prompt_tokens == 4  # 1e999 is no count: the request's own


def run_against(url: str, folder: Path) -> int:
    """A two-sample run, no controls, against the planting server at ``url``."""
    grid = [
        "--tokenizer",
        "cl100k_base",
        "--lengths",
        "1k",
        "--depths",
        "1",
        "--samples",
        "2",
        "--no-control",
    ]
    model = f"openai:m@{url}?retries=1"
    return main(["run", "niah", "--model", model, "--run-dir", str(folder), "--no-progress", *grid])


@pytest.mark.parametrize("orders", ["refuse 162", f"answer {ANSWER_BYTES - 20}"])
def test_a_run_against_a_server_that_leaks_the_key_writes_no_part_of_it(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, orders: str
) -> None:
    # Refused with the key at character 162 of the message (where the cut of 200 fell inside it
    # before), or answered with the key where the record's cap of the answer falls.
    monkeypatch.setattr(Planting, "orders", orders)
    folder = tmp_path / "run"
    status = run_against(url, folder)
    assert status == (SAMPLE_ERRORS if orders.startswith("refuse") else 0)
    assert (folder / "report.html").is_file()
    for path in folder.rglob("*"):
        if path.is_file():
            assert_no_part_of_the_key(path.read_bytes().decode("utf-8", "replace"))


def test_a_record_with_a_number_that_is_not_finite_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "samples.jsonl"
    with path.open("ab") as handle:
        with pytest.raises(RunFolderError, match="NaN or Infinity"):
            append_line(handle.fileno(), {"decode_s": float("inf")}, path)
        append_line(handle.fileno(), {"decode_s": 0.5}, path)
    assert path.read_text() == '{"decode_s": 0.5}\n'


def test_a_server_that_says_infinity_leaves_strict_json_and_no_time(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(Planting, "orders", "infinite 0")  # llama.cpp's timings, as Infinity and NaN
    folder = tmp_path / "run"
    assert run_against(url, folder) == 0
    lines = (folder / "samples.jsonl").read_text().splitlines()
    strict = [json.loads(line, parse_constant=pytest.fail) for line in lines]  # no NaN, no Infinity
    assert len(strict) == 2 and all("decode_s" not in r and "prefill_s" not in r for r in strict)


def test_a_judge_that_echoes_the_key_leaves_no_part_of_it_in_its_verdicts(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "run"
    args = ["--lengths", "1k", "--depths", "1", "--samples", "2", "--no-control", "--no-progress"]
    assert main(["run", "niah", "--model", "sim:perfect", "--run-dir", str(folder), *args]) == 0
    # The judge's reply holds the key where the record's cap of a reply falls.
    monkeypatch.setattr(Planting, "orders", f"answer {ANSWER_BYTES - 20}")
    status = main(["judge", str(folder), "--judge", f"openai:j@{url}?retries=1", "--judge-retries", "0"])
    assert status == 3  # no verdict in the reply: an error, recorded
    judgements = (folder / "judgements.jsonl").read_text()
    assert len(judgements.splitlines()) == 2
    assert_no_part_of_the_key(judgements)
