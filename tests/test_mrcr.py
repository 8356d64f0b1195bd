"""Multi-round co-reference (``fathom run mrcr``): MRCR's grading worked by hand, the conversation
at exact lengths through several chat templates, its rounds found again, the output budget, the
refusals, the summary's numbers, and what simulated readers score on it."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from family_checks import refused_run
from http_faults import serving

from fathom.analysis.control import answered
from fathom.analysis.mrcr import mrcr_summary
from fathom.backends.base import Request
from fathom.backends.openai import OpenAIBackend
from fathom.cli import main
from fathom.errors import SpecError
from fathom.plan.check import check_run
from fathom.prompts import conversation as talk
from fathom.prompts.spaces import TRAIN
from fathom.prompts.tokenizers import load_tokenizer
from fathom.records import Cell, SampleRecord
from fathom.report.compare import compare_runs
from fathom.scoring import SCORERS
from fathom.spec import RunSpec
from fathom.tasks.base import Sample
from fathom.tasks.control import without_context
from fathom.tasks.mrcr import MARGIN, MrcrTask, topics_of

INTERVAL_RULE = (
    "The 95% interval is Wilson's where every score is 0 or 1 or there are fewer than 30 of them (of "
    "their mean, for fractional ones), else a percentile bootstrap's over them."
)

TOKENIZERS = {name: load_tokenizer(name) for name in ("char", "cl100k_base")}


def task(tokenizer: str, lengths: tuple[int, ...], repeats: tuple[int, ...], **options: Any) -> MrcrTask:
    options.setdefault("template", "none")
    spec = RunSpec("mrcr", "sim:perfect", tokenizer, lengths, (), 3, repeats=repeats, **options)
    return MrcrTask(spec, TOKENIZERS[tokenizer])


def sample(tokenizer: str, length: int, repeats: int, index: int = 0, **options: Any) -> Sample:
    return task(tokenizer, (length,), (repeats,), **options).prepare(
        Cell(f"mrcr:{repeats}", length, None, index)
    )


def grade(output: str, reference: str) -> float:
    return SCORERS["mrcr"].grade(output, (reference,)).value


@pytest.mark.parametrize(
    ("output", "score"),
    [
        ("ABCDEFGHIJabcd", 1.0),  # the prefix, then the piece itself
        ("ABCDEFGHIJabce", 0.75),  # 3 of 4 characters matched: 2 x 3 / (4 + 4)
        ("ABCDEFGHIJab", 4 / 6),  # "ab" matched: 2 x 2 / (2 + 4)
        ("ABCDEFGHIJ", 0.0),  # the prefix alone: nothing of the piece
        ("ABCDEFGHIJ abcd", 8 / 9),  # a space past the prefix is a character like any: 2 x 4 / (5 + 4)
        ("abcd", 0.0),  # no prefix: 0, however like the piece the rest is
        (" ABCDEFGHIJabcd", 0.0),  # as MRCR grades: the prefix opens the output as it stands
        ("abcdefghijabcd", 0.0),  # the prefix's case is its own
        ("ABCDEFGHIabcd", 0.0),  # nine of its ten characters are no prefix
    ],
)
def test_mrcr_grading_worked_by_hand(output: str, score: float) -> None:
    assert grade(output, "ABCDEFGHIJabcd") == pytest.approx(score)


def test_an_exact_reproduction_is_recorded_as_matched() -> None:
    assert SCORERS["mrcr"].grade("ABCDEFGHIJabcd", ("ABCDEFGHIJabcd",)).matched == ("ABCDEFGHIJabcd",)
    assert SCORERS["mrcr"].grade("ABCDEFGHIJabce", ("ABCDEFGHIJabcd",)).matched == ()


@pytest.mark.parametrize(
    ("number", "said"),
    [(1, "1st"), (2, "2nd"), (3, "3rd"), (4, "4th"), (11, "11th"), (12, "12th"), (13, "13th"), (21, "21st"),
     (22, "22nd"), (101, "101st"), (111, "111th"), (112, "112th")],
)  # fmt: skip
def test_ordinals(number: int, said: str) -> None:
    assert talk.ordinal(number) == said


def test_the_final_ask_reads_back_whatever_the_form() -> None:
    for form, plural in talk.FORMS:
        text = talk.question(3, 8, form, "Brelmoor", "Ab3dE6gH9j")
        assert f"the 3rd of the 8 {plural} about Brelmoor" in text
        assert talk.asked(text) == talk.Asked(3, 8, form, "Brelmoor", "Ab3dE6gH9j")
    alone = talk.question(1, 1, "short story", "Brelmoor", "Ab3dE6gH9j")
    assert "Reproduce the short story about Brelmoor," in alone
    assert talk.asked(alone) == talk.Asked(1, 1, "short story", "Brelmoor", "Ab3dE6gH9j")
    assert talk.asked("What is the magic number?") is None
    assert talk.ask("essay", "Brelmoor") == "Write an essay about Brelmoor."
    assert talk.ask("poem", "Brelmoor") == "Write a poem about Brelmoor."


@pytest.mark.parametrize(
    ("tokenizer", "template"),
    [("cl100k_base", "chatml"), ("cl100k_base", "llama3"), ("cl100k_base", "plain"), ("char", "none")],
)
@pytest.mark.parametrize("length", [4096, 8192])
def test_every_conversation_is_its_length_with_its_rounds_found_again(
    tokenizer: str, template: str, length: int
) -> None:
    made = task(tokenizer, (length,), (2, 4), template=template)
    for repeats in (2, 4):
        for index in range(3):
            drawn = made.prepare(Cell(f"mrcr:{repeats}", length, None, index))
            prompt, tok = drawn.prompt, TOKENIZERS[tokenizer]
            assert len(prompt.ids) == length == prompt.target_tokens
            assert len(prompt.needles) == repeats
            assert list(prompt.needles) == sorted(prompt.needles, key=lambda n: n.token_offset)
            # The chat messages are the rounds the ids hold, in order, each answer the needle's ids.
            assert drawn.chat is not None
            chat = drawn.chat()
            asks, answers = chat.turns[0::2], chat.turns[1::2]
            assert {role for role, _ in asks} == {"user"} and {role for role, _ in answers} == {"assistant"}
            assert chat.user == drawn.question and chat.prefill == ""
            asked = talk.asked(drawn.question)
            assert asked is not None and asked.repeats == repeats
            repeated = [
                a for (_, ask), (_, a) in zip(asks, answers, strict=True) if ask == drawn.query_keys[0]
            ]
            assert len(repeated) == repeats
            for needle, answer in zip(prompt.needles, repeated, strict=True):
                # Each repeat's answer but its last token, which is joined to the markup after it.
                ids = prompt.ids[needle.token_offset : needle.token_offset + needle.tokens]
                assert answer.startswith(tok.decode(ids.tolist())) and len(tok.decode(ids.tolist())) < len(
                    answer
                )
            # The text re-encodes to the length but for a token or two: the seams' ids are the text's.
            assert abs(len(tok.encode_with_specials(tok.decode(prompt.ids.tolist()))) - length) <= 2
            assert drawn.answers == (asked.prefix + repeated[asked.number - 1].strip(),)
            # A reader that knows no template finds every round again from the text alone.
            context = tok.decode(
                prompt.ids[prompt.head_tokens : prompt.head_tokens + prompt.context_tokens].tolist()
            )
            turns = talk.turns_in(context)
            assert [talk.ask(t.form, t.topic) for t in turns] == [ask for _, ask in asks]
            assert [t.answer for t in turns] == [answer.strip() for _, answer in answers]
            # Only the asked pair repeats it: every other ask is another form or another topic.
            assert sum(ask == drawn.query_keys[0] for _, ask in asks) == repeats


def test_the_rendered_conversation_is_the_template_s_own() -> None:
    """The ids are the template rendered over the messages, encoded: with chatml and the char
    tokenizer (no merges across a boundary), exactly."""
    drawn = sample("char", 4096, 4, template="chatml")
    assert drawn.chat is not None
    chat = drawn.chat()
    rendered = "".join(
        f"<|im_start|>{role}\n{content}<|im_end|>\n" for role, content in [*chat.turns, ("user", chat.user)]
    )
    assert TOKENIZERS["char"].decode(drawn.prompt.ids.tolist()) == rendered + "<|im_start|>assistant\n"


def test_the_control_is_the_final_ask_alone() -> None:
    drawn = sample("cl100k_base", 4096, 2, template="chatml")
    control = without_context(drawn, Cell("mrcr:2", 4096, None, 0, control=True))
    text = TOKENIZERS["cl100k_base"].decode(control.prompt.ids.tolist())
    assert text == f"<|im_start|>user\n{drawn.question}<|im_end|>\n<|im_start|>assistant\n"
    assert control.chat is None  # a chat backend is sent the final ask alone too


def test_the_output_budget_is_the_target_s_tokens_a_quarter_more_and_the_margin() -> None:
    drawn = sample("char", 4096, 2)
    assert drawn.max_new_tokens == -(-5 * len(drawn.answers[0]) // 4) + MARGIN  # char: a token a character
    given = task("char", (4096,), (2,), max_new_tokens=7).prepare(Cell("mrcr:2", 4096, None, 0))
    assert given.max_new_tokens == 7


def test_more_repeats_than_fit_are_refused_with_how_many_fit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fit = task("char", (2048,), (1,)).fitting(2048)
    assert fit >= 1
    sample("char", 2048, fit)  # the most that fit builds
    args = ["run", "mrcr", "--model", "sim:perfect", "--tokenizer", "char", "--lengths", "2k,8k"]
    err = refused_run([*args, "--repeats", f"1,{fit + 1}"], tmp_path / "runs", capsys)
    assert f"--repeats {fit + 1} does not fit" in err and f"at most {fit} repeats fit" in err


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["run", "mrc"], "unknown task 'mrc' (did you mean 'mrcr'?)"),
        (["run", "mrcr", "--repeats", "2,x"], "--repeats takes whole counts"),
        (["run", "mrcr", "--repeats", "0"], "at least 1"),
        (["run", "niah", "--repeats", "2"], "--repeats goes with mrcr runs"),
    ],
)
def test_bad_input_is_one_line_and_no_folder(
    args: list[str], says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    err = refused_run([*args, "--model", "sim:perfect", "--lengths", "4k"], tmp_path / "runs", capsys)
    assert says in err, err


def test_a_budget_past_the_backend_s_context_is_refused_before_any_sample() -> None:
    made = task("char", (2048,), (2,))
    # The longest is the sample asking the most new tokens: each sample's budget is its own answer's.
    budget = max(made.prepare(Cell("mrcr:2", 2048, None, i)).max_new_tokens for i in range(3))
    backend = SimpleNamespace(
        name="openai:stand-in", tokenizer=TOKENIZERS["char"], max_prompt_tokens=2048 + 10
    )
    with pytest.raises(SpecError) as refused:
        check_run(made.spec, made, backend)  # type: ignore[arg-type]
    assert "exceed the backend's context of 2058 tokens" in str(refused.value)
    assert f"2048 prompt tokens + {budget} new" in str(refused.value)


def record(sample: int, score: float, **fields: Any) -> SampleRecord:
    values: dict[str, Any] = dict(
        sample_id=f"mrcr:2|L4096|S{sample}", task="mrcr:2", length=4096, depth=None, sample=sample, seed=0,
        prompt_sha256="0" * 64, target_tokens=4096, actual_tokens=4096, needle_kind="first",
        needle_token_offsets=(), needle_depths=(), question="q", answers=("ABCDEFGHIJabcd",), output="",
        finish_reason="stop", score=score, matched=(), scoring="mrcr", latency_s=0.0, beyond_window=False,
        max_new_tokens=30,
    )  # fmt: skip
    values.update(fields)
    return SampleRecord(**values)


def test_the_summary_s_numbers_worked_by_hand() -> None:
    records = [
        record(0, 1.0, output="ABCDEFGHIJabcd"),
        record(1, 0.75, output="ABCDEFGHIJabce", needle_kind="last"),
        record(2, 0.0, output="abcd", needle_kind="last", finish_reason="length", max_new_tokens=4),
        record(3, 0.5, output="ABCDEFGHIJab", length=8192, sample_id="mrcr:2|L8192|S3"),
    ]
    summary = mrcr_summary(records, threshold=0.6)
    cells = {(c["repeats"], c["length"]): c for c in summary["cells"]}
    short, long = cells[(2, 4096)], cells[(2, 8192)]
    assert (short["n"], short["mean"]) == (3, pytest.approx(1.75 / 3))
    assert (short["prefixed"], short["exact"]) == (pytest.approx(2 / 3), pytest.approx(1 / 3))
    assert (short["truncated"], short["max_new_tokens"]) == (1, 30)
    assert (long["n"], long["mean"], long["prefixed"], long["exact"]) == (1, 0.5, 1.0, 0.0)
    assert summary["truncated"] == 1
    positions = {(p["position"], p["length"]): p["mean"] for p in summary["positions"]}
    assert positions == {("first", 4096): 1.0, ("last", 4096): 0.375, ("first", 8192): 0.5}
    # 0.583 >= 0.6 fails at the shortest length already: no effective length.
    assert summary["effective_length"] == [{"repeats": 2, "mean": None, "lower_bound": None}]
    assert mrcr_summary(records, threshold=0.5)["effective_length"][0]["mean"] == 8192


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Simulated readers on one small sweep: a sure reader, one that holds a single piece (the last
    it read), one that reads only the last 2048 tokens, a sure one through a chat endpoint, and one
    sure inside 4k that finds nothing past it."""
    root = tmp_path_factory.mktemp("mrcr")
    models = {
        "perfect": "sim:perfect",
        "one-fact": "sim:one-fact",
        "recent": "sim:recent?window=2048",
        "chat": "sim:perfect?input=chat",
        "cliff": "sim:cliff?window=4096&accuracy=1&floor=0",
    }
    folders = {}
    for name, model in models.items():
        folders[name] = root / name
        args = ["run", "mrcr", "--model", model, "--tokenizer", "cl100k_base", "--lengths", "2k,8k"]
        assert main([*args, "--repeats", "2,4", "--samples", "6", "--run-dir", str(folders[name])]) == 0
    return folders


