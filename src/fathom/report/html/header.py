"""report.html's header: the run as its manifest resolved it (model, tokenizer, lengths, where and when it
ran, its resumes) and its main numbers as boxes."""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from fathom.analysis.control import answered_share
from fathom.analysis.summary import NiahGrid, RulerGrid, Summary
from fathom.manifest import Environment, Manifest
from fathom.records import SampleRecord
from fathom.report.html.babi import babi_boxes
from fathom.report.html.listing import listing_boxes
from fathom.report.html.mrcr import mrcr_boxes
from fathom.report.html.page import depth_label, esc, number_box, percent
from fathom.report.html.state import state_boxes
from fathom.report.html.suites import suite_boxes
from fathom.report.plots import format_length
from fathom.report.provider_text import provider_counts_line
from fathom.report.text import answered_count, controls_count, samples_count
from fathom.units import length_or_none


def _modified(environment: Environment) -> str:
    return ", with uncommitted changes" if environment.git_dirty else ""


def _short(digest: object) -> str:
    return str(digest)[:12] if digest else "n/a"


# An absolute path into an installed package (a tokenizer file, a model in a virtualenv) is told by
# what follows site-packages/ (or dist-packages/); the rest is the same in every row.
_INSTALLED = re.compile(r"/[^\s\"']*/(?:site|dist)-packages/")


def short_paths(text: str) -> str:
    """``text`` with each path into an installed package cut to its package-relative part."""
    return _INSTALLED.sub("…/", text)


def _full(value: str) -> str:
    """A title attribute with the full text, where short_paths cut it (shown on hover)."""
    return f' title="{esc(value)}"' if short_paths(value) != value else ""


def _corpus(task: Mapping[str, Any]) -> str:
    """The haystack corpus, or for a suite of tasks (RULER's) each task's corpus or data set."""
    if "corpus" in task:
        return f"{task['corpus']} (sha256 {_short(task.get('corpus_sha256'))})"
    sources = {d.get("corpus") or d.get("dataset") for d in task.get("data", {}).values()}
    return ", ".join(sorted(s for s in sources if s)) or "none"


# How a run's prompts meet their lengths (--fill), as the report says it.
_FILLS = {
    "exact": "exact: every prompt and its new tokens fill the length",
    "ruler": "RULER's: haystacks sized by RULER's search, below the length (each record has both)",
}


def _facts(manifest: Manifest, records: Sequence[SampleRecord]) -> list[tuple[str, str]]:
    """The run as the manifest resolved it, as (name, value) pairs."""
    spec, identity, served, where = manifest.spec, manifest.identity, manifest.backend, manifest.environment
    task, window = identity.task, served.trained_window
    return [
        ("model", f"{spec.model} (backend {identity.backend.name})"),
        ("backend settings", json.dumps(identity.backend.settings, sort_keys=True)),
        ("tokenizer", f"{identity.tokenizer.name} (sha256 {_short(identity.tokenizer.sha256)})"),
        ("template", f"{task.get('template', spec.template)} (sha256 {_short(task.get('template_sha256'))})"),
        ("task", f"{spec.task} (version {task.get('version', 'n/a')})"),
        ("lengths", ", ".join(format_length(n) for n in spec.lengths)),
        ("fill", _FILLS[spec.fill]),
        (
            "depths",
            ", ".join(depth_label(d) for d in spec.depths) or ("drawn per sample" if records else "none"),
        ),
        ("samples per cell (k)", str(spec.samples)),
        ("seed", str(spec.seed)),
        ("corpus", _corpus(task)),
        ("needle kind", ", ".join(sorted({r.needle_kind for r in records})) or "n/a"),
        ("trained window", "unknown" if window is None else format_length(window)),
        ("input", f"{served.input}, {'exact' if served.exact_lengths else 'approximate'} lengths"),
        ("fathom", f"{where.fathom_version} (git {_short(where.git_sha)}{_modified(where)})"),
        ("created", f"{where.created} on {where.host}"),
        *_resumes(manifest),
    ]


