"""``fathom.prompts.hygiene`` where its own tests leave it open: a rare word in a unit after the
last unit of a common word, and a whole word found between two that are not whole."""

from __future__ import annotations

from fathom.prompts.hygiene import HaystackCheck, window_mentions


def test_a_rare_word_after_every_unit_of_a_common_word_is_scored() -> None:
    # "magic" is in 300 lines (a common word, scored apart), "zebra" in the last line alone, after
    # every line that holds "magic". Each unit shares one of the needle's two words and holds one:
    # Jaccard 1 / (2 + 1 - 1) = 0.5.
    check = HaystackCheck("magic\n" * 300 + "zebra\n")
    assert check.similarity("magic zebra") == 0.5


def test_a_whole_word_between_two_inside_other_words_is_found() -> None:
    assert window_mentions("xcatx cat xcatx", ["cat"]) == ("cat",)
    assert window_mentions("xcatx xcatx xcatx", ["cat"]) == ()
    # The text's first character continues a word too; an occurrence one character on from one
    # that is not whole is still looked at.
    assert window_mentions("xcat", ["cat"]) == ()
    assert window_mentions("harbour_master", ["harbour"]) == ()  # an underscore continues a word
    assert window_mentions("a---", ["--"]) == ("--",)
