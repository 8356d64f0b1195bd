"""``fathom plan --detect POINTS``: the samples per cell the gate needs to see a drop of that size at
one length and at one cell, with 80% power, and what those samples cost on the plan's GPUs."""

from __future__ import annotations

from fathom.analysis.gate import signs_alpha
from fathom.analysis.power import TARGET_POWER, Detection, detection
from fathom.errors import SpecError
from fathom.plan.sweep import Plan
from fathom.plan.text import amount, duration


def check_detect(points: float, accuracy: float, alpha: float) -> None:
    """Refuse --detect's values before a plan is made: a drop, a base accuracy above it, an alpha."""
    if not 0.0 < alpha < 1.0:
        raise SpecError(f"--alpha must lie strictly between 0 and 1, not {alpha:g}: e.g. --alpha 0.05")
    if not 0.0 < points < 100.0:
        raise SpecError(
            f"--detect takes a drop in points between 0 and 100, not {points:g}: e.g. --detect 10"
        )
    drop = points / 100.0
    if not drop < accuracy <= 1.0:
        raise SpecError(
            f"--base-accuracy must lie above the drop ({drop:g}) and at most 1, not {accuracy:g}: the new "
            "checkpoint's accuracy, base minus drop, must stay a chance"
        )


def detections(plan: Plan, points: float, accuracy: float, alpha: float) -> list[Detection]:
    """Per length (its cells pooled) and per cell, for a drop of ``points`` from ``accuracy``."""
    check_detect(points, accuracy, alpha)
    drop = points / 100.0
    cells = {(p.cell.task, p.cell.length, p.cell.depth) for p in plan.swept.prompts if not p.cell.control}
    if not cells:
        raise SpecError("the sweep asks no graded questions (perplexity documents only): nothing to detect")
    lengths = {length for _, length, _ in cells}
    # A real suite's comparison (its items read from --data) has no effective length, so its sign
    # tests have all of alpha.
    signs = signs_alpha(alpha, effective=plan.spec.data is None)
    samples = plan.spec.samples
    return [
        detection("length", len(lengths), len(cells) // len(lengths), drop, accuracy, signs, samples),
        detection("cell", len(cells), 1, drop, accuracy, signs, samples),
    ]


def detect_text(plan: Plan, points: float, accuracy: float, alpha: float) -> list[str]:
    """The lines ``fathom plan --detect`` adds: each level's k, its cost scaled from this plan (every
    prompt is one sample's: the sweep's tokens and hours grow with k), and the power at the plan's k."""
    found = detections(plan, points, accuracy, alpha)
    k, total = plan.spec.samples, plan.total
    lines = [
        f"detect a drop of {points:g} points from {accuracy:.0%} accurate (every answer a coin; one-sided "
        f"exact sign test, alpha {alpha:g} less the effective length's share, split evenly over a level's "
        f"tests; {TARGET_POWER:.0%} power; an estimate of the gate, docs/gate.md):"
    ]
    for level in found:
        pairs = f"{level.pairs_per_sample} pair{'s' * (level.pairs_per_sample != 1)} a sample"
        where = f"at one {level.level} ({pairs}, {level.tests} such tests)"
        if level.samples is None:
            lines.append(f"  {where}: beyond reach (more than 100,000 samples per cell)")
            continue
        scale = level.samples / k
        cost = f"{amount(total.prompt_tokens * scale)} tokens, {total.gpu_hours * scale:.3g} GPU-hours"
        if total.wall_hours is not None:
            cost += f", {duration(total.wall_hours * scale)} of wall time"
        if total.cost is not None:
            cost += f", cost {total.cost * scale:,.2f}"
        lines.append(
            f"  {where}: --samples {level.samples} ({cost}); at --samples {k}: "
            f"{level.power_at_spec:.0%} power"
        )
    return lines
