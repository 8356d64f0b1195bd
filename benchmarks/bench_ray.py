"""How a sweep on Ray scales with its replicas: 1, 2, 4 and 8 simulated models that sleep a fixed time
per request (``sim:perfect?delay=0.2``), against the same sweep run locally.

Each Ray run is ``fathom run --executor ray``'s own call (``run_distributed`` with no address): it
starts a local Ray, starts its replicas (each a process that imports fathom and builds the task),
sweeps into a fresh run folder, and stops Ray. Three figures a run:

- wall: the whole call, Ray's start, the replicas' and its stop included: what a user waits for.
- sweep: from the run folder being taken (every replica ready) to the last answer, against the ideal,
  the requests' delay divided among the replicas.
- steady state: answers a second from the first answer to the last, against the replicas over the
  delay. A replica hands its answers back a batch at a time (16), so each replica's first batch was
  answered before the first answer arrived: those are not counted in the window.

The replicas sleep, so this shows fathom's and Ray's overhead per request and at start-up; it says
nothing of compute scaling (a replica that computes shares the machine's cores) nor of several
machines. Every run's records are checked to be the local run's (timings aside); the load average
is read before and after each run.

    python benchmarks/bench_ray.py --replicas 1,2,4,8 --lengths 1k,2k --depths 4 --samples 32
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import ray

import fathom
from fathom.manifest import Manifest
from fathom.records import AnyRecord, Cell
from fathom.run import distributed, runner
from fathom.run.store import RunFolder
from fathom.spec import RunSpec, parse_depths, parse_lengths

TIMES = ("latency_s", "prefill_s", "decode_s")


class _Clock:
    """When the run folder was taken, and each answer (its replica, its time) as it was written."""

    taken = 0.0
    answers: list[tuple[int, float]] = []  # noqa: RUF012  # one run's, emptied before each


class _Timed(RunFolder):
    """The run folder, noting when a run takes it and when each record is written."""

    def start(self, manifest: Manifest) -> None:
        super().start(manifest)
        _Clock.taken = time.perf_counter()

    def append(self, record: AnyRecord) -> None:
        super().append(record)
        _Clock.answers.append((0, time.perf_counter()))


class _Answered(set[str]):
    """A replica's answered samples (``_Slot.answered``), each addition noted with the replica."""

    def __init__(self, replica: int) -> None:
        super().__init__()
        self.replica = replica

    def add(self, sample_id: str) -> None:
        super().add(sample_id)
        _Clock.answers[-1] = (self.replica, _Clock.answers[-1][1])  # the record just written: this one's


class _Slot(distributed._Slot):
    def give(self, shard: list[Cell]) -> None:
        super().give(shard)
        self.answered = _Answered(self.index)


def steady(answers: Sequence[tuple[int, float]], gap: float) -> float | None:
    """Answers a second between the first answer and the last, leaving out each replica's first
    batch (its answers less than ``gap`` apart from its first): their work was done before the
    window opened. None when no answer is left to count (every replica answered in one batch)."""
    before = 0
    for replica in {r for r, _ in answers}:
        times = sorted(t for r, t in answers if r == replica)
        first_batch = 1
        while first_batch < len(times) and times[first_batch] - times[first_batch - 1] < gap:
            first_batch += 1
        before += first_batch
    span = max(t for _, t in answers) - min(t for _, t in answers)
    return (len(answers) - before) / span if len(answers) > before else None


def _records(folder: Path) -> dict[str, dict[str, Any]]:
    lines = (folder / "samples.jsonl").read_text().splitlines()
    return {r["sample_id"]: {k: v for k, v in r.items() if k not in TIMES} for r in map(json.loads, lines)}


def timed(call: Callable[[], Any], replicas: int, delay: float) -> dict[str, Any]:
    """One run's figures; ``call`` makes it."""
    _Clock.answers, load = [], os.getloadavg()[0]
    started = time.perf_counter()
    call()
    wall = time.perf_counter() - started
    answers = len(_Clock.answers)
    sweep, ideal = _Clock.answers[-1][1] - _Clock.taken, answers * delay / replicas
    rate = steady(_Clock.answers, delay / 2)  # a batch's answers come together; the next is >= delay on
    return {
        "samples": answers,
        "wall_s": round(wall, 2),
        "before_sweep_s": round(_Clock.taken - started, 2),
        "wall_of_linear": round(ideal / wall, 3),
        "sweep_s": round(sweep, 2),
        "after_sweep_s": round(started + wall - _Clock.answers[-1][1], 2),
        "ideal_sweep_s": round(ideal, 2),
        "sweep_of_linear": round(ideal / sweep, 3),
        "steady_per_s": None if rate is None else round(rate, 2),
        "ideal_per_s": round(replicas / delay, 2),
        "steady_of_linear": None if rate is None else round(rate * delay / replicas, 3),
        "load_1min": [round(load, 2), round(os.getloadavg()[0], 2)],
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--replicas", default="1,2,4,8")
    parser.add_argument("--delay", type=float, default=0.2, help="seconds per request")
    parser.add_argument("--lengths", default="1k,2k")
    parser.add_argument("--depths", default="4")
    parser.add_argument("--samples", type=int, default=32)
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
    # Clocks on the folder and on the driver's view of each replica, nothing else changed.
    setattr(runner, "RunFolder", _Timed)  # noqa: B010
    setattr(distributed, "RunFolder", _Timed)  # noqa: B010
    setattr(distributed, "_Slot", _Slot)  # noqa: B010
    load_before = os.getloadavg()
    rows: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        local = Path(tmp) / "local"
        rows["local"] = timed(lambda: runner.run(spec, local, show_progress=False), 1, args.delay)
        expected = _records(local)
        for count in counts:
            folder = Path(tmp) / f"ray-{count}"
            rows[f"ray x{count}"] = timed(
                lambda: distributed.run_distributed(spec, folder, count, show_progress=False),  # noqa: B023
                count,
                args.delay,
            )
            assert _records(folder) == expected, f"{count} replicas wrote other records than a local run"
            print(f"{count} replicas: {rows[f'ray x{count}']}", flush=True)
    report = {
        "spec": spec.to_json(),
        "machine": {
            "platform": platform.platform(),
            "python": platform.python_version(),
            "cores": os.cpu_count(),
            "load_before": [round(x, 2) for x in load_before],
            "load_after": [round(x, 2) for x in os.getloadavg()],
            "ray": ray.__version__,
        },
        "fathom": str(Path(fathom.__file__).parent),
        "date": datetime.now(UTC).isoformat(timespec="minutes"),
        "runs": rows,
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
