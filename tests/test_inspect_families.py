"""fathom's beyond-retrieval families inside inspect_ai (issue #34's state, babi, listing, mrcr):
``inspect eval fathom/state`` and the others on inspect's mock model, graded by each family's own
grader with each sample's own answer budget, mrcr's conversation sent as messages in turns, and
``fathom import-inspect`` making each log a run folder with its family's section in summary.json.
The mock answers from each prompt's references, read off the task fathom builds for the same options
(as test_inspect's suite test reads its golds), right at one length and wrong at the other; every
score expected is worked out by hand."""

from __future__ import annotations

import itertools
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

inspect_ai = pytest.importorskip("inspect_ai", reason="needs the inspect extra: pip install '.[inspect]'")

from inspect_ai.log import EvalLog, read_eval_log  # noqa: E402
from inspect_ai.model import ChatMessage, GenerateConfig, ModelOutput, get_model  # noqa: E402
from inspect_runs import (  # noqa: E402
    INSPECT_WARNINGS,
    evaluate,
    import_folder,
    no_loop_marked_running,  # noqa: F401  (autouse: the running-loop mark lifted for this module)
    output,
    scores,
)

from fathom.cli import main  # noqa: E402
from fathom.errors import SpecError  # noqa: E402
from fathom.integrations.inspect_tasks import fathom_task  # noqa: E402
from fathom.run.store import RunFolder  # noqa: E402

pytestmark = INSPECT_WARNINGS

# (the messages, inspect's generate config) -> (the answer, inspect's stop reason)
Reply = Callable[[list[ChatMessage], GenerateConfig], tuple[str, str]]


def mock(reply: Reply) -> Any:
    def answered(
        messages: list[ChatMessage], _tools: object, _choice: object, config: GenerateConfig
    ) -> ModelOutput:
        text, stop = reply(messages, config)
        return output(text, messages[-1].text, stop)

    return get_model("mockllm/model", custom_outputs=answered)


def references(task: str, args: dict[str, object]) -> dict[str, tuple[list[str], int]]:
    """Each sample's references and length by its last message, from the task fathom builds for
    ``args`` (``task``: the fathom task's name, ``babi:qa1``)."""
    return {text: (list(target), facts["length"]) for text, (target, facts) in built(task, args).items()}


def built(task: str, args: dict[str, object]) -> dict[str, tuple[list[str], dict[str, Any]]]:
    """Each sample's references and fathom's metadata by its last message."""
    made = fathom_task(task, dict(args))
    return {
        sample.input[-1].text: (sample.target, sample.metadata["fathom"])  # type: ignore[index,misc]
        for sample in made.dataset
    }


def cells(summary: dict[str, Any], family: str, axis: str, *fields: str) -> list[tuple[Any, ...]]:
    return [(row[axis], row["length"], *(row[f] for f in fields)) for row in summary[family]["cells"]]


def summary_of(folder: Path) -> dict[str, Any]:
    return json.loads((folder / "summary.json").read_text())  # type: ignore[no-any-return]


STATE = {"lengths": "1k,2k", "ops": "2", "samples": 2}
WRONG_STATE = "[1000000]"  # no list of these runs holds it, nor is it any count they ask for


@pytest.fixture(scope="module")
def state_log(tmp_path_factory: pytest.TempPathFactory) -> EvalLog:
    golds = references("state", STATE)

    def reply(messages: list[ChatMessage], _: GenerateConfig) -> tuple[str, str]:
        [gold], length = golds[messages[-1].text]
        return (f"The list is {gold}." if length == 1024 else WRONG_STATE), "stop"

    return evaluate("fathom/state", STATE, mock(reply), tmp_path_factory.mktemp("logs"))


