"""fathom export and export-check: training examples from evaluation's generators, drawn from a
space no evaluation draws from, and a check that reads both and finds nothing shared."""

from __future__ import annotations

import dataclasses
import json
import random
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from fathom.cli import main
from fathom.errors import SpecError
from fathom.export import EXPORT_KINDS, check_export
from fathom.export.check import Drawn, _record_terms
from fathom.prompts.latent import load_items, split_of
from fathom.prompts.names import split_of_name
from fathom.prompts.needle_sets import Hardness, needle_set
from fathom.prompts.needles import make_needle, needle_rng
from fathom.prompts.spaces import EVAL, SPACES, TRAIN
from fathom.prompts.tokenizers import load_tokenizer
from fathom.records import Cell, SampleRecord
from fathom.run.runner import run
from fathom.run.store import RunFolder
from fathom.spec import RunSpec
from fathom.tasks.base import Sample
from fathom.tasks.niah import NIAH_TEXT, NiahTask
from fathom.tasks.ruler.base import word_list

# 2k characters and more: at 1k, a haystack of a sentence or two has no boundary a distractor could
# take the gap from two needles.
GRID = ["--tokenizer", "char", "--lengths", "2k,4k", "--depths", "3"]
# Each kind as evaluation and export ask for it: every generator, with distractors and several needles.
KINDS: dict[str, dict[str, int]] = {
    "number": {"distractors": 2},
    "words": {"needles": 2, "distractors": 1},  # the plural question says "two-word"
    "uuid": {"distractors": 2},
    "fact": {"needles": 2, "distractors": 2},
    "split": {"distractors": 2},
    "chain": {"distractors": 2},
    "latent-1": {"distractors": 2},
    "latent-2": {},  # with several, evaluation on prose runs out of redraws (the corpus names places)
}


def flags(options: dict[str, int]) -> list[str]:
    return [word for name, value in options.items() for word in (f"--{name}", str(value))]


