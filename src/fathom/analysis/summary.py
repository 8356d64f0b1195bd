"""What summary.json holds, typed: a run's numbers from all its records, the form's schema with them.

The tables (cells, lengths, aggregates, the perplexity table) stay rows of JSON values, as
``fathom.analysis.niah``, ``ruler``, ``perplexity`` and ``control`` make them; what a reader used to
find by looking for keys (which kind of run, which sections it has) is typed here.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from fathom.analysis.agreement import judge_sections
from fathom.analysis.babi import babi_summary, is_babi_run
from fathom.analysis.control import control_summary
from fathom.analysis.hard import hard_summary
from fathom.analysis.knowledge import knowledge_summary
from fathom.analysis.listing import is_listing_run, listing_summary
from fathom.analysis.mrcr import is_mrcr_run, mrcr_summary
from fathom.analysis.niah import CellStats, summarize, worst_depth_effective_length
from fathom.analysis.perplexity import answer_likelihood, perplexity_table
from fathom.analysis.provider_counts import provider_counts
from fathom.analysis.ruler import TaskCell, category_scores, ruler_summary
from fathom.analysis.select import (
    control_records,
    is_literal_twin,
    is_ruler_run,
    probe_records,
    split_records,
)
from fathom.analysis.slow import slow_samples
from fathom.analysis.state import is_state_run, state_summary
from fathom.analysis.suites import is_suite_run, suite_summary
from fathom.analysis.thinking import thinking_summary
from fathom.judgement import JudgementRecord, QualificationRecord
from fathom.manifest import JudgeIdentity, Manifest
from fathom.records import AnyRecord, SampleRecord
from fathom.schemas import SUMMARY_SCHEMA, Versions, read

Row = dict[str, Any]  # a row of a table, or a table's header numbers, as summary.json writes it


@dataclass(frozen=True)
class NiahGrid:
    """NIAH's sweep: accuracy per (length, depth) cell and per length, the effective length on the
    mean, on the 95% lower bound and at the worst depth (``threshold``, ``mean``, ``lower_bound``,
    ``worst_depth``), and the lost-in-the-middle index (edges minus middle; None without both)."""

    cells: tuple[Row, ...]
    lengths: tuple[Row, ...]
    effective_length: Row
    lost_in_the_middle_index: float | None
    # Schema 3. A run of several variants (domains, literal twins: tasks ``niah:...``) has each one's
    # grid here by task name, and the grid above pools the variants that were asked (not the twins).
    variants: dict[str, Row] = dataclasses.field(default_factory=dict)
    # Hard needles' sections (``fathom.analysis.hard.hard_summary``), where the run has them.
    hard: Row = dataclasses.field(default_factory=dict)


@dataclass(frozen=True)
class RulerGrid:
    """RULER's sweep: score per (task, length), the per-length mean over tasks, RULER's aggregates on
    the mean and on the lower bound (``mean``, ``lower_bound``), and the score by needle depth."""

    grid: tuple[Row, ...]
    lengths: tuple[Row, ...]
    aggregates: dict[str, Row]
    depth_profile: tuple[Row, ...]
    # Schema 4. A real suite's run (``fathom.analysis.suites.suite_summary``): the grid by the prompts'
    # actual length, how many prompts the suite's middle truncation cut and by how much, its splits;
    # and each task's score with its interval (``by_task``) and the mean over tasks (``mean``), added
    # inside the section without a schema of their own: readers allow a summary that lacks them.
    suites: Row = dataclasses.field(default_factory=dict)
    # A state-tracking run's section (``fathom.analysis.state.state_summary``): scores by operation
    # count and by question kind, effective lengths per count; added as ``suites`` was.
    state: Row = dataclasses.field(default_factory=dict)
    # A bAbI-style run's section (``fathom.analysis.babi.babi_summary``): scores by task with their
    # intervals, by the distance between supporting facts, effective lengths per task; added as ``state`` was.
    babi: Row = dataclasses.field(default_factory=dict)
    # A long-output run's section (``fathom.analysis.listing.listing_summary``): F1, precision, recall
    # and truncated answers by item count and length, effective lengths per count; added as ``babi`` was.
    listing: Row = dataclasses.field(default_factory=dict)
    # A multi-round co-reference run's section (``fathom.analysis.mrcr.mrcr_summary``): the similarity
    # score, prefixed and exact answers by repeat count and length, by which repeat was asked for,
    # effective lengths per count; added as ``listing`` was.
    mrcr: Row = dataclasses.field(default_factory=dict)
    # Schema 7. RULER's four categories, each one's mean over its tasks per length with its interval
    # (``fathom.analysis.ruler.category_scores``), where the run has a task of RULER's suite: made
    # from the grid for an older summary. Added to schema 7 before any release wrote it, so a summary
    # of 7 without it (written by the fathom of the hour before) reads, as one of no RULER task.
    categories: tuple[Row, ...] = ()


@dataclass(frozen=True)
class Perplexity:
    """The perplexity documents: ``perplexity_table``'s table (lengths, buckets), and their counts."""

    table: Row
    documents: int
    errors: int


