"""State tracking's prompts beside plain NIAH's: the seconds to build a few prompts at one length with
one tokenizer (3 at 128k with cl100k_base by default), each task made (its corpus tokenised) before
the clock starts. A benchmark, not a test: it prints timings and asserts none.

    python benchmarks/bench_state.py [--length 128k] [--samples 3] [--ops 64] [--repeats 30]
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from typing import Any

from fathom.prompts.tokenizers import load_tokenizer
from fathom.registry import create_task
from fathom.spec import RunSpec
from fathom.tasks.base import Sample
from fathom.units import parse_count


def build_seconds(spec: RunSpec, repeats: int) -> tuple[float, float]:
    """The first pass building every cell's prompt (nothing of them remembered yet: a needle's ids
    are kept once encoded), and the fastest of ``repeats`` passes after it."""
    task = create_task(spec, load_tokenizer(spec.tokenizer))
    cells = list(task.cells())
    passes = []
    for _ in range(1 + repeats):
        started = time.perf_counter()
        for cell in cells:
            assert isinstance(task.prepare(cell), Sample)
        passes.append(time.perf_counter() - started)
    return passes[0], min(passes[1:])


def beside_niah(task: str, options: dict[str, Any], about: str, args: argparse.Namespace) -> None:
    """Prints the seconds to build ``args.samples`` prompts of ``task`` (with ``options``) and as many
    plain NIAH prompts at ``args.length`` with ``args.tokenizer``, and their ratio."""
    common = {
        "model": "sim:perfect",
        "tokenizer": args.tokenizer,
        "lengths": (parse_count(args.length),),
        "samples": args.samples,
    }
    niah = build_seconds(RunSpec("niah", depths=(0.5,), **common), args.repeats)
    family = build_seconds(RunSpec(task, depths=(), **options, **common), args.repeats)
    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}"
    )
    cells = f"{args.samples} prompts at {args.length} ({args.tokenizer})"
    print(f"{cells}, best of {args.repeats} passes after a first:")
    print(f"  niah (one needle, depth 0.5): {1000 * niah[1]:.1f} ms (first pass {1000 * niah[0]:.1f} ms)")
    print(f"  {task} ({about}): {1000 * family[1]:.1f} ms (first pass {1000 * family[0]:.1f} ms)")
    print(f"  ratio {task} / niah: {family[1] / niah[1]:.2f}")


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
