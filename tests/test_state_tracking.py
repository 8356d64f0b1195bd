"""State tracking (``fathom run state``): the list's state, its lines in the prompt, the grading, the
refusals, and what simulated readers score on it. Python itself is the reference for the lines."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from family_checks import refused_run, wilson_low

from fathom.cli import main
from fathom.prompts import list_ops
from fathom.prompts.tokenizers import load_tokenizer
from fathom.records import Cell
from fathom.report.compare import compare_runs
from fathom.spec import RunSpec
from fathom.tasks.base import Sample
from fathom.tasks.state import StateTask, grade, program

TOKENIZERS = {name: load_tokenizer(name) for name in ("char", "cl100k_base")}


def python_state(lines: list[str] | tuple[str, ...]) -> dict[str, list[int]]:
    """The lists after running the lines with Python itself."""
    scope: dict[str, list[int]] = {"items": [], "notes": []}
    for line in lines:
        exec(line, {}, scope)  # the lines are Python: Python is the reference
    return scope


def task(tokenizer: str, lengths: tuple[int, ...], ops: tuple[int, ...], seed: int = 0) -> StateTask:
    spec = RunSpec("state", "sim:perfect", tokenizer, lengths, (), 3, seed=seed, template="none", ops=ops)
    return StateTask(spec, TOKENIZERS[tokenizer])


def sample(tokenizer: str, length: int, ops: int, index: int = 0, seed: int = 0) -> Sample:
    return task(tokenizer, (length,), (ops,), seed).prepare(Cell(f"state:{ops}", length, None, index))


def code_lines(sample: Sample, tokenizer: str) -> list[str]:
    """The lines of code in the sample's context, in the order they stand there."""
    prompt = sample.prompt
    context = TOKENIZERS[tokenizer].decode(
        prompt.ids[prompt.head_tokens : prompt.head_tokens + prompt.context_tokens].tolist()
    )
    return [line for line in context.split("\n") if list_ops.parse(line) is not None]


def test_a_fixed_sequence_ends_in_the_state_worked_by_hand() -> None:
    lines = [
        "items.append(3)",  # [3]
        "items.insert(0, 5)",  # [5, 3]
        "notes.append(9)",  # another list
        "items.append(1)",  # [5, 3, 1]
        "items.sort()",  # [1, 3, 5]
        "items.pop(0)",  # [3, 5]
        "items.count(3)",  # reads it: [3, 5]
        "items.append(8)",  # [3, 5, 8]
        "items.pop()",  # [3, 5]
        "items.remove(3)",  # [5]
        "items.insert(9, 7)",  # past the end: [5, 7]
    ]
    lists = list_ops.replay(lines)
    assert lists == {"items": [5, 7], "notes": [9]}
    assert [list_ops.answer(k, lists["items"]) for k in ("list", "length", "sum")] == ["[5, 7]", "2", "12"]


def test_a_program_ends_where_python_says_and_its_decoys_change_nothing_asked() -> None:
    for seed in range(300):
        drawn = program(random.Random(seed), 1 + seed % 40)
        assert list(drawn.final) == python_state(drawn.lines)["items"]
        relevant = [line for line, kept in zip(drawn.lines, drawn.relevant, strict=True) if kept]
        assert len(relevant) == len(drawn.lines) - len(relevant) == 1 + seed % 40
        # The decoys left out, the list asked about ends the same.
        assert python_state(relevant)["items"] == list(drawn.final)
        # Each relevant line changes the list; no decoy does.
        scope: dict[str, list[int]] = {"items": [], "notes": []}
        for line, kept in zip(drawn.lines, drawn.relevant, strict=True):
            before = list(scope["items"])
            exec(line, {}, scope)
            assert (scope["items"] != before) == kept, line
            assert len(scope["items"]) <= 8 and len(set(scope["items"])) == len(scope["items"])


