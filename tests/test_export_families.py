"""fathom export of the families of lines (babi, state): stories of training names, places and
objects that no evaluation story draws, programs on training lists of training values, prompts
exactly their length, and export-check finding a planted name."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any

import pytest

from fathom.cli import main
from fathom.prompts import babi_story as lang
from fathom.prompts import list_ops
from fathom.prompts.names import pool_of
from fathom.prompts.spaces import ONSETS
from fathom.records import SampleRecord
from fathom.run.runner import run
from fathom.run.store import RunFolder
from fathom.spec import RunSpec
from fathom.tasks import babi_draw as draw
from fathom.tasks import state
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
        (["niah_single_1"], "'niah_single_1' cannot be exported: export takes niah, babi"),
        (["state", "--ops", "64"], "--ops 64 does not fit a length of 2048 tokens"),
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


# --- state ---


def _program_words(program: state.Program) -> tuple[set[str], set[int]]:
    """The lists a program names and the values it writes, read back by the list language (an
    insert's first argument and a pop's are indices, not values)."""
    names: set[str] = set()
    values: set[int] = set()
    for line in program.lines:
        op = list_ops.parse(line)
        assert op is not None, line
        names.add(op.target)
        held = {"append": op.args, "insert": op.args[1:], "remove": op.args, "count": op.args}
        values |= set(held.get(op.method, ()))
    return names, values


def test_training_and_evaluation_programs_never_share_a_list_or_a_value() -> None:
    eval_names: set[str] = set()
    train_names: set[str] = set()
    eval_values: set[int] = set()
    train_values: set[int] = set()
    for seed in range(300):
        names, values = _program_words(state.program(random.Random(seed), 1 + seed % 40))
        eval_names, eval_values = eval_names | names, eval_values | values
        names, values = _program_words(state.program(random.Random(seed), 1 + seed % 40, state.TRAIN_LISTS))
        train_names, train_values = train_names | names, train_values | values
    assert eval_names == {"items", "notes"} and train_names == {"cards", "jars"}
    # One or two digits in evaluation, three in training: no value, so no list, is in both.
    assert eval_values and all(1 <= v <= 99 for v in eval_values)
    assert train_values and all(100 <= v <= 999 for v in train_values)


def test_evaluation_programs_are_drawn_as_before() -> None:
    # A program the generator drew before it took lists (commit 1444ae6).
    assert state.program(random.Random(5), 3).lines == (
        "items.append(60)", "items.insert(0, 21)", "notes.insert(0, 49)", "items.pop(0)",
        "notes.insert(1, 36)", "notes.sort()",
    )  # fmt: skip


def test_a_state_export_is_its_length_and_its_answers_are_what_python_says(tmp_path: Path) -> None:
    out = tmp_path / "state.jsonl"
    args = ["--tokenizer", "char", "--template", "none", "--lengths", "2k", "--ops", "4,8"]
    assert cli("export", "state", *args, "--count", "12", "--out", out) == 0
    kinds = set()
    for example in lines(out):
        data = example["meta"]
        user, answer = (m["content"] for m in example["messages"])
        assert len(user + "\n\n" + "Answer:") == data["length"] == 2048
        code = [line for line in user.splitlines() if re.fullmatch(r"(cards|jars)\.\w+\([0-9, ]*\)", line)]
        assert len(code) == 2 * int(data["task"].partition(":")[2]) and "items" not in user
        # Python itself runs the lines: the answer is the list, its length or its sum.
        lists: dict[str, list[int]] = {"cards": [], "jars": []}
        for line in code:
            exec(line, {}, lists)  # a line of the list language is a Python statement
        final = lists["cards"]
        expected = {"list": str(final), "length": str(len(final)), "sum": str(sum(final))}[data["needle"]]
        assert answer == f"Answer: {expected}."
        kinds.add(data["needle"])
    assert kinds == {"list", "length", "sum"}
