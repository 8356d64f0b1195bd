import pytest

from fathom.prompts.hygiene import HaystackCheck

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
