"""report.html, one self-contained page per run, and the page of a comparison of two runs.

Every number comes from ``fathom.analysis``, ``ruler_analysis`` and ``perplexity_analysis``, through
the run's summary; this module only presents them (see ``fathom.html_page`` for how pages stay
self-contained and safe with untrusted text).
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from fathom.analysis import FAILURE_KINDS, error_kinds, failure_kind
from fathom.html_page import (
    Square,
    cell_key,
    depth_label,
    esc,
    heatmap,
    image,
    legend,
    length_or_none,
    niah_heatmap,
    number_box,
    page,
    percent,
    ruler_grid,
    summary_heatmap,
    table,
)
from fathom.plots import format_length
from fathom.records import SampleRecord
from fathom.report import DEPTH, PERPLEXITY, TRAP, split_records
from fathom.ruler_analysis import task_order
from fathom.store import RunFolder

REPORT = "report.html"

FAILURE_LABELS = {
    "error": "error: never graded (the backend failed, or the prompt missed its length or limit)",
    "beyond_window": "wrong, on a prompt beyond the model's trained window",
    "empty": "empty output",
    "partial": "partly right: some of the expected answers, not all",
    "refusal": "refused, or said it found no answer",
    "wrong_answer": "wrong answer",
}

# The run's report.


def _modified(environment: Mapping[str, Any]) -> str:
    return ", with uncommitted changes" if environment.get("git_dirty") else ""


def _short(digest: object) -> str:
    return str(digest)[:12] if digest else "n/a"


def _corpus(task: Mapping[str, Any]) -> str:
    """The haystack corpus, or for a suite of tasks (RULER's) each task's corpus or data set."""
    if "corpus" in task:
        return f"{task['corpus']} (sha256 {_short(task.get('corpus_sha256'))})"
    sources = {d.get("corpus") or d.get("dataset") for d in task.get("data", {}).values()}
    return ", ".join(sorted(s for s in sources if s)) or "none"


def _facts(manifest: Mapping[str, Any], records: Sequence[SampleRecord]) -> list[tuple[str, str]]:
    """The run as the manifest resolved it, as (name, value) pairs."""
    identity = manifest.get("identity", {})
    spec, task = identity.get("spec", {}), identity.get("task", {})
    tokenizer, backend = identity.get("tokenizer", {}), identity.get("backend", {})
    served, where = manifest.get("backend", {}), manifest.get("environment", {})
    depths = spec.get("depths") or []
    window, exact = served.get("trained_window"), served.get("exact_lengths", True)
    return [
        ("model", f"{spec.get('model')} (backend {backend.get('name')})"),
        ("backend settings", json.dumps(backend.get("settings", {}), sort_keys=True)),
        ("tokenizer", f"{tokenizer.get('name')} (sha256 {_short(tokenizer.get('sha256'))})"),
        (
            "template",
            f"{task.get('template', spec.get('template'))} (sha256 {_short(task.get('template_sha256'))})",
        ),
        ("task", f"{spec.get('task')} (version {task.get('version', 'n/a')})"),
        ("lengths", ", ".join(format_length(n) for n in spec.get("lengths", []))),
        ("depths", ", ".join(depth_label(d) for d in depths) or ("drawn per sample" if records else "none")),
        ("samples per cell (k)", str(spec.get("samples"))),
        ("seed", str(spec.get("seed"))),
        ("corpus", _corpus(task)),
        ("needle kind", ", ".join(sorted({r.needle_kind for r in records})) or "n/a"),
        ("trained window", "unknown" if window is None else format_length(window)),
        ("input", f"{served.get('input')}, {'exact' if exact else 'approximate'} lengths"),
        ("fathom", f"{where.get('fathom_version')} (git {_short(where.get('git_sha'))}{_modified(where)})"),
        ("created", f"{where.get('created')} on {where.get('host')}"),
    ]


def headline(summary: Mapping[str, Any]) -> str:
    """The run's main numbers, as boxes."""
    boxes = []
    if summary.get("kind") == "ruler":
        mean, low = summary["aggregates"]["mean"], summary["aggregates"]["lower_bound"]
        threshold = f"score > {mean['threshold']:g}"
        boxes += [
            number_box(length_or_none(mean["effective_length"]), f"effective length ({threshold})"),
            number_box(length_or_none(low["effective_length"]), f"on the 95% lower bound ({threshold})"),
            number_box(
                length_or_none(mean["effective_length_relative"]),
                f"effective length (score > {mean['relative_threshold']:g} x the shortest length's)",
            ),
            number_box("n/a" if mean["average"] is None else f"{mean['average']:.1f}", "RULER average"),
        ]
    elif "effective_length" in summary:
        effective, lim = summary["effective_length"], summary["lost_in_the_middle_index"]
        threshold = f"accuracy ≥ {effective['threshold']:g}"
        boxes += [
            number_box(length_or_none(effective["mean"]), f"effective length ({threshold})"),
            number_box(length_or_none(effective["lower_bound"]), f"on the 95% lower bound ({threshold})"),
            number_box("n/a" if lim is None else f"{lim:+.3f}", "lost-in-the-middle index (edges - middle)"),
        ]
    if "perplexity" in summary:
        errors = summary["document_errors"]
        boxes.append(number_box(str(summary["documents"]), f"perplexity documents ({errors} errors)"))
    kinds = ", ".join(f"{kind} {count}" for kind, count in summary.get("error_kinds", {}).items())
    boxes += [
        number_box(str(summary["samples"]), "samples"),
        number_box(str(summary["errors"]), f"errors ({kinds})" if kinds else "errors"),
    ]
    return f'<div class="headline">{"".join(boxes)}</div>'


def _niah_section(summary: Mapping[str, Any]) -> str:
    rows = [
        (format_length(r["length"]), percent(r["mean"]), f"{percent(r['ci_low'])} to {percent(r['ci_high'])}",
         r["n"], r["errors"], "yes" if r["beyond_window"] else "")
        for r in summary["lengths"]
    ]  # fmt: skip
    return (
        '<section id="grid"><h2>Accuracy by context length and needle depth</h2>'
        "<p>Click a cell to see its samples below.</p>"
        f"{niah_heatmap(summary)}{legend('accuracy')}<h3>By length (pooled over depths)</h3>"
        f"{table(('length', 'accuracy', '95% interval', 'k', 'errors', 'beyond window'), rows)}</section>"
    )


def _aggregate_row(name: str, row: Mapping[str, Any]) -> list[str]:
    scores = [
        ("n/a" if row[key] is None else f"{row[key]:.1f}") for key in ("average", "wavg_inc", "wavg_dec")
    ]
    return [
        name,
        *scores,
        length_or_none(row["effective_length"]),
        length_or_none(row["effective_length_relative"]),
    ]


def _ruler_section(summary: Mapping[str, Any], folder: RunFolder) -> str:
    mean, low = summary["aggregates"]["mean"], summary["aggregates"]["lower_bound"]
    head = ("on", "average", "wAvg inc", "wAvg dec", f"effective length (> {mean['threshold']:g})",
            f"effective length (> {mean['relative_threshold']:g} x the shortest length's)")  # fmt: skip
    rows = [_aggregate_row("per-length mean", mean), _aggregate_row("95% lower bound", low)]
    return (
        '<section id="grid"><h2>Score by task and context length (percent)</h2>'
        "<p>Click a task's cell to see its samples below; the last row is the mean over tasks.</p>"
        f"{ruler_grid(summary)}{legend('score')}<h3>RULER's aggregates (percent)</h3>{table(head, rows)}"
        f"{image(folder.path / DEPTH, 'score by needle depth')}</section>"
    )


def _perplexity_section(summary: Mapping[str, Any], folder: RunFolder) -> str:
    last = {b["length"]: b for b in summary["perplexity"]["buckets"]}  # sorted: the last bucket wins
    rows = []
    for r in summary["perplexity"]["lengths"]:
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


def _error_kind(record: SampleRecord) -> str:
    (kind,) = error_kinds([record])
    return kind


def _failures_section(records: Sequence[SampleRecord]) -> str:
    """Counts of each kind of failure, and each kind's samples in a collapsed list (filled by the
    script when opened); errors in sub-lists by their kind."""
    kinds = Counter(failure_kind(r) for r in records)
    rows = [(kind, FAILURE_LABELS[kind], kinds[kind]) for kind in FAILURE_KINDS]
    lists = []
    for kind in FAILURE_KINDS:
        if not kinds[kind]:
            continue
        summary = f"<summary>{esc(FAILURE_LABELS[kind])}: {kinds[kind]}</summary>"
        if kind == "error":
            by_kind = error_kinds(records)
            inner = "".join(
                f'<details data-samples="error {esc(name)}"><summary>{esc(name)}: {count}</summary>'
                '<div class="samples"></div></details>'
                for name, count in by_kind.items()
            )
            lists.append(f'<details class="failure" data-kind="error">{summary}{inner}</details>')
        else:
            lists.append(
                f'<details class="failure" data-kind="{kind}" data-samples="failure {kind}">{summary}'
                '<div class="samples"></div></details>'
            )
    right = kinds[None]
    return (
        f'<section id="failures"><h2>Failures</h2><p>{right} of {len(records)} samples fully right. '
        "Each failed sample is counted once, under the first kind that applies, in this order.</p>"
        f"{table(('kind', 'what it means', 'samples'), rows)}{''.join(lists)}</section>"
    )


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
        "context": None if record.needle_context is None else list(record.needle_context),
        "failure": failure_kind(record),
    }


