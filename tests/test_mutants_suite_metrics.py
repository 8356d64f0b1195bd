"""The suites' metrics where their other tests leave them open (``fathom.tasks.suites.metrics``,
``infinite_metrics`` and ``libraries``): each mark InfiniteBench's scorers turn into a space, labels
written in a float's exponent form, and each value worked out by hand in the comment beside it."""

from __future__ import annotations

import pytest

from fathom.errors import MissingExtraError, install_command
from fathom.records import Score
from fathom.tasks.suites import infinite_metrics as ib
from fathom.tasks.suites import libraries
from fathom.tasks.suites.metrics import Grader, classification_score, code_sim_score, first_line


@pytest.mark.parametrize(
    "answer",
    [
        "It returns `7`",  # a backtick each side
        "It returns 7.",  # a full stop after it
        "It returns '7'",
        'It returns "7"',
        "return value:7",  # the colon joins it to the word before
    ],
)
def test_code_run_reads_the_last_word_once_each_of_its_marks_is_a_space(answer: str) -> None:
    # Code.Run's marks are "\n", ".", "`", "'", '"' and ":"; with any of these kept, the last word is
    # "`7`", "7.", "'7'", '"7"' or "value:7", which int() refuses: 0.
    assert ib.code_run(answer, ("7",)) == 1.0


def test_math_find_reads_a_label_in_exponent_form_as_a_float() -> None:
    # JSON writes 1e16 as "1e+16": a float label, so the answer's first number is read as a float and
    # 10000000000000000 equals it; read as an integer label, int("1e+16") would fail.
    assert ib.math_find("It is 10000000000000000.", ("1e+16",)) == 1.0
    assert ib.math_find("It is 10000000000000000.", ("1E+16",)) == 1.0
    assert ib.math_find("It is 2.", ("1e+16",)) == 0.0


def test_math_find_calls_a_decimal_answer_to_an_integer_label_wrong() -> None:
    # An integer label: "42.0" has a full stop, so it is wrong, though float("42.0") == 42.
    assert ib.math_find("42.0", ("42",)) == 0.0
    assert ib.math_find("42", ("42",)) == 1.0


def test_en_qa_of_no_reference_is_0() -> None:
    assert ib.qa_f1_en("Ada Lovelace", ()) == 0.0


# En.MC's label: the option's text and its letter.
BOB = ("Bob", "B")


@pytest.mark.parametrize("mark", ["\n", '"', "'", ".", ",", "?", "!", "{", "}"])
def test_choice_makes_each_of_its_marks_a_space_and_squeezes_the_spaces(mark: str) -> None:
    # "answer is: mmB": the marks made spaces and the spaces squeezed leave "answer is: B", and the text
    # one character after the prefix is "B": right. A mark kept leaves "mmB" there: wrong.
    assert ib.choice(f"The answer is: {mark}{mark}B", BOB) == 1.0


@pytest.mark.parametrize(
    ("answer", "score"),
    [
        ("answer is: B", 1.0),  # a first character a-d in lower case is not a letter answer
        ("X marks it, the answer is: B", 1.0),  # nor is an X
        ("The answer: Bob", 1.0),  # "answer:" then the option's text (no word of it is in "ABCD")
        ("The correct option is Bob", 1.0),  # "option is"
        ("The answer is: B, not the answer is: C", 1.0),  # the first prefix found is read
        ("The answer is: C, not the answer is: B", 0.0),
        ("X then B", 1.0),  # the first word in "ABCD" is "B"; an X is none
        ("no letter here", 0.0),  # no prefix, no word in "ABCD": wrong
    ],
)
def test_choice_reads_the_first_prefix_then_the_first_letter_word(answer: str, score: float) -> None:
    assert ib.choice(answer, BOB) == score


def test_zh_qa_of_no_reference_is_0() -> None:
    assert ib.qa_f1_zh_chars("阿达", ()) == 0.0


# Code.Debug's label: the function's name and its option's letter.
FUNC_B = ("func_b", "B")


@pytest.mark.parametrize("mark", ["\n", "`", "'", '"', "-", "*", "Option", "option", " "])
def test_code_debug_makes_each_of_its_marks_a_space_and_squeezes_the_spaces(mark: str) -> None:
    # As En.MC's: "answer is: mmB" becomes "answer is: B"; a mark kept, or the spaces not squeezed
    # (the mark " "), leaves something other than "B" one character after the prefix.
    assert ib.code_debug(f"The answer is: {mark}{mark}B", FUNC_B) == 1.0


