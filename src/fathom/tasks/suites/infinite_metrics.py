"""InfiniteBench's scorers (``src/compute_scores.py``, its latest form), one per task.

Each takes the prediction and all of the item's references, as InfiniteBench passes its label list:
several tasks read only the first (passkey, Code.Run, Math.Find, En.Dia), the choice tasks read the
pair (option text, letter) that its ``get_answer`` builds, and Math.Calc reads the whole list of
intermediate values. fathom's references are strings: numbers are kept as JSON writes them ("42",
"3.5") and read back to the type InfiniteBench compares with.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from fathom.tasks.suites.libraries import rouge_lsum
from fathom.tasks.suites.metrics import normalize_zh_answer, qa_f1, token_f1

_DIGIT_RUNS = re.compile("[^0-9]")
_FIRST_NUMBER = re.compile(r"\d+\.\d+|\d+")
# The characters InfiniteBench turns into spaces before splitting an answer into words.
_WORD_BREAKS = ("\n", ":", '"', "'", ".", ",", "?", "!", "{", "}")


def _words(prediction: str, breaks: Sequence[str] = _WORD_BREAKS) -> list[str]:
    for ch in breaks:
        prediction = prediction.replace(ch, " ")
    return prediction.split()


def _squeezed(text: str, breaks: Sequence[str]) -> str:
    """``breaks`` made spaces, then runs of spaces made one, as the choice scorers prepare answers."""
    for ch in breaks:
        text = text.replace(ch, " ")
    while "  " in text:
        text = text.replace("  ", " ")
    return text


def first_int(prediction: str) -> str:
    """The first run of digits in the prediction, "" if none (first_int_match)."""
    return next((part for part in _DIGIT_RUNS.split(prediction) if part), "")


def passkey(prediction: str, references: Sequence[str]) -> float:
    """Passkey and Number.String: the first run of digits is the label."""
    return float(first_int(prediction) == references[0])


def kv_retrieval(prediction: str, references: Sequence[str]) -> float:
    """Retrieve.KV: the value is one of the answer's words, after punctuation became spaces."""
    words = _words(prediction)
    return float(any(reference in words for reference in references))


def code_run(prediction: str, references: Sequence[str]) -> float:
    """Code.Run: the answer's last word is the return value, an integer."""
    words = _words(prediction.strip(), ("\n", ".", "`", "'", '"', ":"))
    try:
        return float(bool(words) and int(words[-1]) == int(references[0]))
    except ValueError:
        return 0.0


def code_debug(prediction: str, references: Sequence[str]) -> float:
    """Code.Debug: references are (function name, option letter). The answer opens with "B." or
    "B:", or names the letter or the function right after an answer prefix (the first found)."""
    name, letter = references[0], references[1]
    prediction = prediction.strip()
    if prediction[:2] in (f"{letter}.", f"{letter}:"):
        return 1.0
    text = _squeezed(prediction, ("\n", "`", "'", '"', "-", "*", "Option", "option"))
    for prefix in ("answer is:", "is:", "answer:", "correct option is:"):
        at = text.find(prefix)
        if at == -1:
            continue
        rest = text[at + len(prefix) + 1 :]  # "" when the answer ends with the prefix: wrong
        return float(bool(rest) and (rest.startswith(letter) or rest.startswith(name)))
    return 0.0


def choice(prediction: str, references: Sequence[str]) -> float:
    """En.MC: references are (option text, letter). The answer's first character if it is A-D; the
    whole answer if it is the option; the text after an answer prefix; else its first word that is
    part of "ABCD" (InfiniteBench's test is a substring one, kept)."""
    label = tuple(references)
    prediction = prediction.strip()
    if not prediction:
        return 0.0
    if prediction[0] in "ABCD":
        return float(prediction[0] in label)
    if prediction in label:
        return 1.0
    text = _squeezed(prediction, ("\n", '"', "'", ".", ",", "?", "!", "{", "}"))
    for prefix in ("answer is:", "answer:", "answer is", "option is"):
        at = text.find(prefix)
        if at == -1:
            continue
        rest = text[at + len(prefix) + 1 :]
        return float(bool(rest) and any(rest.startswith(s) for s in label))
    for word in text.split():
        if word in "ABCD":
            return float(word in label)
    return 0.0


def math_find(prediction: str, references: Sequence[str]) -> float:
    """Math.Find: the answer's first number equals the label, read as the label's type (an integer
    label and a decimal answer is wrong here; InfiniteBench's int() fails on it)."""
    found = _FIRST_NUMBER.search(prediction)
    if found is None:
        return 0.0
    label, value = references[0], found.group(0)
    if "." in label or "e" in label.lower():
        return float(float(value) == float(label))
    return float("." not in value and int(value) == int(label))


def math_calc(prediction: str, references: Sequence[str]) -> float:
    """Math.Calc: the share of the intermediate values given right before the first wrong one. The
    answer's numbers are its digit runs, signs dropped, as InfiniteBench reads them (so a negative
    value is never matched; kept)."""
    values = [int(part) for part in _DIGIT_RUNS.split(prediction) if part]
    right = 0
    for expected, given in zip((int(r) for r in references), values, strict=False):
        if expected != given:
            break
        right += 1
    return right / len(references)


def dialogue(prediction: str, references: Sequence[str]) -> float:
    """En.Dia: the character's name (upper case in the data) is one of the answer's words, upper-cased;
    only the first reference counts."""
    return float(references[0] in [w.upper() for w in _words(prediction.strip())])


def qa_f1_en(prediction: str, references: Sequence[str]) -> float:
    """En.QA: LongBench's token F1, the best over the references."""
    return max((qa_f1(prediction, r) for r in references), default=0.0)


def qa_f1_zh_chars(prediction: str, references: Sequence[str]) -> float:
    """Zh.QA: F1 over characters (one character one token, no jieba), the best over the references."""
    chars = list(normalize_zh_answer(prediction))
    return max((token_f1(chars, list(normalize_zh_answer(r))) for r in references), default=0.0)


def summary_rouge(prediction: str, references: Sequence[str]) -> float:
    """En.Sum: ROUGE-Lsum F against the best reference."""
    return rouge_lsum()(prediction, list(references))


INFINITE_METRICS = {
    "passkey": passkey,
    "number_string": passkey,
    "kv_retrieval": kv_retrieval,
    "code_run": code_run,
    "code_debug": code_debug,
    "choice": choice,
    "math_find": math_find,
    "math_calc": math_calc,
    "dialogue": dialogue,
    "qa_f1": qa_f1_en,
    "qa_f1_zh": qa_f1_zh_chars,
    "rouge_lsum": summary_rouge,
}
