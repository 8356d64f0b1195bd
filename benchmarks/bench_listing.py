"""The long-output task's prompts beside plain NIAH's: the seconds to build a few prompts at one
length with one tokenizer (3 at 128k with cl100k_base by default, 128 matching records and 128
look-alikes each), each task made (its corpus tokenised) before the clock starts. A benchmark, not
a test: it prints timings and asserts none. It times and prints as ``bench_state.py`` does, with its function.

    python benchmarks/bench_listing.py [--length 128k] [--samples 3] [--items 128] [--repeats 30]
"""

from __future__ import annotations

import argparse

from bench_state import beside_niah


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--length", default="128k")
    parser.add_argument("--samples", type=int, default=3)
    parser.add_argument("--items", type=int, default=128, help="matching records per listing prompt")
    parser.add_argument("--tokenizer", default="cl100k_base")
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    beside_niah(
        "listing", {"items": (args.items,)}, f"{args.items} matching records, {args.items} look-alikes", args
    )


if __name__ == "__main__":
    main()