def page_data(records: Sequence[SampleRecord]) -> dict[str, Any]:
    """The samples, once each, and the lists that name them: by cell, by failure kind, by error."""
    lists: defaultdict[str, list[int]] = defaultdict(list)
    for index, record in enumerate(records):
        lists[
            "cell " + cell_key(record.length, record.task if record.depth is None else record.depth)
        ].append(index)
        kind = failure_kind(record)
        if kind is not None:
            lists[f"error {_error_kind(record)}" if kind == "error" else f"failure {kind}"].append(index)
    return {"samples": [sample_json(r) for r in records], "lists": lists, "labels": FAILURE_LABELS}


PANEL = (
    '<section id="panel" hidden><h2 class="panel-title"></h2>'
    '<p class="muted">samples of the selected cell</p><div class="samples"></div></section>'
)


def _header(manifest: Mapping[str, Any], records: Sequence[SampleRecord], summary: Mapping[str, Any]) -> str:
    spec = manifest.get("identity", {}).get("spec", {})
    facts = "".join(f"<dt>{esc(name)}</dt><dd>{esc(value)}</dd>" for name, value in _facts(manifest, records))
    return (
        f"<header><h1>{esc(spec.get('model'))} · {esc(spec.get('task'))}</h1>"
        f"{headline(summary)}<details open><summary>run</summary>"
        f'<dl class="facts">{facts}</dl></details></header>'
    )


