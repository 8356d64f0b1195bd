"""One model replica of a sweep on Ray (``fathom.run.distributed``), run as a Ray actor: its backend
and task built once, as ``run`` builds them, and the cells the driver hands it answered as one stream,
as a local run answers its cells.

The driver hands a replica its cells a shard at a time (``more``), the next before it runs out, and
the replica's one stream (``run``) reads them as it goes: each prompt built on a worker while earlier
requests are in flight, and a Pulling backend (openai) sent controls and samples one after another
without a gap between shards, so its server is kept busy. The stream ends when the driver says there
are no more cells, or when it has waited ``IDLE_SECONDS`` for more with none of its records written
(a batch waiting to be filled, a stream that failed): what it holds is then answered, and the driver
starts another stream for any shard that came after.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from fathom.errors import FathomError
from fathom.manifest import Manifest
from fathom.records import AnyRecord, Cell
from fathom.run.clock import BackendClock
from fathom.run.manifest import manifest
from fathom.run.runner import Write, answer_cells, prepare
from fathom.spec import RunSpec
from fathom.tasks import probe

# How long a stream waits for its next shard while none of its records is written. The driver hands
# a replica its next shard while it still holds one, so a stream that answers seldom waits; one that
# cannot go on without more cells (a batch to fill, longer than the shard it was handed) or has failed
# (its failure to be told) stops waiting after this, and answers what it holds.
IDLE_SECONDS = 2.0


class Replica:
    """A model replica: the backend and task built once, so every shard it answers reuses the model it
    loaded and the prefix cache it keeps. Run with two threads (its stream, and ``more`` beside it)."""

    def __init__(self, spec: RunSpec, order: str, keep_too_long: bool = False) -> None:
        self.spec = spec
        self.feed: queue.SimpleQueue[list[Cell] | None] = queue.SimpleQueue()
        self.written_at = time.monotonic()
        try:
            prepared = prepare(spec, order, keep_too_long=keep_too_long)
        except FathomError as exc:
            # Kept to be told, not raised: raised here it would reach the driver as the actor's death,
            # a traceback where a local run prints one line.
            self.problem: str | None = str(exc)
            return
        self.problem = None
        self.task, self.loading, self.plan_line = prepared.task, prepared.loading, prepared.plan
        self.clock = BackendClock(prepared.backend)

    def ready(self) -> Manifest | str:
        """The manifest this replica would write, or why it cannot run."""
        if self.problem is not None:
            return self.problem
        backend = self.clock.backend
        return manifest(self.spec, backend.tokenizer, self.task, backend, sum(1 for _ in self._planned()))

    def plan(self) -> str | None:
        """The plan's line a local run prints for a real backend (None for a simulated one), made when
        the replica was prepared, for the driver to print once."""
        return self.plan_line

    def todo(self, done: frozenset[str]) -> list[Cell]:
        """The run's cells not in ``done``, in the runner's order."""
        return [cell for cell in self._planned() if cell.id not in done]

    def more(self, shard: list[Cell] | None) -> None:
        """Cells for the stream to answer after those it has; None: there are no more."""
        self.feed.put(shard)

    def run(self) -> Iterator[list[AnyRecord]]:
        """The records of the cells handed over, as they are written (a Ray streaming generator),
        answered as a local run answers its cells. A failure is raised after the records written
        before it."""
        if self.problem is not None:  # a replica Ray restarted, that could not build its backend again
            raise FathomError(self.problem)

        def answer(write: Write) -> None:
            def noted(record: AnyRecord) -> None:
                self.written_at = time.monotonic()
                write(record)

            answer_cells(self.spec, self.clock, self.task, self._fed(), noted)

        self.written_at = time.monotonic()
        yield from _as_written(answer)

    def seconds(self) -> float:
        """The time spent in the model: loading it, and inside generate and score."""
        return self.loading + self.clock.seconds

    def _planned(self) -> Iterator[Cell]:
        return probe.plan(self.task, self.spec.control)

    def _fed(self) -> Iterator[Cell]:
        """The cells handed over, shard by shard, until there are no more, or until none has come for
        ``IDLE_SECONDS`` with no record written (read on the build's worker thread)."""
        while True:
            try:
                shard = self.feed.get(timeout=IDLE_SECONDS)
            except queue.Empty:
                if time.monotonic() - self.written_at >= IDLE_SECONDS:
                    return
                continue
            if shard is None:
                return
            yield from shard


@dataclass(frozen=True)
class _Ended:
    """The end of a stream's records: what stopped it, if anything did."""

    failure: BaseException | None = None


def _as_written(answer: Callable[[Write], None]) -> Iterator[list[AnyRecord]]:
    """The records ``answer`` writes, on a thread of its own, in lists of those written since the last
    was taken: a Ray generator yields one as the next is answered, not once the stream is done. What
    ``answer`` raises is raised after them."""
    written: queue.SimpleQueue[AnyRecord | _Ended] = queue.SimpleQueue()

    def work() -> None:
        try:
            answer(written.put)
        except BaseException as exc:  # raised on the generator's thread, whatever it is
            written.put(_Ended(exc))
            return
        written.put(_Ended())

    worker = threading.Thread(target=work, name="fathom-replica", daemon=True)
    worker.start()
    records: list[AnyRecord] = []
    while not isinstance(got := written.get(), _Ended):
        records.append(got)
        if written.empty():
            yield records
            records = []
    worker.join()
    if records:  # those written just before the end
        yield records
    if got.failure is not None:
        raise got.failure
