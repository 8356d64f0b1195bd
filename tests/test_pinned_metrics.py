"""Values pinned where a wrong implementation gives another number: the suites' metrics on inputs that
tell jieba's words from characters and from whitespace splitting, that need each normalisation step,
and that hang on which line, which prefix or which rounding the reference implementation takes; and
Cohen's kappa worked out by hand from its table (not by calling ``kappa``).

Each expected value is derived in the comment beside it, from the suite's own definition (LongBench's
``metrics.py``, InfiniteBench's ``compute_scores.py``) and jieba's segmentation, which is pinned too:
a jieba that cut otherwise would move the numbers, and the test says so first.
"""

# The suites' answers are Chinese text: full-width marks are meant.

from __future__ import annotations

import importlib.util

import pytest

from fathom.analysis.agreement import kappa
from fathom.tasks.suites import infinite_metrics as ib
from fathom.tasks.suites import metrics as lb

needs_libraries = pytest.mark.skipif(
    not all(importlib.util.find_spec(name) for name in ("jieba", "rapidfuzz")),
    reason="needs the suites' metric libraries: pip install -e '.[suites]'",
)


@needs_libraries
def test_jiebas_segmentation_of_the_pinned_inputs() -> None:
    from fathom.tasks.suites.libraries import jieba_cut

    cut = jieba_cut()
    assert cut("我爱北京天安门") == ("我", "爱", "北京", "天安门")
    assert cut("天安门在北京") == ("天安门", "在", "北京")
    assert cut("北京市") == ("北京市",)
    assert cut("首都是北京。") == ("首都", "是", "北京", "。")
    assert cut("北京是中国的首都") == ("北京", "是", "中国", "的", "首都")


@needs_libraries
@pytest.mark.parametrize(
    ("prediction", "reference", "expected"),
    [
        # jieba's words: 4 against 3, 北京 and 天安门 shared: p = 1/2, r = 2/3, F1 = 4/7. Characters
        # would give 10/13 (5 of 7 and 5 of 6), whitespace splitting 0 (one token each, unequal).
        ("我爱北京天安门", "天安门在北京", 4 / 7),
        # One word each, and not the same word: 0. Characters would give 0.8 (北京 inside 北京市).
        ("北京市", "北京", 0.0),
        # 。 is a word of its own that normalises to "" and is dropped: 3 words, all in the 5 of the
        # reference, p = 1, r = 3/5, F1 = 3/4. Kept as an empty word it would be p = 3/4: F1 = 2/3.
        ("首都是北京。", "北京是中国的首都", 3 / 4),
        # Words are lower-cased: Python|是|编程语言 against python, p = 1/3, r = 1: F1 = 1/2 (0 unfolded).
        ("Python是编程语言", "python", 1 / 2),
    ],
)
def test_longbench_chinese_f1_is_over_jiebas_words(prediction: str, reference: str, expected: float) -> None:
    assert lb.qa_f1_zh(prediction, reference) == pytest.approx(expected, abs=1e-12)


def test_infinitebench_chinese_f1_is_over_characters_not_words() -> None:
    # 我爱北京天安门 against 天安门在北京: 5 characters shared, p = 5/7, r = 5/6, F1 = 10/13, where
    # LongBench's jieba words give 4/7 on the same pair (above).
    assert ib.qa_f1_zh_chars("我爱北京天安门", ("天安门在北京",)) == pytest.approx(10 / 13, abs=1e-12)
    # 北京市 against 北京: p = 2/3, r = 1, F1 = 0.8 (jieba's words give 0).
    assert ib.qa_f1_zh_chars("北京市", ("北京",)) == pytest.approx(0.8, abs=1e-12)
    # the best of the references: 0.8 against 北京, not 0 against 上海
    assert ib.qa_f1_zh_chars("北京市", ("上海", "北京")) == pytest.approx(0.8, abs=1e-12)


@needs_libraries
def test_longbench_chinese_rouge_is_over_jiebas_words() -> None:
    # "我 爱 北京 天安门" against "天安门 在 北京": the two shared words come in opposite orders, so the
    # LCS is one word: r = 1/3, p = 1/4, F = 2 * (1/12) / (7/12 + 1e-8) = 2/7. Unsegmented, each text
    # is one word and F is 0.
    assert lb.rouge_zh("我爱北京天安门", "天安门在北京") == pytest.approx(2 / 7, abs=1e-7)
    assert lb.rouge_zh("北京市", "北京") == 0.0


@needs_libraries
def test_code_similarity_grades_the_first_line_that_is_no_comment_and_rounds_the_ratio() -> None:
    # "return a + b" (12) against "return a+b" (10): LCS 10, Indel distance 2 of 22 characters, ratio
    # 90.9, rounded to 91 as fuzzywuzzy's integer ratio is: 0.91 (unrounded, 0.909).
    assert lb.code_sim_score("```python\n# add them\nreturn a + b\n```", "return a+b") == 0.91
    # The // line is skipped: "x++;" (4) against "x += 1;" (7), LCS 3 ("x", "+", ";"), Indel 5 of 11:
    # 54.5, rounded to 55 (Python rounds half to even, and 54.545... is no half).
    assert lb.code_sim_score("// c style\nx++;", "x += 1;") == 0.55


