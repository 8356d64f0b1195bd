import random
import re

import pytest

from fathom.prompts import hygiene
from fathom.prompts.hygiene import HaystackCheck
from fathom.prompts.latent import content_words

CORPUS = (
    "The mill stood by the river. Thundmere lay two days to the north.\n"
    "Its code was 4821-7730, and the harbour_master kept it. Nobody asked why."
)


def test_mentions_are_whole_words_case_insensitive_in_the_order_given() -> None:
    check = HaystackCheck(CORPUS)
    phrases = ["thundmere", "Thundme", "4821", "7730", "harbour", "the river", "river.", "mill stood by"]
    # "Thundme" is inside a word, "harbour" is joined to "_master", "river." ends at a full stop the
    # phrase carries (the stop is no word character, so the edge after it is free).
    assert check.mentions(phrases) == ("thundmere", "4821", "7730", "the river", "river.", "mill stood by")
    assert check.mentions(["Quoxdale", ""]) == ()


def test_similarity_is_the_best_jaccard_over_one_sentence_or_line() -> None:
    check = HaystackCheck(CORPUS)
    # "The mill stood by the river." has content words {mill, stood, river}; the needle {mill, river,
    # burned}: 2 shared of 4 distinct.
    assert check.similarity("The mill by the river burned.") == pytest.approx(2 / 4)
    assert check.similarity("The mill stood by the river.") == 1.0
    assert check.similarity("Quoxdale keeps a ledger.") == 0.0


def _brute_similarity(corpus: str, text: str) -> float:
    """The definition, unit by unit: the highest content-word Jaccard index of ``text`` and one
    sentence or line of ``corpus`` (0.0 where none shares a word)."""
    needle = content_words(text)
    units = [content_words(unit) for unit in re.split(r"(?<=[.!?])\s+|\n+", corpus.lower())]
    return max((len(needle & unit) / len(needle | unit) for unit in units if needle & unit), default=0.0)


@pytest.mark.parametrize("common", [0, 1, 3, 10_000])
def test_similarity_equals_the_unit_by_unit_definition(common: int, monkeypatch: pytest.MonkeyPatch) -> None:
    # Words in more than `common` units are scored apart and cached: from every word so scored (0)
    # to none (10,000), the result must be the definition's to the last bit.
    monkeypatch.setattr(hygiene, "_COMMON", common)
    rng = random.Random(common)
    vocabulary = ["river", "mill", "stone", "ledger", "harbour", "number", "magic", "cabin", "north", "bell"]
    weights = [2.0**-i for i in range(len(vocabulary))]  # a few words in most units, most in few
    sentences = [
        " ".join(rng.choices([*vocabulary, "the", "of"], [*weights, 1, 1], k=rng.randint(1, 7))) + "."
        for _ in range(60)
    ]
    # Sentences, then lines; the last unit, the only one with "thundmere", is the best for the last
    # needle (a unit at the end of every word's list of units is still found).
    corpus = " ".join(sentences[:30]) + "\n" + "\n".join(sentences[30:]) + "\nThundmere river mill."
    check = HaystackCheck(corpus)
    needles = [
        " ".join(rng.sample([*vocabulary, "quoxdale", "7730", "the"], rng.randint(1, 6))) for _ in range(200)
    ]
    needles.append("the mill by thundmere river")
    assert [check.similarity(text) for text in needles] == [
        _brute_similarity(corpus, text) for text in needles
    ]
