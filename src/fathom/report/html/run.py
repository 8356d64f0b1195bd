"""report.html, one self-contained page per run (a comparison's page is ``fathom.report.html.compare``'s).

Every number comes from ``fathom.analysis.niah``, ``ruler_analysis`` and ``perplexity_analysis``, through
the run's summary; this module only presents them (see ``fathom.report.html.page`` for how pages stay
self-contained and safe with untrusted text).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from fathom.analysis.failures import failure_kind, hedged_right, rejected_lure
from fathom.analysis.select import is_literal_twin, split_records
from fathom.analysis.summary import NiahGrid, Perplexity, Row, RulerGrid, Summary
from fathom.records import AnyRecord, SampleRecord, error_kind
from fathom.report.files import DEPTH, PERPLEXITY, REPORT, TRAP
from fathom.report.html.babi import babi_section
from fathom.report.html.compare import comparison_section
from fathom.report.html.excerpt import word_bounded
from fathom.report.html.failures import HEDGED_RIGHT, REJECTED_RIGHT, failures_section
from fathom.report.html.hard import hard_section, variants_section
from fathom.report.html.header import page_header
from fathom.report.html.judges import judges_section
from fathom.report.html.listing import listing_section
from fathom.report.html.mrcr import mrcr_section
from fathom.report.html.page import (
    FAILURE_LABELS,
    cell_key,
    esc,
    image,
    interval,
    legend,
    niah_heatmap,
    page_parts,
    percent,
    ruler_grid,
    table,
)
from fathom.report.html.state import state_section
from fathom.report.html.suites import suite_section
from fathom.report.html.thinking import thinking_section
from fathom.report.plots import format_length
from fathom.report.text import slow_cause
from fathom.run.store import RunFolder
from fathom.units import length_or_none


def _niah_section(grid: NiahGrid) -> str:
    rows = [
        (format_length(r["length"]), percent(r["mean"]), interval(r), r["n"], r["errors"],
         "yes" if r["beyond_window"] else "")
        for r in grid.lengths
    ]  # fmt: skip
    return (
        '<section id="grid"><h2>Accuracy by context length and needle depth</h2>'
        "<p>Click a cell to see its samples below.</p>"
        f"{niah_heatmap(grid)}{legend('accuracy')}<h3>By length (pooled over depths)</h3>"
        f"{table(('length', 'accuracy', '95% interval', 'k', 'errors', 'beyond window'), rows)}</section>"
    )


def _aggregate_row(name: str, row: Row) -> list[str]:
    scores = [
        ("n/a" if row[key] is None else f"{row[key]:.1f}") for key in ("average", "wavg_inc", "wavg_dec")
    ]
    return [
        name,
        *scores,
        length_or_none(row["effective_length"]),
        length_or_none(row["effective_length_relative"]),
    ]


def _ruler_section(grid: RulerGrid, folder: RunFolder) -> str:
    lengths = "length limit" if grid.suites else "context length"
    top = (
        f'<section id="grid"><h2>Score by task and {lengths} (percent)</h2>'
        "<p>Click a task's cell to see its samples below; the last row is the mean over tasks.</p>"
        f"{ruler_grid(grid)}{legend('score')}"
    )
    # RULER's thresholds are no suite's, nor state's, nor bAbI's, nor long outputs', nor mrcr's
    if grid.suites or grid.state or grid.babi or grid.listing or grid.mrcr:
        return top + "</section>"
    mean, low = grid.aggregates["mean"], grid.aggregates["lower_bound"]
    head = ("on", "average", "wAvg inc", "wAvg dec", f"effective length (> {mean['threshold']:g})",
            f"effective length (> {mean['relative_threshold']:g} x the shortest length's)")  # fmt: skip
    rows = [_aggregate_row("per-length mean", mean), _aggregate_row("95% lower bound", low)]
    return (
        f"{top}<h3>RULER's aggregates (percent)</h3>{table(head, rows)}{_categories(grid.categories)}"
        f"{image(folder.path / DEPTH, 'score by needle depth')}</section>"
    )


def _categories(categories: Sequence[Row]) -> str:
    """RULER's four categories: each one's mean over its tasks per length, and its 95% interval."""
    if not categories:
        return ""
    lengths = [r["length"] for r in categories[0]["lengths"]]
    rows = [
        (row["category"], ", ".join(row["tasks"]),
         *("n/a" if r["mean"] is None else f"{percent(r['mean'])} ({interval(r)})" for r in row["lengths"]))
        for row in categories
    ]  # fmt: skip
    head = ("category", "tasks", *(format_length(n) for n in lengths))
    return f"<h3>By RULER's category (mean over its tasks, 95% interval)</h3>{table(head, rows)}"


def _perplexity_section(perplexity: Perplexity, folder: RunFolder) -> str:
    last = {b["length"]: b for b in perplexity.table["buckets"]}  # sorted: the last bucket wins
    rows = []
    for r in perplexity.table["lengths"]:
        far = last.get(r["length"])
        scored = r["perplexity"] is not None
        rows.append((
            format_length(r["length"]), f"{r['perplexity']:.2f}" if scored else "n/a",
            f"{r['ci_low']:.2f} to {r['ci_high']:.2f}" if scored else "",
            f"{format_length(far['lo'])}-{format_length(far['hi'])}: {far['perplexity']:.2f}" if far else "",
            r["documents"], r["errors"], "yes" if r["beyond_window"] else "",
        ))  # fmt: skip
    head = ("length", "perplexity", "95% interval", "last bucket", "documents", "errors", "beyond window")
    figures = image(folder.path / TRAP, "perplexity trap") + image(folder.path / PERPLEXITY, "perplexity")
    return f'<section id="perplexity"><h2>Perplexity</h2>{table(head, rows)}{figures}</section>'


def _control_section(control: Mapping[str, Any]) -> str:
    """The no-context control: its score per task, how much the context raised the gold answer's
    log-probability, and the questions answered without the context."""
    rows = [(task, percent(t["mean"]), interval(t), t["n"]) for task, t in control["by_task"].items()]
    parts = [
        '<section id="control"><h2>No-context control</h2><p>Every question asked again with the '
        "context cut out of its prompt (template, instruction, question and answer prefix kept). A question "
        "answered without the context was memorised or guessed: its sample's score is no evidence that the "
        f"model used the context. {control['errors']} control errors.</p>",
        table(("task", "score without the context", "95% interval", "questions"), rows),
    ]
    if control["answer_logprob_gain"]:
        gain = control["answer_logprob_gain"]
        gains = [(format_length(g["length"]), f"{g['mean_nats']:+.2f}", g["pairs"]) for g in gain]
        parts += [
            "<h3>What the context adds to the gold answer</h3><p>Mean of log p(gold answer) with the context "
            "minus without it, teacher-forced, in nats: it falls towards 0 where the model stops using the "
            "context.</p>",
            table(("length", "gain (nats)", "pairs"), gains),
        ]
    if control["examples"]:
        examples = [(e["sample_id"], e["question"], ", ".join(e["answers"]), e["output"], f"{e['score']:g}")
                    for e in control["examples"]]  # fmt: skip
        parts += [
            f"<h3>Answered without the context ({control['answered']}; the first {len(examples)})</h3>",
            table(("sample", "question", "expected", "output without the context", "score"), examples),
        ]
    return "".join(parts) + "</section>"


def sample_json(record: SampleRecord) -> dict[str, Any]:
    """What the page shows of a sample (the fields the panel lists)."""
    return {
        "id": record.sample_id,
        "question": record.question,
        "answers": list(record.answers),
        "output": record.output,
        "score": record.score,
        "scoring": record.scoring,
        "matched": list(record.matched),
        "tokens": record.actual_tokens,
        "target": record.target_tokens,
        "beyond": record.beyond_window,
        "needle_depths": list(record.needle_depths),
        "latency_s": record.latency_s,
        "finish": record.finish_reason,
        "error": record.error,
        "context": None if record.needle_context is None else list(map(word_bounded, record.needle_context)),
        "failure": failure_kind(record),
        "extracted": record.extracted,
        "lured": list(record.lured),
    }


def _cells(record: SampleRecord, variants: bool) -> list[str]:
    """The cells whose click lists the sample: RULER's task at its length; NIAH's pooled cell (which
    pools the variants asked, not the literal twins) and, in a run of several variants, its
    variant's cell."""
    if record.depth is None:
        return [cell_key(record.length, record.task)]
    keys = [] if is_literal_twin(record.task) else [cell_key(record.length, record.depth)]
    return [*keys, cell_key(record.length, record.depth, record.task)] if variants else keys


