import hashlib
import itertools
import json
import random
import re
from pathlib import Path
from typing import Any

import pytest

from fathom.errors import SpecError
from fathom.prompts import latent
from fathom.prompts.latent import (
    LATENT_VERSION,
    LatentItem,
    LatentItemsError,
    content_overlap,
    content_words,
    draw_latent,
    item_overlap,
    items_in,
    latent_sha256,
    load_items,
    rouge1,
    split_of,
)
from fathom.prompts.needles import needle_rng

ITEMS = load_items()
# sha256 of the sorted eval-part ids, one a line: exported training data relies on no item ever
# changing part. Adding items changes it too; re-pin only after checking that no old id moved.
# Re-pinned for version 2 (#29 item 2): 14 items dropped, and every kept id in the part it was in.
EVAL_IDS_SHA256 = "2a0f22a6ea582b579816bbc8cc766f716320de53fdbec7e4896fb7060c9d6934"


def _needle_words(item: LatentItem) -> frozenset[str]:
    return content_words(item.needle.replace("{name}", ""))


def _phrase(text: str) -> str:
    return " " + " ".join(re.findall(r"[^\W_]+", latent._fold(text))) + " "


def test_the_set_is_large_enough() -> None:
    assert sum(item.hops == 1 for item in ITEMS) >= 150
    assert sum(item.hops == 2 for item in ITEMS) >= 50


@pytest.mark.parametrize("item", ITEMS, ids=lambda item: item.id)
def test_each_item_is_well_formed(item: LatentItem) -> None:
    needle = _needle_words(item)
    assert not needle & content_words(item.question)
    assert needle & content_words(item.literal_question)
    # Nor a near miss that the plural stripper would not catch (visits / visited): no content word
    # of the question shares its first five letters with one of the needle's.
    assert not {w[:5] for w in needle if len(w) >= 5} & {
        w[:5] for w in content_words(item.question) if len(w) >= 5
    }
    assert item.chain[0] in item.needle and item.key == item.chain[0]
    assert item.chain[-1] in item.question
    assert item.needle.startswith("{name} ") and item.needle.endswith(".")
    assert item.question.startswith("Which character ") and item.question.endswith("?")
    assert item_overlap(item, literal=False).shared == 0
    assert item_overlap(item, literal=True).shared > 0


def test_items_of_different_groups_name_none_of_each_others_places() -> None:
    # An item's needle answers another's question only if it names (or implies) the place asked:
    # across groups no chain element of one item appears anywhere in another.
    pairs = [(a, b) for a, b in itertools.permutations(ITEMS, 2) if a.group != b.group]
    assert len(pairs) > len(ITEMS) ** 2 // 2  # most pairs are of two groups: the check reaches them
    for a, b in pairs:
        other = _phrase(" ".join((b.needle, b.question, *b.chain)))
        for element in a.chain:
            assert _phrase(element) not in other, (a.id, element, b.id)


def test_anchors_are_unique() -> None:
    anchors = [_phrase(item.key) for item in ITEMS]
    assert len(anchors) == len(set(anchors))


def test_content_words_fold_case_accents_possessives_and_plurals() -> None:
    assert content_words("The museums' cities, Mark's boxes and the churches") == {
        "museum",
        "city",
        "mark",
        "box",
        "church",
    }
    assert content_words("Zürich\u2019s CAMPUS in Paris: glass buses") == {
        "zurich",
        "campus",
        "paris",
        "glass",
        "buse",
    }
    assert content_words("Which one has been to it?") == {"one"}
    assert content_words("") == frozenset()


def test_content_overlap_by_hand() -> None:
    assert content_overlap("Which character has been to Amsterdam?", "Amsterdam's canals") == (1, 1 / 3)
    assert content_overlap("lives next to the museum", "the museums next door") == (2, 2 / 4)
    assert content_overlap("", "") == (0, 0.0)
    assert content_overlap("of the", "museum") == (0, 0.0)