def section(folder: Path) -> dict[str, Any]:
    mrcr: dict[str, Any] = json.loads((folder / "summary.json").read_text())["mrcr"]
    return mrcr


def test_sim_perfect_reproduces_every_piece(runs: dict[str, Path]) -> None:
    for name in ("perfect", "chat"):
        mrcr = section(runs[name])
        assert sorted((c["repeats"], c["length"]) for c in mrcr["cells"]) == [
            (2, 2048),
            (2, 8192),
            (4, 2048),
            (4, 8192),
        ]
        for cell in mrcr["cells"]:
            assert (cell["n"], cell["mean"], cell["prefixed"], cell["exact"], cell["truncated"]) == (
                6,
                1.0,
                1.0,
                1.0,
                0,
            )
        assert [row["mean"] for row in mrcr["effective_length"]] == [8192, 8192]
    page = (runs["perfect"] / "report.html").read_text()
    assert '<section id="mrcr">' in page
    assert INTERVAL_RULE in page  # score_interval's rule, not "a bootstrap's over the samples"


def test_sim_one_fact_is_right_only_when_the_last_repeat_is_asked_for(runs: dict[str, Path]) -> None:
    mrcr = section(runs["one-fact"])
    by_position: dict[str, list[float]] = {}
    for row in mrcr["positions"]:
        by_position.setdefault(row["position"], []).append(row["mean"])
    assert set(by_position) == {"first", "middle", "last"}
    assert by_position["last"] == [1.0, 1.0]
    assert max(by_position["first"] + by_position["middle"]) < 0.2  # another piece: little in common
    assert all(cell["prefixed"] == 1.0 for cell in mrcr["cells"])  # it keeps the prefix all the same