def page_data(records: Sequence[SampleRecord]) -> dict[str, Any]:
    """The samples, once each, and the lists that name them: by cell, by failure kind, by error. The
    samples are made one at a time as the page is written (``page_parts``), never held as a list."""
    lists: defaultdict[str, list[int]] = defaultdict(list)
    variants = len({r.task for r in records if r.depth is not None}) > 1
    for index, record in enumerate(records):
        for key in _cells(record, variants):
            lists["cell " + key].append(index)
        kind = failure_kind(record)
        if kind is not None:
            reason = f"error {error_kind(record.error)}" if record.error is not None else f"failure {kind}"
            lists[reason].append(index)
        if hedged_right(record):
            lists[HEDGED_RIGHT].append(index)
        if rejected_lure(record):
            lists[REJECTED_RIGHT].append(index)
    return {"samples": map(sample_json, records), "lists": lists, "labels": FAILURE_LABELS}


PANEL = (
    '<section id="panel" hidden><h2 class="panel-title"></h2>'
    '<p class="muted">samples of the selected cell</p><div class="samples"></div></section>'
)


def _slow_section(slow: Row, model: str) -> str:
    """The samples far slower per token than their task's median at their length: a KV cache paged
    to host memory or a server in trouble is tens of times slower, which an average hides (a simulated
    backend's slow samples are named as the machine's load, ``slow_cause``)."""
    rows = [
        (
            r["sample_id"],
            r["seconds"],
            r["ms_per_token"],
            r["median_ms_per_token"],
            f"{r['factor']}x",
            r["timed"],
        )
        for r in slow["samples"]
    ]
    head = ("sample", "seconds", "ms per prompt token", "its task's median", "factor", "timed by")
    return (
        f'<section id="slow"><h2>Slow samples</h2><p>{esc(slow["count"])} samples took at least '
        f"{esc(slow['factor'])} times their task's median time per prompt token at their length (and at "
        f"least {esc(slow['least_seconds'])} s): likely {esc(slow_cause(model))}. Their answers are "
        "graded as any; their times are not the model's speed.</p>"
        f"{table(head, rows)}</section>"
    )


