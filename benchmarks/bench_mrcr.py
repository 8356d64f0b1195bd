"""Multi-round co-reference's prompts beside plain NIAH's (``bench_state.beside_niah``): the seconds
to build a few conversations at one length with one tokenizer (3 at 128k with cl100k_base, 8 repeats,
by default), each task made (its corpus tokenised) before the clock starts. A benchmark, not a test.

    python benchmarks/bench_mrcr.py [--length 128k] [--samples 3] [--repeats-asked 8] [--repeats 30]
"""

from __future__ import annotations

import argparse

from bench_state import beside_niah


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--length", default="128k")
    parser.add_argument("--samples", type=int, default=3)
    parser.add_argument("--repeats-asked", type=int, default=8, help="times the asked piece is asked for")
    parser.add_argument("--tokenizer", default="cl100k_base")
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    asked = args.repeats_asked
    beside_niah("mrcr", {"repeats": (asked,), "template": "chatml"}, f"{asked} repeats, chatml", args)


if __name__ == "__main__":
    main()
