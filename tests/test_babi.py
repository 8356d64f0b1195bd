"""Reasoning in a haystack (``fathom run babi``): the stories' answers worked by hand, the generator's
stories against their replay with and without distractors, the prompts' lengths, the refusals, the
grading (BABILong's rule), and what simulated readers score."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from family_checks import refused_run, wilson_low

from fathom.analysis.babi import distance_bin
from fathom.cli import main
from fathom.prompts import babi_story as lang
from fathom.prompts.tokenizers import load_tokenizer
from fathom.records import Cell
from fathom.report.compare import compare_runs
from fathom.spec import RunSpec
from fathom.tasks import babi_draw as draw
from fathom.tasks.babi import BabiTask, grade
from fathom.tasks.base import Sample

TOKENIZERS = {name: load_tokenizer(name) for name in ("char", "cl100k_base")}


def task(tokenizer: str, lengths: tuple[int, ...], name: str = "babi", seed: int = 0) -> BabiTask:
    spec = RunSpec(name, "sim:perfect", tokenizer, lengths, (), 3, seed=seed, template="none")
    return BabiTask(spec, TOKENIZERS[tokenizer])


def sample(tokenizer: str, length: int, qa: str, index: int = 0, seed: int = 0) -> Sample:
    return task(tokenizer, (length,), f"babi:{qa}", seed).prepare(Cell(f"babi:{qa}", length, None, index))


def story_lines(built: Sample, tokenizer: str) -> list[str]:
    """The story's sentences in the sample's context, in the order they stand there."""
    prompt = built.prompt
    ids = prompt.ids[prompt.head_tokens : prompt.head_tokens + prompt.context_tokens].tolist()
    return [line.strip() for line in TOKENIZERS[tokenizer].decode(ids).split("\n") if lang.parse(line)]


STORIES = [
    # qa1: her last move counts.
    (
        "qa1",
        ["Ida went to Brenmoor.", "Hugo moved to Kelport.", "Ida journeyed to Dalmere."],
        ("Ida",),
        "Dalmere",
    ),
    # qa2: he took it in Kelport, then carried it to Dalmere.
    (
        "qa2",
        [
            "Hugo went to Kelport.",
            "Hugo picked up the lantern.",
            "Ida went to Brenmoor.",
            "Hugo moved to Dalmere.",
        ],
        ("lantern",),
        "Dalmere",
    ),
    # qa2: dropped in Kelport, it stays there when he leaves.
    (
        "qa2",
        ["Hugo went to Kelport.", "Hugo took the bell.", "Hugo dropped the bell.", "Hugo went to Dalmere."],
        ("bell",),
        "Kelport",
    ),
    # qa3: Kelport (taken), Brenmoor, Dalmere: before Dalmere it was in Brenmoor.
    (
        "qa3",
        [
            "Hugo went to Kelport.",
            "Hugo got the drum.",
            "Hugo went to Brenmoor.",
            "Ida went to Dalmere.",
            "Hugo travelled to Dalmere.",
            "Hugo went to Kelport.",
        ],
        ("drum", "Dalmere"),
        "Brenmoor",
    ),
    # qa3: handed on, it travels with its new holder.
    (
        "qa3",
        [
            "Hugo went to Kelport.",
            "Ida went to Brenmoor.",
            "Hugo took the drum.",
            "Hugo gave the drum to Ida.",
        ],
        ("drum", "Brenmoor"),
        "Kelport",
    ),
    # qa4: said the other way round: Dalmere is south of Brenmoor, so Brenmoor is north of Dalmere.
    (
        "qa4",
        ["Kelport is west of Dalmere.", "Dalmere is south of Brenmoor."],
        ("north", "Dalmere"),
        "Brenmoor",
    ),
    # qa5: the drum went Hugo -> Ida -> Lena.
    (
        "qa5",
        ["Hugo took the drum.", "Hugo gave the drum to Ida.", "Ida handed the drum to Lena."],
        ("drum", "Ida"),
        "Hugo",
    ),
]


@pytest.mark.parametrize(("qa", "lines", "args", "answer"), STORIES)
def test_a_fixed_story_has_the_answer_worked_by_hand(
    qa: str, lines: list[str], args: tuple[str, ...], answer: str
) -> None:
    assert lang.replay(lines).answer(qa, args) == answer
    assert lang.asked(lang.question(qa, args)) == (qa, args)


def test_a_story_that_does_not_say_has_no_answer() -> None:
    assert lang.replay(["Ida went to Brenmoor."]).answer("qa1", ("Hugo",)) is None
    assert lang.replay(["Ida went to Brenmoor."]).answer("qa5", ("drum", "Ida")) is None
    assert lang.parse("Ida went to the Brenmoor, she said.") is None


@pytest.mark.parametrize("qa", draw.TASKS)
def test_distractors_never_change_the_answer(qa: str) -> None:
    for seed in range(200):
        story = draw.draw_story(random.Random(seed), qa)
        assert len(story.lines) == draw.SIZES[qa] and all(lang.parse(line) for line in story.lines)
        bare = draw.draw_story(random.Random(seed), qa, distractors=False)
        assert draw.DISTRACTOR not in bare.roles and set(bare.lines) < set(story.lines)
        # Replayed whole, without its distractors, or with its supporting facts alone: one answer.
        support = [story.lines[i] for i in story.support]
        answers = {lang.replay(lines).answer(qa, story.args) for lines in (story.lines, bare.lines, support)}
        assert answers == {story.answer}
        assert story.answer in story.labels
        # A distractor names nothing the question asks about (others may pass through qa3's place).
        asked = {a for a in (story.args[:1] if qa == "qa3" else story.args) if a not in lang.DIRECTIONS}
        for line, role in zip(story.lines, story.roles, strict=True):
            if role == draw.DISTRACTOR:
                assert not set(line.rstrip(".").split()) & asked


def test_supporting_facts_are_one_two_and_three() -> None:
    counts = {qa: len(draw.draw_story(random.Random(1), qa).support) for qa in draw.TASKS}
    assert counts == {"qa1": 1, "qa2": 2, "qa3": 3, "qa4": 1, "qa5": 1}


def test_names_places_and_objects_are_fathoms_own() -> None:
    from fathom.prompts.spaces import EVAL

    assert set(draw.OBJECTS) <= set(EVAL.nouns) and set(draw.PEOPLE) == set(EVAL.names.given)
    assert len(draw.PLACES) == 48 and not {p.lower() for p in draw.PLACES} & set(draw.OBJECTS)


@pytest.mark.parametrize("tokenizer", sorted(TOKENIZERS))
@pytest.mark.parametrize("length", [2048, 8192])
@pytest.mark.parametrize("qa", draw.TASKS)
def test_every_prompt_is_its_length_with_its_story_in_order(tokenizer: str, length: int, qa: str) -> None:
    for index in range(2):
        built = sample(tokenizer, length, qa, index)
        assert len(built.prompt.ids) == length
        lines = story_lines(built, tokenizer)
        assert len(lines) == draw.SIZES[qa] == len(built.prompt.needles)
        asked = lang.asked(built.question)
        assert asked is not None and asked[0] == qa
        assert built.answers == (lang.replay(lines).answer(qa, asked[1]),)


@pytest.mark.parametrize(("corpus", "template"), [("prose", "none"), ("code", "none"), ("prose", "chatml")])
def test_a_prompt_read_back_as_text_is_still_its_length(corpus: str, template: str) -> None:
    """Under a chat template too, and in a haystack of lines (each sentence starts a line there)."""
    tokenizer = TOKENIZERS["cl100k_base"]
    spec = RunSpec("babi", "sim:perfect", "cl100k_base", (4096,), (), 3, corpus=corpus, template=template)
    made = BabiTask(spec, tokenizer)
    for qa in draw.TASKS:
        built = made.prepare(Cell(f"babi:{qa}", 4096, None, 0))
        assert len(built.prompt.ids) == 4096
        text = tokenizer.decode(built.prompt.ids.tolist())
        assert len(tokenizer.encode_with_specials(text)) == 4096  # the template's own tokens as specials
        assert len(story_lines(built, "cl100k_base")) == draw.SIZES[qa]


def test_the_same_seed_builds_the_same_prompts_and_another_seed_others() -> None:
    first, again, other = (sample("cl100k_base", 2048, "qa3", 1, seed) for seed in (7, 7, 8))
    assert first.prompt.sha256 == again.prompt.sha256 and first.answers == again.answers
    assert first.prompt.sha256 != other.prompt.sha256


@pytest.mark.parametrize(
    ("output", "right"),
    [
        ("Dalmere", True),
        ("dalmere.", True),  # case aside, as BABILong
        ("Ida is in Dalmere. Before that she was in Kelport.", True),  # the first sentence alone
        ("Kelport", False),
        ("Dalmere or Kelport", False),  # two labels: no answer
        ("Dalmereford", False),  # whole words only
        ("Brenmoor, no, Dalmere", False),
        ("I do not know. Dalmere", False),  # not in the first sentence
        ("Answer: Dalmere", True),
    ],
)
def test_grading_is_babilongs_first_sentence_one_label_rule(output: str, right: bool) -> None:
    labels = ("Dalmere", "Kelport", "Brenmoor")
    graded = grade(output, ["Dalmere"], labels=labels, question="Where is Ida?")
    assert graded.value == float(right)


def test_a_label_the_question_names_is_not_counted() -> None:
    # "What is north of Kelport?": naming Kelport beside the answer is no second answer.
    graded = grade(
        "Brenmoor is north of Kelport", ["Brenmoor"], ("Brenmoor", "Kelport"), "What is north of Kelport?"
    )
    assert graded.value == 1.0


def test_distance_bins_by_hand() -> None:
    assert [distance_bin(d) for d in (0, 1, 1023, 1024, 5000, 70000)] == [0, 1, 1, 1024, 4096, 65536]


def test_a_story_too_long_is_refused_with_how_many_fit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    made = task("char", (4096,))
    fit = made.fitting(512)
    assert 0 < fit < draw.SIZES["qa3"]
    # The shortest length that holds qa3's story builds it.
    enough = made.overhead + draw.SIZES["qa3"] * made.line_tokens
    assert (
        task("char", (enough,), "babi:qa3").prepare(Cell("babi:qa3", enough, None, 0)).prompt.ids.size
        == enough
    )
    args = ["run", "babi", "--model", "sim:perfect", "--tokenizer", "char", "--lengths", "512,8k"]
    err = refused_run(args, tmp_path / "runs", capsys)
    assert f"story of {draw.SIZES['qa3']} sentences does not fit" in err and f"at most {fit} sentences" in err


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["run", "babi:qa9"], "unknown task 'babi:qa9' (did you mean 'babi:qa5'?)"),
        (["run", "babi", "--ops", "4"], "--ops goes with state runs"),
        (["run", "babi", "--depths", "3"], "'babi' draws needle depths per sample"),
    ],
)
def test_bad_input_is_one_line_and_no_folder(
    args: list[str], says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    err = refused_run([*args, "--model", "sim:perfect", "--lengths", "4k"], tmp_path / "runs", capsys)
    assert says in err, err


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """sim:perfect and sim:cliff (a sure reader inside 4k, none past it) on one small sweep."""
    root = tmp_path_factory.mktemp("babi")
    folders = {}
    for name, model in (("perfect", "sim:perfect"), ("cliff", "sim:cliff?window=4096&accuracy=1&floor=0")):
        folders[name] = root / name
        args = ["run", "babi", "--model", model, "--tokenizer", "char", "--lengths", "2k,8k"]
        assert main([*args, "--samples", "5", "--run-dir", str(folders[name])]) == 0
    return folders


def summary(folder: Path) -> dict[str, object]:
    data: dict[str, object] = json.loads((folder / "summary.json").read_text())
    return data


def test_sim_perfect_scores_every_cell_and_its_section_has_wilson_intervals(
    runs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    babi = summary(runs["perfect"])["babi"]
    assert isinstance(babi, dict)
    cells = {(c["task"], c["length"]): c for c in babi["cells"]}
    assert sorted(cells) == [(f"babi:{qa}", n) for qa in draw.TASKS for n in (2048, 8192)]
    for cell in cells.values():
        assert (cell["n"], cell["mean"], cell["ci_high"]) == (5, 1.0, 1.0)
        assert cell["ci_low"] == pytest.approx(wilson_low(5, 5), abs=1e-5)
    assert babi["effective_length"] == [
        {"task": f"babi:{qa}", "mean": 8192, "lower_bound": None} for qa in draw.TASKS
    ]
    # One supporting fact is at distance 0; two or three, further apart; 10 samples a task in all.
    by_task: dict[str, dict[int, int]] = {}
    for row in babi["distances"]:
        by_task.setdefault(row["task"], {})[row["distance"]] = row["n"]
    assert {t: sum(bins.values()) for t, bins in by_task.items()} == {f"babi:{qa}": 10 for qa in draw.TASKS}
    assert all(list(by_task[f"babi:{qa}"]) == [0] for qa in ("qa1", "qa4", "qa5"))
    assert all(0 not in by_task[f"babi:{qa}"] for qa in ("qa2", "qa3"))
    report = (runs["perfect"] / "report.html").read_text()
    assert '<section id="babi">' in report and "effective length of babi:qa3" in report
    capsys.readouterr()
    assert main(["report", str(runs["perfect"])]) == 0
    shown = capsys.readouterr().out
    assert "score by tokens between the first and last supporting fact" in shown
    assert "effective length of babi:qa2 (score >= 0.85): 8k" in shown


def test_sim_cliff_drops_past_its_window(runs: dict[str, Path]) -> None:
    babi = summary(runs["cliff"])["babi"]
    assert isinstance(babi, dict)
    means = {(c["task"], c["length"]): c["mean"] for c in babi["cells"]}
    assert means == {(f"babi:{qa}", n): float(n == 2048) for qa in draw.TASKS for n in (2048, 8192)}


def test_compare_pairs_babi_samples_by_id(runs: dict[str, Path]) -> None:
    comparison = compare_runs(runs["perfect"], runs["cliff"])
    assert comparison.overall.pairs == 50 and comparison.left_out_unpaired == 0
    assert (comparison.overall.worse, comparison.overall.better) == (25, 0)
