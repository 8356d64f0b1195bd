"""Thinking models: reasoning kept apart from the answer (issue #35 item 1). The splitter on text with
and without a think block, unclosed, with other tags; a server's reasoning fields; Anthropic's thinking
blocks; the records, their schema and the summary; the grader, the control and the judge on the
answer alone; sim:thinker's every case; and each refusal of a thinking budget. Every number is counted
by hand (the char tokenizer: one token a character)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from http_faults import KEY, FaultHandler, FaultServer, request, serving
from messages_api import keyed_messages_serving

from fathom.analysis.failures import failure_kind
from fathom.backends import jsonhttp, openai_replies
from fathom.backends.anthropic import AnthropicBackend
from fathom.backends.base import Request
from fathom.backends.openai import OpenAIBackend
from fathom.backends.reasoning import (
    THINK_TAGS,
    Split,
    reasoned,
    split_completion,
    split_reasoning,
    tags_setting,
)
from fathom.backends.settings import parse_settings
from fathom.backends.sim import SimulatedBackend
from fathom.cli import main
from fathom.errors import SpecError
from fathom.judge import runner as judge_runner
from fathom.judgement import answer_sha256
from fathom.plan.prompts import sweep_prompts
from fathom.prompts.judging import judge_prompt
from fathom.prompts.tokenizers import load_tokenizer
from fathom.records import THINKING, Completion, SampleRecord, record_from_json
from fathom.registry import check_backend, create_task
from fathom.report.files import read_summary
from fathom.run.store import RunFolder
from fathom.spec import RunSpec

CHAR = load_tokenizer("char")
FIXTURES = Path(__file__).parent / "fixtures"


# The splitter.


@pytest.mark.parametrize(
    ("text", "split"),
    [
        ("<think>Looking for it.</think> It is 7.", Split("It is 7.", "Looking for it.")),
        ("\n <think>\nLooking for it.\n</think>\n\nIt is 7.", Split("It is 7.", "Looking for it.")),
        # The template opened the block (DeepSeek-R1's and Qwen3's end the prompt with <think>\n).
        ("Looking for it.</think>It is 7.", Split("It is 7.", "Looking for it.")),
        ("<think>Looking for it. It is 7", Split("", "Looking for it. It is 7", unclosed=True)),
        ("<think></think>It is 7.", Split("It is 7.", "")),
        # No block at the start: the answer, whole, tags and all.
        ("It is 7. <think>no</think>", Split("It is 7. <think>no</think>", None)),
        ("It is 7.", Split("It is 7.", None)),
        ("", Split("", None)),
    ],
)
def test_a_think_block_at_the_start_is_the_reasoning(text: str, split: Split) -> None:
    assert split_reasoning(text) == split


def test_other_tags_are_split_and_off_splits_nothing() -> None:
    tags = ("[R]", "[/R]")
    assert split_reasoning("[R]hmm[/R] 7", tags) == Split("7", "hmm")
    assert split_reasoning("<think>hmm</think> 7", tags) == Split("<think>hmm</think> 7", None)
    assert split_reasoning("[R]hmm", tags) == Split("", "hmm", unclosed=True)
    assert split_reasoning("<think>hmm</think> 7", None) == Split("<think>hmm</think> 7", None)


@pytest.mark.parametrize(
    ("given", "tags"),
    [("off", None), ("<r>,</r>", ("<r>", "</r>")), (" [R] , [/R] ", ("[R]", "[/R]"))],
)
def test_think_tags_are_read_as_a_backend_setting(given: str, tags: tuple[str, str] | None) -> None:
    assert parse_settings("hf", {"think_tags": THINK_TAGS}, {"think_tags": given}) == {"think_tags": tags}
    assert parse_settings("hf", {"think_tags": THINK_TAGS}, {}) == {"think_tags": ("<think>", "</think>")}
    # Named in the identity only where not the default, so that earlier runs keep theirs.
    assert tags_setting(("<think>", "</think>")) == {}
    assert tags_setting(tags) == {"think_tags": "off" if tags is None else list(tags)}


@pytest.mark.parametrize("given", ["<think>", "<t>,<t>", ",</t>", "<t>,", "a,b,c", ""])
def test_think_tags_that_are_no_pair_are_refused(given: str) -> None:
    with pytest.raises(SpecError, match=r"hf setting 'think_tags' must be off, or the opening and closing"):
        parse_settings("hf", {"think_tags": THINK_TAGS}, {"think_tags": given})


def completion(text: str, finish: str = "stop") -> Completion:
    return Completion(text, 100, 40, finish, 0.5)


def test_a_completion_keeps_its_reasoning_and_its_tokens_apart() -> None:
    split = split_completion(completion("<think>Looking for it.</think> It is 7."), CHAR)
    assert (split.text, split.reasoning, split.reasoning_tokens) == ("It is 7.", "Looking for it.", 15)
    assert split.finish_reason == "stop" and split.completion_tokens == 40  # the model's, all of them
    cut = split_completion(completion("<think>Looking for", "length"), CHAR)
    assert (cut.text, cut.reasoning, cut.reasoning_tokens, cut.finish_reason) == (
        "",
        "Looking for",
        11,
        THINKING,
    )
    plain = completion("It is 7.")
    assert split_completion(plain, CHAR) is plain  # no block: nothing read, None kept
    failed = Completion("", 100, 0, "error", 0.5, error="backend_error: x")
    assert split_completion(failed, CHAR) is failed


def test_reasoning_is_scrubbed_of_the_key_and_bounded() -> None:
    split = split_completion(completion(f"<think>key {KEY} seen</think>7"), CHAR, secret=KEY)
    assert split.reasoning == "key [API key removed] seen"
    long = split_completion(completion("<think>" + "x" * 20000 + "</think>7"), CHAR)
    assert long.reasoning is not None and len(long.reasoning) == 16384 and long.reasoning.endswith("…")
    assert long.reasoning_tokens == 20000  # counted whole, kept cut


# A server's reasoning fields.


@pytest.mark.parametrize("field", ["reasoning", "reasoning_content"])
def test_a_servers_reasoning_field_is_read_beside_the_content(field: str) -> None:
    message = {"role": "assistant", "content": " It is 7.", field: "Looking for it."}
    reply = {"choices": [{"message": message, "finish_reason": "stop"}], "usage": {}}
    text, finish, _, _, reasoning = openai_replies.read_answer(reply, chat=True)
    assert (text, finish, reasoning) == (" It is 7.", "stop", "Looking for it.")
    legacy = {"choices": [{"text": " It is 7.", field: "Looking.", "finish_reason": "stop"}]}
    assert openai_replies.read_answer(legacy, chat=False)[4] == "Looking."


@pytest.mark.parametrize("value", [None, "", 7, ["x"]])
def test_a_reasoning_field_that_is_no_text_is_none(value: object) -> None:
    message = {"content": "7", "reasoning": value, "reasoning_content": value}
    assert openai_replies.read_answer({"choices": [{"message": message}]}, chat=True)[4] is None


def test_a_servers_reasoning_count_is_taken_where_it_gives_one() -> None:
    assert openai_replies.reasoning_count({"completion_tokens_details": {"reasoning_tokens": 64}}) == 64
    assert openai_replies.reasoning_count({"completion_tokens_details": {"reasoning_tokens": 0}}) == 0
    assert openai_replies.reasoning_count({"completion_tokens_details": {"reasoning_tokens": -1}}) is None
    assert openai_replies.reasoning_count({"completion_tokens_details": None}) is None
    assert openai_replies.reasoning_count({}) is None


def test_a_servers_reasoning_wins_over_tags_and_a_cut_with_no_content_is_still_thinking() -> None:
    given = reasoned(completion("<think>x</think>7"), "Looking for it.", CHAR)
    assert (given.text, given.reasoning, given.reasoning_tokens) == (
        "<think>x</think>7",
        "Looking for it.",
        15,
    )
    counted = reasoned(completion("7"), "Looking for it.", CHAR, counted=9)
    assert counted.reasoning_tokens == 9  # the server's count, not the tokenizer's
    cut = reasoned(completion(" \n", "length"), "Looking for", CHAR)
    assert cut.finish_reason == THINKING and cut.reasoning_tokens == 11
    answered_cut = reasoned(completion("It is", "length"), "Looking", CHAR)
    assert answered_cut.finish_reason == "length"  # an answer begun and cut: not still thinking
    assert reasoned(completion("<think>x</think>7"), None, CHAR).text == "7"  # none given: the tags


class ReasoningServer(FaultServer):
    """A chat server that answers with a reasoning field beside the content, as vLLM's reasoning
    parsers and llama.cpp's server do."""

    def __init__(self) -> None:
        super().__init__()
        self.RequestHandlerClass = ReasoningHandler
        self.message: dict[str, Any] = {}
        self.finish = "stop"


