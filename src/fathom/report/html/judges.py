"""report.html's section for LLM judges: per rubric, each judge's scores and its agreement with the
task's metric, its qualification (``fathom judge --qualify``: a warning where a judge failed it or was
never qualified), the two judges' agreement, the scores by task beside the metric's, and the answers
the judges disagree on, to read (an answer is untrusted text: every value goes through ``table``/``esc``).

Every number is the summary's (``fathom.analysis.agreement``); this module only lays them out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from fathom.analysis.summary import Row
from fathom.report.html.page import esc, percent, table
from fathom.report.qualification_text import qualification_line


def _score(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def _kappa(agreement: Mapping[str, Any]) -> str:
    if agreement["value"] is None:
        return "undefined (one label throughout)"
    low, high = agreement["ci_low"], agreement["ci_high"]
    return f"{agreement['value']:.2f} ({_score(low)} to {_score(high)}), n={agreement['n']}"


def judges_section(sections: Sequence[Row]) -> str:
    """Empty for a run no judge has graded."""
    return "".join(_rubric(section) for section in sections)


def _rubric(section: Row) -> str:
    judges = table(
        ("judge", "model", "family (model under test's)", "judged", "unreadable", "not yet", "mean score",
         "95% interval", "pass rate", "kappa with the metric", "qualification"),
        [(j["role"], j["name"], f"{j['family'] or 'unknown'} ({j['tested_family'] or 'unknown'})",
          j["judged"],
          j["errors"], j["unjudged"], _score(j["mean"]), f"{_score(j['ci_low'])} to {_score(j['ci_high'])}",
          percent(j["pass_rate"]), _kappa(j["metric_agreement"]), qualification_line(j.get("qualification")))
         for j in section["judges"]],
    )  # fmt: skip
    roles = [j["role"] for j in section["judges"]]
    by_task = table(
        ("task", "samples", "metric", *roles),
        [
            (r["task"], r["samples"], _score(r["metric"]), *(_score(r[role]) for role in roles))
            for r in section["by_task"]
        ],
    )
    parts = [
        f'<section class="judges"><h2>LLM judges: {esc(section["rubric"])}</h2>',
        f"<p>Scores on the rubric's scale ({esc(', '.join(map(str, section['scale'])))}; passing: "
        f"{esc(section['passing'])}), with 95% bootstrap intervals. Each judge is set beside the task's own "
        f"metric as pass/fail (a metric score of at least {esc(section['metric_pass'])} passes) by Cohen's "
        f"kappa. Rubric sha256 {esc(section['rubric_sha256'][:16])}.</p>",
        _warning(section["judges"]),
        judges,
        "<h3>By task</h3>",
        by_task,
    ]
    if "agreement" in section:
        agreement = section["agreement"]
        parts.append(
            f"<p>The judges' agreement: {esc(agreement['statistic'])} {esc(_kappa(agreement))}; the same "
            f"score on {esc(percent(agreement['observed']))} of the answers both judged.</p>"
        )
        parts.append(_disagreements(section["disagreements"]))
    return "".join(parts) + "</section>"


def _warning(judges: Sequence[Row]) -> str:
    """A warning for each judge that failed its qualification or never took one: its verdicts are
    not known to follow the labels, or to resist an answer that asks for its own score."""
    lines = [
        f"{j['role']} {j['name']}: {qualification_line(j.get('qualification'))}"
        for j in judges
        if not (j.get("qualification") or {}).get("passed")
    ]
    if not lines:
        return ""
    items = "".join(f"<li>{esc(line)}</li>" for line in lines)
    return (
        '<div class="warning"><p><strong>Warning: judges not qualified.</strong> A judge that failed the '
        "qualification set, or never took it, may not agree with hand-labelled answers, or may give the "
        f"score an answer asks for; read its numbers with that in mind.</p><ul>{items}</ul></div>"
    )


def _disagreements(rows: Sequence[Row]) -> str:
    if not rows:
        return "<p>The judges agree on every answer.</p>"
    return "<h3>Disagreements, the widest first</h3>" + table(
        ("sample", "question", "references", "answer", "metric", "judge", "its reason", "judge2",
         "its reason"),
        [(r["sample_id"], r["question"], " | ".join(r["answers"]), r["output"], _score(r["metric"]),
          r["judge"], r["judge_reason"], r["judge2"], r["judge2_reason"]) for r in rows],
    )  # fmt: skip