@pytest.mark.parametrize("tokenizer", sorted(TOKENIZERS))
@pytest.mark.parametrize(("length", "ops"), [(1024, 4), (4096, 16), (16384, 64)])
def test_every_prompt_is_its_length_with_its_lines_in_order(tokenizer: str, length: int, ops: int) -> None:
    for index in range(3):
        built = sample(tokenizer, length, ops, index)
        assert len(built.prompt.ids) == length
        lines = code_lines(built, tokenizer)
        assert len(lines) == 2 * ops == len(built.prompt.needles)
        depths = [n.depth for n in built.prompt.needles]
        assert depths == sorted(depths) and depths[0] >= 0 and depths[-1] <= 1
        kind = ("list", "length", "sum")[index]
        assert built.kind == kind and built.question == list_ops.question(kind)
        final = python_state(lines)["items"]
        assert built.answers == ((str(final), str(len(final)), str(sum(final)))[index],)


@pytest.mark.parametrize("corpus", ["prose", "code"])
def test_a_prompt_read_back_as_text_is_still_its_length(corpus: str) -> None:
    """Text backends get the decoded prompt: its lines must not merge with the haystack around them
    (".\n" is one cl100k token, "." and "\n" two), or 64 lines would drift 128 tokens."""
    tokenizer = TOKENIZERS["cl100k_base"]
    spec = RunSpec("state", "sim:perfect", "cl100k_base", (16384,), (), 3, corpus=corpus, ops=(64,))
    made = StateTask(spec, tokenizer)
    assert made.corpus.units == ("sentence" if corpus == "prose" else "line")
    for index in range(3):
        built = made.prepare(Cell("state:64", 16384, None, index))
        assert len(tokenizer.encode(tokenizer.decode(built.prompt.ids.tolist()))) == 16384
        assert len(code_lines(built, "cl100k_base")) == 128


def test_the_same_seed_builds_the_same_prompts_and_another_seed_others() -> None:
    first, again, other = (sample("cl100k_base", 2048, 8, 1, seed) for seed in (7, 7, 8))
    assert first.prompt.sha256 == again.prompt.sha256 and first.answers == again.answers
    assert first.prompt.sha256 != other.prompt.sha256


@pytest.mark.parametrize(
    ("output", "reference", "right"),
    [
        ("[3, 1, 2]", "[3, 1, 2]", True),
        ("[3,1,2]", "[3, 1, 2]", True),
        (" [ 3 ,1,  2 ] ", "[3, 1, 2]", True),
        ("Answer: items = [3, 1, 2].", "[3, 1, 2]", True),
        ("[1, 2, 3]", "[3, 1, 2]", False),  # the values, not in their order
        ("[3, 1]", "[3, 1, 2]", False),
        ("3, 1, 2", "[3, 1, 2]", False),  # no list written
        ("[3, 1, 2] or maybe [3, 2]", "[3, 1, 2]", False),  # the last list is the answer
        ("[]", "[]", True),
        ("[ ]", "[]", True),
        ("[0]", "[]", False),
        ("[3, x, 2]", "[3, 2]", False),
        ("[3, \u00b2]", "[3, 2]", False),  # a superscript two is a digit to str.isdigit, not to int
        ("5", "5", True),
        ("The answer is 5.", "5", True),
        ("After 16 lines, it holds 5 values.", "5", True),
        ("15", "5", False),
        ("5.5", "5", False),
        ("5 or 6", "5", False),
        ("1,234", "1234", True),
        ("none", "0", False),
    ],
)
def test_grading_reads_the_list_whatever_its_spacing_and_numbers_whole(
    output: str, reference: str, right: bool
) -> None:
    assert grade(output, [reference]).value == (1.0 if right else 0.0)


