"""The long-output task's prompts beside plain NIAH's: the seconds to build a few prompts at one
length with one tokenizer (3 at 128k with cl100k_base by default, 128 matching records and 128
look-alikes each), each task made (its corpus tokenised) before the clock starts. A benchmark, not
a test: it prints timings and asserts none. It times as ``bench_state.py`` does, with its function.

    python benchmarks/bench_listing.py [--length 128k] [--samples 3] [--items 128] [--repeats 30]
"""

from __future__ import annotations

import argparse
import os
import platform

from bench_state import build_seconds

from fathom.spec import RunSpec
from fathom.units import parse_count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--length", default="128k")
    parser.add_argument("--samples", type=int, default=3)
    parser.add_argument("--items", type=int, default=128, help="matching records per listing prompt")
    parser.add_argument("--tokenizer", default="cl100k_base")
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    common = {
        "model": "sim:perfect",
        "tokenizer": args.tokenizer,
        "lengths": (parse_count(args.length),),
        "samples": args.samples,
    }
    niah = build_seconds(RunSpec("niah", depths=(0.5,), **common), args.repeats)
    listing = build_seconds(RunSpec("listing", depths=(), items=(args.items,), **common), args.repeats)
    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}"
    )
    cells = f"{args.samples} prompts at {args.length} ({args.tokenizer})"
    print(f"{cells}, best of {args.repeats} passes after a first:")
    print(f"  niah (one needle, depth 0.5): {1000 * niah[1]:.1f} ms (first pass {1000 * niah[0]:.1f} ms)")
    records = f"{args.items} matching records, {args.items} look-alikes"
    print(f"  listing ({records}): {1000 * listing[1]:.1f} ms (first pass {1000 * listing[0]:.1f} ms)")
    print(f"  ratio listing / niah: {listing[1] / niah[1]:.2f}")


if __name__ == "__main__":
    main()
