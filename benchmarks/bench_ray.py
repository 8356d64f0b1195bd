"""How a sweep on Ray scales with its replicas: 1, 2, 4 and 8 simulated models that take a fixed time
per request (``sim:perfect?delay=0.2``), against the same sweep run locally.

One local Ray is started for all the runs (its start-up is no run's), and each run goes into a fresh
run folder. A run's wall time includes starting its replicas (each a process that imports fathom and
builds the task); its sweep time starts when the run folder is taken, which is when every replica
is ready, and ends with the last record. The ideal sweep is the requests' delay divided among the
replicas; every run's records are checked to be the local run's (timings aside).

    python benchmarks/bench_ray.py --replicas 1,2,4,8 --lengths 1k,2k --depths 4 --samples 16
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import ray

from fathom.manifest import Manifest
from fathom.run import distributed
from fathom.run.runner import run
from fathom.run.store import RunFolder
from fathom.run.writer import RunResult
from fathom.spec import RunSpec, parse_depths, parse_lengths

TIMES = ("latency_s", "prefill_s", "decode_s")


class _Timed(RunFolder):
    """The run folder, noting when a run takes it: when the sweep proper starts."""

    taken = 0.0

    def start(self, manifest: Manifest) -> None:
        super().start(manifest)
        _Timed.taken = time.perf_counter()


def _records(folder: Path) -> dict[str, dict[str, Any]]:
    lines = (folder / "samples.jsonl").read_text().splitlines()
    return {r["sample_id"]: {k: v for k, v in r.items() if k not in TIMES} for r in map(json.loads, lines)}


def _row(result: RunResult, sweep: float, ideal: float) -> dict[str, Any]:
    return {
        "samples": result.written,
        "wall_s": round(result.seconds, 2),
        "sweep_s": round(sweep, 2),
        "ideal_sweep_s": round(ideal, 2),
        "efficiency": round(ideal / sweep, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--replicas", default="1,2,4,8")
    parser.add_argument("--delay", type=float, default=0.2, help="seconds per request")
    parser.add_argument("--lengths", default="1k,2k")
    parser.add_argument("--depths", default="4")
    parser.add_argument("--samples", type=int, default=16)
    parser.add_argument("--output", type=Path, default=Path(__file__).parent / "results" / "ray.json")
    args = parser.parse_args()
    counts = [int(n) for n in args.replicas.split(",")]
    spec = RunSpec(
        "niah",
        f"sim:perfect?delay={args.delay:g}",
        "cl100k_base",
        parse_lengths(args.lengths),
        parse_depths(args.depths),
        args.samples,
    )
    setattr(distributed, "RunFolder", _Timed)  # noqa: B010  # a clock on the folder, nothing else changed
    ray.init(num_cpus=max(counts), include_dashboard=False, log_to_driver=False, configure_logging=False)
    rows: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        local = run(spec, Path(tmp) / "local", show_progress=False)
        serial = local.written * args.delay
        rows["local"] = _row(local, time.perf_counter() - started, serial)
        expected = _records(Path(tmp) / "local")
        for count in counts:
            folder = Path(tmp) / f"ray-{count}"
            result = distributed.run_distributed(spec, folder, count, show_progress=False)
            rows[f"ray x{count}"] = _row(result, time.perf_counter() - _Timed.taken, serial / count)
            assert _records(folder) == expected, f"{count} replicas wrote other records than a local run"
            print(f"{count} replicas: {rows[f'ray x{count}']}", flush=True)
    ray.shutdown()
    report = {
        "spec": spec.to_json(),
        "machine": {
            "platform": platform.platform(),
            "python": platform.python_version(),
            "cores": os.cpu_count(),
            "load": os.getloadavg(),
            "ray": ray.__version__,
        },
        "date": datetime.now(UTC).date().isoformat(),
        "runs": rows,
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
