"""report.html's sections for NIAH's variants and hard needles: a heatmap per variant (haystack
domain, literal twin) with a variant x length table, and the hard needles' tables (distractors taken,
every needle found, missed positions, split needles by distance, lexical overlap, the literal twins'
cost, the odd-name shortcut, redraws).

Every number is the summary's (``fathom.analysis.hard``, ``fathom.analysis.summary``); this module
only lays them out, each value escaped by ``table`` or ``esc``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from fathom.analysis.select import is_literal_twin
from fathom.analysis.summary import Row
from fathom.report.html.page import (
    depth_label,
    esc,
    interval,
    legend,
    niah_heatmap,
    percent,
    table,
    variant_grid,
)
from fathom.report.plots import format_length
from fathom.report.text import hard_to_report
from fathom.units import length_or_none


def _variant_name(task: str) -> str:
    return f"{task} (literal twin: a contrast, not pooled)" if is_literal_twin(task) else task


def variants_section(variants: Mapping[str, Row]) -> str:
    """Each variant's heatmap (a click shows that variant's samples) and the variant x length table;
    empty for a run of one variant."""
    if not variants:
        return ""
    lengths = sorted({r["length"] for grid in variants.values() for r in grid["lengths"]})
    rows = []
    figures = []
    for task, grid in variants.items():
        by_length = {r["length"]: r for r in grid["lengths"]}
        scores = [percent(by_length[n]["mean"]) if n in by_length else "" for n in lengths]
        effective, lim = grid["effective_length"], grid["lost_in_the_middle_index"]
        rows.append((
            _variant_name(task), *scores, length_or_none(effective["mean"]),
            length_or_none(effective["lower_bound"]), length_or_none(effective["worst_depth"]),
            "n/a" if lim is None else f"{lim:+.3f}",
        ))  # fmt: skip
        figures.append(
            f'<figure class="variant" data-variant="{esc(task)}"><figcaption>{esc(_variant_name(task))}'
            f"</figcaption>{niah_heatmap(variant_grid(grid), variant=task)}</figure>"
        )
    head = ("variant", *(format_length(n) for n in lengths), "effective length", "on the 95% lower bound",
            "at the worst depth", "lost-in-the-middle index")  # fmt: skip
    return (
        '<section id="variants"><h2>Variants</h2><p>The run swept variants beside length and depth (haystack '
        "domains, literal twins of low-overlap needles). The grid above pools the variants asked; a literal "
        "twin asks the same needle in its own words and is a contrast, so it is shown here alone. Click a "
        f'cell to see that variant\'s samples.</p><div class="gallery">{"".join(figures)}</div>'
        f"{legend('accuracy')}<h3>Accuracy by variant and length</h3>{table(head, rows)}</section>"
    )


def _count(share: Mapping[str, Any]) -> str:
    """A ``Share``: how many of how many, and the share in percent."""
    return f"{share['count']} of {share['n']} ({percent(share['share'])})"


def _lures(rows: Sequence[Row]) -> str:
    body = [(format_length(r["length"]), r["lured"]["n"], _count(r["lured"]), interval(r["lured"]),
             _count(r["hedged"]), interval(r["hedged"])) for r in rows]  # fmt: skip
    head = ("length", "samples with distractors", "answered a distractor", "95% interval", "hedged",
            "95% interval")  # fmt: skip
    return (
        "<h3>Distractors</h3><p>Of the samples with look-alike distractors: those whose answer holds a "
        "distractor's value and not every gold value (answered a distractor), and those that hold the gold "
        "and a distractor's value too (hedged: not counted as right). Wilson 95% intervals.</p>"
        + table(head, body)
    )


def _rejected(rows: Sequence[Row]) -> str:
    body = [(format_length(r["length"]), r["rejected"]["n"], _count(r["rejected"]), interval(r["rejected"]))
            for r in rows]  # fmt: skip
    head = ("length", "samples with distractors", "rejected a look-alike", "95% interval")
    return (
        "<h3>Look-alikes rejected</h3><p>Of the samples with look-alike distractors: those right that "
        "name a distractor's value only to reject it (\u201c2484111, not 9546144\u201d: a negation governs "
        "that mention in its clause), counted right. Wilson 95% intervals.</p>" + table(head, body)
    )


def _all_or_nothing(rows: Sequence[Row]) -> str:
    body = [(format_length(int(r["label"])), r["n"], percent(r["mean"]), interval(r)) for r in rows]
    return (
        "<h3>Every needle found</h3><p>Of the samples with several needles: the share that found every one "
        "(the grid's score counts the fraction found).</p>"
        + table(("length", "samples", "every needle found", "95% interval"), body)
    )


def _positions(rows: Sequence[Row]) -> str:
    body = [(f"{depth_label(r['depth_low'])} to {depth_label(r['depth_high'])}", r["found"]["n"],
             r["found"]["count"], percent(r["found"]["share"]), interval(r["found"]))
            for r in rows]  # fmt: skip
    return (
        "<h3>Which needles were missed</h3><p>Each needle asked for in a sample with several, by the depth "
        "it landed at: how many were found.</p>"
        + table(("needle depth", "needles", "found", "share found", "95% interval"), body)
    )


def _part_distance(rows: Sequence[Row]) -> str:
    body = [(r["label"], r["n"], percent(r["mean"]), interval(r)) for r in rows]
    return (
        "<h3>Split needles by distance between parts</h3><p>The score of split needles by how far apart "
        "their two parts landed, as a share of the haystack.</p>"
        + table(("distance between parts", "samples", "score", "95% interval"), body)
    )


def _overlap(rows: Sequence[Row]) -> str:
    body = [(r["label"], r["n"], f"{r['shared_words']:.1f}", f"{r['rouge1']:.2f}", percent(r["mean"]),
             interval(r)) for r in rows]  # fmt: skip
    return (
        "<h3>Lexical overlap with the question</h3><p>Per needle kind, the mean overlap between each needle "
        "and its question (content words shared, ROUGE-1) beside the kind's score: a reader that matches "
        "words finds the needles that overlap and misses those that do not.</p>"
        + table(("needle kind", "samples", "shared content words", "ROUGE-1", "score", "95% interval"), body)
    )


def _forms(rows: Sequence[Row]) -> str:
    body = [(r["axis"], r["label"], r["n"], percent(r["mean"]), interval(r)) for r in rows]
    return (
        "<h3>By the needles' form</h3><p>The low-overlap score by each part of the needles' form the run "
        "varied: the relation (what the needle says the character did at the anchor), the order (the "
        "character or the anchor first) and the question's template. The items and their knowledge are "
        "the same in every form; a score that moves with it moves with the reading.</p>"
        + table(("part", "value", "samples", "score", "95% interval"), body)
    )


def _neighbours(rows: Sequence[Row]) -> str:
    body = [(r["label"], r["n"], percent(r["mean"]), interval(r)) for r in rows]
    return (
        "<h3>Accidental literal distractors</h3><p>The low-overlap samples whose haystack window names a "
        'near neighbour of their places ("Washington" beside Washington, D.C.) beside those whose window '
        "names none.</p>" + table(("window", "samples", "score", "95% interval"), body)
    )


def _literal_cost(rows: Sequence[Row]) -> str:
    body = [(format_length(r["length"]), r["pairs"], percent(r["low_overlap"]), percent(r["literal"]),
             f"{100 * r['cost']:+.1f}", r["literal_better"], r["low_overlap_better"], f"{r['p_value']:.3g}")
            for r in rows]  # fmt: skip
    head = ("length", "pairs", "low-overlap", "literal twin", "cost (points)", "literal better",
            "low-overlap better", "sign test p")  # fmt: skip
    return (
        "<h3>What removing the overlap costs</h3><p>Each low-overlap sample beside its literal twin (the "
        "same item, name, haystack and depth, asked in the needle's own words): both means, the cost "
        "(literal minus low-overlap) and the exact sign test on the pairs that differ.</p>"
        + table(head, body)
    )


def _odd_name(rows: Sequence[Row]) -> str:
    body = [(r["variant"], r["n"], percent(r["score"]["mean"]), interval(r["score"]),
             percent(r["odd_name"]["mean"]), interval(r["odd_name"])) for r in rows]  # fmt: skip
    head = ("variant", "samples", "score", "95% interval", "odd-name shortcut on these prompts",
            "95% interval")  # fmt: skip
    return (
        "<h3>The odd-name shortcut</h3><p>Beside each low-overlap variant's score, what a reader with no "
        "knowledge and no model scores on the same prompts by answering a name the document holds only "
        "once (<code>sim:odd-name</code>): the baseline a low-overlap score must beat. With the default "
        "distractors it is near chance (one in the characters a sample names); near 100% means the "
        "question is answered by spotting the odd name, not by knowing the link.</p>" + table(head, body)
    )


def _redraws(redraws: Row) -> str:
    return (
        f"<h3>Needles drawn again</h3><p>{esc(redraws['samples'])} samples had their needles drawn again "
        "because the corpus already held an answer, a key or a look-alike's value (a haystack that states "
        f"the answer measures nothing). The first reason: {esc(redraws['first'][0])}.</p>"
    )


def _knowledge(section: Row) -> str:
    probes, rows = section.get("probes"), section.get("lengths", [])
    known = ""
    if probes:
        known = (
            f"<p>Closed-book probes (each item's fact asked alone, no document): the model knew "
            f"{esc(probes['known'])} of {esc(probes['graded'])} items ({percent(probes['share'])}, "
            f"{interval(probes)}). Not known: {esc(', '.join(probes['unknown']) or 'none')}.</p>"
        )
    body = [(format_length(r["length"]), r["all"]["n"], percent(r["all"]["mean"]), interval(r["all"]),
             r["known"]["n"], percent(r["known"]["mean"]), interval(r["known"])) for r in rows]  # fmt: skip
    head = ("length", "samples", "all items", "95% interval", "known samples", "known items", "95% interval")
    relative = section["relative"]
    ratios = [(format_length(r["length"]), r["samples"], percent(r["ratio"])) for r in relative["lengths"]]
    return (
        "<h3>Knowledge apart from context</h3>"
        + known
        + (table(head, body) if body else "")
        + "<p>Each item's base is the best of its mean scores at "
        + esc(", ".join(format_length(n) for n in relative["base_lengths"]))
        + f" ({esc(relative['zero_base'])} of {esc(relative['items'])} items at 0 left out); each length's "
        "score over its samples' bases (NoLiMa's effective length, per item): effective length "
        + f"{esc(length_or_none(relative['effective_length']))} at {relative['threshold']:.0%} of base.</p>"
        + table(("length", "samples with a base", "score / base"), ratios)
    )


# The sections in the order the page shows them, each drawn only where the summary has it.
_PARTS: tuple[tuple[str, Callable[[Any], str]], ...] = (
    ("lures", _lures),
    ("rejected_lures", _rejected),
    ("all_or_nothing", _all_or_nothing),
    ("needle_positions", _positions),
    ("part_distance", _part_distance),
    ("overlap", _overlap),
    ("literal_cost", _literal_cost),
    ("odd_name", _odd_name),
    ("forms", _forms),
    ("neighbours", _neighbours),
    ("redraws", _redraws),
    ("knowledge", _knowledge),
)


def hard_section(hard: Row) -> str:
    """The hard needles' tables that the run has (``hard_to_report``); for a run of plain needles, only
    its needles drawn again, if any, under their own heading."""
    if not hard_to_report(hard):
        redraws = hard.get("redraws")
        return f'<section id="redraws">{_redraws(redraws)}</section>' if redraws else ""
    parts = [draw(hard[name]) for name, draw in _PARTS if hard.get(name)]
    return f'<section id="hard"><h2>Hard needles</h2>{"".join(parts)}</section>'
