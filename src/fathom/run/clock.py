"""The backend as the runner calls it, with the seconds spent inside it added up: what a run reports
as the model's time, apart from fathom's own."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence

from fathom.backends.base import Backend, Request, Streamer, TokenScores, score_request, scorer
from fathom.records import Completion
from fathom.tasks.base import Document


class BackendClock:
    """The backend, with the time spent inside generate and score added up."""

    def __init__(self, backend: Backend) -> None:
        self.backend, self.seconds = backend, 0.0

    def stream(self, requests: Sequence[Request]) -> Iterator[tuple[int, Completion]]:
        """Each completion as the backend finishes it: as they come from a Streamer, else all
        together after one ``generate`` call."""
        backend = self.backend
        answers = backend.stream(requests) if isinstance(backend, Streamer) else self._generate(requests)
        try:
            while True:
                started = time.perf_counter()
                try:
                    answer = next(answers)
                except StopIteration:
                    return
                finally:
                    self.seconds += time.perf_counter() - started
                yield answer
        finally:
            close = getattr(answers, "close", None)
            if close is not None:
                close()  # an interrupt stops the requests still in flight

    def _generate(self, requests: Sequence[Request]) -> Iterator[tuple[int, Completion]]:
        yield from enumerate(self.backend.generate(requests))

    def score(self, documents: Sequence[Document]) -> list[TokenScores]:
        asks = [score_request(self.backend, d.cell.id, d.ids, 1) for d in documents]
        started = time.perf_counter()
        try:
            return scorer(self.backend).score(asks)
        finally:
            self.seconds += time.perf_counter() - started
