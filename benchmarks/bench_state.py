"""State tracking's prompts beside plain NIAH's: the seconds to build a few prompts at one length with
one tokenizer (3 at 128k with cl100k_base by default), each task made (its corpus tokenised) before
the clock starts. A benchmark, not a test: it prints timings and asserts none.

    python benchmarks/bench_state.py [--length 128k] [--samples 3] [--ops 64] [--repeats 30]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import platform
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from fathom.prompts.tokenizers import load_tokenizer
from fathom.registry import create_task
from fathom.spec import RunSpec
from fathom.tasks.base import Sample
from fathom.units import parse_count


@dataclass(frozen=True)
class Timing:
    """One task's seconds for a pass over its cells: the first (nothing of them remembered yet, and
    whatever a process pays once, such as NIAH's word index of the corpus), the fastest of the passes
    after it (a line's or needle's ids are kept once encoded), and the fastest pass over prompts never
    built before (each a task of another seed, made before the clock: what a run pays per prompt).
    Wall-clock seconds, and the fastest of the same passes in this thread's CPU seconds
    (``cpu_best``, ``cpu_fresh``): on a machine shared with other work a pass is preempted, more
    often the longer it runs, which the wall clock counts and the CPU clock does not."""

    first: float
    best: float
    fresh: float
    cpu_best: float
    cpu_fresh: float


def _pass(task: Any) -> tuple[float, float]:
    """The wall-clock and CPU seconds of one pass over ``task``'s cells."""
    started, cpu = time.perf_counter(), time.thread_time()
    for cell in task.cells():
        assert isinstance(task.prepare(cell), Sample)
    return time.perf_counter() - started, time.thread_time() - cpu


def build_seconds(specs: Sequence[RunSpec], repeats: int) -> list[Timing]:
    """Each spec's ``Timing`` over ``repeats`` passes of each kind. The passes alternate between the
    specs, so that a shared machine's load, which changes from second to second, weighs on each alike,
    and their order turns by one each round, so that none always follows the same one (a pass right
    after another task's finds less of its own data in the CPU's caches)."""
    tokenizer = load_tokenizer(specs[0].tokenizer)
    tasks = [create_task(spec, tokenizer) for spec in specs]
    others = [
        [create_task(dataclasses.replace(spec, seed=spec.seed + 1 + k), tokenizer) for k in range(repeats)]
        for spec in specs
    ]
    first = [_pass(task)[0] for task in tasks]
    seconds: dict[tuple[int, bool], list[tuple[float, float]]] = {
        (i, new): [] for i in range(len(specs)) for new in (False, True)
    }
    kinds = list(seconds)
    for k in range(repeats):
        for i, new in kinds[k % len(kinds) :] + kinds[: k % len(kinds)]:
            seconds[i, new].append(_pass(others[i][k] if new else tasks[i]))
    timings = []
    for i, f in enumerate(first):
        (best, cpu_best), (fresh, cpu_fresh) = (_fastest(seconds[i, new]) for new in (False, True))
        timings.append(Timing(f, best, fresh, cpu_best, cpu_fresh))
    return timings


# Prompts a run's pass builds, each once, after one built first (what a process pays once): the cost a
# prompt adds to a run, its task's remembered ids (a line's, a seam's) warm as they are in a run.
RUN_PROMPTS = 30


def run_seconds(spec: RunSpec) -> float:
    """CPU seconds a prompt, as one task builds ``RUN_PROMPTS`` new prompts of ``spec``'s first length
    in turn (cells of its first variant, the first one left out of the clock)."""
    tokenizer = load_tokenizer(spec.tokenizer)
    task = create_task(dataclasses.replace(spec, samples=RUN_PROMPTS + 1), tokenizer)
    first, *rest = [cell for cell in task.cells() if cell.task == next(iter(task.cells())).task]
    task.prepare(first)
    cpu = time.thread_time()
    for cell in rest:
        assert isinstance(task.prepare(cell), Sample)
    return (time.thread_time() - cpu) / len(rest)


def _fastest(passes: list[tuple[float, float]]) -> tuple[float, float]:
    """The fastest of the passes on each clock (not always the same pass)."""
    wall, cpu = zip(*passes, strict=True)
    return min(wall), min(cpu)


def machine() -> str:
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return (
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}, load average {load}"
    )


def line(name: str, timing: Timing) -> str:
    return (
        f"  {name}: {1000 * timing.best:.2f} ms (first pass {1000 * timing.first:.1f} ms, "
        f"new prompts {1000 * timing.fresh:.2f} ms; CPU {1000 * timing.cpu_best:.2f} ms, "
        f"new prompts {1000 * timing.cpu_fresh:.2f} ms)"
    )


def ratio(name: str, family: Timing, niah: Timing) -> str:
    fresh, cpu, cpu_fresh = (
        family.fresh / niah.fresh,
        family.cpu_best / niah.cpu_best,
        family.cpu_fresh / niah.cpu_fresh,
    )
    return (
        f"  ratio {name} / niah: {family.best / niah.best:.2f} (new prompts {fresh:.2f}; "
        f"CPU {cpu:.2f}, new prompts {cpu_fresh:.2f})"
    )


def beside_niah(task: str, options: dict[str, Any], about: str, args: argparse.Namespace) -> None:
    """Prints the seconds to build ``args.samples`` prompts of ``task`` (with ``options``) and as many
    plain NIAH prompts at ``args.length`` with ``args.tokenizer``, and their ratios."""
    common = {
        "model": "sim:perfect",
        "tokenizer": args.tokenizer,
        "lengths": (parse_count(args.length),),
        "samples": args.samples,
    }
    specs = [RunSpec("niah", depths=(0.5,), **common), RunSpec(task, depths=(), **options, **common)]
    niah, family = build_seconds(specs, args.repeats)
    print(machine())
    cells = f"{args.samples} prompts at {args.length} ({args.tokenizer})"
    print(f"{cells}, best of {args.repeats} passes after a first, and of {args.repeats} over new prompts:")
    print(line("niah (one needle, depth 0.5)", niah))
    print(line(f"{task} ({about})", family))
    print(ratio(task, family, niah))
    plain, built = (1000 * run_seconds(spec) for spec in specs)
    print(
        f"as a run builds them ({RUN_PROMPTS} new prompts of one task, each once, CPU): niah "
        f"{plain:.3f} ms a prompt, {task} {built:.3f} ms (ratio {built / plain:.2f})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--length", default="128k")
    parser.add_argument("--samples", type=int, default=3)
    parser.add_argument("--ops", type=int, default=64, help="relevant operations per state prompt")
    parser.add_argument("--tokenizer", default="cl100k_base")
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    beside_niah("state", {"ops": (args.ops,)}, f"{args.ops} operations, {args.ops} decoys", args)


if __name__ == "__main__":
    main()
