import pytest

from fathom.errors import SpecError
from fathom.prompts.needles import NEEDLE_KINDS, SAN_FRANCISCO, make_needle, needle_rng


@pytest.mark.parametrize("kind", [k for k in NEEDLE_KINDS if k != "sf"])
def test_needles_are_seeded_and_differ_between_samples(kind: str) -> None:
    first = make_needle(kind, needle_rng(0, "niah", 1024, 0.5, 0))
    again = make_needle(kind, needle_rng(0, "niah", 1024, 0.5, 0))
    other = [make_needle(kind, needle_rng(0, "niah", 1024, 0.5, i)).answers for i in range(1, 6)]
    assert first == again
    assert first.answers not in other
    assert make_needle(kind, needle_rng(1, "niah", 1024, 0.5, 0)) != first


@pytest.mark.parametrize("kind", list(NEEDLE_KINDS))
def test_needle_shape(kind: str) -> None:
    needle = make_needle(kind, needle_rng(7, kind))
    assert needle.text.startswith(" ") and needle.text.endswith(".")
    assert needle.key in needle.text and needle.key in needle.question
    assert all(answer in needle.text for answer in needle.answers)
    # The question is a paraphrase: it does not repeat the needle sentence.
    assert needle.question.rstrip("?") not in needle.text


def test_san_francisco_needle_is_the_published_one() -> None:
    assert SAN_FRANCISCO.text.strip() == (
        "The best thing to do in San Francisco is eat a sandwich and sit in Dolores Park on a sunny day."
    )
    assert make_needle("sf", needle_rng(0)) is SAN_FRANCISCO


def test_unknown_kind_names_the_choices() -> None:
    with pytest.raises(SpecError, match=r"unknown needle kind 'pin'.*number"):
        make_needle("pin", needle_rng(0))
