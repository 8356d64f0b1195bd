"""A simulated OpenAI-compatible server with a prefix cache, to measure the order in which a client
sends its requests (``bench_scheduler.py``) and to test fathom's (``tests/test_scheduler.py``).

It serves ``/v1/models`` and ``/v1/completions`` on 127.0.0.1 at a free port, from an event loop in a
thread of its own (HTTP/1.1 through h11, which httpx already brings), and answers like a model that
finds the needle asked for. Its latency is a serving engine's arithmetic, not a model's:

- ``slots`` requests are served at once; the others wait for a slot in the order they arrived.
- A request holds its slot for (uncached prompt tokens / ``prefill`` + new tokens / ``decode``)
  simulated seconds; the uncached tokens are those after the longest prefix in the cache.
- The cache holds prompts' prefixes in blocks of ``block`` tokens, each keyed by the hash of the
  whole prefix up to its end (as vLLM's), at most ``cache_tokens`` of them, the least recently used
  dropped first. A prompt's blocks enter the cache when its prefill ends (so two prompts prefilled
  at once each compute what they share), and a hit touches them. A partial last block is never
  cached, and at least one token is always computed.
- Time is scaled: ``scale`` real seconds to a simulated one. Slots are timers, not work, so hundreds
  of requests in flight cost the server nothing but their bytes.

A prompt is counted as the client sends it: ids as they are, text through ``tokenizer`` (memoised
by text: ``warm`` fills the memo beforehand, so that tokenising is not timed).
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import h11
import numpy as np

from fathom.prompts.tokenizers import Tokenizer

# NIAH's plain needle, and the question that asks for it (fathom.prompts.needles).
NEEDLE = r"One of the special magic numbers for {key} is: (\d+)\."
QUESTION = re.compile(r"special magic number for ([\w-]+)\?")


@dataclass(frozen=True)
class Engine:
    """The simulated engine's numbers (rates in tokens per simulated second)."""

    slots: int = 16
    cache_tokens: int = 1 << 21
    prefill: float = 10_000.0
    decode: float = 50.0
    block: int = 16
    scale: float = 0.5


@dataclass(frozen=True)
class Served:
    """One completion, its times in simulated seconds since the clock's start."""

    prompt: str
    prompt_tokens: int
    cached_tokens: int
    new_tokens: int
    arrived: float
    started: float  # a slot taken
    prefilled: float  # its blocks in the cache
    done: float


@dataclass(frozen=True)
class _Prompt:
    tokens: int
    chain: tuple[int, ...]  # the hashes of its whole blocks, prefix by prefix


class BlockCache:
    """An LRU of prefix blocks, at most ``capacity`` of them."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._blocks: OrderedDict[int, None] = OrderedDict()

    def hit(self, chain: Sequence[int]) -> int:
        """How many of the chain's leading blocks are cached (each touched)."""
        found = 0
        for key in chain:
            if key not in self._blocks:
                break
            self._blocks.move_to_end(key)
            found += 1
        return found

    def add(self, chain: Sequence[int]) -> None:
        for key in chain:
            self._blocks[key] = None
            self._blocks.move_to_end(key)
        while len(self._blocks) > self.capacity:
            self._blocks.popitem(last=False)


