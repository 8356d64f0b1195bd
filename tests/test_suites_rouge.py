"""fathom's ROUGE-L and ROUGE-Lsum against the libraries that define them (the ``rouge`` package for
LongBench, rouge-score for InfiniteBench), on hundreds of generated pairs and the edge cases: fathom
computes them itself for speed, and a score that differs from the library's is no suite's score."""

# ruff: noqa: RUF001

from __future__ import annotations

import importlib.util
import inspect
import json
import random
import subprocess
import sys
import textwrap

import pytest

from fathom.tasks.suites import infinite_metrics as ib
from fathom.tasks.suites import metrics as lb
from fathom.tasks.suites.libraries import _lcs_rows, _positions, jieba_cut, rouge_l

pytestmark = pytest.mark.skipif(
    not all(importlib.util.find_spec(name) for name in ("jieba", "rouge", "rouge_score")),
    reason="needs the suites' metric libraries: pip install -e '.[suites]'",
)

# Few distinct words, so that LCSs tie and the read-out's choice shows; full stops inside words and
# alone, case, empty and whitespace pieces, digits and characters rouge-score's tokenizer drops.
WORDS = ["the", "cat", "sat", "on", "mat", "a", "The", "CAT", "cat.", "mat,", "!", "?", "...", "."]
WORDS += ["", " ", "\t", "3.5", "e.g.", "x", "y", "naïve", "北京", "--"]
GAPS = [" ", " ", " ", "  ", ". ", ".", "\n", "\n\n", "", " .\n"]
EDGES = [
    ("", ""),
    ("", "the cat"),
    ("the cat", ""),
    (".", "the cat"),
    ("the cat", "..."),
    (" ", "the cat"),
    ("the cat. ", "the cat"),
    ("cat cat cat", "cat"),
    ("the cat. the cat. the cat", "cat the"),
    ("a b c d", "d c b a"),
    ("\n", "\n"),
    ("The Cat", "the cat"),
    ("!!!", "?"),
    ("one sentence\nanother one\n\nthird", "another one\nthird\none sentence"),
]


def _text(rng: random.Random) -> str:
    return "".join(rng.choice(WORDS) + rng.choice(GAPS) for _ in range(rng.randint(0, 40)))


def _pairs(seed: int, count: int) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    return EDGES + [(_text(rng), _text(rng)) for _ in range(count)]


def _package_rouge_l(prediction: str, reference: str) -> float | None:
    """The package's score as LongBench's rouge_score takes it; None for a RecursionError."""
    from rouge import Rouge

    try:
        scores = Rouge().get_scores([prediction], [reference], avg=True)
    except RecursionError:
        return None
    except Exception:  # LongBench's bare except: an empty text's ValueError
        return 0.0
    return float(scores["rouge-l"]["f"])


def test_lcs_rows_are_the_lcs_table() -> None:
    rng = random.Random(3)
    for _ in range(200):
        x = [rng.choice("abcd") for _ in range(rng.randint(0, 12))]
        y = [rng.choice("abcd") for _ in range(rng.randint(0, 12))]
        table = [[0] * (len(y) + 1) for _ in range(len(x) + 1)]
        for i in range(1, len(x) + 1):
            for j in range(1, len(y) + 1):
                same = x[i - 1] == y[j - 1]
                table[i][j] = table[i - 1][j - 1] + 1 if same else max(table[i - 1][j], table[i][j - 1])
        rows = _lcs_rows(x, len(y), _positions(y))
        assert [[j - (row & (1 << j) - 1).bit_count() for j in range(len(y) + 1)] for row in rows] == table


def test_rouge_l_is_the_rouge_packages() -> None:
    for prediction, reference in _pairs(seed=1, count=600):
        expected = _package_rouge_l(prediction, reference)
        assert expected is not None
        # Bit-identical, not merely close: the same float operations in the same order.
        assert lb.rouge_score(prediction, reference) == expected, (prediction, reference)


def test_chinese_rouge_l_over_jieba_words_is_the_rouge_packages() -> None:
    rng = random.Random(2)
    hanzi = "北京上海河流城市会议总结问题答案文章新闻的了是在我们他们"
    punctuation = ["。", "，", "、", " ", ".", "\n", "", "", "", ""]

    def text() -> str:
        return "".join(rng.choice(hanzi) + rng.choice(punctuation) for _ in range(rng.randint(0, 60)))

    import jieba

    jieba_cut()  # quiets jieba's dictionary loading
    for _ in range(300):
        prediction, reference = text(), text()
        # LongBench's rouge_zh_score, segmentation included.
        joined = [" ".join(list(jieba.cut(t, cut_all=False))) for t in (prediction, reference)]
        expected = _package_rouge_l(*joined)
        assert lb.rouge_zh(prediction, reference) == expected, (prediction, reference)