def _order(record: SampleRecord) -> tuple[str, int, float, int]:
    return record.task, record.length, -1.0 if record.depth is None else record.depth, record.sample


def write_report(
    folder: RunFolder, summary: Mapping[str, Any], comparison: Mapping[str, Any] | None = None
) -> Path:
    """Write ``report.html`` in the run folder from its manifest, records, plots and ``summary``
    (derive's); with ``comparison`` (fathom compare's result) it gains the comparison section."""
    manifest = folder.read_manifest()
    samples = sorted(split_records(folder.latest())[0], key=_order)
    body = [_header(manifest, samples, summary)]
    if summary.get("kind") == "ruler":
        body.append(_ruler_section(summary, folder))
    elif "cells" in summary:
        body.append(_niah_section(summary))
    if samples:
        body += [PANEL, _failures_section(samples)]
    if "perplexity" in summary:
        body.append(_perplexity_section(summary, folder))
    if comparison is not None:
        body.append(comparison_section(comparison))
    body.append(
        f"<footer>Made by fathom from {esc(folder.path.name)}/manifest.json and samples.jsonl; "
        "<code>fathom report RUN</code> re-makes it.</footer>"
    )
    spec = manifest.get("identity", {}).get("spec", {})
    title = f"fathom · {spec.get('model')} · {spec.get('task')}"
    return folder.write_derived(REPORT, page(title, "\n".join(body), page_data(samples)))


# A comparison of two runs (fathom compare's result).

VERDICT_FLAGS = {"regressed": " ▼", "improved": " ▲"}


def _where(cell: Mapping[str, Any]) -> str:
    row = str(cell["task"]) if cell["depth"] is None else depth_label(cell["depth"])
    return f"{format_length(cell['length'])} · {row}"


def _difference_square(cell: Mapping[str, Any], by_depth: bool) -> Square:
    title = (
        f"{_where(cell)}: base {cell['base_mean']:.1%} → new {cell['new_mean']:.1%} "
        f"({100 * cell['difference']:+.1f} points), {cell['pairs']} pairs, {cell['worse']} worse, "
        f"{cell['better']} better, p {cell['p_value']:.3g}, adjusted p {cell['p_adjusted']:.3g}: "
        f"{cell['verdict']}"
    )
    return Square(
        row=depth_label(cell["depth"]) if by_depth else str(cell["task"]),
        column=format_length(cell["length"]),
        # The accuracy colours over -1..1: red worse, yellow the same, green better.
        value=min(1.0, max(0.0, (cell["difference"] + 1) / 2)),
        label=f"{100 * cell['difference']:+.0f}{VERDICT_FLAGS.get(cell['verdict'], '')}",
        title=title,
        marks=(cell["verdict"],),
        data=(
            ("length", str(cell["length"])),
            ("depth", repr(cell["depth"])) if by_depth else ("task", str(cell["task"])),
            ("verdict", cell["verdict"]),
        ),
    )


