"""A run's prompts built ahead of its requests, on a worker thread, while earlier requests are in flight.

The runner reads the cells' prompts from ``Ahead`` in the plan's order (controls and samples alike)
and hands them to the backend as one stream (a ``Pulling`` backend, which reads them as its window has
room) or in batches (any other): either way the next prompts are built, and their lengths checked,
while the backend answers, so a server never waits on fathom.

What is held is bounded: a prompt counts from the moment its build starts until its record is
written (``Ahead.done``), wherever it is meanwhile (built and waiting, in the backend's lookahead, in
flight), and a build starts only while fewer than ``HELD_PROMPTS`` prompts and ``HELD_TOKENS`` tokens
are held: at most ``HELD_PROMPTS`` prompts, and ``HELD_TOKENS`` tokens plus the last prompt's (one
longer than the bound is built once no other is held). The tokens are the prompts' own, counted when
built: a control's prompt is a few dozen tokens whatever its cell's length.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TypeVar

from fathom.backends.base import Request
from fathom.records import Cell
from fathom.tasks.base import Document, Sample

# At 2^25 tokens the ids are 128 MiB (int32) and a text backend's text about as much again (some 4
# bytes a token): at 1M-token prompts that is 33 prompts at most (32, and the one whose build began
# under the bound), some 260 MiB, and more than a server runs at once at that length; at 1k-token
# prompts the count binds first. Twice the runner's batch (BATCH_TOKENS), so a backend answering in
# batches has the next one built while it answers one, and a batch always fits.
HELD_TOKENS = 1 << 25
# As many requests as an HTTP backend keeps in flight at most (MOST_IN_FLIGHT, 4096), and as many again
# for its lookahead and the prompts built ahead: some 100 MB of samples at 1k tokens.
HELD_PROMPTS = 8192


@dataclass(frozen=True, eq=False)
class BuiltSample:
    """A sample made ready to ask: its request, its token count as the backend will see it, and why it
    must not be sent (too long, or a length that missed its target), if so."""

    sample: Sample
    request: Request
    actual: int
    refusal: str | None

    @property
    def cell(self) -> Cell:
        return self.sample.cell


Ready = BuiltSample | Document  # a cell made ready: a sample to ask, or a document to score
Kind = TypeVar("Kind", BuiltSample, Document)


def held_tokens(ready: Ready) -> int:
    return len(ready.ids if isinstance(ready, Document) else ready.sample.prompt.ids)


class Ahead:
    """``build(cell)`` for each of ``cells``, in order, on a worker thread, at most ``prompts`` and
    ``tokens`` held (as the module says); read in order by one reader at a time. A build that raises
    ends the reading (the reader finishes what it holds) and is kept in ``failure``, for the runner to
    raise once the answered are written."""

    def __init__(
        self,
        cells: Iterable[Cell],
        build: Callable[[Cell], Ready],
        prompts: int = HELD_PROMPTS,
        tokens: int = HELD_TOKENS,
    ) -> None:
        self.most_prompts, self.most_tokens = prompts, tokens
        self.failure: BaseException | None = None
        self.prompts = self.tokens = 0  # held now
        self._room = threading.Condition()
        self._stopped = False
        self._built: queue.SimpleQueue[Ready | BaseException | None] = queue.SimpleQueue()
        self._next: Ready | None = None  # read by peek, not yet taken
        self._ended = False
        self._worker = threading.Thread(
            target=self._build, args=(cells, build), name="fathom-build", daemon=True
        )
        self._worker.start()

    def peek(self) -> Ready | None:
        """The next prompt, left to be read; None at the end (or after a failure)."""
        if self._next is None and not self._ended:
            got = self._built.get()
            if isinstance(got, BaseException):
                self.failure = got
            if got is None or isinstance(got, BaseException):
                self._ended = True
            else:
                self._next = got
        return self._next

    def samples(self) -> Iterator[BuiltSample]:
        """The next prompts while they are samples'."""
        return self._while(BuiltSample)

    def alike(self) -> Iterator[Ready]:
        """The next prompts while they are of the first one's kind (samples, or documents)."""
        if isinstance(self.peek(), BuiltSample):
            return self._while(BuiltSample)
        return self._while(Document)

    def _while(self, kind: type[Kind]) -> Iterator[Kind]:
        while isinstance(ready := self.peek(), kind):
            self._next = None
            yield ready

    def done(self, ready: Ready) -> None:
        """``ready``'s record is written: it is held no longer."""
        with self._room:
            self.prompts -= 1
            self.tokens -= held_tokens(ready)
            self._room.notify()

    def close(self) -> None:
        """Stop building (a build under way finishes first), wait for the worker, and end the reading
        (a reader still waiting for a prompt, on a backend's thread, gets none)."""
        with self._room:
            self._stopped = True
            self._room.notify()
        self._worker.join()
        self._built.put(None)

    def _has_room(self) -> bool:
        return (
            self._stopped
            or self.prompts == 0
            or (self.prompts < self.most_prompts and self.tokens < self.most_tokens)
        )

    def _build(self, cells: Iterable[Cell], build: Callable[[Cell], Ready]) -> None:
        try:
            for cell in cells:
                with self._room:
                    self._room.wait_for(self._has_room)
                    if self._stopped:
                        return
                    self.prompts += 1  # counted from the start of its build
                ready = build(cell)
                with self._room:
                    self.tokens += held_tokens(ready)
                self._built.put(ready)
        except BaseException as exc:  # the runner raises it, whatever it is
            self._built.put(exc)
            return
        self._built.put(None)