@pytest.mark.slow
def test_state_is_graded_by_its_own_grader_and_imports_with_its_section(
    state_log: EvalLog, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert state_log.status == "success" and state_log.eval.task == "fathom/state"
    # 2 lengths x 2 samples of 2 operations: right at 1k, wrong at 2k.
    assert scores(state_log) == {
        "state:2|L1024|S0": 1.0,
        "state:2|L1024|S1": 1.0,
        "state:2|L2048|S0": 0.0,
        "state:2|L2048|S1": 0.0,
    }
    assert state_log.results.scores[0].metrics["accuracy"].value == 0.5  # type: ignore[union-attr]
    facts = read_eval_log(state_log.location).samples[0].metadata["fathom"]  # type: ignore[index]
    assert (facts["scoring"], facts["max_new_tokens"]) == ("state", 48)  # state's own grader and budget
    status, out = import_folder(state_log, tmp_path / "run", capsys)
    assert status == 0 and "samples imported: 4 of 4 planned, errors: 0" in out, out
    summary = summary_of(tmp_path / "run")
    assert cells(summary, "state", "ops", "mean", "n") == [(2, 1024, 1.0, 2), (2, 2048, 0.0, 2)]
    assert summary["state"]["effective_length"] == [{"ops": 2, "mean": 1024, "lower_bound": None}]
    assert main(["report", str(tmp_path / "run")]) == 0


@pytest.mark.slow
def test_two_imported_state_logs_compare_by_operations(
    state_log: EvalLog, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    golds = references("state", STATE)
    right = mock(lambda messages, _: (golds[messages[-1].text][0][0], "stop"))
    better = evaluate("fathom/state", STATE, right, tmp_path / "logs")
    assert sorted(scores(better).values()) == [1.0] * 4
    assert import_folder(better, tmp_path / "b", capsys)[0] == 0
    assert import_folder(state_log, tmp_path / "a", capsys)[0] == 0
    status = main(["compare", str(tmp_path / "b"), str(tmp_path / "a")])
    out = capsys.readouterr().out
    assert status in (0, 1), out  # two samples lost of four: the gate's verdict is test_gate's matter
    # b answered all 4, a the two at 1k: 100% -> 50%, the two at 2k worse.
    assert "state:2: 100.0% → 50.0% (-50.0 points" in out and "4 pairs: 2 worse, 0 better" in out


@pytest.mark.slow
def test_one_babi_task_alone_is_graded_by_babis_rule(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = {"task": "qa1", "lengths": "1k,2k", "samples": 1}
    golds = references("babi:qa1", {k: v for k, v in args.items() if k != "task"})

    def reply(messages: list[ChatMessage], _: GenerateConfig) -> tuple[str, str]:
        [gold], length = golds[messages[-1].text]
        return (gold if length == 1024 else "nowhere"), "stop"

    log = evaluate("fathom/babi", args, mock(reply), tmp_path / "logs")
    assert scores(log) == {"babi:qa1|L1024|S0": 1.0, "babi:qa1|L2048|S0": 0.0}
    assert import_folder(log, tmp_path / "run", capsys)[0] == 0
    summary = summary_of(tmp_path / "run")
    assert cells(summary, "babi", "task", "mean", "n") == [
        ("babi:qa1", 1024, 1.0, 1),
        ("babi:qa1", 2048, 0.0, 1),
    ]


LISTING = {"lengths": "1k,2k", "items": "2,4", "samples": 1}


@pytest.mark.slow
def test_listing_answers_have_their_own_budgets_item_scores_and_truncation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    golds = references("listing", LISTING)
    asked: dict[tuple[str, int], int] = {}  # each sample's budget as inspect asked the model for it

    def reply(messages: list[ChatMessage], config: GenerateConfig) -> tuple[str, str]:
        ids, length = golds[messages[-1].text]
        asked[f"listing:{len(ids)}", length] = config.max_tokens or 0
        # At 2k: the first id and one no record has, cut at the budget.
        return ("\n".join(ids), "stop") if length == 1024 else (f"{ids[0]}\n#00000", "max_tokens")

    log = evaluate("fathom/listing", LISTING, mock(reply), tmp_path / "logs")
    # 2 of 2 ids: F1 1. At 2k, one of two said right: precision 1/2; recall 1/2 of 2 ids, 1/4 of 4; F1
    # 2PR/(P+R): 1/2 for 2 items, (2 x 1/8) / (3/4) = 1/3 for 4.
    graded = scores(log)
    assert graded == pytest.approx(
        {
            "listing:2|L1024|S0": 1.0,
            "listing:2|L2048|S0": 0.5,
            "listing:4|L1024|S0": 1.0,
            "listing:4|L2048|S0": 1 / 3,
        }
    )
    facts = [s.metadata["fathom"] for s in read_eval_log(log.location).samples or []]
    budgets = {(f["task"], f["length"]): f["max_new_tokens"] for f in facts}
    assert budgets == asked and len(asked) == 4
    assert asked["listing:2", 1024] < asked["listing:4", 1024]  # the budget grows with the answer
    assert import_folder(log, tmp_path / "run", capsys)[0] == 0
    listing = summary_of(tmp_path / "run")["listing"]
    assert cells({"listing": listing}, "listing", "items", "mean", "precision", "recall", "truncated") == [
        (2, 1024, 1.0, 1.0, 1.0, 0),
        (2, 2048, pytest.approx(0.5), 0.5, 0.5, 1),
        (4, 1024, 1.0, 1.0, 1.0, 0),
        (4, 2048, pytest.approx(1 / 3), 0.5, 0.25, 1),
    ]
    assert listing["truncated"] == 2
    records = {(r.task, r.length): r.max_new_tokens for r in RunFolder(tmp_path / "run").latest()}
    assert records == budgets


ASKED = re.compile(
    r"Reproduce the (\d+)\w\w of the (\d+) ([a-z ]+) about (\w+), exactly as you wrote it, with (\w+)"
)
ASK = re.compile(r"Write an? ([a-z ]+) about (\w+)\.")


def of_asked(ask: ChatMessage, plural: str, topic: str) -> bool:
    """A user's ask for a piece of the asked form (its first four letters are the plural's: no two
    forms share them) about the asked topic."""
    found = ASK.fullmatch(ask.text)
    return ask.role == "user" and found is not None and found[2] == topic and found[1][:4] == plural[:4]


def reproduce(messages: list[ChatMessage], right_prefix: bool) -> str:
    """mrcr answered by reading the conversation in its messages: the answer to the Nth ask of the
    asked form and topic, after the prefix (or after another one)."""
    found = ASKED.search(messages[-1].text)
    assert found is not None, messages[-1].text
    number, _, plural, topic, prefix = found.groups()
    answers = [answer.text for ask, answer in itertools.pairwise(messages) if of_asked(ask, plural, topic)]
    return (prefix if right_prefix else "0" * len(prefix)) + answers[int(number) - 1].strip()


@pytest.mark.slow
def test_mrcr_is_a_conversation_in_messages_graded_by_mrcrs_rule(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = {"lengths": "1k,2k", "repeats": "2", "samples": 1}
    golds = references("mrcr", args)

    def reply(messages: list[ChatMessage], _: GenerateConfig) -> tuple[str, str]:
        return reproduce(messages, right_prefix=golds[messages[-1].text][1] == 1024), "stop"

    log = evaluate("fathom/mrcr", args, mock(reply), tmp_path / "logs")
    # The right piece after the right prefix: 1. After another prefix: 0, whatever follows.
    assert scores(log) == {"mrcr:2|L1024|S0": 1.0, "mrcr:2|L2048|S0": 0.0}
    for sample in read_eval_log(log.location).samples or []:
        roles = [m.role for m in sample.input]  # type: ignore[union-attr]
        # Turns of an ask and its answer, then the final ask; no system prompt in this run.
        assert roles == ["user", "assistant"] * (len(roles) // 2) + ["user"] and len(roles) > 5
        target = sample.target[0]  # type: ignore[index]
        assert target[10:] in [m.text.strip() for m in sample.input]  # type: ignore[union-attr]
        found = ASKED.search(sample.input[-1].text)  # type: ignore[index]
        assert found is not None and found[2] == "2"  # the 1st or 2nd of 2
        assert sum(of_asked(m, found[3], found[4]) for m in sample.input) == 2  # type: ignore[union-attr]
    status, out = import_folder(log, tmp_path / "run", capsys)  # each prompt checked by its sha256
    assert status == 0, out
    mrcr = summary_of(tmp_path / "run")["mrcr"]
    assert cells({"mrcr": mrcr}, "mrcr", "repeats", "mean", "prefixed", "exact") == [
        (2, 1024, 1.0, 1.0, 1.0),
        (2, 2048, 0.0, 0.0, 0.0),
    ]
    assert main(["report", str(tmp_path / "run")]) == 0


@pytest.mark.slow
def test_no_context_controls_come_back_as_control_records(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = {"lengths": "1k", "ops": "2", "samples": 2, "control": "true"}
    golds = built("state", args)

    def reply(messages: list[ChatMessage], _: GenerateConfig) -> tuple[str, str]:
        [gold], facts = golds[messages[-1].text]
        # Every sample answered; of the controls, the first sample's alone.
        return (gold if not facts["control"] or facts["sample"] == 0 else WRONG_STATE), "stop"

    log = evaluate("fathom/state", args, mock(reply), tmp_path / "logs")
    assert scores(log) == {
        "control|state:2|L1024|S0": 1.0,
        "control|state:2|L1024|S1": 0.0,
        "state:2|L1024|S0": 1.0,
        "state:2|L1024|S1": 1.0,
    }
    metrics = log.results.scores[0].metrics  # type: ignore[union-attr]
    # The samples' accuracy without the controls (2 of 2), the controls' mean apart (1 of 2).
    assert {name: m.value for name, m in metrics.items()} == {
        "samples_accuracy": 1.0,
        "samples_stderr": 0.0,
        "controls_mean": 0.5,
    }
    status, out = import_folder(log, tmp_path / "run", capsys)
    assert status == 0 and "samples imported: 4 of 4 planned" in out, out
    assert "no-context control: 50.0% (1 of 2 questions answered without the context)" in out
    assert "2 samples + 2 controls, errors: 0" in out
    summary = summary_of(tmp_path / "run")
    assert (summary["control"]["n"], summary["control"]["answered"], summary["control"]["mean"]) == (
        2,
        1,
        0.5,
    )
    assert cells(summary, "state", "ops", "mean", "n") == [(2, 1024, 1.0, 2)]
    controls = [r for r in RunFolder(tmp_path / "run").latest() if r.control]
    assert sorted(r.sample_id for r in controls) == ["control|state:2|L1024|S0", "control|state:2|L1024|S1"]


# Refusals: each kind once, before any sample runs.


def test_an_option_another_family_takes_is_refused() -> None:
    with pytest.raises(SpecError, match="--ops goes with state runs, not 'listing'"):
        inspect_ai.eval("fathom/listing", task_args={"lengths": "1k", "ops": "4"}, model="mockllm/model")


def test_a_bad_count_is_refused() -> None:
    with pytest.raises(
        SpecError, match=r"--items takes whole counts separated by commas, e\.g\. 8,32,128, not 'many'"
    ):
        inspect_ai.eval("fathom/listing", task_args={"lengths": "1k", "items": "many"}, model="mockllm/model")


def test_a_babi_task_that_is_none_is_refused() -> None:
    with pytest.raises(
        SpecError, match="fathom/babi runs the bAbI-style tasks: -T task= one of babi, qa1, qa2"
    ):
        inspect_ai.eval("fathom/babi", task_args={"task": "qa9", "lengths": "1k"}, model="mockllm/model")


def test_more_repeats_than_a_length_holds_are_refused() -> None:
    # 2 fit 1k: each repeat beside another round, up to 406 tokens a pair of cl100k's, in 1,024 less 43.
    with pytest.raises(
        SpecError, match="--repeats 64 does not fit a length of 1024 tokens: at most 2 repeats fit"
    ):
        inspect_ai.eval("fathom/mrcr", task_args={"lengths": "1k", "repeats": "64"}, model="mockllm/model")


@pytest.mark.slow
def test_inspects_command_line_says_a_refusal_in_one_line(tmp_path: Path) -> None:
    command = [
        str(Path(sys.executable).parent / "inspect"), "eval", "fathom/babi", "--model", "mockllm/model",
        "-T", "task=qa9", "-T", "lengths=1k", "--log-dir", str(tmp_path / "logs"), "--display", "plain",
    ]  # fmt: skip
    env = {**os.environ, "NO_COLOR": "1"}
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    said = " ".join((done.stdout + done.stderr).split())
    assert done.returncode == 1 and said.startswith("fathom: error: fathom/babi runs the bAbI-style tasks"), (
        said
    )
    assert "Traceback" not in said and not (tmp_path / "logs").exists()
