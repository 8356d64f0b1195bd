"""The judge pinned value by value, written against the survivors of mutation testing
(docs/mutation.md): every family ``fathom.judge.lineage`` knows, read from each name it looks at, and
``same_model``'s every way of telling two backends apart; ``parse_verdict``'s fences and reason; the
runner's check of a judge against the model under test, message by message, its progress bar and
its counts of what it judged, reused and could not read."""

from __future__ import annotations

import hashlib
import logging
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from test_judge import run_dir

from fathom.backends.base import Request
from fathom.backends.sim_judge import SimulatedJudge
from fathom.cli import main
from fathom.errors import SpecError
from fathom.judge import runner
from fathom.judge.lineage import family, same_model
from fathom.judge.verdicts import Malformed, parse_verdict
from fathom.judgement import JudgementRecord
from fathom.manifest import JudgeIdentity
from fathom.prompts import ChatPrompt
from fathom.prompts.judging import Unreadable, judge_prompt, load_rubric
from fathom.prompts.tokenizers import load_tokenizer
from fathom.records import Completion, SampleRecord
from fathom.registry import BACKEND
from fathom.run.judgements import read_judgements
from fathom.run.store import RunFolder

__all__ = ["run_dir"]  # the fixture, from test_judge

QA = load_rubric("qa-correctness")
MARKER = "0123456789abcdef"
KEY = f"score_{MARKER}"


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("hf:HuggingFaceTB/SmolLM2-1.7B", "smollm"),
        ("llamacpp:gemma-2-9b", "gemma"),
        ("hf:codellama-7b", "llama"),  # "codellama" does not start with "llama"
        ("hf:llama-3-8b", "llama"),
        ("vllm:Qwen2.5-7B", "qwen"),
        ("vllm:QwQ-32B", "qwen"),
        ("vllm:Mixtral-8x22B", "mistral"),
        ("vllm:Mistral-7B", "mistral"),
        ("vllm:Ministral-8B", "mistral"),
        ("hf:Phi-3-mini", "phi"),
        ("hf:DeepSeek-V3", "deepseek"),
        ("hf:OLMo-2-7B", "olmo"),
        ("hf:falcon-40b", "falcon"),
        ("hf:internlm2-chat", "internlm"),
        ("hf:glm-4-9b", "glm"),
        ("openai:command-r-plus@http://x", "cohere"),
        ("hf:CohereForAI/c4ai-command-r-v01", "cohere"),
        ("openai:gpt-4o@http://x", "openai"),
        ("openai:claude-3-5-sonnet@http://x", "anthropic"),
    ],
)
def test_each_known_family_is_read_from_a_name_of_its_own(spec: str, expected: str) -> None:
    assert family(spec, {}) == expected


def test_a_family_is_read_word_by_word_from_the_last_part_of_each_name_in_turn() -> None:
    # A word must start with the family's name: "tinyllama" is none of Llama's.
    assert family("hf:tinyllama-1.1b", {}) is None
    assert family("hf:my-llama", {}) == "llama"
    # Only the file or model name counts, not the folder it is in, nor an openai spec's address.
    assert family("hf:/models/llama/SmolLM2", {}) == "smollm"
    assert family("hf:/models/gemma/finetune", {}) is None
    assert family("openai:mine@http://llama-server:8080", {}) is None
    assert family("openai:mine@http://qwen@host", {}) is None  # the model is before the first "@"
    # A spec without a backend prefix is read whole.
    assert family("qwen2", {}) == "qwen"
    # The spec first, then the settings' model, then its model path.
    assert family("llamacpp:gemma", {"model": "qwen", "model_path": "/m/phi.gguf"}) == "gemma"
    assert family("vllm:/m/x", {"model": "qwen", "model_path": "/m/phi.gguf"}) == "qwen"
    assert family("llamacpp:x", {"model_path": "/m/Phi-3.gguf"}) == "phi"
    assert family("llamacpp:x", {"other": "qwen"}) is None