class ReasoningHandler(FaultHandler):
    server: ReasoningServer

    def do_POST(self) -> None:
        self.server.bodies.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
        usage = {"prompt_tokens": 12, "completion_tokens": 30}
        choice = {
            "message": {"role": "assistant", **self.server.message},
            "finish_reason": self.server.finish,
        }
        self._send(200, {"choices": [choice], "usage": usage})


@pytest.fixture
def reasoning_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[ReasoningServer]:
    monkeypatch.setattr(jsonhttp, "BACKOFF_BASE", 0.001)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    with serving(ReasoningServer) as server:
        yield server  # type: ignore[misc]


def test_an_openai_chat_reply_with_reasoning_content_is_answered_by_its_content(
    reasoning_server: ReasoningServer,
) -> None:
    backend = OpenAIBackend(f"m@{reasoning_server.url}?endpoint=chat&retries=1", "char")
    reasoning_server.message = {"content": " It is 7.", "reasoning_content": "Looking for it."}
    (answered,) = backend.generate([request()])
    assert (answered.text, answered.reasoning, answered.reasoning_tokens) == (
        " It is 7.",
        "Looking for it.",
        15,
    )
    reasoning_server.message, reasoning_server.finish = {"content": None, "reasoning": "Looking"}, "length"
    (cut,) = backend.generate([request()])
    assert (cut.text, cut.finish_reason, cut.reasoning_tokens) == ("", THINKING, 7)
    # A budget is the larger max_tokens: the request's max_new_tokens (thinking's, then the answer's).
    budgeted = Request("s2", np.zeros(12, dtype=np.int32), 8 + 64, chat=request().chat)
    backend.generate([budgeted])
    assert reasoning_server.bodies[-1]["max_tokens"] == 72
    assert backend.take_thinking(64) is None


