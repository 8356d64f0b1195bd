"""The spec's details that its behaviour tests leave open, each pinned by a value worked out by
hand: the bounds of a depth count, the rounding of evenly spaced depths, and the refusal's words."""

from __future__ import annotations

import pytest

from fathom.errors import SpecError
from fathom.spec import MAX_DEPTHS, parse_depths


def test_a_depth_count_up_to_the_maximum_is_taken_and_one_past_it_is_refused() -> None:
    assert MAX_DEPTHS == 1001
    depths = parse_depths("1001")
    assert len(depths) == 1001 and depths[:3] == (0.0, 0.001, 0.002) and depths[-1] == 1.0
    for text in ("1002", "0"):
        with pytest.raises(SpecError) as refused:
            parse_depths(text)
        assert str(refused.value) == f"--depths takes a count of 1..1001 depths, not {text}"


def test_evenly_spaced_depths_are_rounded_to_six_places() -> None:
    assert parse_depths("7") == (0.0, 0.166667, 0.333333, 0.5, 0.666667, 0.833333, 1.0)
    assert parse_depths(" 4 ") == (0.0, 0.333333, 0.666667, 1.0)


@pytest.mark.parametrize("text", ["zero", "0.5,half", ",", "nan"])
def test_unreadable_depths_are_refused_with_what_to_write(text: str) -> None:
    with pytest.raises(SpecError) as refused:
        parse_depths(text)
    assert str(refused.value) == f"cannot read depths '{text}': write a count (11) or fractions (0,0.5,1)"