class PrefixServer:
    """The server; ``log`` holds every completion, ``most_in_flight`` the most requests it held at
    once (arrived, not yet answered), ``misses`` the prompts it tokenised since ``reset`` that ``warm``
    had not. ``fail`` names the prompts it answers with HTTP 500."""

    def __init__(
        self, tokenizer: Tokenizer, engine: Engine, fail: Callable[[str], bool] | None = None
    ) -> None:
        self.tokenizer, self.engine, self.fail = tokenizer, engine, fail
        self._memo: dict[str, _Prompt] = {}
        self._handlers: set[asyncio.Task[None]] = set()
        self.port = 0
        self.reset()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def reset(self) -> None:
        """An empty cache, an empty log, and the clock at 0 (called between clients, while idle)."""
        self.cache = BlockCache(self.engine.cache_tokens // self.engine.block)
        self.log: list[Served] = []
        self.failed = self.misses = 0
        self.in_flight = self.most_in_flight = 0
        self._start = time.monotonic()

    def warm(self, prompts: Sequence[str]) -> None:
        for prompt in prompts:
            self._prompt(prompt)

    def count(self, prompt: str) -> int:
        return self._prompt(prompt).tokens

    def new_tokens(self, prompt: str, most: int) -> int:
        """The tokens of the answer to ``prompt``, at most ``most``."""
        return min(most, len(self.tokenizer.encode(answer(prompt))))

    def unique_tokens(self, prompts: Sequence[str]) -> int:
        """The prompts' tokens, each whole block that several share counted once."""
        block, blocks, tokens = self.engine.block, set[int](), 0
        for prompt in prompts:
            counted = self._prompt(prompt)
            blocks.update(counted.chain)
            tokens += counted.tokens - block * len(counted.chain)
        return tokens + block * len(blocks)

    def ideal(self, prompts: Sequence[str], most: Sequence[int]) -> float:
        """The simulated seconds the prompts (with ``most`` new tokens each) take at best: every
        block computed once, all the work spread evenly over the slots. No order of sending reaches
        it exactly: a prompt's followers wait for its prefill."""
        engine = self.engine
        decoded = sum(self.new_tokens(p, m) for p, m in zip(prompts, most, strict=True))
        return (self.unique_tokens(prompts) / engine.prefill + decoded / engine.decode) / engine.slots

    def now(self) -> float:
        return (time.monotonic() - self._start) / self.engine.scale

    def _prompt(self, prompt: str | list[int]) -> _Prompt:
        key = prompt if isinstance(prompt, str) else json.dumps(prompt)
        if key not in self._memo:
            self.misses += 1  # tokenised now, not beforehand by ``warm``: inside a timing, if serving
            ids = np.asarray(self.tokenizer.encode(prompt) if isinstance(prompt, str) else prompt)
            block = self.engine.block
            rows = ids[: len(ids) // block * block].reshape(-1, block)
            chain, last = [], 0
            for row in rows:
                last = hash((last, row.tobytes()))
                chain.append(last)
            self._memo[key] = _Prompt(len(ids), tuple(chain))
        return self._memo[key]

    async def serve(self, ready: threading.Event) -> None:
        server = await asyncio.start_server(self._connection, "127.0.0.1", 0)
        self.port = server.sockets[0].getsockname()[1]
        self._slots = asyncio.Semaphore(self.engine.slots)
        ready.set()
        try:
            async with server:
                await server.serve_forever()
        finally:
            for handler in self._handlers:
                handler.cancel()
            await asyncio.gather(*self._handlers, return_exceptions=True)

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connection = h11.Connection(h11.SERVER)
        handler = asyncio.current_task()
        assert handler is not None
        self._handlers.add(handler)
        try:
            while (got := await _request(connection, reader)) is not None:
                status, reply = await self._route(*got)
                data = json.dumps(reply).encode()
                headers = [("Content-Type", "application/json"), ("Content-Length", str(len(data)))]
                writer.write(connection.send(h11.Response(status_code=status, headers=headers)) or b"")
                writer.write(connection.send(h11.Data(data=data)) or b"")
                writer.write(connection.send(h11.EndOfMessage()) or b"")
                await writer.drain()
                if connection.our_state is h11.MUST_CLOSE:
                    break
                connection.start_next_cycle()
        except (ConnectionError, h11.RemoteProtocolError):
            pass  # a client gone mid-request (a run cancelled): its slot is already given back
        except asyncio.CancelledError:
            pass  # the server stopping: asyncio's own callback would report a cancelled handler
        finally:
            self._handlers.discard(handler)
            writer.close()

    async def _route(self, target: bytes, body: bytes) -> tuple[int, dict[str, Any]]:
        if target.endswith(b"/v1/models"):
            return 200, {"object": "list", "data": [{"id": "sim", "object": "model"}]}
        if not target.endswith(b"/v1/completions"):
            return 404, {"error": {"message": "Not Found"}}
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            return await self._complete(json.loads(body))
        finally:
            self.in_flight -= 1

    async def _complete(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        arrived, prompt = self.now(), body["prompt"]
        text = prompt if isinstance(prompt, str) else self.tokenizer.decode(prompt)
        if self.fail is not None and self.fail(text):
            self.failed += 1
            return 500, {"error": {"message": "simulated failure"}}
        counted = await asyncio.get_running_loop().run_in_executor(None, self._prompt, prompt)
        new = self.new_tokens(text, int(body.get("max_tokens", 16)))
        engine = self.engine
        async with self._slots:
            started = self.now()
            cached = min(engine.block * self.cache.hit(counted.chain), counted.tokens - 1)
            end = started + (counted.tokens - cached) / engine.prefill
            prefilled = await self._until(end)
            self.cache.add(counted.chain)
            done = await self._until(end + new / engine.decode)
        self.log.append(Served(text, counted.tokens, cached, new, arrived, started, prefilled, done))
        choice = {"index": 0, "text": answer(text), "finish_reason": "stop", "logprobs": None}
        usage = {"prompt_tokens": counted.tokens, "completion_tokens": new}
        return 200, {"object": "text_completion", "choices": [choice], "usage": usage}

    async def _until(self, moment: float) -> float:
        """Sleep until the simulated ``moment``; the simulated time on waking (late, on a busy
        machine: the figures count it)."""
        await asyncio.sleep(max(0.0, (moment - self.now()) * self.engine.scale))
        return self.now()


async def _request(connection: h11.Connection, reader: asyncio.StreamReader) -> tuple[bytes, bytes] | None:
    """The next request's target and body, or None once the client has closed the connection."""
    target, body = b"", bytearray()
    while True:
        event = connection.next_event()
        if event is h11.NEED_DATA:
            connection.receive_data(await reader.read(1 << 16))
        elif isinstance(event, h11.Request):
            target = event.target
        elif isinstance(event, h11.Data):
            body += event.data
        elif isinstance(event, h11.EndOfMessage):
            return target, bytes(body)
        else:  # ConnectionClosed
            return None


def answer(prompt: str) -> str:
    """The needle's value for the key the question (at the prompt's end) asks about."""
    asked = QUESTION.search(prompt, max(0, len(prompt) - 2000))
    found = asked and re.search(NEEDLE.format(key=re.escape(asked[1])), prompt)
    return f" {found[1]}." if found else " I do not know."


@contextmanager
def serving(
    tokenizer: Tokenizer, engine: Engine, fail: Callable[[str], bool] | None = None
) -> Iterator[PrefixServer]:
    """The server, running until the block ends."""
    server = PrefixServer(tokenizer, engine, fail)
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    task = loop.create_task(server.serve(ready))
    thread = threading.Thread(target=_run, args=(loop, task), name="prefix-server", daemon=True)
    thread.start()
    ready.wait(10)
    try:
        yield server
    finally:
        loop.call_soon_threadsafe(task.cancel)
        thread.join(10)
        loop.close()


def _run(loop: asyncio.AbstractEventLoop, task: asyncio.Task[None]) -> None:
    try:
        loop.run_until_complete(task)
    except asyncio.CancelledError:
        pass  # the server stopped, as asked
    finally:
        loop.run_until_complete(loop.shutdown_default_executor())
