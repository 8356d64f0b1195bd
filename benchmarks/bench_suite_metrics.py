"""Scoring speed of the real suites' metrics: 10,000 predictions, shared out over every metric.

Run from the repository root, in fathom's virtualenv (with the suites extra):

    python benchmarks/bench_suite_metrics.py --predictions 10000

Each metric of LongBench (qa_f1, qa_f1_zh, rouge, rouge_zh, classification, retrieval, retrieval_zh,
count, code_sim), LongBench v2 (choice) and InfiniteBench (its 12 scorers) grades an equal share of
the predictions, each against references of the size the suite's answers have: a few words for QA,
about 150 words for a summary (LongBench's ROUGE-L and InfiniteBench's ROUGE-Lsum), a line of code.
The libraries are loaded (jieba's dictionary too) before the clock starts. Timings are printed and
written to benchmarks/results/suite_metrics.json, not asserted.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections.abc import Callable
from pathlib import Path

from fathom.records import Score
from fathom.tasks.suites.infinite_metrics import INFINITE_METRICS
from fathom.tasks.suites.metrics import LONGBENCH_METRICS, Grader

WORDS = "river mill town bridge lamp stone harbour market clock garden tower field road".split()
HANZI = "北京上海河流城市会议总结问题答案文章新闻"


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words))


def _chinese(rng: random.Random, chars: int) -> str:
    return "".join(rng.choice(HANZI) for _ in range(chars)) + "。"


Case = tuple[Callable[[str, tuple[str, ...]], Score], Callable[[random.Random], tuple[str, tuple[str, ...]]]]


def cases() -> dict[str, Case]:
    def longbench(metric: str, make: Callable[[random.Random], tuple[str, tuple[str, ...]]]) -> Case:
        return Grader(f"longbench:{metric}", metric=LONGBENCH_METRICS[metric]), make

    def infinite(metric: str, make: Callable[[random.Random], tuple[str, tuple[str, ...]]]) -> Case:
        return Grader(f"infinitebench:{metric}", whole=INFINITE_METRICS[metric]), make

    classes = tuple(f"class {i}" for i in range(50))
    return {
        "longbench:qa_f1": longbench("qa_f1", lambda r: (_text(r, 12), (_text(r, 4), _text(r, 3)))),
        "longbench:qa_f1_zh": longbench("qa_f1_zh", lambda r: (_chinese(r, 20), (_chinese(r, 8),))),
        "longbench:rouge": longbench("rouge", lambda r: (_text(r, 150), (_text(r, 150),))),
        "longbench:rouge_zh": longbench("rouge_zh", lambda r: (_chinese(r, 200), (_chinese(r, 200),))),
        "longbench:classification": (
            Grader("longbench:classification", classes=classes, first_line=True),
            lambda r: (f"{r.choice(classes)}\nmore", (r.choice(classes),)),
        ),
        "longbench:retrieval": longbench(
            "retrieval", lambda r: (f"Paragraph {r.randint(1, 30)}", ("Paragraph 7",))
        ),
        "longbench:retrieval_zh": longbench(
            "retrieval_zh", lambda r: (f"段落{r.randint(1, 30)}", ("段落7",))
        ),
        "longbench:count": longbench("count", lambda r: (str(r.randint(1, 30)), ("12",))),
        "longbench:code_sim": longbench(
            "code_sim", lambda r: ("x = " + _text(r, 6), ("x = " + _text(r, 6),))
        ),
        "longbench-v2:choice": longbench(
            "choice", lambda r: ("The correct answer is (B)", (r.choice("ABCD"),))
        ),
        "infinitebench:passkey": infinite("passkey", lambda r: ("The pass key is 71432", ("71432",))),
        "infinitebench:number_string": infinite("number_string", lambda r: ("1234567890", ("1234567890",))),
        "infinitebench:kv_retrieval": infinite("kv_retrieval", lambda r: ('"ab-12-cd"', ("ab-12-cd",))),
        "infinitebench:code_run": infinite("code_run", lambda r: ("The value is 42", ("42",))),
        "infinitebench:code_debug": infinite("code_debug", lambda r: ("The answer is: B", ("func_1", "B"))),
        "infinitebench:choice": infinite("choice", lambda r: ("I think the answer is C", ("text", "C"))),
        "infinitebench:math_find": infinite("math_find", lambda r: ("12", ("12",))),
        "infinitebench:math_calc": infinite("math_calc", lambda r: ("[1, 4, 8, 9]", ("1", "4", "8", "10"))),
        "infinitebench:dialogue": infinite("dialogue", lambda r: ("It is John.", ("JOHN",))),
        "infinitebench:qa_f1": infinite("qa_f1", lambda r: (_text(r, 12), (_text(r, 4),))),
        "infinitebench:qa_f1_zh": infinite("qa_f1_zh", lambda r: (_chinese(r, 20), (_chinese(r, 8),))),
        "infinitebench:rouge_lsum": infinite("rouge_lsum", lambda r: (_text(r, 150), (_text(r, 150),))),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--predictions", type=int, default=10_000)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/suite_metrics.json"))
    args = parser.parse_args()
    rng = random.Random(0)
    table = cases()
    share = args.predictions // len(table)
    inputs = {name: [make(rng) for _ in range(share)] for name, (_, make) in table.items()}
    for name, (grade, _) in table.items():  # load the libraries (jieba's dictionary) off the clock
        grade(*inputs[name][0])
    seconds: dict[str, float] = {}
    started = time.perf_counter()
    for name, (grade, _) in table.items():
        begin = time.perf_counter()
        for prediction, references in inputs[name]:
            grade(prediction, references)
        seconds[name] = round(time.perf_counter() - begin, 4)
    total = time.perf_counter() - started
    for name, spent in sorted(seconds.items(), key=lambda item: -item[1]):
        print(f"{name:<30} {share} predictions: {spent:.3f} s")
    print(f"{share * len(table)} predictions over {len(table)} metrics: {total:.2f} s")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    result = {"predictions": share * len(table), "metrics": len(table), "seconds": round(total, 3)}
    args.out.write_text(json.dumps({**result, "per_metric_seconds": seconds}, indent=2) + "\n")


if __name__ == "__main__":
    main()