def test_two_backends_are_one_model_only_where_a_name_or_hash_they_both_have_agrees() -> None:
    assert same_model("a", {}, "a", {"model": "other"})
    assert not same_model("a", {}, "b", {})
    assert same_model("llamacpp:a", {"model_path": "/m/x.gguf"}, "llamacpp:b", {"model_path": "/m/x.gguf"})
    assert not same_model("llamacpp:a", {"model_path": "/m/x.gguf"}, "llamacpp:b", {"model_path": "/m/y"})
    # An empty hash or path names nothing, even on both sides.
    assert not same_model("llamacpp:a", {"model_sha256": ""}, "llamacpp:b", {"model_sha256": ""})
    assert not same_model("llamacpp:a", {"model_path": ""}, "llamacpp:b", {"model_path": ""})
    # A served model: its name and server both.
    served = {"model": "m", "base_url": "http://u"}
    assert same_model("openai:m@http://u", served, "openai:m@http://u/", dict(served))
    assert not same_model("openai:m@u", served, "openai:n@u", {"model": "n", "base_url": "http://u"})
    assert not same_model("openai:a", {"base_url": "u"}, "openai:b", {"base_url": "u"})


@pytest.mark.parametrize(
    ("reply", "score", "reason"),
    [
        (f'```\n{{"{KEY}": 1, "reason": " fine "}}\n```', 1, "fine"),
        (f'```json {{"{KEY}": 0, "reason": "no"}}```', 0, "no"),
        (f'  {{"{KEY}": 1, "reason": "spaced"}}  ', 1, "spaced"),
    ],
)
def test_a_fenced_or_spaced_verdict_is_read_with_its_reason_stripped(
    reply: str, score: int, reason: str
) -> None:
    verdict = parse_verdict(reply, QA, MARKER)
    assert (verdict.score, verdict.reason) == (score, reason)


def test_a_reply_nested_past_the_parsers_stack_is_no_object() -> None:
    with pytest.raises(Malformed, match=r"^it was not one JSON object$") as raised:
        parse_verdict('{"a": ' + "[" * 100_000, QA, MARKER)
    assert raised.value.problem is Unreadable.NOT_AN_OBJECT


def _judge(role: str, spec: str, settings: dict[str, Any]) -> runner.Judge:
    backend = SimpleNamespace(settings=lambda: settings)
    return runner.Judge(role, spec, "id", backend, None)  # type: ignore[arg-type]


def _tested(spec: str, settings: dict[str, Any]) -> Any:
    """As much of a run's manifest as ``_checked`` reads: the model's spec and its backend's settings."""
    return SimpleNamespace(
        spec=SimpleNamespace(model=spec), identity=SimpleNamespace(backend=SimpleNamespace(settings=settings))
    )


def test_a_judge_serving_the_tested_models_weights_is_refused_whole() -> None:
    judge = _judge("judge", "llamacpp:other", {"model_path": "/m/a.gguf"})
    with pytest.raises(SpecError) as raised:
        runner._checked(judge, _tested("llamacpp:smollm2", {"model_path": "/m/a.gguf"}), QA)
    assert str(raised.value) == (
        "--judge llamacpp:other is the model under test (llamacpp:smollm2): a model grading its own "
        "answers is no judge; name a model of another family"
    )


def test_a_judge_of_the_tested_family_is_warned_of_whole_and_one_of_another_is_not(
    caplog: pytest.LogCaptureFixture,
) -> None:
    tested = _tested("llamacpp:smollm2", {"model_path": "/m/SmolLM2-360M.gguf"})
    with caplog.at_level(logging.WARNING, logger="fathom"):
        runner._checked(_judge("judge2", "llamacpp:SmolLM2-1.7B", {}), tested, QA)
        assert caplog.messages == [
            "--judge2 llamacpp:SmolLM2-1.7B is of the smollm family, as the model under test "
            "(llamacpp:smollm2) is: a judge of the same lineage tends to favour its own kind; a judge "
            "of another family is more trustworthy"
        ]
        caplog.clear()
        identity = runner._checked(_judge("judge", "llamacpp:gemma-2b", {"seed": 1}), tested, QA)
        unknown = runner._checked(_judge("judge", "sim-judge:reference", {}), _tested("sim:perfect", {}), QA)
        assert caplog.messages == []
    assert identity == JudgeIdentity(
        role="judge",
        name="llamacpp:gemma-2b",
        settings={"seed": 1},
        identity="id",
        family="gemma",
        tested_family="smollm",
        rubric="qa-correctness@1",
        rubric_sha256=QA.sha256,
        rubric_kind="binary",
        scale=(0, 1),
        passing=1,
    )
    assert (unknown.family, unknown.tested_family) == (None, None)