def test_english_f1_needs_each_normalisation_step() -> None:
    # Lower case, then punctuation: "CAT." becomes "cat" (1.0); either step left out makes it 0.
    assert lb.qa_f1("CAT.", "cat") == 1.0
    # The comma goes and the article with it: "cat" alone.
    assert lb.qa_f1("the, cat", "cat") == 1.0
    # p = 1/2 ("cat", "sat" against "cat"), r = 1: 2/3; with "a" kept as a word, p = 1/3: 1/2.
    assert lb.qa_f1("a cat sat", "cat") == pytest.approx(2 / 3, abs=1e-12)


@pytest.mark.parametrize(
    ("prediction", "expected"),
    [
        # The prefixes are tried in InfiniteBench's order, not by where they stand: "is:" comes before
        # "answer:" in its list, so the letter after "is:" (B) is read, not the C after "answer:".
        ("answer: C, is: B", 1.0),
        ("The correct option is: func_x", 1.0),  # "is:" again, then the function's name
        ("B: because", 1.0),  # the letter and a colon open the answer
        ("func_x is wrong; answer: A", 0.0),
    ],
)
def test_infinitebench_code_debug_reads_the_first_prefix_of_its_list(
    prediction: str, expected: float
) -> None:
    assert ib.code_debug(prediction, ("func_x", "B")) == expected


def test_infinitebench_choice_reads_after_its_answer_prefixes() -> None:
    label = ("the red door", "B")
    assert ib.choice("I think the answer is the red door", label) == 1.0  # "answer is", then the text
    assert ib.choice("My answer: C", label) == 0.0  # "answer:", then another letter
    assert ib.choice("My answer: B", label) == 1.0
    assert ib.choice("Maybe. B", label) == 1.0  # no prefix: the first word that is part of "ABCD"


# Cohen's kappa worked out by hand. Two raters, pass (1) or fail (0), ten items:
#              b: pass  b: fail
#   a: pass       5        2        a passes 7 of 10
#   a: fail       1        2
#                 6 of 10 pass for b
# p_o = (5 + 2) / 10 = 0.7; p_e = 0.7 * 0.6 + 0.3 * 0.4 = 0.54; kappa = (0.7 - 0.54) / 0.46 = 8/23.
# (p_e from one rater's margins alone, 0.7^2 + 0.3^2 = 0.58, would give 0.12/0.42 = 2/7.)
PASS_FAIL_A = [1, 1, 1, 1, 1, 1, 1, 0, 0, 0]
PASS_FAIL_B = [1, 1, 1, 1, 1, 0, 0, 1, 0, 0]


def test_cohens_kappa_of_a_two_by_two_table_by_hand() -> None:
    assert kappa(PASS_FAIL_A, PASS_FAIL_B, [0, 1]) == pytest.approx(8 / 23, abs=1e-12)
    assert kappa(PASS_FAIL_B, PASS_FAIL_A, [0, 1]) == pytest.approx(8 / 23, abs=1e-12)  # symmetric
    # One rater always passes, the other half the time: p_o = 0.5, p_e = 1 * 0.5 = 0.5: kappa 0.
    assert kappa([1, 1, 1, 1], [1, 0, 1, 0], [0, 1]) == pytest.approx(0.0, abs=1e-12)
    # Both always pass: chance agreement is total, and kappa undefined.
    assert kappa([1, 1, 1], [1, 1, 1], [0, 1]) is None
    # Perfect disagreement with balanced margins: p_o = 0, p_e = 0.5: kappa -1.
    assert kappa([1, 0, 1, 0], [0, 1, 0, 1], [0, 1]) == pytest.approx(-1.0, abs=1e-12)


# A three-point ordinal scale (1, 2, 3), ten items:
#            b: 1  b: 2  b: 3     a's margins
#   a: 1       3     1     1         0.5
#   a: 2       0     2     1         0.3
#   a: 3       0     1     1         0.2
#   b's:     0.3   0.4   0.3
# Quadratic weights (i - j)^2 / 4: 1/4 a step apart, 1 two steps apart.
# Observed weighted disagreement: (1 + 1 + 1) * 1/4 + 1 * 1 = 1.75, over 10: 0.175.
# Expected: 0.5 * (0.4/4 + 0.3) + 0.3 * (0.3/4 + 0.3/4) + 0.2 * (0.3 + 0.4/4) = 0.2 + 0.045 + 0.08 = 0.325.
# Weighted kappa = 1 - 0.175 / 0.325 = 6/13. Unweighted: p_o = 0.6, p_e = 0.15 + 0.12 + 0.06 = 0.33,
# kappa = 0.27 / 0.67 = 27/67. (Linear weights, |i - j| / 2, would give 1 - 0.25 / 0.44 = 19/44.)
ORDINAL_A = [1, 1, 1, 1, 1, 2, 2, 2, 3, 3]
ORDINAL_B = [1, 1, 1, 2, 3, 2, 2, 3, 2, 3]


def test_weighted_and_unweighted_kappa_of_a_three_by_three_table_by_hand() -> None:
    assert kappa(ORDINAL_A, ORDINAL_B, [1, 2, 3], weighted=True) == pytest.approx(6 / 13, abs=1e-12)
    assert kappa(ORDINAL_A, ORDINAL_B, [1, 2, 3]) == pytest.approx(27 / 67, abs=1e-12)
