"""The real suites' metrics against values computed by hand from their definitions (LongBench's
metrics.py and eval.py, LongBench v2's pred.py, InfiniteBench's compute_scores.py), edge cases and the
suites' own quirks included."""

# ruff: noqa: RUF001

from __future__ import annotations

import importlib.util

import pytest

from fathom.tasks.suites import infinite_metrics as ib
from fathom.tasks.suites import metrics as lb
from fathom.tasks.suites.catalogue import longbench_e_bucket
from fathom.tasks.suites.metrics import Grader

LIBRARIES = ("jieba", "rouge", "rouge_score", "rapidfuzz")
# The suites marker: skipped with the install hint where the suites extra is not installed.
needs_libraries = pytest.mark.skipif(
    not all(importlib.util.find_spec(name) for name in LIBRARIES),
    reason="needs the suites' metric libraries: pip install -e '.[suites]'",
)


@pytest.mark.parametrize(
    ("prediction", "reference", "expected"),
    [
        ("The Eiffel Tower!", "eiffel tower", 1.0),  # case, punctuation and the article go
        ("a big red dog", "red dog", 0.8),  # p = 2/3, r = 1
        ("An apple", "apple", 1.0),
        ("theme park", "park", 2 / 3),  # "the" inside a word stays
        ("", "Paris", 0.0),  # empty prediction
        ("Paris", "", 0.0),
        ("dog dog cat", "dog", 0.5),  # counted with multiplicity: p = 1/3, r = 1
    ],
)
def test_token_f1_after_squad_normalisation(prediction: str, reference: str, expected: float) -> None:
    assert lb.qa_f1(prediction, reference) == pytest.approx(expected)


def test_the_best_of_several_references_counts() -> None:
    # "Paris France" vs "Paris": p = 1/2, r = 1 -> 2/3; vs "the city of Paris": p = 1/2, r = 1/3 -> 0.4.
    score = Grader("longbench:qa_f1", metric=lb.qa_f1)("Paris France", ("the city of Paris", "Paris"))
    assert score.value == pytest.approx(2 / 3)
    assert score.matched == ("Paris",)
    assert Grader("m", metric=lb.qa_f1)("nothing", ("Paris",)).matched == ()


def test_few_shot_tasks_grade_the_first_line_only() -> None:
    first = Grader("longbench:qa_f1", metric=lb.qa_f1, first_line=True)
    assert first("\n\nParis\nQuestion: and London?", ("Paris",)).value == 1.0
    whole = Grader("longbench:qa_f1", metric=lb.qa_f1)
    assert whole("\n\nParis\nLondon", ("Paris",)).value == pytest.approx(2 / 3)


def test_chinese_normalisation_drops_full_width_punctuation_and_spaces() -> None:
    assert lb.normalize_zh_answer("北京，中国。 Hello!") == "北京中国hello"
    assert lb.normalize_answer("The  cat,  the hat.") == "cat hat"


@pytest.mark.parametrize(
    ("prediction", "classes", "reference", "expected"),
    [
        ("NUM and LOC", ("NUM", "LOC", "HUM"), "NUM", 0.5),  # two classes named: half credit
        ("NUM and LOC", ("NUM", "LOC", "HUM"), "HUM", 0.0),
        ("nothing", ("NUM", "LOC"), "NUM", 0.0),
        ("Food and drink", ("Food", "Food and drink", "Sport"), "Food and drink", 1.0),
        # LongBench removes from the list it iterates: after "ab" goes, "bc" is skipped and stays.
        ("abc", ("ab", "bc", "abc"), "abc", 0.5),
    ],
)
def test_classification(prediction: str, classes: tuple[str, ...], reference: str, expected: float) -> None:
    assert lb.classification_score(prediction, reference, classes) == expected
    grader = Grader("longbench:classification", classes=classes, first_line=True)
    assert grader(prediction + "\nmore", (reference,)).value == expected


def test_passage_retrieval_and_count() -> None:
    assert lb.retrieval_score("Paragraph 3, not Paragraph 12", "Paragraph 3") == 0.5
    assert lb.retrieval_score("Paragraph 3", "Paragraph 3") == 1.0
    assert lb.retrieval_score("", "Paragraph 3") == 0.0  # no number at all
    assert lb.retrieval_zh_score("答案是段落5", "段落5") == 1.0
    assert lb.retrieval_zh_score("段落5或段落6", "段落5") == 0.5
    assert lb.count_score("There are 7 unique of 10", "7") == 0.5
    assert lb.count_score("seven", "7") == 0.0


def test_longbench_v2_answer_extraction() -> None:
    assert lb.extract_choice("**The correct answer is (C)**") == "C"
    assert lb.extract_choice("The correct answer is B.") == "B"
    assert lb.extract_choice("I think (A).") is None
    assert lb.extract_choice("the correct answer is (A)") is None  # case matters, as in pred.py
    assert lb.choice_score("The correct answer is (D)", "D") == 1.0
    assert lb.choice_score("", "D") == 0.0