def test_sim_recent_loses_what_lies_before_its_window(runs: dict[str, Path]) -> None:
    means = {(c["repeats"], c["length"]): c["mean"] for c in section(runs["recent"])["cells"]}
    assert means[(2, 2048)] == 1.0 and means[(4, 2048)] == 1.0
    assert means[(2, 8192)] < 0.5 and means[(4, 8192)] < 0.5


def test_sim_cliff_finds_no_piece_past_its_window_and_so_no_prefix(runs: dict[str, Path]) -> None:
    cells = {(c["repeats"], c["length"]): c for c in section(runs["cliff"])["cells"]}
    assert {key: cell["mean"] for key, cell in cells.items()} == {
        (2, 2048): 1.0, (4, 2048): 1.0, (2, 8192): 0.0, (4, 8192): 0.0
    }  # fmt: skip
    assert cells[(2, 8192)]["prefixed"] == 0.0  # it says it found nothing: no prefix, a 0 whatever the rest


def test_compare_pairs_mrcr_samples_by_id_and_tests_each_cell(runs: dict[str, Path]) -> None:
    comparison = compare_runs(runs["perfect"], runs["recent"])
    assert comparison.overall.pairs == 24 and comparison.left_out_unpaired == 0
    assert comparison.overall.better == 0
    by_cell = {(c.task, c.length): (c.test.pairs, c.test.worse) for c in comparison.cells}
    assert by_cell[("mrcr:2", 2048)] == (6, 0) and by_cell[("mrcr:4", 2048)] == (6, 0)
    assert by_cell[("mrcr:2", 8192)][1] >= 4 and by_cell[("mrcr:4", 8192)][1] >= 4