def test_a_walk_too_long_for_the_recursion_limit_scores_0_as_in_the_package() -> None:
    # Under a low recursion limit, the longest walk the package survives from here is found with
    # one shape of pair; random long single-sentence pairs, whose walks fall either side of it, must
    # then score 0 exactly where the package runs out of frames. Both are called from this frame.
    rng = random.Random(4)
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(len(inspect.stack(context=0)) + 150)
    try:
        longest = 1
        while _package_rouge_l(" ".join(["a"] + ["b"] * longest), "a") is not None:
            longest += 1  # the first failing walk was longest + 1 steps
        cut_off = 0
        for _ in range(300):
            prediction = " ".join(rng.choice("abcdef") for _ in range(rng.randint(60, 130)))
            reference = " ".join(rng.choice("abcdeg") for _ in range(rng.randint(60, 130)))
            expected = _package_rouge_l(prediction, reference)
            cut_off += expected is None
            assert rouge_l(prediction, reference, longest) == (expected or 0.0), (prediction, reference)
    finally:
        sys.setrecursionlimit(limit)
    assert 30 < cut_off < 270  # both sides of the limit were tried


# LongBench's eval.py and the metric functions it calls, as they stand (jieba.cut aside, which
# returns before rouge_score is called, so the frames are the same): the walk lengths its RecursionError
# begins at, as fathom's constants must say.
EVAL_PY = """
import json
from rouge import Rouge

def rouge_score(prediction, ground_truth, **kwargs):
    rouge = Rouge()
    try:
        scores = rouge.get_scores([prediction], [ground_truth], avg=True)
    except:
        return 0.0
    return scores["rouge-l"]["f"]

def rouge_zh_score(prediction, ground_truth, **kwargs):
    prediction = " ".join(list(prediction.split()))
    ground_truth = " ".join(list(ground_truth.split()))
    score = rouge_score(prediction, ground_truth)
    return score

def scorer(dataset, predictions, answers, all_classes):
    total_score = 0.
    for (prediction, ground_truths) in zip(predictions, answers):
        score = 0.
        for ground_truth in ground_truths:
            score = max(score, dataset2metric[dataset](prediction, ground_truth, all_classes=all_classes))
        total_score += score
    return round(100 * total_score / len(predictions), 2)

dataset2metric = {"gov_report": rouge_score, "vcsum": rouge_zh_score}
longest = {}
for dataset in dataset2metric:
    steps = 900
    while scorer(dataset, [" ".join(["a"] + ["b"] * steps)], [["a"]], []) > 0:
        steps += 1
    longest[dataset] = steps
print(json.dumps(longest))
"""


def test_the_recursion_cut_off_is_longbench_eval_pys() -> None:
    run = subprocess.run([sys.executable, "-c", textwrap.dedent(EVAL_PY)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    longest = json.loads(run.stdout)
    assert longest == {"gov_report": lb.LONGBENCH_ROUGE_STEPS, "vcsum": lb.LONGBENCH_ROUGE_ZH_STEPS}
    for metric, steps in (
        (lb.rouge_score, lb.LONGBENCH_ROUGE_STEPS),
        (lb.rouge_zh, lb.LONGBENCH_ROUGE_ZH_STEPS),
    ):
        walk = " ".join(["a"] + ["b"] * (steps - 1))  # a walk of one step a word
        assert metric(walk, "a") > 0
        assert metric(walk + " b", "a") == 0.0


def test_rouge_lsum_is_rouge_scores() -> None:
    from rouge_score.rouge_scorer import RougeScorer

    scorer = RougeScorer(["rougeLsum"], use_stemmer=False)
    rng = random.Random(5)
    for prediction, reference in _pairs(seed=6, count=400):
        references = [reference] + [_text(rng) for _ in range(rng.randint(0, 2))]
        expected = scorer.score_multi(references, prediction)["rougeLsum"].fmeasure
        assert ib.summary_rouge(prediction, references) == expected, (prediction, references)
