"""A run's fixed cost: the CPU seconds of ``fathom run niah --model sim:cliff --lengths 1k`` (11 depths
x 3 samples and their 33 no-context controls, 66 records), start to exit, and where they go.

Each measurement is a fresh process with the corpus cache already warm (one run first, into a cache
folder of the benchmark's own unless ``--cache`` names one), as every run after a machine's first is:

- **whole**: the command installed beside this Python, its user + system CPU (``getrusage`` of the
  child), ``--runs`` times;
- **phases**: the same command run through ``fathom.cli.main`` in a process that times its parts with
  ``time.process_time``: importing ``fathom.cli``; the backend and its tokenizer; the task; the first
  prompt of the shortest length (``run/runner.py``'s check, where the word index is first asked); the
  requests and records; the derived files (summary.json, heatmap.png, report.html). What is left of
  the whole (interpreter start, exit) is the difference;
- ``import fathom`` and ``fathom --help``, each in a fresh process.

The machine's load average is printed beside each figure: on a shared machine the medians move with it.

    python benchmarks/bench_start.py [--runs 7] [--cache DIR]
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

COMMAND = ["run", "niah", "--model", "sim:cliff", "--lengths", "1k"]
FATHOM = str(Path(sys.executable).with_name("fathom"))


def cpu_of(command: list[str], env: dict[str, str]) -> float:
    """User + system CPU seconds of ``command``, run to its end."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(command, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def phases(run_dir: str) -> dict[str, float]:
    """In this process: the command's parts, in CPU seconds (the parts that runner.py still has)."""
    started = time.process_time()
    import fathom.cli
    from fathom.report import derive
    from fathom.run import runner

    spent = {"import fathom.cli": time.process_time() - started}

    def timed(owner: Any, name: str, label: str) -> None:
        original: Callable[..., Any] | None = getattr(owner, name, None)
        if original is None:
            return

        @functools.wraps(original)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            begun = time.process_time()
            try:
                return original(*args, **kwargs)
            finally:
                spent[label] = spent.get(label, 0.0) + time.process_time() - begun

        setattr(owner, name, wrapper)

    timed(runner, "create_backend", "backend and tokenizer")
    timed(runner, "create_task", "task")
    timed(runner, "_check_shortest", "first prompt (the shortest length's check)")
    timed(derive, "run", "the run: the three above, its checks, the 66 requests")
    timed(derive, "derive", "derived files")
    fathom.cli.main([*COMMAND, "--run-dir", run_dir])
    spent["in process"] = time.process_time() - started
    return spent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument(
        "--cache", type=Path, help="the corpus cache folder (default: a new one, warmed first)"
    )
    parser.add_argument("--phases", help=argparse.SUPPRESS)  # the child that times the parts
    args = parser.parse_args()
    if args.phases:
        print(json.dumps(phases(args.phases)))
        return
    scratch = Path(tempfile.mkdtemp(prefix="bench-start-"))
    env = {**os.environ, "FATHOM_CACHE_DIR": str(args.cache or scratch / "cache")}
    cpu_of([FATHOM, *COMMAND, "--run-dir", str(scratch / "warm")], env)

    def load() -> str:
        return f"load {os.getloadavg()[0]:.1f}"

    def report(label: str, seconds: list[float]) -> None:
        print(f"{label:58} median {statistics.median(seconds):.2f}  min {min(seconds):.2f}  ({load()})")

    whole = [
        cpu_of([FATHOM, *COMMAND, "--run-dir", str(scratch / f"whole-{i}")], env) for i in range(args.runs)
    ]
    report("whole command, CPU s", whole)
    parts: dict[str, list[float]] = {}
    for i in range(args.runs):
        done = subprocess.run(
            [sys.executable, __file__, "--phases", str(scratch / f"phases-{i}")],
            env=env,
            check=True,
            capture_output=True,
            text=True,
        )
        for label, seconds in json.loads(done.stdout.splitlines()[-1]).items():
            parts.setdefault(label, []).append(seconds)
    for label, seconds in parts.items():
        report(f"  {label}", seconds)
    rest = statistics.median(whole) - statistics.median(parts["in process"])
    print(f"  {'interpreter start and exit (the difference)':56} {rest:.2f}")
    report("import fathom", [cpu_of([sys.executable, "-c", "import fathom"], env) for _ in range(args.runs)])
    report("fathom --help", [cpu_of([FATHOM, "--help"], env) for _ in range(args.runs)])


if __name__ == "__main__":
    main()
