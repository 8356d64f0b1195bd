"""The regression gate's calibration and power, measured by simulation (issue #28).

A checkpoint that did not change is ``sim:noisy`` against itself under another seed: every answer a
coin that comes up right with the same chance in both runs, independently. The gate must flag such
a pair at most alpha of the time. A checkpoint that lost 20 points at one length is ``sim:noisy``
with ``drop=0.2&at=LENGTH``: the gate should flag it most of the time, at fathom's default k = 3
samples per cell and 11 depths.

``sim:noisy``'s answers are coins drawn from a hash of the seed and the prompt, so a trial here draws
the same coins with numpy instead of building prompts and asking the simulated model: thousands of
trials in minutes. ``tests/test_gate.py`` checks, with real runs, that two seeds of ``sim:noisy``
are such coins, and runs a few hundred trials of this simulation against the bounds below.

    python benchmarks/gate_calibration.py --trials 2000

prints the rates with their 95% Wilson intervals and writes benchmarks/results/gate_calibration.json.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fathom.analysis.gate import gate
from fathom.analysis.stats import wilson_interval
from fathom.records import SampleRecord

LENGTHS = (1024, 2048, 4096, 8192, 16384)
DEPTHS = tuple(round(i / 10, 6) for i in range(11))
SAMPLES = 3
ALPHA = 0.05
RESULTS = Path(__file__).parent / "results" / "gate_calibration.json"


def _record(length: int, depth: float, sample: int, score: float) -> SampleRecord:
    sample_id = f"niah|L{length}|D{depth:.4f}|S{sample}"
    return SampleRecord(
        sample_id=sample_id, task="niah", length=length, depth=depth, sample=sample, seed=0,
        prompt_sha256="0" * 64, target_tokens=length, actual_tokens=length, needle_kind="number",
        needle_token_offsets=(0,), needle_depths=(depth,), question="?", answers=("1",),
        output="1" if score else "", finish_reason="stop", score=score, matched=(), scoring="contains",
        latency_s=0.0, beyond_window=False,
    )  # fmt: skip


@dataclass(frozen=True)
class Design:
    lengths: tuple[int, ...] = LENGTHS
    depths: tuple[float, ...] = DEPTHS
    samples: int = SAMPLES


def trial(
    rng: np.random.Generator,
    design: Design,
    accuracy: float,
    drops: Mapping[int, float] | None = None,
    realised: bool = False,
) -> list[tuple[SampleRecord, SampleRecord]]:
    """One pair of runs: every sample right with chance ``accuracy`` in the base run and, less the
    length's ``drops``, in the new one, each coin independent. ``realised``: the new run's coins are
    drawn at ``accuracy`` everywhere, then a length with a drop loses exactly that share of its
    samples (rounded), taken at random from those it had right: a drop seen in the scores, not only
    in the chances."""
    drops = drops or {}
    pairs = []
    for length in design.lengths:
        cells = [(depth, sample) for depth in design.depths for sample in range(design.samples)]
        drop = drops.get(length, 0.0)
        base = rng.random(len(cells)) < accuracy
        new = rng.random(len(cells)) < (accuracy if realised else accuracy - drop)
        if realised and drop:
            right = np.flatnonzero(new)
            lost = rng.choice(right, size=min(len(right), round(drop * len(cells))), replace=False)
            new[lost] = False
        pairs += [
            (_record(length, depth, sample, float(b)), _record(length, depth, sample, float(n)))
            for (depth, sample), b, n in zip(cells, base, new, strict=True)
        ]
    return pairs


@dataclass(frozen=True)
class Rate:
    flagged: int
    trials: int

    @property
    def rate(self) -> float:
        return self.flagged / self.trials

    @property
    def interval(self) -> tuple[float, float]:
        return wilson_interval(self.flagged, self.trials)

    def to_json(self) -> dict[str, float | int]:
        low, high = self.interval
        return {
            "flagged": self.flagged,
            "trials": self.trials,
            "rate": self.rate,
            "ci_low": low,
            "ci_high": high,
        }


def flag_rate(
    trials: int,
    seed: int,
    design: Design,
    accuracy: float,
    drops: Mapping[int, float] | None = None,
    realised: bool = False,
) -> Rate:
    """How often the gate flags a regression over ``trials`` simulated pairs of runs."""
    rng = np.random.default_rng(seed)
    flagged = sum(
        gate(trial(rng, design, accuracy, drops, realised), ALPHA, _sample_id).regressed
        for _ in range(trials)
    )
    return Rate(flagged, trials)


def _sample_id(record: SampleRecord) -> str:
    return record.sample_id


def measure(trials: int, seed: int = 0, accuracies: Sequence[float] = (0.95, 0.9, 0.85)) -> dict[str, object]:
    """The false-alarm rate at each base accuracy, and the power against a 20-point drop at 8k: of the
    model's chance (each answer a coin), and of its scores (7 of the 33 samples lost)."""
    design = Design()
    started = time.perf_counter()
    false_alarms = {
        str(a): flag_rate(trials, seed + i, design, a).to_json() for i, a in enumerate(accuracies)
    }
    drop = {8192: 0.2}
    power = {
        str(a): flag_rate(trials, seed + 100 + i, design, a, drop).to_json()
        for i, a in enumerate((1.0, 0.98, *accuracies))
    }
    realised = {
        str(a): flag_rate(trials, seed + 200 + i, design, a, drop, realised=True).to_json()
        for i, a in enumerate((1.0, 0.98, *accuracies))
    }
    return {
        "design": {"lengths": list(design.lengths), "depths": len(design.depths), "samples": design.samples},
        "alpha": ALPHA,
        "false_alarms": false_alarms,
        "power_20_points_at_8k": power,
        "power_7_of_33_lost_at_8k": realised,
        "seconds": round(time.perf_counter() - started, 1),
        "machine": f"{platform.processor() or platform.machine()}, {platform.platform()}",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args()
    results = measure(args.trials, args.seed)
    for name in ("false_alarms", "power_20_points_at_8k", "power_7_of_33_lost_at_8k"):
        for accuracy, rate in results[name].items():  # type: ignore[attr-defined]
            print(
                f"{name} at accuracy {accuracy}: {rate['flagged']}/{rate['trials']} = {rate['rate']:.3f} "
                f"[{rate['ci_low']:.3f}, {rate['ci_high']:.3f}]"
            )
    print(f"{results['seconds']} s")
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
