"""Thinking models' edges (issue #35 items 1 and 2): the budgets a backend cannot honour (Anthropic's
least budget, its thinking setting, and a thinking budget and answer past its max_output, refused
before any work; the per-sample refusal is test_anthropic's), transformers' think block split off
its words, the reasoning fields a server leaves empty, and a no-context control graded on its answer
alone though its reasoning holds the gold. Every number by hand."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from messages_api import MessagesServer, keyed_messages_serving

from fathom.analysis.control import control_summary
from fathom.backends import openai_replies
from fathom.backends.base import Request
from fathom.backends.reasoning import DEFAULT_TAGS, tags_refusal
from fathom.backends.sim import SimulatedBackend
from fathom.cli import main
from fathom.prompts.tokenizers import load_tokenizer
from fathom.records import THINKING, Completion
from fathom.registry import create_task
from fathom.run.recording import sample_record
from fathom.spec import RunSpec
from fathom.tasks import control
from fathom.tasks.base import Sample

CHAR = load_tokenizer("char")
GRID = ("--lengths", "1k", "--depths", "0.5", "--samples", "1", "--no-control", "--no-progress")


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[MessagesServer]:
    pytest.importorskip("anthropic")  # the extra; CI installs it
    with keyed_messages_serving(monkeypatch) as server:
        yield server


REFUSED = "drop --thinking-budget, or give one it can honour"
PAST = (
    "the most a sample of this run asks for: lower --thinking-budget or --max-new-tokens, or raise the "
    "backend's limit where the model allows more"
)


@pytest.mark.parametrize(
    ("settings", "options", "message"),
    [
        (
            "",
            ("--thinking-budget", "1023"),
            f"Anthropic's least thinking budget is 1024 tokens, not 1023: {REFUSED}",
        ),
        (
            "?thinking=off",
            ("--thinking-budget", "2048"),
            "the anthropic setting thinking=off turns thinking off, so no thinking budget is honoured: "
            + REFUSED,
        ),
        (
            "?thinking=2048",
            ("--thinking-budget", "1024"),
            f"the anthropic setting thinking=2048 and a thinking budget of 1024 disagree: {REFUSED}",
        ),
        (
            "?max_output=2048",
            ("--thinking-budget", "2048"),
            f"a thinking budget of 2048 leaves no answer room below max_output (2048): {REFUSED}",
        ),
        # niah's answer budget is 32 tokens: 2017 + 32 = 2049, one past max_output.
        (
            "?max_output=2048",
            ("--thinking-budget", "2017"),
            f"thinking 2017 + answer 32 tokens exceed max_output 2048, {PAST}",
        ),
        # The setting's budget is not in the request's max_new_tokens: it is added.
        (
            "?max_output=2048&thinking=2017",
            (),
            f"thinking 2017 + answer 32 tokens exceed max_output 2048, {PAST}",
        ),
        (
            "",
            ("--max-new-tokens", "32001"),
            f"thinking 0 + answer 32001 tokens exceed max_output 32000, {PAST}",
        ),
    ],
)
def test_a_budget_anthropic_cannot_honour_is_one_line_exit_2_and_nothing_written(
    fake: MessagesServer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    settings: str,
    options: tuple[str, ...],
    message: str,
) -> None:
    folder = tmp_path / "run"
    model = f"anthropic:claude-test@{fake.root}{settings}"
    assert main(["run", "niah", "--model", model, *GRID, *options, "--run-dir", str(folder)]) == 2
    assert capsys.readouterr().err == f"fathom: error: {message}\n"
    assert not folder.exists() and fake.bodies == []  # no request asked for an answer


@pytest.mark.parametrize(
    ("settings", "options"),
    [("?max_output=2048", ("--thinking-budget", "2016")), ("?max_output=2048&thinking=2016", ())],
)
def test_a_budget_and_answer_that_fill_max_output_exactly_are_asked(
    fake: MessagesServer, tmp_path: Path, settings: str, options: tuple[str, ...]
) -> None:
    folder = tmp_path / "run"
    model = f"anthropic:claude-test@{fake.root}{settings}"
    assert main(["run", "niah", "--model", model, *GRID, *options, "--run-dir", str(folder)]) == 0
    (body,) = fake.bodies
    # 2016 of thinking, then niah's 32 of answer: max_output's 2048 exactly.
    assert body["max_tokens"] == 2048 and body["thinking"] == {"type": "enabled", "budget_tokens": 2016}


def test_a_backend_with_think_tags_off_says_why_it_refuses_a_budget() -> None:
    assert tags_refusal("hf:x", DEFAULT_TAGS) is None
    assert tags_refusal("hf:x", ("<reasoning>", "</reasoning>")) is None
    assert (
        tags_refusal("hf:x", None) == "hf:x has think_tags=off, so it would grade the reasoning as the answer"
    )


@pytest.mark.parametrize("prefix", ["hf", "llamacpp", "vllm"])
def test_a_budget_with_think_tags_off_is_refused_before_any_model_is_loaded(
    prefix: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The refusal reads the model's name alone: no backend is made (which would load the model, a
    minute for a small one), and the model named need not exist."""
    made: list[str] = []
    monkeypatch.setattr("fathom.run.runner.create_backend", lambda model, tokenizer: made.append(model))
    folder, model = tmp_path / "run", f"{prefix}:{tmp_path}/absent?think_tags=off&seed=1"
    argv = ["run", "niah", "--model", model, *GRID, "--thinking-budget", "64", "--run-dir", str(folder)]
    assert main(argv) == 2
    assert capsys.readouterr().err == (
        f"fathom: error: {prefix}:{tmp_path}/absent has think_tags=off, so it would grade the reasoning "
        "as the answer: drop --thinking-budget, or give one it can honour\n"
    )
    assert made == [] and not folder.exists()
    # Tags of its own, or none named, are left to the backend (which reads them as it loads).
    for settings in ("think_tags=<r>,</r>", "seed=1", "think_tags=bad"):
        monkeypatch.setattr("fathom.run.runner.create_backend", _refused_when_made)
        argv[3] = f"{prefix}:{tmp_path}/absent?{settings}"
        assert main(argv) == 2
        assert capsys.readouterr().err == "fathom: error: made\n"


