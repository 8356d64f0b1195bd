"""Prefix-aware ordering vs naive order on a real model, and fathom's own share of the run.

Runs one NIAH sweep twice on the same backend (each into a fresh run folder): once in fathom's
order (prompts that share the longest prefix one after another, so llama.cpp's KV cache reuses
it) and once shuffled. Both runs build byte-identical prompts and get identical answers; only the
wall time differs. The harness share is the part of a run spent outside ``backend.generate``.

    python benchmarks/bench_ordering.py --model "llamacpp:smollm2?threads=2" --lengths 1k,2k,4k \
        --depths 3 --samples 3
"""

from __future__ import annotations

import argparse
import json
import platform
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fathom.run.runner import run
from fathom.run.store import RunFolder
from fathom.spec import RunSpec, parse_depths, parse_lengths


def _measure(spec: RunSpec, order: str, root: Path) -> dict[str, Any]:
    result = run(spec, root / order, show_progress=False, order=order)
    scores = {r.sample_id: r.score for r in RunFolder(result.folder).latest()}
    return {
        "seconds": round(result.seconds, 2),
        "backend_seconds": round(result.backend_seconds, 2),
        "harness_share": round(result.harness_share, 4),
        "samples": result.written,
        "mean_score": round(sum(scores.values()) / len(scores), 4),
        "scores": scores,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default="llamacpp:smollm2?threads=2")
    parser.add_argument("--lengths", default="1k,2k,4k")
    parser.add_argument("--depths", default="3")
    parser.add_argument("--samples", type=int, default=3)
    parser.add_argument("--output", type=Path, default=Path(__file__).parent / "results" / "ordering.json")
    args = parser.parse_args()
    spec = RunSpec(
        "niah", args.model, "auto", parse_lengths(args.lengths), parse_depths(args.depths), args.samples
    )
    with tempfile.TemporaryDirectory() as tmp:
        runs = {order: _measure(spec, order, Path(tmp)) for order in ("prefix", "shuffled")}
    same = runs["prefix"].pop("scores") == runs["shuffled"].pop("scores")
    report = {
        "spec": spec.to_json(),
        "machine": {"platform": platform.platform(), "python": platform.python_version()},
        "date": datetime.now(UTC).date().isoformat(),
        "runs": runs,
        "identical_scores": same,
        "speedup": round(runs["shuffled"]["seconds"] / runs["prefix"]["seconds"], 2),
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=2) + "\n")
    for order, figures in runs.items():
        print(
            f"{order:>9}: {figures['seconds']:8.1f} s, {figures['backend_seconds']:8.1f} s in the model, "
            f"fathom's share {figures['harness_share']:.2%}, mean score {figures['mean_score']:.3f}"
        )
    print(f"speed-up from ordering: {report['speedup']}x; identical scores: {same}")


if __name__ == "__main__":
    main()
