"""The backend as the runner calls it, with the seconds spent inside it added up: what a run reports
as the model's time, apart from fathom's own."""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Sequence

from fathom.backends.base import Backend, Pulling, Request, Streamer, TokenScores, score_request, scorer
from fathom.records import Completion
from fathom.tasks.base import Document


class BackendClock:
    """The backend, with the time spent inside generate and score added up."""

    def __init__(self, backend: Backend) -> None:
        self.backend, self.seconds = backend, 0.0

    def stream(self, requests: Iterable[Request]) -> Iterator[tuple[int, Completion]]:
        """Each completion as the backend finishes it: as they come from a Streamer, else all
        together after one ``generate`` call. A Pulling backend reads ``requests`` as it sends them;
        any other is handed them all at once. The time inside includes, for a Pulling backend, any wait
        for the next request to be built."""
        backend = self.backend
        if isinstance(backend, Pulling):
            answers = backend.stream(requests)
        else:
            listed = requests if isinstance(requests, Sequence) else list(requests)
            answers = backend.stream(listed) if isinstance(backend, Streamer) else self._generate(listed)
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