@dataclass(frozen=True)
class RunFacts:
    """Which run the numbers are of, from its manifest (``fathom.report.derive`` adds them)."""

    task: str
    model: str
    tokenizer: str
    samples: int
    seed: int
    trained_window: int | None
    # How a RULER run sized its haystacks (``RunSpec.fill``); added without a schema of its own:
    # a summary without it is of an exact fill.
    fill: str = "exact"

    @classmethod
    def of(cls, manifest: Manifest) -> RunFacts:
        spec = manifest.spec
        window = manifest.backend.trained_window
        return cls(spec.task, spec.model, spec.tokenizer, spec.samples, spec.seed, window, spec.fill)


# Each kind of run's sweep, by the kind summary.json names; "perplexity" (documents alone) has none.
SWEEPS = {"niah": NiahGrid, "ruler": RulerGrid}


@dataclass(frozen=True)
class Summary:
    """A run's numbers. summary.json writes the sweep's fields, and the perplexity documents' and
    the run's, at its top level, as it did before it had a schema."""

    samples: int  # graded samples, controls not counted
    errors: int
    error_kinds: dict[str, int]  # errors by ``fathom.records.error_kind``
    sweep: NiahGrid | RulerGrid | None = None  # None for a run of perplexity alone
    answer_likelihood: tuple[Row, ...] | None = None  # per length, where the gold answer's was read
    control: Row | None = None  # the no-context control (``control_summary``)
    perplexity: Perplexity | None = None
    run: RunFacts | None = None
    # Schema 5: the LLM judges' sections, one per rubric (``fathom.analysis.agreement``), where judged;
    # the samples far slower per token than their task's others at their length
    # (``fathom.analysis.slow``), if any.
    judges: tuple[Row, ...] = ()
    slow: Row | None = None
    # Schema 8: a thinking model's reasoning tokens per cell and its samples still thinking when their
    # reply ended (``fathom.analysis.thinking``), where any record holds reasoning.
    thinking: Row | None = None
    # Schema 8 too, added before any release wrote it: where a backend's provider counted the prompts
    # (``Manifest.provider_counted``), how its counts compare with the target lengths
    # (``fathom.analysis.provider_counts``).
    provider_counts: Row | None = None
    schema: int = SUMMARY_SCHEMA

    @property
    def kind(self) -> str:
        """The run's kind, as summary.json names it: "niah", "ruler" or "perplexity" (documents alone)."""
        if isinstance(self.sweep, RulerGrid):
            return "ruler"
        return "perplexity" if self.sweep is None else "niah"

    @property
    def lengths(self) -> tuple[Row, ...]:
        """The score per length (NIAH's or RULER's), empty for a run of perplexity alone."""
        return () if self.sweep is None else self.sweep.lengths

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "schema": self.schema,
            "kind": self.kind,
            "samples": self.samples,
            "errors": self.errors,
            "error_kinds": self.error_kinds,
        }
        if self.sweep is not None:
            # Sections a plain run does not have are left out, so its summary keeps its form.
            data |= {k: v for k, v in dataclasses.asdict(self.sweep).items() if k not in _OPTIONAL or v}
        if self.answer_likelihood is not None:
            data["answer_likelihood"] = self.answer_likelihood
        if self.control is not None:
            data["control"] = self.control
        if self.perplexity is not None:
            p = self.perplexity
            data |= {"perplexity": p.table, "documents": p.documents, "document_errors": p.errors}
        if self.judges:
            data["judges"] = list(self.judges)
        if self.slow is not None:
            data["slow"] = self.slow
        if self.thinking is not None:
            data["thinking"] = self.thinking
        if self.provider_counts is not None:
            data["provider_counts"] = self.provider_counts
        if self.run is not None:
            names = dataclasses.asdict(self.run)
            if names["fill"] == "exact":  # the default is left out: summaries keep their old form
                del names["fill"]
            data |= {"trained_window": names.pop("trained_window"), "run": names}
        return data

    @classmethod
    def from_json(cls, data: Any) -> Summary:
        """NewerSchemaError for a summary of a newer fathom; TypeError (or KeyError) for JSON that is
        no summary. A number that is not finite is read as None (``finite``): none is ever written."""
        if not isinstance(data, dict):
            raise TypeError(f"a JSON {type(data).__name__}, not an object")
        rest = SUMMARIES.upgrade(finite(data))
        kind = rest.pop("kind")
        sweep: NiahGrid | RulerGrid | None = None
        if kind != "perplexity":
            sweep_type = SWEEPS[kind]
            fields = [f.name for f in dataclasses.fields(sweep_type)]
            sweep = read(
                sweep_type, {name: rest.pop(name) for name in fields if name in rest or name not in _OPTIONAL}
            )
        perplexity = run = None
        if "perplexity" in rest:
            counts = {"documents": rest.pop("documents"), "errors": rest.pop("document_errors")}
            perplexity = read(Perplexity, {"table": rest.pop("perplexity"), **counts})
        if "run" in rest:
            run = read(RunFacts, {**rest.pop("run"), "trained_window": rest.pop("trained_window")})
        return dataclasses.replace(read(cls, rest), sweep=sweep, perplexity=perplexity, run=run)


