"""The libraries the suites' metrics are computed with, imported when first used: they are the
``suites`` extra, and jieba takes seconds to load its dictionary, which a run that never grades Chinese
should not pay.

The two ROUGE-L scores are computed here rather than by their libraries, for speed: both fill a
Python table of every cell of the longest common subsequence (LCS) problem, some 15 and 6 ms for a
pair of 150-word summaries here, most of the time spent grading 10,000 predictions of every metric.
The numbers are the libraries' own, to the bit: the same text is cut into the same words, the same
LCS is read out of the table (which of several equally long ones matters, since the words taken are
counted), and the same float operations make the score. ``tests/test_suites_rouge.py`` compares both
with their library on hundreds of generated pairs.
"""

from __future__ import annotations

import functools
import importlib
import logging
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from fathom.errors import MissingExtraError

EXTRA = "suites"


def _module(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except ImportError:
        raise MissingExtraError(name.partition(".")[0], EXTRA) from None


@functools.cache
def jieba_cut() -> Callable[[str], tuple[str, ...]]:
    """jieba's default (accurate, not full) mode, as LongBench segments Chinese. The words of recent
    texts are kept: a grader segments the prediction again for each reference."""
    jieba = _module("jieba")
    jieba.setLogLevel(logging.WARNING)  # its dictionary loading talks on stderr otherwise

    @functools.lru_cache(maxsize=1024)
    def cut(text: str) -> tuple[str, ...]:
        return tuple(jieba.lcut(text, cut_all=False))

    return cut


def _positions(words: Sequence[str]) -> dict[str, int]:
    """Where each word stands in ``words``, as the bits of one integer."""
    masks: dict[str, int] = {}
    for j, word in enumerate(words):
        masks[word] = masks.get(word, 0) | 1 << j
    return masks


def _lcs_rows(x: Sequence[str], width: int, positions: dict[str, int]) -> list[int]:
    """The LCS table of ``x`` against a sequence of ``width`` words whose ``positions`` are given, a
    row per prefix of ``x``, each row as the bits of one integer (Hyyrö's bit-parallel LCS): bit j is
    clear where the row rises from column j to j + 1, so that
    ``table[i][j] == j - (rows[i] & (1 << j) - 1).bit_count()``. Python's integers do a row of any
    length in a few operations where the libraries' loops visit every cell."""
    full = (1 << width) - 1
    row = full
    rows = [row]
    for word in x:
        matched = row & positions.get(word, 0)
        row = ((row + matched) | (row - matched)) & full
        rows.append(row)
    return rows


def _read_out(
    x: Sequence[str], y: Sequence[str], positions: dict[str, int], ties_up: bool, limit: int = sys.maxsize
) -> tuple[list[int], int]:
    """One LCS of ``x`` and ``y``, read back from the table's far corner as both libraries read it: a
    word that matches is taken, else the walk goes to the larger of the cells above and to the left,
    on a tie up (rouge-score) or left (the rouge package). Returns the positions in ``x`` taken, last
    first, and the number of steps walked, which stops one past ``limit``. ``positions`` are ``y``'s,
    made once for all its pairs."""
    rows = _lcs_rows(x, len(y), positions)
    i, j, steps = len(x), len(y), 0
    taken: list[int] = []
    while i and j and steps <= limit:
        steps += 1
        if x[i - 1] == y[j - 1]:
            taken.append(i - 1)
            i -= 1
            j -= 1
            continue
        up = j - (rows[i - 1] & (1 << j) - 1).bit_count()
        left = j - 1 - (rows[i] & (1 << j - 1) - 1).bit_count()
        if up > left or (ties_up and up == left):
            i -= 1
        else:
            j -= 1
    return taken, steps


def _package_sentences(text: str) -> list[list[str]]:
    """The rouge package's words: sentences cut at full stops, empty pieces dropped, whitespace runs
    made one space, words split at spaces (a piece of whitespace alone is one empty word)."""
    return [" ".join(piece.split()).split(" ") for piece in text.split(".") if piece]


def rouge_l(prediction: str, reference: str, max_steps: int) -> float:
    """The ``rouge`` package's (1.0.1) ROUGE-L F of ``Rouge().get_scores(prediction, reference)``, its
    summary-level LCS: every reference sentence against every predicted one, one LCS each (read out
    with ties going left), the distinct words of all of them counted once, against the numbers of
    distinct words of each text (the package's word collections are sets), F = 2PR / (P + R + 1e-8).

    The package raises for an empty prediction or reference, and reads each LCS out by recursion, one
    frame a step, so a walk longer than the frames its caller leaves it is a RecursionError: both are
    0 here, as the suites' bare ``except`` makes them. ``max_steps`` is the longest walk the caller's
    frames allow. (LongBench's ``Rouge()`` computes ROUGE-1 and ROUGE-2 as well, which raise only where
    this does.) Computed here, not by the package, for speed: see the module's docstring.
    """
    predicted, referred = _package_sentences(prediction), _package_sentences(reference)
    if not predicted or not referred:
        return 0.0
    candidates = [(words, _positions(words)) for words in predicted]
    union: set[str] = set()
    for words in referred:
        for candidate, positions in candidates:
            taken, steps = _read_out(words, candidate, positions, False, max_steps)
            if steps > max_steps:
                return 0.0
            union.update(words[i] for i in taken)
    recall = len(union) / len({w for words in referred for w in words})
    precision = len(union) / len({w for words in predicted for w in words})
    # The package's expression, operation for operation: a bit-identical float.
    return 2.0 * ((precision * recall) / (precision + recall + 1e-8))


def _summary_level_f(reference: list[list[str]], prediction: list[tuple[list[str], dict[str, int]]]) -> float:
    """rouge-score's ``_summary_level_lcs`` F: for each reference sentence the union of its LCS
    positions against every predicted sentence (ties going up); each word of it a hit while both
    texts still have that word unused (ROUGE 1.5.5's guard against counting one twice). Each predicted
    sentence comes with its words' positions."""
    words_r, words_p = sum(map(len, reference)), sum(len(words) for words, _ in prediction)
    if not words_r or not words_p:  # no sentence, or none with a token
        return 0.0
    unused_r = Counter(w for sentence in reference for w in sentence)
    unused_p = Counter(w for sentence, _ in prediction for w in sentence)
    hits = 0
    for sentence in reference:
        union = set[int]()
        for candidate, positions in prediction:
            union.update(_read_out(sentence, candidate, positions, ties_up=True)[0])
        for i in sorted(union):
            word = sentence[i]
            if unused_p[word] > 0 and unused_r[word] > 0:
                hits += 1
                unused_p[word] -= 1
                unused_r[word] -= 1
    recall, precision = hits / words_r, hits / words_p
    return 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0


@functools.cache
def rouge_lsum() -> Callable[[str, Sequence[str]], float]:
    """rouge-score's (0.1.2) ROUGE-Lsum F against the best of several references (``score_multi``),
    as InfiniteBench's En.Sum scores through ``evaluate``'s rouge: no stemmer, summaries split into
    sentences at newlines, words by rouge-score's own tokenizer (lower case, a-z and 0-9 only). No
    reference at all is an error, as the library's ``argmax`` of nothing is. The tokenizer is the
    library's; the LCS is computed here, for speed (see the module's docstring)."""
    tokenize = _module("rouge_score.tokenize").tokenize

    def sentences(text: str) -> list[list[str]]:
        return [tokenize(line, None) for line in text.split("\n") if line]

    def score(prediction: str, references: Sequence[str]) -> float:
        predicted = [(words, _positions(words)) for words in sentences(prediction)]
        if not references:
            raise ValueError("rouge-score's score_multi needs a reference")
        return max(_summary_level_f(sentences(reference), predicted) for reference in references)

    return score


@functools.cache
def fuzz_ratio() -> Callable[[str, str], float]:
    """fuzzywuzzy's ``fuzz.ratio`` (an integer percentage) through rapidfuzz, which computes the
    Indel similarity that fuzzywuzzy computes with python-Levenshtein installed."""
    ratio = _module("rapidfuzz.fuzz").ratio

    def score(a: str, b: str) -> float:
        # fuzzywuzzy's own checks come first: equal strings are 100, one empty string 0.
        if a == b:
            return 100.0
        if not a or not b:
            return 0.0
        return float(round(ratio(a, b)))

    return score
