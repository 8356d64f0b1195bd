"""``fathom.units`` at its edges: each suffix in either case and with spaces about it, a count of a
fraction of a thousand, each refusal's message whole, and where a count is written with a suffix
(1023 is not "1k"; 1024 is; 0 is "0"; 1025k stays "1025k" and 1024k is "1M")."""

from __future__ import annotations

import pytest

from fathom.errors import SpecError
from fathom.units import format_count, length_or_none, length_span, parse_count


@pytest.mark.parametrize(
    ("text", "count"),
    [
        ("0", 0), ("7", 7), ("2k", 2048), ("2K", 2048), ("3m", 3145728), ("3M", 3145728), (" 4 k ", 4096),
        ("\t1.5k\n", 1536), ("1.0", 1), ("0.25m", 262144), ("0.5k", 512),
    ],
)  # fmt: skip
def test_a_count_is_its_number_times_its_suffix(text: str, count: int) -> None:
    parsed = parse_count(text)
    assert (parsed, type(parsed)) == (count, int)


@pytest.mark.parametrize(
    "text", ["", " ", "k", "4kk", "4g", "-4k", "4.k", ".5k", "4 000", "1e3", "4k x", "x4k"]
)
def test_text_that_is_no_count_is_refused_with_examples(text: str) -> None:
    with pytest.raises(SpecError) as raised:
        parse_count(text)
    assert str(raised.value) == f"cannot read '{text}' as a token count: write e.g. 4096, 4k or 1M"


@pytest.mark.parametrize("text", ["1.5", "0.001k", "1.0000001M"])
def test_a_count_of_part_of_a_token_is_refused(text: str) -> None:
    with pytest.raises(SpecError) as raised:
        parse_count(text)
    assert str(raised.value) == f"token count '{text}' is not a whole number of tokens"


def test_a_count_read_as_infinity_is_refused_with_its_first_24_characters() -> None:
    text = "1" * 400 + "M"
    with pytest.raises(SpecError) as raised:
        parse_count(text)
    assert str(raised.value) == f"token count '{'1' * 24}...' is far too large: write e.g. 4096, 4k or 1M"


def test_the_largest_count_short_of_infinity_is_read() -> None:
    assert parse_count("1" + "0" * 300) == int(float("1e300"))


@pytest.mark.parametrize(
    ("count", "text"),
    [
        (0, "0"), (1, "1"), (1023, "1023"), (1024, "1k"), (1025, "1025"), (1536, "1536"), (3072, "3k"),
        (1047552, "1023k"), (1048575, "1048575"), (1048576, "1M"), (1049600, "1025k"), (2097152, "2M"),
    ],
)  # fmt: skip
def test_a_count_takes_the_largest_suffix_that_divides_it(count: int, text: str) -> None:
    assert format_count(count) == text


def test_lengths_and_spans_are_written_with_none_for_no_length() -> None:
    assert (length_or_none(None), length_or_none(4096), length_or_none(1000)) == ("none", "4k", "1000")
    assert length_span(4096, 16384) == "4k to 16k"
    assert length_span(4096, 4096) == "4k"
    assert length_span(None, None) == "none"
    assert length_span(None, 4096) == "none to 4k"
    assert length_span(2048, None) == "2k to none"