def finite(value: Any) -> Any:
    """``value`` (JSON's form: dicts, lists, numbers, ...) with every number that is not finite (NaN,
    Infinity: a statistic of nothing, a degenerate interval) as None, JSON's null: summary.json is
    JSON, which has neither, and report.html's data is read by JSON.parse, which takes neither."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: finite(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(finite(item) for item in value)
    return value


def v1_to_v2(data: dict[str, Any]) -> dict[str, Any]:
    """Schema 2 names every summary's kind, NIAH's too, and counts error kinds in every one (a run
    of perplexity alone had none)."""
    return {"kind": "niah", "error_kinds": {}} | data


def v2_to_v3(data: dict[str, Any]) -> dict[str, Any]:
    """Schema 3 added NIAH's variants and hard-needle sections: a summary of schema 2 has neither."""
    return data


def v3_to_v4(data: dict[str, Any]) -> dict[str, Any]:
    """Schema 4 added the real suites' section: a summary of schema 3 is of no suite's run."""
    return data


def v4_to_v5(data: dict[str, Any]) -> dict[str, Any]:
    """Schema 5 added the LLM judges' sections: a summary of schema 4 is of a run never judged."""
    return data


def v5_to_v6(data: dict[str, Any]) -> dict[str, Any]:
    """Schema 6 added the low-overlap scores by the needles' form (``hard.forms``) and apart where a
    window names a near neighbour of the place (``hard.neighbours``): only the records can give them,
    so a summary of schema 5 reads without them (``fathom report`` derives them again)."""
    return data


def v6_to_v7(data: dict[str, Any]) -> dict[str, Any]:
    """Schema 7 added the effective length at the worst depth (``effective_length.worst_depth``) to
    NIAH's grid and each variant's, and RULER's categories to its grid: made here from the summary's
    own cells, as the records give them."""
    if data["kind"] == "ruler":
        categories = category_scores(TaskCell(**cell) for cell in data["grid"])
        return data | ({"categories": categories} if categories else {})
    if data["kind"] != "niah":
        return data
    variants = {task: _with_worst_depth(grid) for task, grid in data.get("variants", {}).items()}
    return _with_worst_depth(data) | ({"variants": variants} if variants else {})


def _with_worst_depth(grid: dict[str, Any]) -> dict[str, Any]:
    effective = grid["effective_length"]
    cells = [CellStats(**row) for row in grid["cells"]]
    worst = worst_depth_effective_length(cells, effective["threshold"])
    return grid | {"effective_length": effective | {"worst_depth": worst}}


def v7_to_v8(data: dict[str, Any]) -> dict[str, Any]:
    """Schema 8 added the reasoning's section (``thinking``): a summary of schema 7 is of records
    whose reasoning was never read apart (record schema 12 or before). It added the provider's counts
    (``provider_counts``) too, which only the records give: a summary of 7 reads without them
    (``fathom report`` derives them again)."""
    return data


