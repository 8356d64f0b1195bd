"""The libraries the suites' metrics are computed with, imported when first used: they are the
``suites`` extra, and jieba takes seconds to load its dictionary, which a run that never grades Chinese
should not pay."""

from __future__ import annotations

import functools
import importlib
import logging
from collections.abc import Callable
from typing import Any

from fathom.errors import MissingExtraError

EXTRA = "suites"


def _module(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except ImportError:
        raise MissingExtraError(name, EXTRA) from None


@functools.cache
def jieba_cut() -> Callable[[str], list[str]]:
    """jieba's default (accurate, not full) mode, as LongBench segments Chinese."""
    jieba = _module("jieba")
    jieba.setLogLevel(logging.WARNING)  # its dictionary loading talks on stderr otherwise
    cut: Callable[[str], list[str]] = functools.partial(jieba.lcut, cut_all=False)
    return cut


@functools.cache
def rouge_l() -> Callable[[str, str], float]:
    """The ``rouge`` package's ROUGE-L F (LongBench's and InfiniteBench's rouge_score): 0 where the
    package refuses the pair (an empty hypothesis or reference), as their bare ``except`` makes it."""
    scorer = _module("rouge").Rouge(metrics=["rouge-l"])

    def score(prediction: str, reference: str) -> float:
        try:
            scores = scorer.get_scores([prediction], [reference], avg=True)
        except Exception:  # the package raises ValueError, and others on odd input; the suites catch all
            return 0.0
        return float(scores["rouge-l"]["f"])

    return score


@functools.cache
def rouge_lsum() -> Callable[[str, list[str]], float]:
    """rouge-score's ROUGE-Lsum F against the best of several references, as InfiniteBench's En.Sum
    scores through ``evaluate``'s rouge (no stemmer, summaries split into lines at newlines)."""
    scorer = _module("rouge_score.rouge_scorer").RougeScorer(["rougeLsum"], use_stemmer=False)

    def score(prediction: str, references: list[str]) -> float:
        return float(scorer.score_multi(references, prediction)["rougeLsum"].fmeasure)

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
