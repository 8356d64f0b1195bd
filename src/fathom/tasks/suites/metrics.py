"""The suites' metrics, as their releases compute them: LongBench's (``metrics.py``, ``eval.py``),
LongBench v2's answer extraction (``pred.py``) and, in ``infinite_metrics``, InfiniteBench's
(``src/compute_scores.py``).

A metric grades one prediction against one reference; a ``Grader`` applies the suite's rules around it:
LongBench's maximum over the references and its first-line rule for few-shot tasks. Their quirks are
kept where they change a number (classification's list edited while it is read, for one), since a
score that differs from the suite's is no LongBench score; each is said where it is kept.
"""

# The suites' Chinese prompts and punctuation are their own text: full-width marks are meant.
# ruff: noqa: RUF001

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from fathom.records import Score
from fathom.tasks.suites.libraries import fuzz_ratio, jieba_cut, rouge_l

Metric = Callable[[str, str], float]  # one prediction against one reference
SetMetric = Callable[[str, Sequence[str]], float]  # against all references at once (InfiniteBench's)

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = frozenset(string.punctuation)
# LongBench's (and InfiniteBench's) Chinese punctuation, added to ASCII's for Chinese answers.
_ZH_PUNCTUATION = _PUNCTUATION | frozenset(
    "！？｡。＂＃＄％＆＇（）＊＋，－／：；＜＝＞＠［＼］＾＿｀｛｜｝～｟｠｢｣､、〃》「」『』【】〔〕〖〗〘〙〚〛〜〝〞〟〰〾〿–—‘’‛“”„‟…‧﹏."
)
_NUMBER = re.compile(r"\d+")


def normalize_answer(text: str) -> str:
    """SQuAD's normalisation, as LongBench uses it: lower case, ASCII punctuation removed, then the
    articles a, an and the, then runs of whitespace made one space."""
    kept = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", kept).split())


def normalize_zh_answer(text: str) -> str:
    """The Chinese normalisation: lower case, ASCII and Chinese punctuation removed, all whitespace
    removed (Chinese has no spaces between words)."""
    return "".join("".join(ch for ch in text.lower() if ch not in _ZH_PUNCTUATION).split())


