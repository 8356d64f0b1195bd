"""Low-overlap needles in several forms: relations, inverted needles, question templates; what a run
records of them and reports, and the bad input refused in one line before any folder is made."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from fathom.cli import main
from fathom.errors import SpecError
from fathom.prompts.latent import content_words, draw_latent, items_in, load_items
from fathom.prompts.latent_forms import FORMS_VERSION, RELATIONS, Form, Forms, fits
from fathom.prompts.needle_checks import MIN_SENTENCE_TOKENS, check_room
from fathom.prompts.needle_sets import Hardness, needle_set
from fathom.prompts.needle_styles import STYLES
from fathom.prompts.needles import KEYED_NEEDLES
from fathom.prompts.tokenizers import load_tokenizer
from fathom.spec import NEEDLE_ORDERS, QUESTION_TEMPLATES
from fathom.spec import RELATIONS as SPEC_RELATIONS
from fathom.tasks import niah

EVERY_FORM = [Form(r, o, t) for r in RELATIONS for o in NEEDLE_ORDERS for t in QUESTION_TEMPLATES]


def test_the_spec_names_every_relation_order_and_template_the_forms_write() -> None:
    assert tuple(RELATIONS) == SPEC_RELATIONS
    assert all(len(relation.questions) == len(QUESTION_TEMPLATES) for relation in RELATIONS.values())


@pytest.mark.parametrize("form", EVERY_FORM, ids=lambda f: f.label)
def test_every_item_in_every_form_it_fits_asks_without_the_needles_words(form: Form) -> None:
    checked = 0
    for item in load_items():
        if not fits(form.relation, item.element):
            continue
        needle, question = item.sentence("", form), item.ask(False, form)
        assert "{" not in needle + question and item.anchor in needle, (item.id, needle)
        assert not content_words(needle) & content_words(question), (item.id, needle, question)
        # No place the question can ask about stands in the needle: the link takes the association.
        assert not any(place in needle for place in item.chain[1:]), (item.id, needle)
        assert item.place in question and item.chain[-1] in question
        literal = item.ask(True, form)  # the literal question repeats the needle's own words
        assert item.anchor in literal and content_words(needle) & content_words(literal)
        checked += 1
    assert checked >= 100  # every relation fits over a hundred items


def test_the_default_form_is_each_items_own_needle_and_question() -> None:
    for seed in range(40):
        (needle, form), item_rng = draw_latent(random.Random(seed), 1, False), random.Random(seed)
        item = item_rng.choice(items_in("eval", 1))  # the default draws the item first, then the name
        name = needle.answers[0]
        assert form == Form("visit", "name-first", 1)
        assert needle.text == " " + item.needle.replace("{name}", name)
        assert needle.question == item.question


def test_an_inverted_needle_puts_the_anchor_before_the_character() -> None:
    by_key = {item.key: item for item in load_items()}
    forms = Forms(("visit", "home", "work"), ("place-first",), (1, 2, 3))
    seen = set()
    for seed in range(60):
        needle, form = draw_latent(random.Random(seed), 2, False, forms=forms)
        seen.add(form.relation)
        assert form.order == "place-first"
        assert needle.text.index(needle.key) < needle.text.index(needle.answers[0])
        place = by_key[needle.key].place
        assert needle.question == RELATIONS[form.relation].questions[form.template - 1].format(place=place)
    assert seen == {"visit", "home", "work"}  # each relation is drawn


def test_home_and_work_are_drawn_only_for_anchors_one_can_live_or_work_beside() -> None:
    by_key = {item.key: item for item in load_items()}
    forms = Forms(("home", "work"), NEEDLE_ORDERS, QUESTION_TEMPLATES)
    for seed in range(80):
        needle, form = draw_latent(random.Random(seed), 1, False, forms=forms)
        assert by_key[needle.key].element not in ("artwork", "object", "event", "street")
        assert form.relation in ("home", "work")


def test_a_sample_and_its_literal_twin_take_one_form() -> None:
    forms = Forms(tuple(RELATIONS), NEEDLE_ORDERS, QUESTION_TEMPLATES)
    for seed in range(20):
        asked = needle_set("latent-1", Hardness(forms=forms), 0.5, random.Random(seed))
        twin = needle_set("latent-1-literal", Hardness(forms=forms), 0.5, random.Random(seed))
        assert asked.forms == twin.forms and asked.placements == twin.placements
        relation, order, _ = asked.forms[0].split("/")
        literal = RELATIONS[relation].literals[order]
        if literal is not None:
            assert twin.question.startswith(literal.split("{anchor}")[0])


@pytest.mark.parametrize(
    ("forms", "message"),
    [
        (((), NEEDLE_ORDERS, QUESTION_TEMPLATES), "--relations names none: use one or more of visit"),
        ((("swim",), NEEDLE_ORDERS, QUESTION_TEMPLATES), "--relations: unknown value 'swim'"),
        ((("visit",), ("sideways",), (1,)), "--needle-orders: unknown value 'sideways'"),
        ((("visit",), NEEDLE_ORDERS, (4,)), "--question-templates: unknown value '4'"),
        ((("visit", "visit"), NEEDLE_ORDERS, (1,)), r"--relations names a value twice \(visit, visit\)"),
    ],
)
def test_a_bad_form_is_a_spec_error(
    forms: tuple[tuple[str, ...], tuple[str, ...], tuple[int, ...]], message: str
) -> None:
    with pytest.raises(SpecError, match=message):
        Forms(*forms)


def test_no_needle_sentence_is_shorter_than_the_room_check_assumes() -> None:
    tokenizer = load_tokenizer("cl100k_base")
    kinds = [*KEYED_NEEDLES, "fact", "split", "chain", "latent-1", "latent-2"]
    shortest = min(
        len(tokenizer.encode(placement.text))
        for style in STYLES.values()
        for kind in kinds
        for seed in range(10)
        for placement in needle_set(
            kind, Hardness(distractors=2), 0.5, random.Random(seed), style=style
        ).placements
    )
    assert shortest >= MIN_SENTENCE_TOKENS


def test_a_million_distractors_are_refused_from_the_arithmetic_before_any_is_built(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SpecError, match=r"use --distractors 169 or fewer, or longer --lengths"):
        check_room("number", Hardness(distractors=1_000_000), 1024)  # 1024 // 6 = 170 sentences, 1 gold
    check_room("number", Hardness(distractors=169), 1024)
    with pytest.raises(SpecError, match=r"use --distractors 166 or fewer"):  # 2 golds, 2 literal ones
        check_room("latent-1", Hardness(distractors=167, needles=2, literal_distractor=True), 1024)

    def never(*_: object, **__: object) -> None:
        raise AssertionError("a needle set was built for a spec the arithmetic refuses")

    monkeypatch.setattr(niah, "needle_set", never)
    assert _run(tmp_path / "run", "--distractors", "1000000") == 2
    assert "use --distractors 340 or fewer, or longer --lengths" in capsys.readouterr().err  # 2k: 341 - 1


GRID = ["--tokenizer", "char", "--lengths", "2k", "--depths", "0.5", "--samples", "6", "--no-progress"]


def _run(folder: Path, *options: str) -> int:
    return main(["run", "niah", "--model", "sim:perfect", *GRID, *options, "--run-dir", str(folder)])


def test_a_run_in_every_form_records_and_reports_each_needles_form(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    every = ["--relations", "all", "--needle-orders", "all", "--question-templates", "all"]
    assert _run(tmp_path / "run", "--needle", "latent-1", *every) == 0
    lines = (tmp_path / "run" / "samples.jsonl").read_text().splitlines()
    samples = [r for r in map(json.loads, lines) if r.get("latent_items") and not r.get("control")]
    assert samples and all(len(r["needle_forms"]) == 1 for r in samples)
    labels = {r["needle_forms"][0] for r in samples}
    assert len(labels) > 1 and all(label.split("/")[0] in RELATIONS for label in labels)
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["identity"]["spec"]["relations"] == list(RELATIONS)
    assert manifest["identity"]["task"]["latent_forms"] == FORMS_VERSION
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    axes = {row["axis"] for row in summary["hard"]["forms"]}
    assert axes and axes <= {"relation", "order", "template"}
    assert "low-overlap by " in capsys.readouterr().out
    assert main(["report", str(tmp_path / "run")]) == 0
    assert "<h3>By the needles' form</h3>" in (tmp_path / "run" / "report.html").read_text()


def test_the_default_form_keeps_the_identity_runs_had(tmp_path: Path) -> None:
    assert _run(tmp_path / "run", "--needle", "latent-1") == 0
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert (
        "relations" not in manifest["identity"]["spec"] and "latent_forms" not in manifest["identity"]["task"]
    )


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--needle", "latent-1", "--relations", "swim"], "--relations: unknown value 'swim'"),
        (["--needle", "latent-1", "--needle-orders", "backwards"], "--needle-orders: unknown value"),
        (["--needle", "latent-1", "--question-templates", "7"], "--question-templates: unknown value '7'"),
        (["--needle", "latent-1", "--question-templates", "one"], "--question-templates: unknown value"),
        (["--needle", "number", "--relations", "home"], "shape low-overlap needles"),
        (["--needle", "latent-1", "--relations", "home,home"], "names a value twice"),
        # more characters than the names pool holds (one given and one family name each)
        (["--needle", "latent-1", "--distractors", "150"], "names pool, less the names the haystack holds"),
    ],
)
def test_bad_forms_are_one_line_and_no_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], options: list[str], message: str
) -> None:
    assert _run(tmp_path / "run", *options) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not (tmp_path / "run").exists()