def test_an_openai_reply_with_tags_in_its_content_is_split_unless_told_not_to(
    reasoning_server: ReasoningServer,
) -> None:
    reasoning_server.message = {"content": "<think>Looking for it.</think>It is 7."}
    (split,) = OpenAIBackend(f"m@{reasoning_server.url}?endpoint=chat", "char").generate([request()])
    assert (split.text, split.reasoning_tokens) == ("It is 7.", 15)
    off = OpenAIBackend(f"m@{reasoning_server.url}?endpoint=chat&think_tags=off", "char")
    (whole,) = off.generate([request()])
    assert (whole.text, whole.reasoning_tokens) == ("<think>Looking for it.</think>It is 7.", None)
    assert off.settings()["think_tags"] == "off"


# Anthropic's thinking blocks (the fake Messages API puts one before the text when thinking is asked).


@pytest.fixture
def messages(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    pytest.importorskip("anthropic")  # the extra; CI installs it
    with keyed_messages_serving(monkeypatch) as server:
        yield server


def test_anthropic_thinking_blocks_are_the_reasoning_and_a_runs_budget_is_budget_tokens(
    messages: Any,
) -> None:
    backend = AnthropicBackend(f"claude-test@{messages.root}?max_output=4096", "cl100k_base")
    assert backend.take_thinking(1024) is None
    asked = Request("s1", np.zeros(12, dtype=np.int32), 1024 + 8, chat=request().chat)
    (answered,) = backend.generate([asked])
    assert answered.text == " One of the special magic numbers for a-b is: 1234567."
    # "Let me look for the number. It is 9999999, no: keep looking.": cl100k's Let, me, look, for, the,
    # number, ., It, is, " ", 999, 999, 9, ",", no, ":", keep, looking, "." are 19 tokens.
    assert (answered.reasoning, answered.reasoning_tokens) == (
        "Let me look for the number. It is 9999999, no: keep looking.",
        19,
    )
    (body,) = messages.bodies
    assert body["max_tokens"] == 1032 and body["thinking"] == {"type": "enabled", "budget_tokens": 1024}
    # The model's default thinking (none asked): no block, no reasoning.
    (plain,) = AnthropicBackend(f"claude-test@{messages.root}", "cl100k_base").generate([request()])
    assert (plain.reasoning, plain.reasoning_tokens) == (None, None)


def test_a_runs_thinking_budget_reaches_anthropics_budget_tokens(messages: Any, tmp_path: Path) -> None:
    folder = tmp_path / "run"
    model = f"anthropic:claude-test@{messages.root}?max_output=4096"
    grid = ["--lengths", "1k", "--depths", "0.5", "--samples", "1", "--no-control", "--no-progress"]
    assert (
        main(["run", "niah", "--model", model, *grid, "--run-dir", str(folder), "--thinking-budget", "1024"])
        == 0
    )
    (body,) = messages.bodies
    # niah's answer budget (32) after the thinking budget: 1056 tokens asked, 1024 of them to think.
    assert body["max_tokens"] == 1056 and body["thinking"] == {"type": "enabled", "budget_tokens": 1024}
    (line,) = [json.loads(raw) for raw in (folder / "samples.jsonl").read_text().splitlines()]
    assert (line["max_new_tokens"], line["reasoning_tokens"], line["score"]) == (32, 19, 1.0)


@pytest.mark.parametrize(
    ("settings", "budget", "refusal"),
    [
        (
            "thinking=off",
            2048,
            "the anthropic setting thinking=off turns thinking off, so no thinking budget is honoured",
        ),
        ("thinking=2048", 1024, "the anthropic setting thinking=2048 and a thinking budget of 1024 disagree"),
        ("thinking=default", 1023, "Anthropic's least thinking budget is 1024 tokens, not 1023"),
        ("max_output=2048", 2048, "a thinking budget of 2048 leaves no answer room below max_output (2048)"),
        ("max_output=2048", 2047, None),
        ("thinking=2048", 2048, None),
    ],
)
def test_anthropic_refuses_a_budget_its_settings_or_the_api_cannot_take(
    messages: Any, settings: str, budget: int, refusal: str | None
) -> None:
    backend = AnthropicBackend(f"claude-test@{messages.root}?{settings}", "cl100k_base")
    assert backend.take_thinking(budget) == refusal


# sim:thinker, through the CLI: every case, in the records and the summary.


def run_cli(folder: Path, *options: str) -> int:
    argv = ["run", "niah", "--lengths", "1k,2k", "--depths", "0.5", "--samples", "3", "--no-progress"]
    return main([*argv, "--run-dir", str(folder), *options])


def test_sim_thinker_answers_runs_out_after_thinking_and_while_thinking(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    assert run_cli(folder, "--model", "sim:thinker", "--thinking-budget", "120", "--keep-reasoning") == 0
    records = {r.sample_id: r for r in RunFolder(folder).latest() if isinstance(r, SampleRecord)}
    seen = {
        sample_id: (r.finish_reason, r.reasoning_tokens, r.score, failure_kind(r))
        for sample_id, r in records.items()
        if not sample_id.startswith("control")
    }
    # The fixture records-v13 is this run: its counts read off its lines.
    assert seen == {
        "niah|L1024|D0.5000|S0": ("stop", 129, 1.0, None),
        "niah|L1024|D0.5000|S1": (THINKING, 150, 0.0, "still_thinking"),
        "niah|L1024|D0.5000|S2": ("stop", 77, 1.0, None),
        "niah|L2048|D0.5000|S0": ("stop", 65, 1.0, None),
        "niah|L2048|D0.5000|S1": ("stop", 101, 1.0, None),
        "niah|L2048|D0.5000|S2": ("length", 137, 0.0, "wrong_answer"),  # its answer cut after thinking
    }
    # The answer budget is recorded as the sample's; the thinking budget is the spec's.
    assert {r.max_new_tokens for r in records.values()} == {32}
    assert RunFolder(folder).read_manifest().spec.thinking_budget == 120
    still = records["niah|L1024|D0.5000|S1"]
    # The reasoning held the needle's number: graded, it would have scored 1. Only the answer is.
    assert still.output == "" and still.reasoning is not None and still.answers[0] in still.reasoning
    summary = read_summary(folder)
    assert summary is not None and summary.thinking is not None
    # 1k: 129, 150, 77 -> 118.7, most 150, one still thinking; 2k: 65, 101, 137 -> 101.0; all: 659 / 6.
    assert summary.thinking == json.loads((FIXTURES / "records-v13" / "summary.json").read_text())["thinking"]
    cells = [
        (c["length"], c["tokens_mean"], c["tokens_max"], c["still_thinking"])
        for c in summary.thinking["cells"]
    ]
    assert cells == [(1024, 118.7, 150, 1), (2048, 101.0, 137, 0)]
    assert (summary.thinking["tokens_mean"], summary.thinking["still_thinking"]) == (109.8, 1)


def test_the_terminal_and_report_give_the_thinking_tokens(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "run"
    assert run_cli(folder, "--model", "sim:thinker", "--thinking-budget", "120") == 0
    out = capsys.readouterr().out
    line = (
        "thinking: 109.8 tokens a sample (most 150) over 6 of 6 samples; still thinking when the reply "
        "ended (no answer): 1"
    )
    assert line in out.splitlines()
    html = (folder / "report.html").read_text()
    assert '<section id="thinking">' in html and "<td>118.7</td><td>150</td><td>1</td>" in html
    # Without --keep-reasoning the text is not kept; its tokens are.
    lines = [json.loads(raw) for raw in (folder / "samples.jsonl").read_text().splitlines()]
    assert all("reasoning" not in line and line["reasoning_tokens"] > 0 for line in lines)


def test_a_run_of_a_model_that_does_not_think_has_no_thinking_section(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    assert run_cli(folder, "--model", "sim:perfect", "--tokenizer", "char") == 0
    summary = read_summary(folder)
    assert summary is not None and summary.thinking is None
    assert "thinking" not in json.loads((folder / "summary.json").read_text())
    assert all("reasoning_tokens" not in line for line in (folder / "samples.jsonl").read_text().splitlines())


def test_the_control_is_graded_on_its_answer_alone(tmp_path: Path) -> None:
    """A thinker with no budget spends the answer's 32 tokens thinking: every sample and control is
    still thinking, its reasoning (which names the needle it found) never graded."""
    folder = tmp_path / "run"
    assert run_cli(folder, "--model", "sim:thinker") == 0
    records = [r for r in RunFolder(folder).latest() if isinstance(r, SampleRecord)]
    assert len(records) == 12 and all(r.finish_reason == THINKING for r in records)
    assert all(r.output == "" and r.score == 0.0 for r in records)
    summary = read_summary(folder)
    assert summary is not None and summary.control is not None and summary.control["answered"] == 0


def test_a_judge_reads_the_answer_and_never_the_reasoning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shown: dict[str, str] = {}  # each judge's prompt, by the answer it was given

    def spied(rubric: Any, question: str, references: Any, answer: str) -> Any:
        prompt = judge_prompt(rubric, question, references, answer)
        shown[answer] = json.dumps(dataclasses.asdict(prompt))
        return prompt

    monkeypatch.setattr(judge_runner, "judge_prompt", spied)
    folder = tmp_path / "run"
    options = ("--model", "sim:thinker", "--thinking-budget", "120", "--keep-reasoning")
    assert run_cli(folder, *options, "--judge", "sim-judge:reference") == 0
    judged = [json.loads(line) for line in (folder / "judgements.jsonl").read_text().splitlines()]
    records = {r.sample_id: r for r in RunFolder(folder).latest() if isinstance(r, SampleRecord)}
    records = {sample_id: r for sample_id, r in records.items() if not r.control}  # the judged ones
    assert len(judged) == len(records) == 6
    for judgement in judged:
        record = records[judgement["sample_id"]]
        # The judged answer is the record's output (its hash), never the reasoning beside it.
        assert judgement["answer_sha256"] == answer_sha256(record.output)
        assert judgement["answer_sha256"] != answer_sha256(record.reasoning or "")
    # What the judge was shown: each record's answer, and no reasoning anywhere in its prompt (the
    # still-thinking sample's names the needle's number, and its answer is empty).
    assert set(shown) == {r.output for r in records.values()}
    reasonings = [r.reasoning for r in records.values() if r.reasoning]
    assert len(reasonings) == 6
    assert not any(reasoning in prompt for reasoning in reasonings for prompt in shown.values())


# Records: schema 13, and the records before it.


def test_a_schema_12_record_reads_with_no_reasoning_and_one_holding_it_is_refused() -> None:
    line = json.loads((FIXTURES / "records-v12" / "samples.jsonl").read_text().splitlines()[0])
    record = record_from_json(line)
    assert isinstance(record, SampleRecord)
    assert record.reasoning_tokens is None and record.reasoning is None
    with pytest.raises(
        TypeError,
        match="unknown field 'reasoning_tokens' \\(a field of schema 13, in a record of schema 12\\)",
    ):
        record_from_json({**line, "reasoning_tokens": 5})


def test_a_negative_reasoning_count_is_refused() -> None:
    line = json.loads((FIXTURES / "records-v13" / "samples.jsonl").read_text().splitlines()[0])
    assert record_from_json(line) == record_from_json(line)  # reads
    assert line["reasoning_tokens"] == 150
    with pytest.raises(ValueError, match="field 'reasoning_tokens' is -1"):
        record_from_json({**line, "reasoning_tokens": -1})


# Refusals: one line, exit 2, nothing written.


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            ("--model", "sim:cliff", "--thinking-budget", "64"),
            "sim:cliff does not think (sim:thinker does), so a thinking budget means nothing to it: drop "
            "--thinking-budget, or give one it can honour",
        ),
        (
            ("--model", "sim:thinker", "--thinking-budget", "0"),
            "--thinking-budget takes a count of tokens in 1..32M, got 0",
        ),
        (
            ("--model", "sim:thinker", "--thinking-budget", "33554433"),
            "--thinking-budget takes a count of tokens in 1..32M, got 33,554,433",
        ),
    ],
)
def test_a_budget_that_cannot_be_honoured_is_refused_before_any_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], options: tuple[str, ...], message: str
) -> None:
    folder = tmp_path / "run"
    assert run_cli(folder, *options) == 2
    err = capsys.readouterr().err
    assert err == f"fathom: error: {message}\n"
    assert not folder.exists()