def token_f1(prediction: Sequence[str], reference: Sequence[str]) -> float:
    """F1 of the tokens two answers share, counted with multiplicity; 0 when they share none."""
    same = sum((Counter(prediction) & Counter(reference)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(prediction), same / len(reference)
    return 2 * precision * recall / (precision + recall)


def qa_f1(prediction: str, reference: str) -> float:
    """LongBench's qa_f1_score: token F1 of the normalised answers split at whitespace."""
    return token_f1(normalize_answer(prediction).split(), normalize_answer(reference).split())


def qa_f1_zh(prediction: str, reference: str) -> float:
    """LongBench's qa_f1_zh_score: token F1 over jieba's words, each normalised, empty ones dropped."""
    cut = jieba_cut()

    def words(text: str) -> list[str]:
        return [w for w in (normalize_zh_answer(token) for token in cut(text)) if w]

    return token_f1(words(prediction), words(reference))


# The rouge package reads an LCS out by recursion, a frame a step. Called as LongBench's eval.py calls
# it (from its module through scorer and rouge_score), the read-out starts 10 frames deep (11 through
# rouge_zh_score), which leaves Python's default limit of 1000 room for walks of 990 steps (989). A
# longer one, as two sentences of some 500 words each make, is a RecursionError that rouge_score's
# bare except makes 0. Fixed here as eval.py has them, not left to the depth fathom happens to call
# from; a test runs eval.py's calls to check them.
LONGBENCH_ROUGE_STEPS = 990
LONGBENCH_ROUGE_ZH_STEPS = 989


def rouge_score(prediction: str, reference: str) -> float:
    """LongBench's rouge_score: the ``rouge`` package's ROUGE-L F, 0 where it refuses the pair."""
    return rouge_l(prediction, reference, LONGBENCH_ROUGE_STEPS)


def rouge_zh(prediction: str, reference: str) -> float:
    """LongBench's rouge_zh_score: ROUGE-L F over jieba's words joined by spaces."""
    cut = jieba_cut()
    joined = " ".join(cut(prediction)), " ".join(cut(reference))
    return rouge_l(*joined, LONGBENCH_ROUGE_ZH_STEPS)


def _share_of_numbers(prediction: str, wanted: str) -> float:
    """The share of the prediction's numbers that are ``wanted``: 0 with no number at all, so that
    listing every paragraph's number earns little."""
    numbers = _NUMBER.findall(prediction)
    return sum(n == wanted for n in numbers) / len(numbers) if numbers else 0.0


def count_score(prediction: str, reference: str) -> float:
    """LongBench's count_score (passage_count)."""
    return _share_of_numbers(prediction, reference)


def retrieval_score(prediction: str, reference: str) -> float:
    """LongBench's retrieval_score (passage_retrieval_en): the reference reads "Paragraph N"."""
    return _share_of_numbers(prediction, re.findall(r"Paragraph (\d+)", reference)[0])


def retrieval_zh_score(prediction: str, reference: str) -> float:
    """LongBench's retrieval_zh_score (passage_retrieval_zh): the reference reads "段落N"."""
    return _share_of_numbers(prediction, re.findall(r"段落(\d+)", reference)[0])


def code_sim_score(prediction: str, reference: str) -> float:
    """LongBench's code_sim_score: fuzzywuzzy's ratio between the reference and the prediction's
    first line that holds no backtick, ``#`` or ``//`` (its comments and fences), over 100."""
    line = ""
    for candidate in prediction.lstrip("\n").split("\n"):
        if "`" not in candidate and "#" not in candidate and "//" not in candidate:
            line = candidate
            break
    return fuzz_ratio()(line, reference) / 100


def classification_score(prediction: str, reference: str, classes: Sequence[str]) -> float:
    """LongBench's classification_score (trec, lsht): the class names the prediction contains, less
    those that are part of the reference's name without being it; 1/n of them if the reference is one.

    LongBench removes from the list while iterating over it, so the name after each removed one is
    never checked; kept, since it changes scores. Its fallback to the most similar class is behind a
    test that is always true (a list compared with 0), so it never runs, and is left out.
    """
    matched = [name for name in classes if name in prediction]
    index = 0
    while index < len(matched):  # a list iterator's walk, by index, as Python's is
        name = matched[index]
        if name in reference and name != reference:
            matched.remove(name)
        index += 1
    return 1.0 / len(matched) if reference in matched else 0.0


def first_line(prediction: str) -> str:
    """The part of a few-shot answer LongBench grades: its first line, leading newlines skipped."""
    return prediction.lstrip("\n").split("\n")[0]


# LongBench v2's extraction: "The correct answer is (B)", then "The correct answer is B", asterisks
# (markdown bold) removed first.
_V2_PATTERNS = (
    re.compile(r"The correct answer is \(([A-D])\)"),
    re.compile(r"The correct answer is ([A-D])"),
)


def extract_choice(response: str) -> str | None:
    """LongBench v2's extract_answer: the letter A-D its answer format names, or None."""
    text = response.strip().replace("*", "")
    for pattern in _V2_PATTERNS:
        found = pattern.search(text)
        if found:
            return found.group(1)
    return None


def choice_score(prediction: str, reference: str) -> float:
    """LongBench v2: 1 when the extracted letter is the answer's, 0 otherwise (no letter found too)."""
    return float(extract_choice(prediction) == reference)


@dataclass(frozen=True)
class Grader:
    """A suite's grading of one task, a ``fathom.scoring.Grader``: ``metric`` against each reference,
    the best kept (LongBench's eval.py starts at 0 and takes the maximum); or ``whole``, a metric of all
    references at once (InfiniteBench's). ``first_line`` grades only the prediction's first line
    (LongBench's few-shot tasks); ``classes`` are a classification task's class names."""

    method: str
    metric: Metric | None = None
    whole: SetMetric | None = None
    first_line: bool = False
    classes: tuple[str, ...] = ()

    def __call__(self, output: str, references: Sequence[str], /) -> Score:
        prediction = first_line(output) if self.first_line else output
        if self.whole is not None:
            value = float(self.whole(prediction, references))
            return Score(value, tuple(references) if value > 0 else (), self.method)
        best, matched = 0.0, tuple[str, ...]()
        for reference in references:
            value = self.score_one(prediction, reference)
            if value > best:
                best, matched = value, (reference,)
        return Score(best, matched, self.method)

    def score_one(self, prediction: str, reference: str) -> float:
        if self.classes:
            return classification_score(prediction, reference, self.classes)
        if self.metric is None:
            raise TypeError(f"grader {self.method} has no metric")
        return float(self.metric(prediction, reference))


# LongBench's metrics by the names its tasks use them under (eval.py's dataset2metric).
LONGBENCH_METRICS: dict[str, Metric | None] = {
    "qa_f1": qa_f1,
    "qa_f1_zh": qa_f1_zh,
    "rouge": rouge_score,
    "rouge_zh": rouge_zh,
    "classification": None,  # needs the task's classes: Grader(classes=...)
    "retrieval": retrieval_score,
    "retrieval_zh": retrieval_zh_score,
    "count": count_score,
    "code_sim": code_sim_score,
    "choice": choice_score,  # LongBench v2
}