def difference_heatmap(comparison: Mapping[str, Any]) -> str:
    """New minus base per cell, in points; regressed and improved cells outlined and flagged."""
    cells = comparison["cells"]
    by_depth = all(c["depth"] is not None for c in cells)
    squares = [_difference_square(c, by_depth) for c in cells]
    if by_depth:
        rows = [depth_label(d) for d in sorted({c["depth"] for c in cells})]
    else:
        rows = task_order(str(c["task"]) for c in cells)
    columns = [format_length(n) for n in sorted({c["length"] for c in cells})]
    return heatmap(squares, rows, columns, corner="new minus base")


def _changed_cells(comparison: Mapping[str, Any]) -> str:
    changed = sorted(
        (c for c in comparison["cells"] if c["verdict"] != "unchanged"),
        key=lambda c: (c["verdict"], c["p_adjusted"]),
    )
    if not changed:
        return "<p>none</p>"
    head = ("verdict", "cell", "base", "new", "difference (points)", "pairs", "worse", "better", "p",
            "adjusted p")  # fmt: skip
    rows = [
        (c["verdict"], _where(c), percent(c["base_mean"]), percent(c["new_mean"]),
         f"{100 * c['difference']:+.1f}", c["pairs"], c["worse"], c["better"], f"{c['p_value']:.3g}",
         f"{c['p_adjusted']:.3g}")
        for c in changed
    ]  # fmt: skip
    return table(head, rows)


def _comparison_boxes(comparison: Mapping[str, Any]) -> str:
    overall, effective = comparison["overall"], comparison["effective_length"]
    base, new = effective["base"], effective["new"]
    boxes = [
        number_box(
            f"{percent(overall['base_mean'])} → {percent(overall['new_mean'])}",
            f"overall, base → new (p {overall['p_value']:.3g})",
        ),
        number_box(str(comparison["regressions"]), "regressed cells"),
        number_box(str(comparison["improvements"]), "improved cells"),
        number_box(f"{length_or_none(base['mean'])} → {length_or_none(new['mean'])}", "effective length"),
        number_box(
            f"{length_or_none(base['lower_bound'])} → {length_or_none(new['lower_bound'])}",
            "effective length on the 95% lower bound",
        ),
    ]
    return f'<div class="headline">{"".join(boxes)}</div>'


def comparison_section(comparison: Mapping[str, Any]) -> str:
    c, left_out, overall = comparison, comparison["left_out"], comparison["overall"]
    return (
        f'<section id="comparison"><h2>Comparison</h2><p>base: {esc(c["base"]["model"])} '
        f"({esc(c['base']['path'])})<br>new: {esc(c['new']['model'])} ({esc(c['new']['path'])})</p>"
        f"{_comparison_boxes(c)}<p>{esc(c['test'])} per cell over {esc(c['pairs'])} paired samples, "
        f"{esc(c['correction'])}-corrected at alpha {esc(c['alpha'])}; {esc(overall['worse'])} pairs worse, "
        f"{esc(overall['better'])} better; left out: {esc(left_out['errors'])} with errors, "
        f"{esc(left_out['unpaired'])} unpaired.</p>{difference_heatmap(c)}"
        '<p class="legend">colour and label: new minus base, in points; ▼ regressed, ▲ improved (adjusted p '
        "below alpha); hover a cell for its numbers</p>"
        f"<h3>Regressed and improved cells</h3>{_changed_cells(c)}</section>"
    )


def write_comparison_html(
    comparison: Mapping[str, Any],
    out: Path,
    base_summary: Mapping[str, Any] | None = None,
    new_summary: Mapping[str, Any] | None = None,
) -> Path:
    """A page of its own for a comparison (compare.html), with the two runs' grids side by side
    when their summaries are given."""
    names = f"{comparison['base']['model']} → {comparison['new']['model']}"
    body = [f"<header><h1>{esc(names)}</h1></header>", comparison_section(comparison)]
    if base_summary is not None and new_summary is not None:
        figures = "".join(
            f"<figure><figcaption>{esc(name)}: {esc(comparison[name]['model'])}</figcaption>"
            f"{summary_heatmap(summary, with_samples=False, size='compact')}</figure>"
            for name, summary in (("base", base_summary), ("new", new_summary))
        )
        body.append(f'<section><h2>The two runs</h2><div class="gallery">{figures}</div></section>')
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(page(f"fathom · {names}", "\n".join(body), {}), encoding="utf-8")
    return out