def test_judging_counts_what_it_judged_reused_and_could_not_read(run_dir: Path) -> None:
    judges = ["sim-judge:reference", "sim-judge:reference?malformed=1"]
    first = runner.judge_run(run_dir, judges, "qa-correctness", retries=0, show_progress=False)
    assert first == runner.JudgingResult(judged=12, reused=0, errors=12)
    again = runner.judge_run(run_dir, judges, "qa-correctness", retries=0, show_progress=False)
    assert again == runner.JudgingResult(judged=0, reused=12, errors=12)


def test_judging_shows_its_progress_only_when_asked(
    run_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runner.judge_run(run_dir, ["sim-judge:reference"], "qa-correctness", show_progress=False)
    assert capsys.readouterr().err == ""
    runner.judge_run(run_dir, ["sim-judge:reference?seed=2"], "qa-correctness", show_progress=True)
    bar = capsys.readouterr().err.split("\r")[-1]
    assert re.match(r"judging: 100%\|[^|]*\| 12/12 \[.*[\d?](answer/s|s/answer)\]", bar), bar


RETRY = (
    "\n\nYour previous reply could not be read (its keys were not exactly the score key this prompt names "
    'and "reason"). Reply with the JSON object only.'
)


@pytest.mark.parametrize(
    ("kind", "as_text", "as_chat"), [("ids", False, False), ("text", True, False), ("chat", False, True)]
)
def test_a_judges_request_is_its_prompt_and_retry_note_framed_with_a_line_to_answer_in(
    kind: str, as_text: bool, as_chat: bool
) -> None:
    judge = runner.load_judge("judge", f"sim-judge:reference?input={kind}")
    prompt = judge_prompt(QA, "What is the capital of France?", ("Paris",), "Paris.")
    request = runner._request(judge, "s1", prompt, Unreadable.WRONG_KEYS)
    assert (request.sample_id, request.max_new_tokens, request.stop) == ("judge|s1", 96, ("\n",))
    # The plain template ("none"): the one message, a blank line, then the verdict's opening.
    framed = prompt.text + RETRY + "\n\n" + prompt.opening
    assert judge.backend.tokenizer.decode(request.ids.tolist()) == framed
    assert request.text == (framed if as_text else None)
    assert request.chat == (ChatPrompt(None, prompt.text + RETRY, prompt.opening) if as_chat else None)
    first = runner._request(judge, "s1", prompt, None)
    assert judge.backend.tokenizer.decode(first.ids.tolist()) == prompt.text + "\n\n" + prompt.opening


def _completion(text: str, error: str | None = None) -> Completion:
    return Completion(text, 10, 5, "stop", 1.234567, error)


@pytest.mark.parametrize(
    ("completion", "score", "reason", "error", "problem"),
    [
        (_completion(' 1, "reason": " matches "}'), 1, "matches", None, None),
        (
            _completion("It is right."),
            None,
            "",
            "malformed: it was not one JSON object",
            Unreadable.NOT_AN_OBJECT,
        ),
        (_completion("", "backend_error: HTTP 500"), None, "", "backend_error: HTTP 500", None),
    ],
)
def test_a_judgement_is_recorded_whole_from_its_reply(
    completion: Completion, score: int | None, reason: str, error: str | None, problem: Unreadable | None
) -> None:
    judge = runner.Judge("judge2", "sim-judge:reference", "the-identity", None, None)  # type: ignore[arg-type]
    case = SimpleNamespace(
        sample_id="s7", prompt_sha256="p" * 64, question="Q?", answers=("Paris",), output="Paris."
    )
    prompt = judge_prompt(QA, case.question, case.answers, case.output)
    record, found = runner._judgement(judge, QA, case, prompt, completion, 3)
    assert found is problem
    assert record == JudgementRecord(
        sample_id="s7",
        prompt_sha256="p" * 64,
        answer_sha256=hashlib.sha256(b"Paris.").hexdigest(),
        role="judge2",
        judge="sim-judge:reference",
        judge_identity="the-identity",
        rubric="qa-correctness@1",
        rubric_sha256=QA.sha256,
        score=score,
        reason=reason,
        reply=completion.text,  # a verdict that goes on from the opening the prompt gave
        attempts=3,
        latency_s=1.2346,
        error=error,
    )


def test_retries_are_taken_from_0_to_10_and_refused_outside() -> None:
    runner.check_retries(0)
    runner.check_retries(10)
    for retries in (-1, 11):
        with pytest.raises(SpecError) as raised:
            runner.check_retries(retries)
        assert str(raised.value) == (
            f"--judge-retries {retries} is outside 0 to 10: give the attempts after the first, 10 at most "
            "(each is paid for)"
        )


def test_judges_are_checked_by_backend_and_rubric_before_a_run() -> None:
    runner.check_judges([], "no-such-rubric")  # no judge: no rubric read
    # A server's address may hold a colon of its own: the backend is what comes before the first.
    runner.check_judges(["sim-judge:reference", "openai:gpt-4o@http://127.0.0.1:8000"], "qa-correctness")
    known = ", ".join(BACKEND.names())
    for spec in ("judgebot", "nope:model"):
        with pytest.raises(SpecError) as raised:
            runner.check_judges(["sim-judge:reference", spec], "qa-correctness")
        assert (
            str(raised.value)
            == f"unknown judge '{spec}': name it as backend:model, with backend one of {known}"
        )
    with pytest.raises(SpecError, match=r"^unknown rubric 'no-such-rubric'"):
        runner.check_judges(["sim-judge:reference"], "no-such-rubric")


def test_a_run_is_judged_by_one_or_two_judges_of_two_models(run_dir: Path) -> None:
    for judges in ([], ["sim-judge:reference"] * 3):
        with pytest.raises(SpecError) as raised:
            runner.judge_run(run_dir, judges, "qa-correctness", show_progress=False)
        assert str(raised.value) == "name one judge (--judge) or two (--judge and --judge2)"
    with pytest.raises(SpecError) as raised:
        runner.judge_run(
            run_dir, ["sim-judge:reference", "sim-judge:reference"], "qa-correctness", show_progress=False
        )
    assert str(raised.value) == (
        "--judge2 sim-judge:reference is the same model as --judge: agreement of a model with itself "
        "measures nothing; name a judge of another family"
    )
    with pytest.raises(SpecError, match=r"^--judge-retries 11 is outside"):
        runner.judge_run(run_dir, ["sim-judge:reference"], "qa-correctness", retries=11, show_progress=False)
    assert not (run_dir / "judgements.jsonl").exists()


def test_by_default_a_judge_is_asked_twice_more_and_its_progress_shown(
    run_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    done = runner.judge_run(run_dir, ["sim-judge:reference?malformed=1"], "qa-correctness")
    assert done == runner.JudgingResult(judged=0, reused=0, errors=12)
    assert {record.attempts for record in read_judgements(run_dir)} == {3}
    assert "judging: 100%" in capsys.readouterr().err


def test_a_runs_controls_are_not_judged(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    args = ["run", "niah", "--model", "sim:perfect", "--lengths", "1k", "--depths", "2", "--samples", "2"]
    assert main([*args, "--run-dir", str(folder), "--no-progress"]) == 0  # with its controls
    done = runner.judge_run(folder, ["sim-judge:reference"], "qa-correctness", show_progress=False)
    assert done == runner.JudgingResult(judged=4, reused=0, errors=0)
    samples = [record for record in RunFolder(folder).records() if isinstance(record, SampleRecord)]
    assert sum(sample.control for sample in samples) == 4
    judged = sorted(record.sample_id for record in read_judgements(folder))
    assert judged == sorted(sample.sample_id for sample in samples if not sample.control)


def test_a_run_with_no_answered_sample_is_refused_by_name(
    run_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(RunFolder, "latest", lambda folder: iter(()))
    with pytest.raises(SpecError) as raised:
        runner.judge_run(run_dir, ["sim-judge:reference"], "qa-correctness", show_progress=False)
    assert str(raised.value) == f"run folder '{run_dir}' holds no answered sample to judge"


def test_a_judges_identity_is_the_hash_of_its_backend_settings_and_prompt_version() -> None:
    # Its judgements carry it, and a verdict is reused only under the same identity: a changed
    # form re-pays every judgement made before. sha256 of the sorted JSON, its first 16 hex digits.
    judge = runner.load_judge("judge2", "sim-judge:reference")
    form = (
        '{"backend": "sim-judge:reference", "prompt": 4, '
        '"settings": {"input": "ids", "malformed": 0.0, "noise": 0.0, "seed": 0}}'
    )
    assert judge.identity == hashlib.sha256(form.encode()).hexdigest()[:16] == "1d72bfd2601ae40f"
    assert (judge.role, judge.name, judge.template.name) == ("judge2", "sim-judge:reference", "none")


class Recording(SimulatedJudge):
    """sim-judge asked at most three requests a call, each call's requests kept; ``path`` is the
    model file its settings name (None: none)."""

    requests_per_call = 3

    def __init__(self, spec: str, path: str | None = None) -> None:
        super().__init__(spec, load_tokenizer("cl100k_base"))
        self.path = path
        self.calls: list[list[Request]] = []

    def settings(self) -> dict[str, Any]:
        return super().settings() | ({} if self.path is None else {"model_path": self.path})

    def generate(self, requests: Any) -> Any:
        self.calls.append(list(requests))
        return super().generate(requests)


def _cases(count: int) -> list[Any]:
    return [
        SimpleNamespace(
            sample_id=f"s{i}", prompt_sha256="p", question="Q?", answers=("Paris",), output="Paris."
        )
        for i in range(count)
    ]


def test_cases_go_to_a_judge_as_many_a_call_as_it_asks_and_unreadable_ones_again_with_the_problem() -> None:
    backend = Recording("reference?malformed=1&input=text")
    judge = runner.Judge(
        "judge", "sim-judge:x", "id", backend, runner.resolve_template("auto", backend.tokenizer)
    )
    records = list(runner.judge_cases(judge, QA, _cases(4), retries=1))
    # Cases 0-2, then 3 (a call of three at most); each batch asked once more, then recorded.
    assert [[r.sample_id for r in call] for call in backend.calls] == [
        ["judge|s0", "judge|s1", "judge|s2"],
        ["judge|s0", "judge|s1", "judge|s2"],
        ["judge|s3"],
        ["judge|s3"],
    ]
    note = "\n\nYour previous reply could not be read (it was not one JSON object)."
    assert [note in (r.text or "") for call in backend.calls for r in call] == [False] * 3 + [True] * 3 + [
        False,
        True,
    ]
    assert [(r.sample_id, r.attempts, r.error) for r in records] == [
        (f"s{i}", 2, "malformed: it was not one JSON object") for i in range(4)
    ]


def test_a_whole_verdict_is_read_under_its_prompts_own_key() -> None:
    judge = runner.Judge("judge", "sim-judge:x", "id", None, None)  # type: ignore[arg-type]
    (case,) = _cases(1)
    prompt = judge_prompt(QA, case.question, case.answers, case.output)
    reply = f'{{"score_{prompt.marker}": 0, "reason": "no"}}'
    record, problem = runner._judgement(judge, QA, case, prompt, Completion(reply, 1, 1, "stop", 0.0), 1)
    assert (record.score, record.reason, record.error, problem) == (0, "no", None, None)


def test_two_judges_are_one_model_where_their_weights_are_one(
    run_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = {"sim-judge:a": "/m/a.gguf", "sim-judge:b": "/m/b.gguf", "sim-judge:c": "/m/a.gguf"}
    monkeypatch.setattr(runner, "create_backend", lambda spec, tokenizer: Recording("reference", paths[spec]))
    done = runner.judge_run(run_dir, ["sim-judge:a", "sim-judge:b"], "qa-correctness", show_progress=False)
    assert done == runner.JudgingResult(judged=24, reused=0, errors=0)
    with pytest.raises(SpecError, match=r"^--judge2 sim-judge:c is the same model as --judge: "):
        runner.judge_run(run_dir, ["sim-judge:a", "sim-judge:c"], "qa-correctness", show_progress=False)