def test_a_backend_that_reads_no_reasoning_is_refused_a_budget() -> None:
    class Plain:  # a plugin's backend, say: no take_thinking
        name = "echo:x"

    spec = RunSpec("niah", "echo:x", "char", (1024,), (0.5,), 1, thinking_budget=64)
    with pytest.raises(
        SpecError, match=r"^backend 'echo:x' reads no reasoning apart from its answers, so it"
    ):
        check_backend(spec, Plain())  # type: ignore[arg-type]
    check_backend(RunSpec("niah", "echo:x", "char", (1024,), (0.5,), 1), Plain())  # type: ignore[arg-type]


def test_sim_archetypes_other_than_the_thinker_refuse_a_budget() -> None:
    assert SimulatedBackend("thinker", CHAR).take_thinking(64) is None
    assert SimulatedBackend("perfect", CHAR).take_thinking(64) == (
        "sim:perfect does not think (sim:thinker does), so a thinking budget means nothing to it"
    )


def test_the_plan_counts_the_thinking_budget_among_each_samples_new_tokens() -> None:
    plain = RunSpec("niah", "sim:thinker", "char", (1024,), (0.5,), 1)
    task = create_task(plain, CHAR)
    assert {p.new_tokens for p in sweep_prompts(plain, task, "prefix").prompts} == {32}
    thinking = RunSpec("niah", "sim:thinker", "char", (1024,), (0.5,), 1, thinking_budget=100)
    assert {p.new_tokens for p in sweep_prompts(thinking, task, "prefix").prompts} == {132}


def test_the_index_holds_each_records_reasoning_tokens(tmp_path: Path) -> None:
    duckdb = pytest.importorskip("duckdb", reason="needs the index extra: pip install -e '.[index]'")
    from fathom.index import index_runs

    index = tmp_path / "results.duckdb"
    index_runs([FIXTURES / "records-v13", FIXTURES / "records-v12"], index)
    with duckdb.connect(str(index), read_only=True) as connection:
        rows = connection.execute(
            "SELECT sample_id, reasoning_tokens FROM samples JOIN runs USING (run_id) "
            "WHERE name = 'records-v13' AND sample_id LIKE 'niah|L1024%' ORDER BY 1"
        ).fetchall()
        older = connection.execute(
            "SELECT count(*), count(reasoning_tokens) FROM samples JOIN runs USING (run_id) "
            "WHERE name = 'records-v12'"
        ).fetchone()
    # records-v13's three samples at 1k (its lines); records-v12's 19 records read no reasoning.
    assert rows == [
        ("niah|L1024|D0.5000|S0", 129),
        ("niah|L1024|D0.5000|S1", 150),
        ("niah|L1024|D0.5000|S2", 77),
    ]
    assert older == (19, 0)
