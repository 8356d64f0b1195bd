"""The bAbI-style stories' prompts beside plain NIAH's: the seconds to build a few prompts at one
length with one tokenizer (3 at 128k with cl100k_base by default, babi:qa3's, the longest story, of
18 sentences), each task made (its corpus tokenised) before the clock starts. A benchmark, not a
test: it prints timings and asserts none. It times as ``bench_state.py`` does, with its function.

    python benchmarks/bench_babi.py [--length 128k] [--samples 3] [--task babi:qa3] [--repeats 30]
"""

from __future__ import annotations

import argparse

from bench_state import build_seconds, line, machine, ratio

from fathom.spec import RunSpec
from fathom.units import parse_count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--length", default="128k")
    parser.add_argument("--samples", type=int, default=3)
    parser.add_argument("--task", default="babi:qa3", help="babi, or one of its tasks, babi:qa1 ... babi:qa5")
    parser.add_argument("--tokenizer", default="cl100k_base")
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    length = parse_count(args.length)
    # "babi" builds a prompt per task per sample: NIAH builds as many, so the passes compare like.
    prompts = args.samples * (5 if args.task == "babi" else 1)
    common = {"model": "sim:perfect", "tokenizer": args.tokenizer, "lengths": (length,)}
    niah, babi = build_seconds(
        [
            RunSpec("niah", depths=(0.5,), samples=prompts, **common),
            RunSpec(args.task, depths=(), samples=args.samples, **common),
        ],
        args.repeats,
    )
    print(machine())
    print(
        f"prompts at {args.length} ({args.tokenizer}), best of {args.repeats} passes after a first, "
        f"and of {args.repeats} over new prompts:"
    )
    print(line(f"niah, {prompts} (one needle, depth 0.5)", niah))
    print(line(f"{args.task}, {prompts}", babi))
    print(ratio(args.task, babi, niah))


if __name__ == "__main__":
    main()
