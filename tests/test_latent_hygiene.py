"""Low-overlap hygiene against the haystack used: places named exactly are redrawn, near neighbours
recorded, and every domain of a run draws the same items and characters, cell by cell."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from fathom.cli import main
from fathom.errors import SpecError
from fathom.prompts.haystack import load_corpus
from fathom.prompts.hygiene import haystack_check, window_mentions
from fathom.prompts.latent import items_in, load_items
from fathom.prompts.needle_sets import GOLD, LITERAL_DISTRACTOR, Hardness, needle_set
from fathom.prompts.needles import needle_rng
from fathom.prompts.neighbours import DEMONYMS, name_parts, neighbours
from fathom.prompts.tokenizers import load_tokenizer
from fathom.records import SampleRecord, record_from_json
from fathom.registry import check_spec
from fathom.run.store import RunFolder
from fathom.spec import RunSpec
from fathom.tasks import probe
from fathom.tasks.base import Sample
from fathom.tasks.niah import NiahTask

CHAR = load_tokenizer("char")
ITEMS = {item.id: item for item in load_items()}


def spec(**changes: object) -> RunSpec:
    base = RunSpec("niah", "sim:perfect", "char", (4096, 16384), (0.25, 0.75), 4, needle="latent-1")
    return dataclasses.replace(base, **changes)


def samples(task: NiahTask) -> list[Sample]:
    made = [task.prepare(cell) for cell in task.cells()]
    assert all(isinstance(one, Sample) for one in made)
    return [one for one in made if isinstance(one, Sample)]


@pytest.mark.parametrize(
    ("place", "parts"),
    [
        ("New York City", ("New York", "York City", "York")),
        ("Washington, D.C.", ("Washington", "D.C.")),
        ("Mexico City", ("Mexico",)),
        ("Rio de Janeiro", ("Rio", "Janeiro")),
        ("South Korea", ("Korea",)),
        ("Paris", ()),
    ],
)
def test_a_names_parts_are_the_names_within_it(place: str, parts: tuple[str, ...]) -> None:
    assert name_parts(place) == parts


def test_neighbours_are_parts_other_names_and_demonyms_never_the_chain() -> None:
    eiffel = ITEMS["h1-eiffel-tower"]
    assert neighbours(eiffel) == ("Parisian",)
    by_place = {item.chain[-1]: item for item in load_items()}
    assert {"New York", "York", "New Yorker"} <= set(neighbours(by_place["New York City"]))
    assert "Washington" in neighbours(by_place["Washington, D.C."])
    for item in load_items():
        assert not set(neighbours(item)) & set(item.chain), item.id


def test_the_demonym_table_names_places_the_items_use() -> None:
    places = {place for item in load_items() for place in item.chain[1:]}
    assert set(DEMONYMS) - {"Manchester", "Naples"} <= places


def test_a_window_is_checked_whole_word_and_case_sensitively() -> None:
    text = "It was a nice day in Splitting weather; then Nice, and New York."
    assert window_mentions(text, ["Nice", "nice", "Split", "York", "New York City"]) == (
        "Nice",
        "nice",
        "York",
    )


def test_famous_places_are_kept_where_the_window_does_not_name_them() -> None:
    """Checked against the whole corpus, every item whose place prose names anywhere was dropped;
    against the window, the samples hold such items, and never one its window names."""
    whole = haystack_check(load_corpus("prose").whole_text)
    task = NiahTask(spec(), CHAR)
    made = samples(task)
    famous = [item for one in made for item in one.latent_items if whole.mentions(ITEMS[item].chain)]
    assert famous, "no sample holds an item whose place the prose corpus names somewhere"
    for cell, one in zip(task.cells(), made, strict=True):
        window = task._windows.text(task.variants[cell.task].builder.corpus, cell.length, 0)
        for item in one.latent_items:
            assert not window_mentions(window, ITEMS[item].chain), (cell.id, item)


def test_near_neighbours_in_the_window_are_recorded() -> None:
    task = NiahTask(spec(lengths=(65536,), samples=12), CHAR)
    made = samples(task)
    recorded = [one for one in made if one.literal_neighbours]
    assert recorded, "no sample of 65k characters of prose names a neighbour of its places"
    for one in recorded:
        window = load_corpus("prose").whole_text[:70000]
        candidates = {name for item in one.latent_items for name in neighbours(ITEMS[item])}
        assert set(one.literal_neighbours) <= candidates
        assert all(name in window for name in one.literal_neighbours)


def test_domains_hold_the_same_items_and_characters_cell_by_cell() -> None:
    task = NiahTask(spec(domains=("code", "prose"), lengths=(65536,), samples=8), CHAR)
    by_cell: dict[tuple[int, float | None, int], dict[str, Sample]] = {}
    for cell in task.cells():
        made = task.prepare(cell)
        assert isinstance(made, Sample)
        by_cell.setdefault((cell.length, cell.depth, cell.sample), {})[cell.task] = made
    assert len(by_cell) == 2 * 8
    redrawn = 0
    for cell, variants in by_cell.items():
        code, prose = variants["niah:code"], variants["niah:prose"]
        assert code.latent_items == prose.latent_items, cell
        assert code.answers == prose.answers, cell
        assert code.needles is not None and prose.needles is not None
        assert code.needles.placements == prose.needles.placements, cell
        assert code.redraws == prose.redraws, cell
        redrawn += bool(code.redraws)
    # The pairing is tested where it could break: some cells were drawn again for one domain's window.
    assert redrawn


def test_redraws_name_the_window_and_the_place() -> None:
    task = NiahTask(spec(lengths=(65536,), samples=8), CHAR)
    reasons = [reason for one in samples(task) for reason in one.redraws]
    assert reasons
    assert all(reason.startswith("a window of the run's corpora already holds '") for reason in reasons)


def test_probe_items_are_those_of_the_samples() -> None:
    task = NiahTask(spec(domains=("code", "prose")), CHAR)
    used = {item for one in samples(task) for item in one.latent_items}
    assert set(task.probed_items()) == used
    assert all(probe.item(item).hops == 1 for item in used)
    assert used <= {item.id for item in items_in("eval", 1)}


def test_records_keep_the_neighbours_and_an_older_record_holding_them_is_refused() -> None:
    fixture = Path(__file__).parent / "fixtures" / "records-v11"
    records = [r for r in RunFolder(fixture).latest() if isinstance(r, SampleRecord)]
    assert {r.literal_neighbours for r in records} == {(), ("New York", "York")}
    assert not any(r.literal_neighbours for r in records if r.control)  # a control reads no haystack
    lines = [json.loads(text) for text in (fixture / "samples.jsonl").read_text().splitlines()]
    line = next(line for line in lines if "literal_neighbours" in line)
    assert line["schema"] == 11
    with pytest.raises(TypeError, match="literal_neighbours"):
        record_from_json({**line, "schema": 10})


def test_a_literal_distractor_names_each_gold_place_after_every_other_draw() -> None:
    rng = needle_rng(0, "literal")
    plain = needle_set("latent-2", Hardness(distractors=2, needles=2), 0.3, rng)
    rng = needle_rng(0, "literal")
    literal = needle_set("latent-2", Hardness(distractors=2, needles=2, literal_distractor=True), 0.3, rng)
    # The same golds and distractors: the option adds sentences, it redraws nothing.
    assert literal.placements[: len(plain.placements)] == plain.placements
    added = literal.placements[len(plain.placements) :]
    places = [ITEMS[item].chain[-1] for item in probe.items_of(literal.keys)]
    assert [p.role for p in added] == [LITERAL_DISTRACTOR] * 2
    assert [p.value for p in added] == places
    assert all(place in p.text and place in literal.question for p, place in zip(added, places, strict=True))
    golds = [p.depth for p in literal.placements if p.role == GOLD]
    assert all(abs(p.depth - gold) >= 0.05 for p in added for gold in golds)
    # No lure: an answer that restates the question's place is not wrong.
    assert literal.lures == plain.lures


def test_a_literal_distractor_is_refused_where_no_question_names_a_place() -> None:
    with pytest.raises(SpecError, match="--literal-distractor names a low-overlap question's place"):
        NiahTask(spec(needle="number", literal_distractor=True), CHAR)
    with pytest.raises(SpecError, match="--literal-distractor"):
        check_spec(spec(task="ruler", needle=None, depths=(), literal_distractor=True))


def test_a_literal_distractor_lands_in_the_records_with_its_role(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    options = ["--tokenizer", "char", "--lengths", "2k", "--depths", "0.5", "--samples", "2"]
    argv = ["run", "niah", "--model", "sim:perfect", *options, "--needle", "latent-1", "--literal-distractor"]
    assert main([*argv, "--no-progress", "--run-dir", str(folder)]) == 0
    lines = [json.loads(text) for text in (folder / "samples.jsonl").read_text().splitlines()]
    samples = [line for line in lines if not line.get("control")]
    assert samples and all(line["needle_roles"].count(LITERAL_DISTRACTOR) == 1 for line in samples)
    for line in samples:
        place = line["needle_values"][line["needle_roles"].index(LITERAL_DISTRACTOR)]
        assert place == ITEMS[line["latent_items"][0]].chain[-1]
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["identity"]["spec"]["literal_distractor"] is True


def test_items_whose_anchor_a_corpus_names_are_never_drawn() -> None:
    """A needle's own words are its alone: an item whose anchor the prose corpus names (Yale,
    Trafalgar Square) is withheld, gold or distractor, in every domain of the run."""
    whole = haystack_check(load_corpus("prose").whole_text)
    named = {item.id for item in items_in("eval") if whole.mentions([item.key])}
    assert "h1-yale" in named
    for domains in ((), ("code", "prose")):
        task = NiahTask(spec(domains=domains), CHAR)
        assert named <= task.space.withheld
        anchors = {item.key for item in items_in("eval") if item.id in named}
        for one in samples(task):
            assert one.needles is not None
            assert not any(anchor in p.text for p in one.needles.placements for anchor in anchors)