def test_rouge1_by_hand() -> None:
    assert rouge1("the cat sat on the mat", "the cat is on the mat") == pytest.approx(5 / 6)
    # counts clip: "a" twice against once is one hit; P = 1/3, R = 1/2
    assert rouge1("a a b", "a c") == pytest.approx(0.4)
    assert rouge1("Sant'Angelo", "sant angelo") == 1.0
    assert rouge1("Zürich", "ZURICH") == 1.0
    assert rouge1("", "") == 0.0
    assert rouge1("", "words") == 0.0
    assert rouge1("one", "two") == 0.0


def test_item_overlap_leaves_the_name_out() -> None:
    item = next(item for item in ITEMS if item.id == "h1-story-bridge")
    # "climbed the Story Bridge" vs "Which character climbed the Story Bridge?"
    literal = item_overlap(item, literal=True)
    assert (literal.shared, literal.jaccard) == (3, 3 / 4)
    assert literal.rouge1 == pytest.approx(2 * 1 * (4 / 6) / (1 + 4 / 6))
    low = item_overlap(item, literal=False)
    assert (low.shared, low.jaccard, low.rouge1) == (0, 0.0, 0.0)


def test_draw_is_seeded_and_fills_the_name() -> None:
    first = draw_latent(needle_rng(3, "niah", 1024, 0.5, 0), hops=1, literal=False)[0]
    assert first == draw_latent(needle_rng(3, "niah", 1024, 0.5, 0), hops=1, literal=False)[0]
    others = {draw_latent(needle_rng(3, "niah", 1024, 0.5, i), 1, False)[0].answers for i in range(1, 6)}
    assert first.answers not in others
    (name,) = first.answers
    assert re.fullmatch(r"[A-Z][a-z]+ [A-Z][a-z]+", name)
    assert first.text.startswith(f" {name} ") and "{name}" not in first.text
    assert first.kind == "latent-1"


@pytest.mark.parametrize("hops", [1, 2])
@pytest.mark.parametrize("literal", [False, True])
def test_draws_come_from_the_eval_part_only(hops: int, literal: bool) -> None:
    by_needle = {(item.hops, item.key): item for item in ITEMS}
    drawn = set()
    for sample in range(300):
        needle, _ = draw_latent(random.Random(sample), hops, literal)
        item = by_needle[(hops, needle.key)]
        (name,) = needle.answers
        assert split_of(item.id) == "eval"
        assert needle.kind == f"latent-{hops}" + ("-literal" if literal else "")
        assert needle.question == item.ask(literal)
        assert needle.text == " " + item.needle.replace("{name}", name)
        assert not content_words(name) & content_words(needle.question)
        drawn.add(item.id)
    assert len(drawn) > 20  # the draw ranges over the part, not a few items of it


def test_the_train_part_is_drawn_only_when_asked() -> None:
    keys = {item.key for item in items_in("train", 2)}
    assert draw_latent(random.Random(0), 2, False, split="train")[0].key in keys


def test_a_name_sharing_a_word_with_the_item_is_drawn_again(monkeypatch: pytest.MonkeyPatch) -> None:
    item = next(item for item in ITEMS if item.id == "h1-story-bridge")
    # the question's place, then a word of the needle, then neither
    pool = latent.NamePool(("Brisbane", "Kessa"), ("Climbed", "Luthra"))
    names = iter(["Brisbane Luthra", "Kessa Climbed", "Kessa Luthra"])
    monkeypatch.setattr(latent.NamePool, "draw", lambda _pool, _rng, _taken: next(names))
    assert latent._name(random.Random(0), item, pool, frozenset()) == "Kessa Luthra"


def test_the_split_is_pinned_disjoint_and_covers_both_hops() -> None:
    train = {item.id for item in ITEMS if split_of(item.id) == "train"}
    evals = {item.id for item in ITEMS if split_of(item.id) == "eval"}
    assert train and evals and not train & evals and train | evals == {item.id for item in ITEMS}
    assert hashlib.sha256("\n".join(sorted(evals)).encode()).hexdigest() == EVAL_IDS_SHA256
    # The hash of the id alone decides, whatever the file holds.
    pinned = {"h1-eiffel-tower": "train", "h1-story-bridge": "eval", "h2-mona-lisa": "train"}
    assert {item_id: split_of(item_id) for item_id in pinned} == pinned
    for hops in (1, 2):
        assert items_in("train", hops) and items_in("eval", hops)
    assert len(train) < len(evals)