def _order(record: SampleRecord) -> tuple[str, int, float, int]:
    return record.task, record.length, -1.0 if record.depth is None else record.depth, record.sample


def write_report(
    folder: RunFolder,
    summary: Summary,
    comparison: Mapping[str, Any] | None = None,
    records: Sequence[AnyRecord] | None = None,
) -> Path:
    """Write ``report.html`` in the run folder from its manifest, records, plots and ``summary``
    (derive's); with ``comparison`` (fathom compare's result) it gains the comparison section.
    ``records`` are the folder's latest, where the caller has them already (read otherwise): a second
    read of a large run would hold its records twice."""
    manifest = folder.read_manifest()
    samples = sorted(split_records(folder.latest() if records is None else records)[0], key=_order)
    body = [page_header(manifest, samples, summary)]
    if isinstance(summary.sweep, RulerGrid):
        body.append(_ruler_section(summary.sweep, folder))
        if summary.sweep.suites:
            body.append(suite_section(summary.sweep.suites, summary.judges))
        if summary.sweep.state:
            body.append(state_section(summary.sweep.state))
        if summary.sweep.babi:
            body.append(babi_section(summary.sweep.babi))
        if summary.sweep.listing:
            body.append(listing_section(summary.sweep.listing))
        if summary.sweep.mrcr:
            body.append(mrcr_section(summary.sweep.mrcr))
    elif isinstance(summary.sweep, NiahGrid):
        body.append(_niah_section(summary.sweep))
        body.append(variants_section(summary.sweep.variants))
    if samples:
        body.append(PANEL)
    if isinstance(summary.sweep, NiahGrid):
        body.append(hard_section(summary.sweep.hard))
    if samples:
        body.append(failures_section(samples))
    if summary.control is not None:
        body.append(_control_section(summary.control))
    if summary.perplexity is not None:
        body.append(_perplexity_section(summary.perplexity, folder))
    if summary.slow is not None:
        body.append(_slow_section(summary.slow, manifest.spec.model))
    body.append(thinking_section(summary.thinking))
    body.append(judges_section(summary.judges))
    if comparison is not None:
        body.append(comparison_section(comparison))
    body.append(
        f"<footer>Made by fathom from {esc(folder.path.name)}/manifest.json and samples.jsonl; "
        "<code>fathom report RUN</code> re-makes it.</footer>"
    )
    title = f"fathom · {manifest.spec.model} · {manifest.spec.task}"
    return folder.write_derived(REPORT, page_parts(title, "\n".join(body), page_data(samples)))
