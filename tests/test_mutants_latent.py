"""``fathom.prompts.latent`` where its own tests leave it open: each malformed item's message read
whole (the file, the item's index and id, the problem), a valid item of two hops whose probe has a
second answer, and the hash of a file other than fathom's own."""

from __future__ import annotations

import hashlib
import random
from pathlib import Path
from typing import Any

import pytest
from test_latent import GOOD, _write

from fathom.errors import SpecError
from fathom.prompts.latent import (
    LatentItem,
    LatentItemsError,
    _name,
    content_words,
    draw_latent,
    latent_sha256,
    load_items,
)
from fathom.prompts.latent_forms import Forms
from fathom.prompts.names import NamePool

# ELEMENTS as the message lists it, sorted, written out here.
_ELEMENTS = (
    "['artwork', 'campus', 'city', 'country', 'event', 'landmark', 'library', 'museum', 'object', "
    "'park', 'street', 'venue', 'worship']"
)


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"hops": 3}, "'hops' must be one of (1, 2)"),
        ({"needle": "Someone climbed the Story Bridge."}, "'needle' must hold '{name}' exactly once"),
        ({"chain": ["Story Bridge"]}, "'chain' must name the anchor and one place per hop"),
        ({"chain": ["Story Bridge", ""]}, "'chain' must hold non-empty strings"),
        ({"association": "landmark"}, "'association' must name one element per chain element"),
        ({"association": "landmark>town"}, f"'association' elements must be among {_ELEMENTS}"),
        ({"group": ""}, "'group' must not be empty"),
        ({"probe": "In which city is the Story Bridge."}, "'probe' must be a question"),
        (
            {"question": "Which city has the Story Bridge?"},
            "'question' must be 'Which character has been to PLACE?'",
        ),
        ({"needle": "{name} climbed the bridge."}, "'needle' must name the chain's anchor as written"),
        ({"probe_answers": ["Sydney"]}, "'probe_answers' must open with the chain's last place"),
        ({"probe_answers": ["Brisbane", ""]}, "'probe_answers' must be names"),
    ],
)
def test_a_malformed_items_message_names_the_file_the_item_and_the_problem(
    tmp_path: Path, change: dict[str, Any], problem: str
) -> None:
    path = _write(tmp_path / "items.json", [GOOD, {**GOOD, **change}])
    with pytest.raises(LatentItemsError) as raised:
        load_items(path)
    assert str(raised.value) == f"latent needle items '{path}', item 1 ('h1-test'): {problem}"


def test_a_malformed_id_is_named_as_written(tmp_path: Path) -> None:
    path = _write(tmp_path / "items.json", [{**GOOD, "id": "H1 Test"}])
    with pytest.raises(LatentItemsError) as raised:
        load_items(path)
    assert str(raised.value) == (
        f"latent needle items '{path}', item 0 ('H1 Test'): 'id' must be lower-case words joined by '-'"
    )


def test_an_item_of_two_hops_whose_probe_has_two_answers_is_read(tmp_path: Path) -> None:
    # The probe's answers open with the chain's last place (the country, not the city) and may go on.
    two: dict[str, Any] = {
        **GOOD,
        "id": "h2-test",
        "hops": 2,
        "association": "landmark>city>country",
        "chain": ["Story Bridge", "Brisbane", "Australia"],
        "question": "Which character has been to Australia?",
        "probe": "In which country is the Story Bridge?",
        "probe_answers": ["Australia", "the Commonwealth of Australia"],
    }
    (item,) = load_items(_write(tmp_path / "two.json", [two]))
    assert item == LatentItem(
        **{
            **two,
            "chain": ("Story Bridge", "Brisbane", "Australia"),
            "probe_answers": ("Australia", "the Commonwealth of Australia"),
        }
    )


def test_the_hash_is_of_the_file_read(tmp_path: Path) -> None:
    path = _write(tmp_path / "items.json", [GOOD])
    assert latent_sha256(path) == hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_name_sharing_a_word_with_the_forms_own_question_is_never_drawn() -> None:
    # Template 2 asks "Which character has travelled to PLACE?": "travelled" is in that question
    # alone (not the needle, the literal question, the places, or template 1's question), so a
    # character called Travelled would hand the answer to the question's words. Of the pool's two
    # given names only Ada can be drawn, in every sample.
    pool = NamePool(("Travelled", "Ada"), ("Smith",))
    forms = Forms(templates=(2,))
    for seed in range(10):
        needle, form = draw_latent(random.Random(seed), 1, False, names=pool, forms=forms)
        assert form.template == 2 and "travelled to" in needle.question
        assert needle.answers == ("Ada Smith",)


def test_a_name_that_is_a_place_of_the_chain_is_never_drawn() -> None:
    # A two-hop item whose middle place (the city) is named by no question or needle, only by the
    # chain: a character called Florence would still give the chain away.
    item = LatentItem(
        id="h2-uffizi", hops=2, association="museum>city>country",
        chain=("Uffizi Gallery", "Florence", "Italy"), group="Italy",
        needle="{name} queued for hours outside the Uffizi Gallery.",
        question="Which character has been to Italy?",
        literal_question="Which character queued for hours outside the Uffizi Gallery?",
        probe="In which country is the Uffizi Gallery?", probe_answers=("Italy",),
    )  # fmt: skip
    pool = NamePool(("Florence", "Ada"), ("Smith",))
    assert {_name(random.Random(seed), item, pool, frozenset()) for seed in range(10)} == {"Ada Smith"}
    with pytest.raises(SpecError) as raised:
        _name(random.Random(0), item, NamePool(("Florence",), ("Smith",)), frozenset())
    assert str(raised.value) == "no name of the pool shares no word with the latent item 'h2-uffizi'"


def test_plurals_made_singular_at_each_rules_edge() -> None:
    # -ies to -y (beyond the first three letters), -sses, -shes and -zes lose -es, a four-letter
    # plural loses its -s, and a word with a digit is left alone whatever its length.
    words = "libraries glasses dishes waltzes cars 1990s"
    assert content_words(words) == {"library", "glass", "dish", "waltz", "car", "1990s"}
