"""fathom export of the story families (babi): stories of training names, places and objects that
no evaluation story draws, prompts exactly their length, and export-check finding a planted name."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any

import pytest

from fathom.cli import main
from fathom.prompts import babi_story as lang
from fathom.prompts.names import pool_of
from fathom.prompts.spaces import ONSETS
from fathom.records import SampleRecord
from fathom.run.runner import run
from fathom.run.store import RunFolder
from fathom.spec import RunSpec
from fathom.tasks import babi_draw as draw
from fathom.tasks.babi import BABI_TEXT

LENGTHS = ("2048", "3072")


def cli(*args: str | Path) -> int:
    return main([str(a) for a in args])


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _words(story: draw.Story) -> dict[str, set[str]]:
    """A story's people, places and objects, read back from its sentences by the story language."""
    found: dict[str, set[str]] = {"person": set(), "place": set(), "thing": set()}
    for line in story.lines:
        event = lang.parse(line)
        assert event is not None, line
        slots = {
            "move": ("person", "place"),
            "take": ("person", "thing"),
            "drop": ("person", "thing"),
            "give": ("person", "thing", "person"),
            "lies": ("place", None, "place"),
        }[event.kind]
        for slot, word in zip(slots, event.words, strict=True):
            if slot is not None:
                found[slot].add(word)
    return found


def test_training_and_evaluation_stories_never_share_a_person_place_or_object() -> None:
    drawn: dict[str, dict[str, set[str]]] = {
        pools: {"person": set(), "place": set(), "thing": set()} for pools in ("eval", "train")
    }
    for seed in range(200):
        for task in draw.TASKS:
            for name, pools in (("eval", draw.EVAL_POOLS), ("train", draw.TRAIN_POOLS)):
                story = draw.draw_story(random.Random(f"{seed} {task}"), task, pools=pools)
                for kind, words in _words(story).items():
                    drawn[name][kind] |= words
    for kind in ("person", "place", "thing"):
        assert drawn["eval"][kind] and drawn["train"][kind]
        assert drawn["eval"][kind].isdisjoint(drawn["train"][kind]), kind
    # Why, written here: training people are the training part of the names, training places begin
    # with C, J or Y, which begin no evaluation place (every one opens with an evaluation onset).
    assert drawn["train"]["person"] <= set(pool_of("train").given)
    assert all(place[0] in "CJY" for place in drawn["train"]["place"])
    assert all(place.lower().startswith(ONSETS) and place[0] not in "CJY" for place in drawn["eval"]["place"])


def test_evaluation_stories_are_drawn_as_before() -> None:
    # A story the generator drew before it took pools (commit 1444ae6): the default pools are
    # evaluation's, drawn in the same order, so a run's prompts are unchanged.
    story = draw.draw_story(random.Random(7), "qa5")
    assert story.lines[:3] == (
        "Stefan travelled to Monford.",
        "Jakob took the basket.",
        "Stefan got the feather.",
    )
    assert (story.args, story.answer) == (("basket", "Dmitri"), "Jakob")
    assert story.places == ("Monford", "Stendale", "Bilmoor", "Kaeskford", "Ferdale", "Numbury", "Duthhaven",
                            "Garkford")  # fmt: skip


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An evaluation run of every story task (seed 0, as the export), its records only."""
    folder = tmp_path_factory.mktemp("evaluated") / "babi"
    spec = RunSpec("babi", "sim:perfect", "char", (2048,), (), 3, template="none")
    assert run(spec, folder, show_progress=False).errors == 0
    return folder


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("exported") / "babi.jsonl"
    args = ["--tokenizer", "char", "--template", "none", "--lengths", ",".join(LENGTHS)]
    assert cli("export", "babi", *args, "--count", "30", "--out", out) == 0
    return out


def test_a_babi_export_holds_every_story_task_each_prompt_exactly_its_length(exported: Path) -> None:
    examples = lines(exported)
    assert len(examples) == 30
    tasks = set()
    for example in examples:
        data = example["meta"]
        user, answer = (m["content"] for m in example["messages"])
        assert data["split"] == "train" and data["length"] in (2048, 3072)
        # Under the `none` template a prompt is the user's text, a blank line, then the answer prefix:
        # in the char tokenizer, its length in characters.
        assert len(user + "\n\n" + BABI_TEXT.answer_prefix) == data["length"]
        question = re.search(r"Question: (.+)$", user)
        assert question is not None
        asked = lang.asked(question.group(1))
        assert asked is not None and data["task"] == f"babi:{asked[0]}"
        assert answer == f"Answer: {data['answers'][0]}."
        tasks.add(asked[0])
    assert tasks == set(draw.TASKS)


def test_a_babi_export_shares_nothing_with_an_evaluation_run(
    exported: Path, evaluated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    assert cli("export-check", exported, evaluated) == 0
    assert capsys.readouterr().out.startswith("no overlap: 30 examples")


def test_an_evaluation_name_planted_in_a_babi_export_is_found(
    exported: Path, evaluated: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A person an evaluation question asks about, found by the test itself: a word of the question
    # that is an evaluation-pool name.
    eval_names = set(pool_of("eval").given)
    records = [r for r in RunFolder(evaluated).records() if isinstance(r, SampleRecord)]
    name = next(w for r in records for w in re.findall(r"\w+", r.question) if w in eval_names)
    examples = exported.read_text(encoding="utf-8").splitlines()
    edited = json.loads(examples[4])
    edited["messages"][0]["content"] += f"\n{name} went to the garden."
    examples[4] = json.dumps(edited, ensure_ascii=False)
    leaky = tmp_path / "leaky.jsonl"
    leaky.write_text("\n".join(examples) + "\n", encoding="utf-8")
    capsys.readouterr()
    assert cli("export-check", leaky, evaluated) == 1
    out = capsys.readouterr().out
    assert out.startswith("1 overlaps:") and f"name '{name}'" in out and "line 5 (user)" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["state"], "'state' cannot be exported: export takes niah, babi"),
        (["babi:qa9"], "unknown task 'babi:qa9': export takes niah, babi, babi:qa1"),
        (["babi", "--depths", "3"], "'babi' draws needle depths per sample"),
        (["babi", "--needle", "uuid"], "--needle goes with niah runs, not 'babi'"),
    ],
)
def test_a_bad_story_export_is_refused_in_one_line(
    args: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out.jsonl"
    assert cli("export", *args, "--count", "3", "--tokenizer", "char", "--lengths", "2k", "--out", out) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"fathom: error: {message}") and err.count("\n") == 1 and "Traceback" not in err
    assert list(tmp_path.iterdir()) == []