def _resumes(manifest: Manifest) -> list[tuple[str, str]]:
    """The resumes made elsewhere, or with other transport settings: where each began and what in
    it differed from the start before."""
    starts = manifest.starts()
    return [
        ("resumed", f"{later.environment.created} on {later.environment.host}, after "
         f"{later.records_before} records (differs in: {', '.join(later.differences(earlier))})")
        for earlier, later in itertools.pairwise(starts)
    ]  # fmt: skip


def headline(summary: Summary) -> str:
    """The run's main numbers, as boxes."""
    boxes = []
    sweep = summary.sweep
    if isinstance(sweep, RulerGrid) and sweep.suites:  # RULER's thresholds are no real suite's
        boxes += suite_boxes(sweep.suites)
    elif isinstance(sweep, RulerGrid) and sweep.state:  # nor are they state tracking's
        boxes += state_boxes(sweep.state)
    elif isinstance(sweep, RulerGrid) and sweep.babi:  # nor the bAbI-style stories'
        boxes += babi_boxes(sweep.babi)
    elif isinstance(sweep, RulerGrid) and sweep.listing:  # nor long outputs'
        boxes += listing_boxes(sweep.listing)
    elif isinstance(sweep, RulerGrid) and sweep.mrcr:  # nor multi-round co-reference's
        boxes += mrcr_boxes(sweep.mrcr)
    elif isinstance(sweep, RulerGrid):
        mean, low = sweep.aggregates["mean"], sweep.aggregates["lower_bound"]
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
    elif isinstance(sweep, NiahGrid):
        effective, lim = sweep.effective_length, sweep.lost_in_the_middle_index
        threshold = f"accuracy ≥ {effective['threshold']:g}"
        boxes += [
            number_box(length_or_none(effective["mean"]), f"effective length ({threshold})"),
            number_box(length_or_none(effective["lower_bound"]), f"on the 95% lower bound ({threshold})"),
            number_box(
                length_or_none(effective["worst_depth"]), f"at the worst depth (every cell's {threshold})"
            ),
            number_box("n/a" if lim is None else f"{lim:+.3f}", "lost-in-the-middle index (edges - middle)"),
        ]
    if summary.control is not None:
        control = summary.control
        counted = f"{answered_count(summary, control)}; mean score {percent(control['mean'])}"
        boxes.append(number_box(percent(answered_share(control)), f"no-context control: {counted}"))
    if summary.perplexity is not None:
        scored = summary.perplexity
        boxes.append(number_box(str(scored.documents), f"perplexity documents ({scored.errors} errors)"))
    kinds = ", ".join(f"{kind} {count}" for kind, count in summary.error_kinds.items())
    controls = controls_count(summary)
    boxes += [
        # Samples and controls both, as ``fathom run`` counts the records it wrote, each named apart.
        number_box(str(summary.samples + controls), samples_count(summary) if controls else "samples"),
        number_box(str(summary.errors), f"errors ({kinds})" if kinds else "errors"),
    ]
    return f'<div class="headline">{"".join(boxes)}</div>'


def page_header(manifest: Manifest, records: Sequence[SampleRecord], summary: Summary) -> str:
    """The page's header: the model and task, the headline numbers, and the run's facts."""
    spec = manifest.spec
    facts = "".join(
        f"<dt>{esc(name)}</dt><dd{_full(value)}>{esc(short_paths(value))}</dd>"
        for name, value in _facts(manifest, records)
    )
    counted = summary.provider_counts
    # Beside the headline numbers: every length on the page is the provider's count, not the stand-in's.
    lengths = "" if counted is None else f'<p class="lengths">{esc(provider_counts_line(counted))}</p>'
    return (
        f"<header><h1>{esc(spec.model)} · {esc(spec.task)}</h1>"
        f"{headline(summary)}{lengths}<details open><summary>run</summary>"
        f'<dl class="facts">{facts}</dl></details></header>'
    )