def test_the_fit_is_refused_past_how_many_operations_fit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    made = task("char", (1024,), (1,))
    fit = made.fitting(1024)
    assert fit > 1
    task("char", (1024,), (fit,)).prepare(Cell(f"state:{fit}", 1024, None, 0))  # the most that fit builds
    args = ["run", "state", "--model", "sim:perfect", "--tokenizer", "char", "--lengths", "1k,8k"]
    err = refused_run([*args, "--ops", f"4,{fit + 1}"], tmp_path / "runs", capsys)
    assert f"--ops {fit + 1} does not fit" in err and f"at most {fit} operations fit" in err


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["run", "stat"], "unknown task 'stat' (did you mean 'state'?)"),
        (["run", "state", "--ops", "4,x"], "--ops takes whole counts"),
        (["run", "state", "--ops", "0"], "at least 1"),
        (["run", "niah", "--ops", "4"], "--ops goes with state runs"),
    ],
)
def test_bad_input_is_one_line_and_no_folder(
    args: list[str], says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    err = refused_run([*args, "--model", "sim:perfect", "--lengths", "4k"], tmp_path / "runs", capsys)
    assert says in err, err


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """sim:perfect and sim:cliff (a sure reader inside 4k, none past it) on one small state sweep."""
    root = tmp_path_factory.mktemp("state")
    folders = {}
    for name, model in (("perfect", "sim:perfect"), ("cliff", "sim:cliff?window=4096&accuracy=1&floor=0")):
        folders[name] = root / name
        args = ["run", "state", "--model", model, "--tokenizer", "char", "--lengths", "2k,8k"]
        assert main([*args, "--ops", "2,8", "--samples", "6", "--run-dir", str(folders[name])]) == 0
    return folders


def summary(folder: Path) -> dict[str, object]:
    data: dict[str, object] = json.loads((folder / "summary.json").read_text())
    return data


def test_sim_perfect_scores_every_cell_and_its_section_has_wilson_intervals(runs: dict[str, Path]) -> None:
    state = summary(runs["perfect"])["state"]
    assert isinstance(state, dict)
    cells = {(c["ops"], c["length"]): c for c in state["cells"]}
    assert sorted(cells) == [(2, 2048), (2, 8192), (8, 2048), (8, 8192)]
    for cell in cells.values():
        assert (cell["n"], cell["mean"], cell["ci_high"]) == (6, 1.0, 1.0)
        assert cell["ci_low"] == pytest.approx(wilson_low(6, 6), abs=1e-5)
    assert {q["question"] for q in state["questions"]} == {"list", "length", "sum"}
    assert all(q["n"] == 4 for q in state["questions"])  # 2 of each kind per cell of 6, 2 cells a length
    assert state["effective_length"] == [
        {"ops": 2, "mean": 8192, "lower_bound": None},
        {"ops": 8, "mean": 8192, "lower_bound": None},
    ]
    report = (runs["perfect"] / "report.html").read_text()
    assert '<section id="state">' in report


def test_sim_cliff_drops_past_its_window(runs: dict[str, Path]) -> None:
    state = summary(runs["cliff"])["state"]
    assert isinstance(state, dict)
    means = {(c["ops"], c["length"]): c["mean"] for c in state["cells"]}
    assert means == {(2, 2048): 1.0, (8, 2048): 1.0, (2, 8192): 0.0, (8, 8192): 0.0}
    assert [row["mean"] for row in state["effective_length"]] == [2048, 2048]


def test_compare_pairs_state_samples_by_id(runs: dict[str, Path]) -> None:
    comparison = compare_runs(runs["perfect"], runs["cliff"])
    assert comparison.overall.pairs == 24 and comparison.left_out_unpaired == 0
    assert (comparison.overall.worse, comparison.overall.better) == (12, 0)
    by_cell = {(c.task, c.length): (c.test.pairs, c.test.worse) for c in comparison.cells}
    assert by_cell == {("state:2", 2048): (6, 0), ("state:8", 2048): (6, 0),
                       ("state:2", 8192): (6, 6), ("state:8", 8192): (6, 6)}  # fmt: skip


@pytest.mark.parametrize("model", ["sim:pattern-matcher", "sim:odd-name"])
def test_a_shortcut_reader_does_not_track_the_list(model: str, tmp_path: Path) -> None:
    """Only a reader that reads follows every line; a shortcut answers from what it grabbed."""
    args = ["run", "state", "--model", model, "--tokenizer", "char", "--lengths", "4k", "--ops", "8"]
    assert main([*args, "--samples", "6", "--run-dir", str(tmp_path / "run")]) == 0
    state = summary(tmp_path / "run")["state"]
    assert isinstance(state, dict)
    assert state["cells"][0]["n"] == 6 and state["cells"][0]["mean"] <= 1 / 3