@pytest.mark.parametrize(
    ("answer", "score"),
    [
        ("Here is: my reasoning. The answer is: B", 1.0),  # "answer is:" is tried before "is:"
        ("Here is: B. The answer is: C", 0.0),
        ("The answer: func_b", 1.0),  # "answer:" then the function's name
        ("The answer is: B. Some say the answer is: C", 1.0),  # a prefix's first occurrence is read
        ("The answer is: C. Some say the answer is: B", 0.0),
        ("B. func_b", 1.0),  # the letter and a full stop open it
        ("B: func_b", 1.0),
        ("B func_b", 0.0),  # the letter alone opens nothing, and no prefix follows
    ],
)
def test_code_debug_reads_the_first_prefix_it_knows(answer: str, score: float) -> None:
    assert ib.code_debug(answer, FUNC_B) == score


def test_a_missing_library_names_its_package_and_the_suites_extra() -> None:
    with pytest.raises(MissingExtraError) as refused:
        libraries._module("fathom_no_such_package.sub.module")
    assert (
        str(refused.value)
        == f"fathom_no_such_package is not installed; install it with: {install_command('suites')}"
    )


def test_the_graded_line_keeps_its_indent_and_skips_only_leading_newlines() -> None:
    assert first_line("\n\n    return a\nb") == "    return a"
    assert first_line("\nXa\nb") == "Xa"
    # code_sim: the line equal to the reference scores 100 / 100; an indent or an "X" stripped would not.
    assert code_sim_score("\n    return a\n", "    return a") == 1.0
    assert code_sim_score("\nX = 1", "X = 1") == 1.0


def test_an_answer_of_comments_only_is_graded_as_an_empty_line() -> None:
    # No line without a backtick, "#" or "//": the empty line, which fuzzywuzzy scores 0 against any
    # text and 100 against the empty reference.
    assert code_sim_score("# a comment\n```", "x = 1") == 0.0
    assert code_sim_score("# a comment\n```", "") == 1.0


def test_classification_checks_each_class_after_one_it_keeps() -> None:
    # Matched in list order: "Animal" (the reference, kept), "Ani" (part of it: removed), "x" (kept):
    # 1/2. Checking every other name would keep "Ani": 1/3.
    assert classification_score("Animal Ani x", "Animal", ["Animal", "Ani", "x"]) == 0.5


def test_the_first_int_of_an_answer_without_digits_is_empty() -> None:
    assert ib.first_int("no digits here") == ""
    assert ib.first_int("a-12b3") == "12"


def test_a_whole_metric_names_its_references_where_it_scores_above_0() -> None:
    passkey = Grader("infinitebench:passkey", whole=ib.passkey)
    assert passkey("The key is 71432.", ["71432"]) == Score(1.0, ("71432",), "infinitebench:passkey")
    assert passkey("The key is 7.", ["71432"]) == Score(0.0, (), "infinitebench:passkey")
    # Math.Calc's share: 1 of 2 values right before the first wrong one.
    calc = Grader("infinitebench:math_calc", whole=ib.math_calc)
    assert calc("[3, 9]", ["3", "8"]) == Score(0.5, ("3", "8"), "infinitebench:math_calc")


def test_a_grader_without_a_metric_says_which() -> None:
    with pytest.raises(TypeError) as refused:
        Grader("longbench:nothing").score_one("a", "b")
    assert str(refused.value) == "grader longbench:nothing has no metric"


def test_rouge_l_reads_out_the_common_subsequence_past_a_step_up() -> None:
    # Reference "c d a" against the prediction "a b c d": the LCS is "c d", and reading it out from
    # the table's far corner steps up past the reference's "a" first. Recall 2/3, precision 2/4,
    # F = 2PR / (P + R) = 4/7 (the rouge package adds 1e-8 to the denominator).
    assert libraries.rouge_lsum()("a b c d", ["c d a"]) == pytest.approx(4 / 7, abs=1e-12)
    assert libraries.rouge_l("a b c d", "c d a", 990) == pytest.approx(4 / 7, abs=1e-7)
