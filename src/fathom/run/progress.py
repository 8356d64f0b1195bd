"""Progress of a run, in two phases: the no-context controls (short prompts, counted in samples),
then the samples, counted in the prompt tokens still to process.

Counting tokens, not samples, is what makes the time left honest: a 32k prompt costs a model far
more than a 1k one, and the controls that run first cost almost nothing, so a rate in samples per
second taken from them would promise minutes where hours are left. The rate is the average over the
phase so far (tokens done / time), so the estimate calibrates itself on the tokens the model has
processed. On a terminal tqdm draws the bars; in a log (or a pipe) each phase writes one line per
tenth of its work, with the same numbers.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable
from typing import TextIO

from tqdm import tqdm

from fathom.records import AnyRecord, Cell, SampleRecord


class RunProgress:
    """A run's two phases. The samples' clock starts when the controls are done, so the time left
    for the long prompts is estimated from long prompts alone."""

    def __init__(self, label: str, todo: Iterable[Cell], enabled: bool = True) -> None:
        controls, tokens = 0, 0
        for cell in todo:
            if cell.control:
                controls += 1
            else:
                tokens += cell.length
        self.controls = Progress(f"{label} controls", controls, "sample", enabled=enabled)
        self.samples = Progress(label, tokens, "tok", enabled=enabled, position=int(controls > 0))
        (self.controls if controls else self.samples).begin()

    def record_done(self, record: AnyRecord) -> None:
        if isinstance(record, SampleRecord) and record.control:
            self.controls.advance()
            if self.controls.done == self.controls.total:
                self.controls.close()
                self.samples.begin()
        else:
            self.samples.advance(record.length)

    def close(self) -> None:
        self.controls.close()
        self.samples.close()


class Progress:
    """One phase: ``total`` units of work (samples, or prompt tokens), advanced as records land."""

    def __init__(
        self,
        label: str,
        total: int,
        unit: str,
        stream: TextIO | None = None,
        enabled: bool = True,
        position: int = 0,
    ) -> None:
        self.label, self.total, self.unit = label, total, unit
        self.stream = stream or sys.stderr
        self.enabled = enabled and total > 0
        self.position = position
        self.done, self._last_tenth = 0, 0
        self._started: float | None = None
        self._bar: tqdm[None] | None = None

    def begin(self) -> None:
        """Start the phase's clock (and its bar, on a terminal): its rate counts from here."""
        if not self.enabled or self._started is not None:
            return
        self._started = time.monotonic()
        if self.stream.isatty():
            # smoothing=0: the rate is the phase's average, not the last few updates'.
            self._bar = tqdm(
                total=self.total,
                desc=self.label,
                unit=self.unit,
                unit_scale=self.unit == "tok",  # 92.2k tokens, but 24 samples, not 24.0
                smoothing=0,
                file=self.stream,
                position=self.position,
                leave=True,
                dynamic_ncols=True,
            )

    def advance(self, amount: int = 1) -> None:
        if not self.enabled:
            return
        self.begin()
        self.done += amount
        if self._bar is not None:
            self._bar.update(amount)
            return
        tenth = 10 * self.done // self.total
        if tenth != self._last_tenth:
            self._last_tenth = tenth
            self.stream.write(self.line() + "\n")
            self.stream.flush()

    def line(self) -> str:
        """The phase as one line: done of total, rate, time elapsed and left (tqdm's format)."""
        elapsed = time.monotonic() - self._started if self._started is not None else 0.0
        line: str = tqdm.format_meter(
            min(self.done, self.total),
            self.total,
            elapsed,
            prefix=self.label,
            unit=self.unit,
            unit_scale=self.unit == "tok",
            ascii=True,  # a log stays plain text
        )
        return line

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
