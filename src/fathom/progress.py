"""A small progress display: samples done, rate and time left, on one refreshed line."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    def __init__(self, total: int, label: str, stream: TextIO | None = None, enabled: bool = True) -> None:
        self.total, self.label, self.done = total, label, 0
        self.stream = stream or sys.stderr
        self.enabled = enabled and total > 0
        self.started = time.monotonic()
        self._interactive = self.stream.isatty()
        self._last_tenth = -1

    def advance(self, count: int = 1) -> None:
        self.done += count
        if not self.enabled:
            return
        tenth = 10 * self.done // self.total
        # On a terminal the line is redrawn in place; in a log, one line per tenth of the run.
        if self._interactive:
            self.stream.write("\r" + self.line())
        elif tenth != self._last_tenth:
            self.stream.write(self.line() + "\n")
        self._last_tenth = tenth
        self.stream.flush()

    def line(self) -> str:
        elapsed = max(time.monotonic() - self.started, 1e-9)
        rate = self.done / elapsed
        left = (self.total - self.done) / rate if rate > 0 else 0.0
        width = 24
        filled = width * self.done // self.total
        bar = "#" * filled + "." * (width - filled)
        return (
            f"{self.label} [{bar}] {self.done}/{self.total} samples "
            f"{rate:.1f}/s, {_clock(elapsed)} elapsed, {_clock(left)} left"
        )

    def finish(self) -> None:
        if self.enabled and self._interactive:
            self.stream.write("\n")
            self.stream.flush()


def _clock(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}"