def v8_to_v9(data: dict[str, Any]) -> dict[str, Any]:
    """Schema 9 gave fewer than 30 fractional scores Wilson's interval of their mean: a summary of 8
    reads with the intervals its fathom wrote (``fathom report`` derives them again from the
    records), its form unchanged."""
    return data


SUMMARIES = Versions(
    "summary",
    SUMMARY_SCHEMA,
    (v1_to_v2, v2_to_v3, v3_to_v4, v4_to_v5, v5_to_v6, v6_to_v7, v7_to_v8, v8_to_v9),
)
# A sweep's sections that only some runs have: absent from summary.json where empty.
_OPTIONAL = ("variants", "hard", "suites", "state", "babi", "listing", "mrcr", "categories")


def run_summary(
    records: Sequence[AnyRecord],
    threshold: float = 0.85,
    judgements: Sequence[JudgementRecord] = (),
    judges: Sequence[JudgeIdentity] = (),
    qualifications: Sequence[QualificationRecord] = (),
    counted_by: str | None = None,
) -> Summary:
    """NIAH's grid with ``threshold`` for its effective length (and the gold answer's likelihood, where
    read), or RULER's grid with RULER's own thresholds; the no-context control; the perplexity table;
    the ``judges``' sections from their ``judgements``; with ``counted_by`` (the backend's words, where
    its provider counted the prompts), how close its counts came to the target lengths. Made in
    summary.json's form and read back through ``Summary.from_json``, so that what is written is what
    reads."""
    samples, documents = split_records(records)
    summary: dict[str, Any] = {"kind": "perplexity", "samples": 0, "errors": 0, "error_kinds": {}}
    if samples and is_ruler_run(samples):
        summary = ruler_summary(samples)
        if is_suite_run(samples):
            summary["suites"] = suite_summary(samples)
        if is_state_run(samples):
            summary["state"] = state_summary(samples, threshold)
        if is_babi_run(samples):
            summary["babi"] = babi_summary(samples, threshold)
        if is_listing_run(samples):
            summary["listing"] = listing_summary(samples, threshold)
        if is_mrcr_run(samples):
            summary["mrcr"] = mrcr_summary(samples, threshold)
    elif samples:
        summary = {"kind": "niah", **_niah(samples, threshold)}
        # The low-overlap items apart from the context: scores on the known ones, bases (hard.knowledge).
        knowledge = knowledge_summary(samples, probe_records(records), threshold)
        if knowledge:
            summary["hard"] = {**summary.get("hard", {}), "knowledge": knowledge}
        likelihood = answer_likelihood(samples)
        if likelihood:
            summary["answer_likelihood"] = likelihood
    controls = control_records(records)
    if controls:
        summary["control"] = control_summary(controls, samples)
    if documents:
        summary["perplexity"] = perplexity_table(documents)
        summary["documents"] = len(documents)
        summary["document_errors"] = sum(1 for r in documents if r.error is not None)
    if judges:
        summary["judges"] = judge_sections(samples, judgements, judges, qualifications)
    slow = slow_samples(samples)
    if slow["samples"]:
        summary["slow"] = slow
    if (thinking := thinking_summary(samples)) is not None:
        summary["thinking"] = thinking
    if counted_by is not None:
        summary["provider_counts"] = provider_counts(samples, counted_by)
    return Summary.from_json({**summary, "schema": SUMMARY_SCHEMA})


def _niah(samples: Sequence[SampleRecord], threshold: float) -> dict[str, Any]:
    """NIAH's grid over the variants asked (a literal twin is a contrast, not more data), each
    variant's grid where there are several, and the hard needles' sections."""
    asked = [r for r in samples if not is_literal_twin(r.task)]
    summary = summarize(asked, threshold=threshold)
    tasks = sorted({r.task for r in samples})
    if len(tasks) > 1:
        summary["variants"] = {
            task: _grid(summarize([r for r in samples if r.task == task], threshold=threshold))
            for task in tasks
        }
    hard = hard_summary(samples)
    if hard:
        summary["hard"] = hard
    return summary


def _grid(summary: dict[str, Any]) -> Row:
    """A variant's grid: the NIAH summary's sweep fields."""
    return {k: summary[k] for k in ("cells", "lengths", "effective_length", "lost_in_the_middle_index")}