def cli(*args: str | Path) -> int:
    return main([str(a) for a in args])


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def meta(example: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = example["meta"]
    return found


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Evaluation runs of every kind (seed 0, as the exports), and one of RULER's needle tasks; their
    records only (the runner, without the report's plots)."""
    root = tmp_path_factory.mktemp("evaluated")
    specs = {
        kind: RunSpec("niah", "sim:perfect", "char", (2048,), (0.0, 0.5, 1.0), 2, needle=kind, **options)
        for kind, options in KINDS.items()
    }
    specs["ruler"] = RunSpec("niah_single_1", "sim:perfect", "char", (1024,), (), 4)
    for name, spec in specs.items():
        assert run(spec, root / name, show_progress=False).errors == 0
    return [root / name for name in specs]


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """200 examples: 25 of each kind, in one file."""
    root = tmp_path_factory.mktemp("exported")
    parts = []
    for kind, options in KINDS.items():
        out = root / f"{kind}.jsonl"
        assert (
            cli("export", "niah", "--needle", kind, *flags(options), *GRID, "--count", "25", "--out", out)
            == 0
        )
        parts.append(out.read_text(encoding="utf-8"))
    both = root / "train.jsonl"
    both.write_text("".join(parts), encoding="utf-8")
    return both


# --- the spaces ---


def test_train_words_are_none_of_evaluations_nor_rulers_keys() -> None:
    train, evaluation = {*TRAIN.adjectives, *TRAIN.nouns}, {*EVAL.adjectives, *EVAL.nouns}
    assert not train & evaluation
    assert not set(TRAIN.adjectives) & set(TRAIN.nouns)
    # RULER's keys are wonderwords adjective-noun pairs: no train adjective is one of its adjectives.
    assert not set(TRAIN.adjectives) & set(word_list("adjectivelist"))
    for words in (TRAIN.adjectives, TRAIN.nouns):
        assert len(set(words)) == len(words) >= 100 and all(w.isalpha() and w.islower() for w in words)


def test_train_names_begin_with_letters_that_begin_no_evaluation_name() -> None:
    # Letters alone would not keep places apart: evaluation's endings hold c (wick) and y (bury).
    assert {"c", "y"} <= set("".join(EVAL.place_endings))
    assert not {onset[0] for onset in EVAL.first_onsets} & {"c", "j", "y"}
    assert {onset[0] for onset in TRAIN.first_onsets} <= {"c", "j", "y"}
    starts: dict[str, set[str]] = {"eval": set(), "train": set()}
    for split, space in SPACES.items():
        rng = random.Random(split)
        for _ in range(2000):
            words = [*space.person(rng).split(), space.place(rng), space.word(rng, 1)]
            starts[split] |= {word[0] for word in words}
    assert starts["train"] == {"C", "J", "Y"} and not starts["train"] & starts["eval"]


def test_train_numbers_and_codes_are_longer_than_any_evaluation_draws() -> None:
    rng = random.Random(0)
    assert {len(EVAL.number(rng)) for _ in range(500)} == {7}
    assert {len(TRAIN.number(rng)) for _ in range(500)} == {8}
    assert {len(EVAL.code_half(rng)) for _ in range(500)} == {4}
    assert {len(TRAIN.code_half(rng)) for _ in range(500)} == {5}


@pytest.mark.parametrize("kind", ["latent-1", "latent-2-literal"])
def test_train_low_overlap_needles_are_train_items_with_train_names(kind: str) -> None:
    by_key = {item.key: item for item in load_items()}
    for sample in range(40):
        made = needle_set(kind, Hardness(distractors=2), 0.5, needle_rng(sample, kind), TRAIN)
        for placement in made.placements:
            item = next(
                i for i in by_key.values() if i.needle.replace("{name}", placement.value) in placement.text
            )
            assert split_of(item.id) == "train"
            assert {split_of_name(name) for name in placement.value.split(" ")} == {"train"}


def test_no_train_item_names_an_evaluation_anchor() -> None:
    evaluated = {item.key for item in load_items() if split_of(item.id) == "eval"}
    train = [item for item in load_items() if split_of(item.id) == "train"]
    assert len(train) > 20 and len(evaluated) > 100  # both parts hold items: the loop checks some
    for item in train:
        words = " ".join((item.needle, item.question, item.literal_question))
        assert item.key not in evaluated and not any(anchor in words for anchor in evaluated)


def test_evaluation_space_is_the_default() -> None:
    for kind in ("number", "words", "uuid", "fact"):
        assert make_needle(kind, needle_rng(5, kind)) == make_needle(kind, needle_rng(5, kind), EVAL)
        assert make_needle(kind, needle_rng(5, kind), TRAIN) != make_needle(kind, needle_rng(5, kind))


def test_the_sf_needle_has_no_training_part() -> None:
    with pytest.raises(SpecError, match="no training part"):
        make_needle("sf", needle_rng(0), TRAIN)


def test_train_samples_draw_from_streams_of_their_own() -> None:
    """Why the stream: lists of equal length consume a generator alike, so the same stream would
    give train the very UUID evaluation drew; the train space's samples are seeded apart."""
    same_lengths = dataclasses.replace(TRAIN, adjectives=TRAIN.adjectives[:100], nouns=TRAIN.nouns[:100])
    assert (
        make_needle("uuid", needle_rng(1), same_lengths).answers == make_needle("uuid", needle_rng(1)).answers
    )
    spec = RunSpec("niah", "sim:perfect", "char", (1024,), (0.5,), 1, needle="uuid")
    cell = Cell("niah", 1024, 0.5, 0)
    tokenizer = load_tokenizer("char")
    samples = [NiahTask(spec, tokenizer, space).prepare(cell) for space in (EVAL, TRAIN)]
    assert isinstance(samples[0], Sample) and isinstance(samples[1], Sample)
    assert samples[0].answers != samples[1].answers


# --- export ---


def test_export_writes_chat_examples_spread_over_the_grid(exported: Path) -> None:
    examples = lines(exported)
    assert len(examples) == 200
    for example in examples:
        messages = example["messages"]
        assert isinstance(messages, list) and [m["role"] for m in messages] == ["user", "assistant"]
        data = meta(example)
        assert data["split"] == "train" and data["version"] == 1 and data["seed"] == 0
        assert data["length"] in (2048, 4096) and data["depth"] in (0.0, 0.5, 1.0)
        assert data["needle"] in EXPORT_KINDS and data["tokenizer"] == "char"
        user, answer = messages[0]["content"], messages[1]["content"]
        assert user.startswith(NIAH_TEXT.before[:40]) and "</document>" in user
        answers = data["answers"]
        assert isinstance(answers, list) and answer.startswith("Answer: ")
        assert all(a in answer for a in answers)
    # Each kind's 25 spread over its 6 cells: 4 or 5 apiece.
    by_cell = Counter((meta(e)["needle"], meta(e)["length"], meta(e)["depth"]) for e in examples)
    assert len(by_cell) == 8 * 6 and set(by_cell.values()) == {4, 5}


def test_export_is_the_same_for_a_seed_and_holds_a_system_prompt(tmp_path: Path) -> None:
    args = ["export", "niah", *GRID, "--count", "7", "--system-prompt", "Be brief."]
    assert cli(*args, "--out", tmp_path / "a.jsonl") == 0
    assert cli(*args, "--out", tmp_path / "b.jsonl") == 0
    assert cli(*args, "--seed", "1", "--out", tmp_path / "c.jsonl") == 0
    first = (tmp_path / "a.jsonl").read_bytes()
    assert first == (tmp_path / "b.jsonl").read_bytes() != (tmp_path / "c.jsonl").read_bytes()
    example = lines(tmp_path / "a.jsonl")[0]
    assert example["messages"][0] == {"role": "system", "content": "Be brief."}


def test_no_exported_example_shares_anything_with_evaluation(
    exported: Path, evaluated: list[Path], capsys: pytest.CaptureFixture[str]
) -> None:
    result = check_export(exported, evaluated)
    # 8 kinds x 6 samples, the two low-overlap kinds' literal twins, RULER's 4 samples
    assert result.examples == 200 and result.records == 8 * 6 + 2 * 6 + 4 and result.drawn > 150
    assert result.overlaps == ()
    capsys.readouterr()
    assert cli("export-check", exported, *evaluated) == 0
    assert capsys.readouterr().out.startswith("no overlap: 200 examples")


# What the evaluated needles state, read from their recorded context with their wording written here
# (not with the check's reading): the key a keyed sentence is about, distractors' keys too ("... for
# brave-helmet is"), the people of fact and chain needles, the anchors of low-overlap needles.
_STATED_KEY = re.compile(r" for ([a-z]+-[a-z]+) is\b")
_STATED_NAME = re.compile(
    r"(?:abroad, |As a child, )([A-Z][a-z]+ [A-Z][a-z]+) (?:settled|spent)"
    r"|([A-Z][a-z]+) (?:keeps|once kept) the"
)


def _stated(runs: list[Path]) -> dict[str, set[str]]:
    """Each class of thing the runs' samples drew: every recorded answer and needle value, and what
    their needles' context states."""
    anchors = {item.key for item in load_items()}
    stated: dict[str, set[str]] = {"value": set(), "key": set(), "name": set(), "anchor": set()}
    for run_dir in runs:
        for record in RunFolder(run_dir).records():
            if not isinstance(record, SampleRecord) or record.control:
                continue
            context = " ".join(record.needle_context or ())
            stated["value"] |= {v for v in (*record.answers, *record.needle_values) if v}
            stated["key"] |= set(_STATED_KEY.findall(context))
            stated["name"] |= {first or second for first, second in _STATED_NAME.findall(context)}
            if record.needle_kind.startswith("latent"):
                people = [n for n in (*record.answers, *record.needle_values) if n]
                sentences = [m for n in people for m in re.findall(rf"{re.escape(n)} ([^.]+)\.", context)]
                stated["anchor"] |= {a for a in anchors for sentence in sentences if a in sentence}
    return stated


@pytest.mark.parametrize("planted", ["value", "key", "name", "anchor"])
def test_a_planted_overlap_is_found(
    planted: str, exported: Path, evaluated: list[Path], tmp_path: Path
) -> None:
    # Every one of the class, each planted in an example's answer of its own: the check must name
    # them all, on the line each was planted in.
    things = sorted(_stated(evaluated)[planted])
    assert len(things) >= {"value": 100, "key": 20, "name": 10, "anchor": 10}[planted]
    examples = exported.read_text(encoding="utf-8").splitlines()
    assert len(examples) >= len(things)
    for number, thing in enumerate(things):
        edited = json.loads(examples[number])
        edited["messages"][-1]["content"] = f"Answer: {thing}."
        examples[number] = json.dumps(edited)
    path = tmp_path / "leaky.jsonl"
    path.write_text("\n".join(examples) + "\n", encoding="utf-8")
    found = {o.drawn.text: o.lines for o in check_export(path, evaluated).overlaps}
    missed = [t for number, t in enumerate(things, start=1) if (number, "assistant") not in found.get(t, ())]
    assert missed == []


def test_a_planted_overlap_is_reported_with_its_class_and_line(
    exported: Path, evaluated: list[Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    anchor = sorted(_stated(evaluated)["anchor"])[0]
    examples = exported.read_text(encoding="utf-8").splitlines()
    edited = json.loads(examples[16])
    edited["messages"][-1]["content"] = f"Answer: {anchor}."
    examples[16] = json.dumps(edited)
    path = tmp_path / "leaky.jsonl"
    path.write_text("\n".join(examples) + "\n", encoding="utf-8")
    capsys.readouterr()
    assert cli("export-check", path, *evaluated) == 1
    out = capsys.readouterr().out
    assert out.startswith("1 overlaps:") and f"anchor '{anchor}'" in out and "line 17 (assistant)" in out


def test_the_check_matches_whole_words_and_keys_as_their_needles_write_them(
    exported: Path, evaluated: list[Path], tmp_path: Path
) -> None:
    drawn = _drawn(evaluated)
    code = next(d.text for d in drawn if d.kind == "value" and d.text.isdigit() and len(d.text) == 4)
    key = next(d.text for d in drawn if d.kind == "key" and d.run.name == "number")
    examples = exported.read_text(encoding="utf-8").splitlines()[:3]
    contents = [
        f"An identifier 1b4e28ba-{code}-41d4-a716-446655440000, a number 1{code}5.",  # neither holds it
        f"The passphrase is {key}.",  # a key as its needle writes it (its words apart are prose)
        f"The code is {code}.",
    ]
    for index, content in enumerate(contents):
        edited = json.loads(examples[index])
        edited["messages"][-1]["content"] = content
        examples[index] = json.dumps(edited)
    path = tmp_path / "edited.jsonl"
    path.write_text("\n".join(examples) + "\n", encoding="utf-8")
    found = {
        (o.drawn.kind, o.drawn.text): [line for line, _ in o.lines]
        for o in check_export(path, evaluated).overlaps
    }
    assert found == {("key", key): [2], ("value", code): [3]}


def _drawn(runs: list[Path]) -> list[Drawn]:
    """What the runs' samples drew, as the check collects it."""
    return [
        Drawn(kind, text, run, record.sample_id)
        for run in runs
        for record in RunFolder(run).records()
        if isinstance(record, SampleRecord) and not record.control
        for kind, text in _record_terms(record, load_items())
    ]


def test_the_check_reads_keys_names_and_anchors_from_the_records(evaluated: list[Path]) -> None:
    drawn = _drawn(evaluated)
    kinds = Counter(d.kind for d in drawn)
    assert set(kinds) == {"value", "key", "name", "anchor"}
    texts = {d.text for d in drawn}
    assert "two-word" not in texts  # the plural question's own word, in no needle
    ruler_keys = {d.text for d in drawn if d.kind == "key" and d.run.name == "ruler"}
    assert ruler_keys and all("-" in key and " " not in key for key in ruler_keys)


# --- bad input ---


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["niah_x"], "unknown task 'niah_x': export takes niah, babi, babi:qa1"),
        (["niah_single_1"], "'niah_single_1' cannot be exported: export takes niah, babi"),
        (
            ["niah", "--needle", "pin"],
            "unknown needle kind 'pin': export takes number, words, uuid, fact, split",
        ),
        (["niah", "--needle", "sf"], "the sf needle is one fixed sentence"),
        (["niah", "--count", "0"], "--count must lie in 1.."),
        (["niah", "--lengths", "100"], "length 100 is below this prompt's fixed overhead"),
    ],
)
def test_bad_export_requests_are_one_line_and_write_nothing(
    args: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out.jsonl"
    count = [] if "--count" in args else ["--count", "3"]
    assert cli("export", *args, *count, "--tokenizer", "char", "--depths", "3", "--out", out) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"fathom: error: {message}") and err.count("\n") == 1 and "Traceback" not in err
    assert list(tmp_path.iterdir()) == []  # not even a partial file


def test_an_existing_file_is_replaced_only_with_force(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out.jsonl"
    out.write_text("mine\n")
    args = ["export", "niah", *GRID, "--count", "2", "--out", out]
    assert cli(*args) == 2
    assert "exists: pass --force to replace it" in capsys.readouterr().err and out.read_text() == "mine\n"
    assert cli(*args, "--force") == 0 and len(lines(out)) == 2


def test_a_latent_export_never_draws_an_item_its_corpus_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The prose corpus names the places of most two-hop training items; those left make 6 groups.
    out = tmp_path / "out.jsonl"
    args = ["export", "niah", "--needle", "latent-2", *GRID, "--out", out]
    assert cli(*args, "--needles", "5", "--distractors", "2", "--count", "12") == 0
    assert cli(*args, "--needles", "7", "--count", "1", "--force") == 2
    assert "come from 6 groups (the train part's, less those the haystack names)" in capsys.readouterr().err


def test_bad_check_input_is_one_line(
    exported: Path, evaluated: list[Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "plain").mkdir()
    assert cli("export-check", exported, tmp_path / "plain") == 2
    assert "is not a fathom run folder (it has no manifest.json)" in capsys.readouterr().err
    assert cli("export-check", exported, tmp_path / "absent") == 2
    assert "does not exist" in capsys.readouterr().err
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"messages": []}\n{"meta": {}}\n')
    assert cli("export-check", broken, evaluated[0]) == 2
    err = capsys.readouterr().err
    assert "broken.jsonl line 2 is not an exported example" in err and err.count("\n") == 1
    assert cli("export-check", tmp_path / "none.jsonl", evaluated[0]) == 2
    assert "none.jsonl" in capsys.readouterr().err


def test_the_help_states_the_guarantee(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli("export", "--help")
    help_text = " ".join(capsys.readouterr().out.split())
    assert "no example shares a needle, key, value, name or item with any evaluation run" in help_text
    assert "fathom export-check verifies" in help_text


def test_a_latent_export_takes_the_forms_and_the_literal_distractor_as_a_run_does(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    forms = ["--relations", "home,work", "--needle-orders", "place-first", "--question-templates", "all"]
    args = ["export", "niah", "--needle", "latent-1", *GRID, "--count", "6", "--out", out]
    assert cli(*args, *forms, "--literal-distractor") == 0
    examples = lines(out)
    assert len(examples) == 6
    questions = [json.dumps(example) for example in examples]
    # Every question asks where a character lives or works, never where one has been.
    assert all(
        (
            "lives in" in q
            or "home in" in q
            or "resides in" in q
            or "works in" in q
            or "job in" in q
            or "earns a living in" in q
        )
        for q in questions
    )
    assert not any("has been to" in q for q in questions)
    # and each haystack names the question's place in an unrelated sentence, on purpose
    cues = ("A faded postcard of", "played a long documentary about", "left a guidebook to")
    assert all(any(cue in q for cue in cues) for q in questions)