def _refused_when_made(model: str, tokenizer: str) -> None:
    from fathom.errors import SpecError

    raise SpecError("made")


def test_transformers_splits_a_think_block_off_its_words_and_refuses_a_budget_with_tags_off() -> None:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from fathom.backends.hf import TransformersBackend

    # The backend as its _completion reads it: a tokenizer of one token a character (id = code point),
    # end of sequence at id 0, and the default tags.
    words = SimpleNamespace(
        _eos={0}, _text=lambda ids: "".join(map(chr, ids)), tokenizer=CHAR, think_tags=DEFAULT_TAGS
    )
    said = [ord(c) for c in "<think>Looking.</think> It is 7."] + [0]
    request = Request("s", np.zeros(4, dtype=np.int32), 64)
    answered = TransformersBackend._completion(words, request, said, 0.5)  # type: ignore[arg-type]
    # "Looking." is 8 characters: 8 tokens of the char tokenizer.
    assert (answered.text, answered.reasoning_tokens, answered.finish_reason) == ("It is 7.", 8, "stop")
    unclosed = TransformersBackend._completion(words, request, [ord(c) for c in "<think>Look"], 0.5)  # type: ignore[arg-type]
    assert (unclosed.text, unclosed.reasoning_tokens, unclosed.finish_reason) == ("", 4, THINKING)
    off = SimpleNamespace(name="hf:x", think_tags=None)
    assert TransformersBackend.take_thinking(off, 64) == tags_refusal("hf:x", None)  # type: ignore[arg-type]
    assert (
        TransformersBackend.take_thinking(SimpleNamespace(name="hf:x", think_tags=DEFAULT_TAGS), 64) is None
    )  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "message",
    [
        # vLLM's docs warn that a client reading the old field may find it empty beside the new one.
        {"content": "7", "reasoning": "Looking.", "reasoning_content": ""},
        {"content": "7", "reasoning": "", "reasoning_content": "Looking."},
        {"content": "7", "reasoning": None, "reasoning_content": "Looking."},
    ],
)
def test_the_reasoning_field_a_server_filled_is_read_whichever_it_left_empty(message: dict[str, Any]) -> None:
    reply = {"choices": [{"message": message, "finish_reason": "stop"}]}
    text, _, _, _, reasoning = openai_replies.read_answer(reply, chat=True)
    assert (text, reasoning) == ("7", "Looking.")


def control_sample() -> Sample:
    spec = RunSpec("niah", "sim:thinker", "char", (1024,), (0.5,), 1)
    task = create_task(spec, CHAR)
    cell = next(c for c in control.plan(task.cells, True) if c.control)
    sample = task.prepare(control.sample_cell(cell))
    assert isinstance(sample, Sample)
    return control.without_context(sample, cell)


def test_a_control_whose_reasoning_holds_the_gold_is_graded_on_its_answer_alone() -> None:
    spec = RunSpec("niah", "sim:thinker", "char", (1024,), (0.5,), 1)
    backend = SimulatedBackend("thinker", CHAR)
    asked = control_sample()
    gold = asked.answers[0]
    tokens = len(asked.prompt.ids)
    # The reasoning names the gold (a model that knew it), the answer does not.
    thought = Completion(
        "I cannot tell.", tokens, 9, "stop", 0.1, reasoning=f"It is {gold}, I think.", reasoning_tokens=9
    )
    said = Completion(f"It is {gold}.", tokens, 9, "stop", 0.1, reasoning="Hm.", reasoning_tokens=2)
    kept, answered = (sample_record(spec, backend, asked, tokens, c) for c in (thought, said))
    assert (
        kept.control and kept.score == 0.0 and kept.output == "I cannot tell." and kept.reasoning_tokens == 9
    )
    assert answered.control and answered.score == 1.0
    assert control_summary([kept], [])["answered"] == 0
    assert control_summary([answered], [])["answered"] == 1
    assert control_summary([kept, answered], [])["answered"] == 1
