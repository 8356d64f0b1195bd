"""Which records an analysis reads: a run's graded samples, its no-context controls and its
perplexity documents, and whether its samples are NIAH's (fixed depths) or RULER's (drawn depths)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from fathom.records import AnyRecord, PerplexityRecord, SampleRecord


def is_ruler_run(records: Sequence[SampleRecord]) -> bool:
    """RULER-style records draw their needle depths per sample, so their cells have no depth."""
    return any(r.depth is None for r in records)


def family_run(prefix: str) -> Callable[[Iterable[SampleRecord]], bool]:
    """The test of whether records are a task family's run: any of them of a task named with ``prefix``
    (``state:``, ``babi:``, ...), as each family names its cells."""

    def holds(records: Iterable[SampleRecord]) -> bool:
        return any(r.task.startswith(prefix) for r in records)

    return holds


def split_records(records: Sequence[AnyRecord]) -> tuple[list[SampleRecord], list[PerplexityRecord]]:
    """A run's graded samples (its grid; no-context controls are not in it) and its perplexity
    documents."""
    samples = [r for r in records if isinstance(r, SampleRecord) and not r.control]
    return samples, [r for r in records if isinstance(r, PerplexityRecord)]


def control_records(records: Sequence[AnyRecord]) -> list[SampleRecord]:
    """A run's no-context controls (its closed-book probes are controls of no sample: not these)."""
    return [r for r in records if isinstance(r, SampleRecord) and r.control and r.probe is None]


def probe_records(records: Sequence[AnyRecord]) -> list[SampleRecord]:
    """A run's closed-book probes of its low-overlap items (``fathom.tasks.probe``)."""
    return [r for r in records if isinstance(r, SampleRecord) and r.probe is not None]


LITERAL = "literal"  # the variant a low-overlap needle's literal twin runs as (tasks/niah.py)


def is_literal_twin(task: str) -> bool:
    """Whether records of this task are a low-overlap needle's literal twins (``niah:literal``,
    ``niah:code+literal``): a contrast beside the samples asked, never pooled with them."""
    variant = task.partition(":")[2]
    return variant == LITERAL or variant.endswith("+" + LITERAL)