def test_longbench_e_buckets() -> None:
    assert [longbench_e_bucket(n) for n in (0, 3999, 4000, 7999, 8000)] == [
        "0-4k",
        "0-4k",
        "4-8k",
        "4-8k",
        "8k+",
    ]


@needs_libraries
def test_code_similarity_is_fuzzywuzzys_ratio_of_the_first_code_line() -> None:
    # The fence and the comment lines are skipped; the first plain line is graded.
    assert lb.code_sim_score("```python\n# the next line\nx = 1\n```", "x = 1") == 1.0
    assert lb.code_sim_score("abc", "abd") == 0.67  # Indel 2 of 6: 66.67, rounded to 67
    assert lb.code_sim_score("", "x = 1") == 0.0
    assert lb.code_sim_score("\n\nreturn a", "return a") == 1.0


@needs_libraries
def test_rouge_l_as_the_rouge_package_computes_it() -> None:
    # LCS "the cat": p = 2/3, r = 2/4, F = 4/7 (the package adds an epsilon of 1e-8 to the divisor).
    assert lb.rouge_score("the cat sat", "the cat was here") == pytest.approx(4 / 7, abs=1e-7)
    assert lb.rouge_score("", "the cat") == 0.0  # the package refuses an empty hypothesis
    assert lb.rouge_score("the cat", "the cat") == pytest.approx(1.0, abs=1e-7)


@needs_libraries
def test_chinese_f1_and_rouge_over_jieba_words() -> None:
    assert lb.qa_f1_zh("北京。", "北京") == 1.0  # the full stop is a word of its own, then empty
    assert lb.qa_f1_zh("", "北京") == 0.0
    assert lb.rouge_zh("北京", "北京") == pytest.approx(1.0, abs=1e-7)


def test_infinitebench_retrieval_tasks() -> None:
    assert ib.passkey("The pass key is 71432.", ("71432",)) == 1.0
    assert ib.passkey("key 7 1432", ("71432",)) == 0.0  # the first digit run only
    assert ib.passkey("", ("71432",)) == 0.0
    assert ib.kv_retrieval('The value is: "abc-123".', ("abc-123",)) == 1.0
    assert ib.kv_retrieval("abc-1234", ("abc-123",)) == 0.0  # a whole word, not a substring


def test_infinitebench_code_tasks() -> None:
    assert ib.code_run("The value is 42.", ("42",)) == 1.0
    assert ib.code_run("so it returns -3", ("-3",)) == 1.0
    assert ib.code_run("unknown", ("3",)) == 0.0
    assert ib.code_run("", ("3",)) == 0.0
    label = ("func_x", "B")
    assert ib.code_debug("B. func_x", label) == 1.0
    assert ib.code_debug("The answer is: func_x", label) == 1.0
    assert ib.code_debug("The answer is:", label) == 0.0  # ends with the prefix
    assert ib.code_debug("C", label) == 0.0


def test_infinitebench_choice_extraction() -> None:
    label = ("the red door", "B")
    assert ib.choice("B", label) == 1.0
    assert ib.choice("A) no", label) == 0.0  # the first character decides
    assert ib.choice("the red door", label) == 1.0  # the option's text itself
    assert ib.choice("I pick: the answer is B", label) == 1.0
    assert ib.choice("maybe C", label) == 0.0  # the first word that is part of "ABCD"
    assert ib.choice("", label) == 0.0
    assert ib.choice("   ", label) == 0.0


def test_infinitebench_math_and_dialogue() -> None:
    assert ib.math_find("The answer is 12.", ("12",)) == 1.0
    assert ib.math_find("3.5", ("3.5",)) == 1.0
    assert ib.math_find("3.5", ("3",)) == 0.0  # InfiniteBench's int("3.5") fails: wrong
    assert ib.math_find("7", ("7.0",)) == 1.0
    assert ib.math_find("none", ("7",)) == 0.0
    assert ib.math_calc("[1, 4, 8]", ("1", "4", "9")) == pytest.approx(2 / 3)
    assert ib.math_calc("[8, 5, -7]", ("8", "5", "-7")) == pytest.approx(2 / 3)  # signs are dropped
    assert ib.math_calc("", ("1",)) == 0.0
    assert ib.dialogue("It is John.", ("JOHN", "MARY")) == 1.0
    assert ib.dialogue("Mary", ("JOHN", "MARY")) == 0.0  # only the first reference counts


def test_infinitebench_qa() -> None:
    assert ib.qa_f1_en("a big red dog", ("cat", "red dog")) == pytest.approx(0.8)
    # Characters, not jieba's words: 北京 vs 北京市, p = 1, r = 2/3.
    assert ib.qa_f1_zh_chars("北京。", ("北京市",)) == pytest.approx(0.8)
    assert ib.qa_f1_zh_chars("", ("北京",)) == 0.0


@needs_libraries
def test_infinitebench_summary_rouge_lsum_takes_the_best_reference() -> None:
    assert ib.summary_rouge("the cat sat", ("the cat was here",)) == pytest.approx(4 / 7)
    assert ib.summary_rouge("the cat sat", ("x y z", "the cat sat")) == pytest.approx(1.0)
    assert ib.summary_rouge("", ("the cat",)) == 0.0