def test_training_and_evaluation_topics_never_share_a_place() -> None:
    for index in range(20):
        _, evaluation = topics_of(0, "mrcr:4", 4096, index)
        _, training = topics_of(0, "mrcr:4", 4096, index, TRAIN)
        assert len(set(evaluation)) == len(set(training)) == 4
        assert all(topic[0] in "CJY" for topic in training) and not any(t[0] in "CJY" for t in evaluation)


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("exported") / "mrcr.jsonl"
    args = ["--tokenizer", "cl100k_base", "--lengths", "2k,8k", "--repeats", "2,4", "--count", "8"]
    assert main(["export", "mrcr", *args, "--out", str(out)]) == 0
    return out


def test_an_mrcr_export_is_a_conversation_ending_in_the_piece_asked_for(exported: Path) -> None:
    lines = [json.loads(line) for line in exported.read_text(encoding="utf-8").splitlines()]
    assert len(lines) == 8 and {line["meta"]["task"] for line in lines} == {"mrcr:2", "mrcr:4"}
    for line in lines:
        messages, meta = line["messages"], line["meta"]
        roles = [m["role"] for m in messages]
        assert roles == ["user", "assistant"] * (len(roles) // 2)
        asked = talk.asked(messages[-2]["content"])
        assert asked is not None and asked.topic[0] in "CJY"
        assert messages[-1]["content"] == meta["answers"][0] and meta["answers"][0].startswith(asked.prefix)
        repeated = [a["content"] for u, a in zip(messages[0:-2:2], messages[1:-2:2], strict=True)
                    if u["content"] == talk.ask(asked.form, asked.topic)]  # fmt: skip
        assert len(repeated) == asked.repeats and meta["length"] in (2048, 8192)
        assert asked.prefix + repeated[asked.number - 1].strip() == meta["answers"][0]


def test_an_mrcr_export_shares_nothing_with_an_evaluation_run_but_what_is_planted(
    exported: Path, runs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    assert main(["export-check", str(exported), str(runs["perfect"])]) == 0
    assert capsys.readouterr().out.startswith("no overlap: 8 examples")
    # An evaluation conversation's topic, read off one of its questions by the test itself.
    record = json.loads((runs["perfect"] / "samples.jsonl").read_text().splitlines()[-1])
    topic = re.search(r"about (\w+),", record["question"])
    assert topic is not None
    lines = exported.read_text(encoding="utf-8").splitlines()
    edited = json.loads(lines[2])
    edited["messages"][0]["content"] = f"Write a poem about {topic.group(1)}."
    lines[2] = json.dumps(edited, ensure_ascii=False)
    leaky = tmp_path / "leaky.jsonl"
    leaky.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert main(["export-check", str(leaky), str(runs["perfect"])]) == 1
    out = capsys.readouterr().out
    assert out.startswith("1 overlaps:") and f"name '{topic.group(1)}'" in out and "line 3 (user)" in out


def test_a_chat_endpoint_is_sent_the_rounds_as_messages_before_the_final_ask() -> None:
    drawn = sample("cl100k_base", 4096, 2, template="chatml")
    assert drawn.chat is not None
    chat = drawn.chat()
    with serving() as server:
        backend = OpenAIBackend(f"m@{server.url}?endpoint=chat", "cl100k_base")
        body = backend._body(Request("s1", drawn.prompt.ids, 8, chat=chat))
    sent = [(m["role"], m["content"]) for m in body["messages"]]
    assert sent == [*chat.turns, ("user", drawn.question)]


@pytest.mark.parametrize("template", ["chatml", "llama3", "plain", "none"])
def test_a_template_marking_rounds_alike_is_taken_and_one_that_differs_is_refused(
    template: str, tmp_path: Path
) -> None:
    task("cl100k_base", (4096,), (2,), template=template).frame  # noqa: B018 (found without error)
    numbered = tmp_path / "numbered.jinja"  # each message marked with its index: no round repeats
    numbered.write_text("{% for m in messages %}[{{ loop.index }}] {{ m['content'] }}\n{% endfor %}")
    with pytest.raises(SpecError, match="marks a conversation's rounds differently from round to round"):
        task("cl100k_base", (4096,), (2,), template=str(numbered))


def test_compare_sets_mrcr_along_its_repeats_with_its_prefixed_and_exact_answers(
    runs: dict[str, Path],
) -> None:
    family = compare_runs(runs["perfect"], runs["cliff"]).to_json()["family"]
    assert family["axis"] == "repeats"
    by_value = {row["repeats"]: row for row in family["rows"]}
    assert sorted(by_value) == [2, 4]
    for row in by_value.values():
        # Past 4k the cliff reader finds nothing: half of each count's 12 pairs lose the prefix and the piece.
        assert (
            row["measures"]["prefixed"]["base_mean"] == 1.0 and row["measures"]["prefixed"]["new_mean"] == 0.5
        )
        assert row["measures"]["exact"]["new_mean"] == 0.5


def test_a_control_answered_the_ask_only_when_nearer_the_piece_than_chance() -> None:
    # A control that copies the prefix from its question and writes anything earns a ratio that
    # unrelated text earns too; only one over 0.5 knew the piece without its chat. A method with no
    # chance level of its own (contains) counts any credit, as before.
    chance, known = record(0, 0.43, control=True), record(1, 0.51, control=True)
    exactly = record(2, 0.5, control=True)  # the line itself is chance's side
    found = record(3, 0.01, control=True, scoring="contains")
    assert answered([chance, known, exactly, found]) == [known, found]