def test_identity_is_the_files_hash_and_version() -> None:
    path = Path(latent.__file__).parent / "data" / "latent_items.json"
    assert latent_sha256() == hashlib.sha256(path.read_bytes()).hexdigest()
    assert json.loads(path.read_text(encoding="utf-8"))["version"] == LATENT_VERSION


def test_unknown_hops_is_a_spec_error() -> None:
    with pytest.raises(SpecError, match="1 or 2 hops, not 3"):
        draw_latent(random.Random(0), 3, False)


GOOD: dict[str, Any] = {
    "id": "h1-test",
    "hops": 1,
    "association": "landmark>city",
    "chain": ["Story Bridge", "Brisbane"],
    "group": "Australia",
    "needle": "{name} climbed the Story Bridge.",
    "question": "Which character has been to Brisbane?",
    "literal_question": "Which character climbed the Story Bridge?",
    "probe": "In which city is the Story Bridge?",
    "probe_answers": ["Brisbane"],
}


def _write(path: Path, items: list[Any], version: object = LATENT_VERSION) -> Path:
    # A fresh file name each time: the loader reads a path once.
    path.write_text(json.dumps({"version": version, "items": items}), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"needle": "Someone climbed the Story Bridge."}, r"'h1-test'.*'\{name\}' exactly once"),
        ({"needle": "{name} and {name} climbed it."}, r"'h1-test'.*'\{name\}' exactly once"),
        ({"hops": True}, r"'h1-test'.*'hops' must be a int"),
        ({"hops": "1"}, r"'h1-test'.*'hops' must be a int"),
        ({"hops": 3}, r"'h1-test'.*'hops' must be one of"),
        ({"chain": ["Story Bridge"]}, r"'h1-test'.*'chain' must name the anchor and one place per hop"),
        ({"chain": ["Story Bridge", 7]}, r"'h1-test'.*non-empty strings"),
        ({"association": "landmark"}, r"'h1-test'.*one element per chain element"),
        ({"association": "landmark>town"}, r"'h1-test'.*'association' elements"),
        ({"question": None}, r"'h1-test'.*'question' must be a str"),
        ({"id": "H1 Test"}, r"'H1 Test'.*lower-case words"),
        ({"colour": "blue"}, r"'h1-test'.*unknown fields \['colour'\]"),
    ],
)
def test_a_malformed_item_is_named(tmp_path: Path, change: dict[str, Any], message: str) -> None:
    with pytest.raises(LatentItemsError, match=message):
        load_items(_write(tmp_path / "items.json", [GOOD, {**GOOD, **change}]))


def test_a_malformed_file_is_named(tmp_path: Path) -> None:
    assert load_items(_write(tmp_path / "good.json", [GOOD])) == (
        LatentItem(**{**GOOD, "chain": ("Story Bridge", "Brisbane"), "probe_answers": ("Brisbane",)}),
    )
    with pytest.raises(LatentItemsError, match="'h1-test' appears twice"):
        load_items(_write(tmp_path / "twice.json", [GOOD, GOOD]))
    with pytest.raises(LatentItemsError, match="item 0: not an object"):
        load_items(_write(tmp_path / "list.json", [["h1"]]))
    with pytest.raises(LatentItemsError, match=f"version 99; this fathom reads version {LATENT_VERSION}"):
        load_items(_write(tmp_path / "version.json", [GOOD], version=99))
    (tmp_path / "bare.json").write_text("[]", encoding="utf-8")
    with pytest.raises(LatentItemsError, match="hold no 'items' list"):
        load_items(tmp_path / "bare.json")
    (tmp_path / "bad.json").write_text("{items: [", encoding="utf-8")
    with pytest.raises(LatentItemsError, match="are not JSON"):
        load_items(tmp_path / "bad.json")
    with pytest.raises(LatentItemsError, match="cannot read"):
        load_items(tmp_path / "absent.json")
