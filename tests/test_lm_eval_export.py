"""fathom export-lm-eval: a run's samples and fathom's graders as an lm-evaluation-harness task folder,
run end to end by lm-eval (its dummy model, a reader answering from each doc, and its own CLI), offline."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fathom import registry
from fathom.cli import main
from fathom.errors import FathomError
from fathom.integrations import lm_eval_export, lm_eval_metrics
from fathom.integrations.lm_eval_export import MARKER, export_lm_eval
from fathom.integrations.lm_eval_metrics import ExportedGraderError, grade, grader_of
from fathom.prompts.tokenizers import load_tokenizer
from fathom.spec import RunSpec
from fathom.tasks import babi, listing
from fathom.tasks.base import Sample

# niah at two lengths, three depths, one sample each: six docs, three a task.
NIAH = ["niah", "--tokenizer", "cl100k_base", "--lengths", "1k,2k", "--depths", "3", "--samples", "1"]
# Never the network: lm-eval's hub and datasets' (the folder's docs are read from its own files).
OFFLINE = {"HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def cli(*args: str | Path) -> int:
    return main([str(a) for a in args])


def docs(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


@pytest.fixture(scope="module")
def niah(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("lm-eval") / "niah"
    assert cli("export-lm-eval", *NIAH, "--out", out) == 0
    return out


@pytest.fixture(scope="module")
def offline() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        for name, value in OFFLINE.items():
            patch.setenv(name, value)
        yield


def evaluate(folder: Path, tasks: list[str], model: Any) -> dict[str, Any]:
    lm_eval = pytest.importorskip("lm_eval")
    from lm_eval.tasks import TaskManager

    manager = TaskManager(include_path=str(folder), include_defaults=False)
    results: dict[str, Any] = lm_eval.simple_evaluate(model=model, tasks=tasks, task_manager=manager)
    return results["results"]


def reader(answer: Callable[[dict[str, Any]], str]) -> Any:
    """An lm-eval model that answers each doc with ``answer(its fathom facts)``, and keeps what it was
    asked (the context and generation options lm-eval sent)."""
    from lm_eval.api.model import LM

    class Reader(LM):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.asked: list[tuple[dict[str, Any], str, dict[str, Any]]] = []

        def generate_until(self, requests: list[Any], disable_tqdm: bool = False) -> list[str]:
            said = []
            for request in requests:
                context, options = request.arguments
                self.asked.append((request.doc, context, options))
                said.append(answer(json.loads(request.doc["fathom"])))
            return said

        def loglikelihood(self, requests: list[Any], disable_tqdm: bool = False) -> list[Any]:
            raise AssertionError("a generate_until task asks no log-likelihoods")

        def loglikelihood_rolling(self, requests: list[Any], disable_tqdm: bool = False) -> list[Any]:
            raise AssertionError("a generate_until task asks no log-likelihoods")

    return Reader()


def test_the_folder_holds_a_task_per_length_and_their_group(niah: Path) -> None:
    assert sorted(p.name for p in niah.iterdir()) == [
        MARKER,
        "fathom_niah.yaml",
        "fathom_niah_1024.jsonl",
        "fathom_niah_1024.yaml",
        "fathom_niah_2048.jsonl",
        "fathom_niah_2048.yaml",
        "utils.py",
    ]
    group = (niah / "fathom_niah.yaml").read_text()
    assert 'group: "fathom_niah"\ntask:\n  - "fathom_niah_1024"\n  - "fathom_niah_2048"\n' in group
    task = (niah / "fathom_niah_1024.yaml").read_text()
    for line in (
        'task: "fathom_niah_1024"',
        "custom_dataset: !function utils.load_docs",
        '  docs: "fathom_niah_1024.jsonl"',
        "process_results: !function utils.process_results",
        "  until: []",
        "  max_gen_toks: 32",  # niah's answer budget
        "  do_sample: false",
    ):
        assert line in task.splitlines()


def test_each_prompt_is_its_length_in_the_named_tokenizer(niah: Path) -> None:
    encode = load_tokenizer("cl100k_base").encode_with_specials
    for length in (1024, 2048):
        lines = docs(niah / f"fathom_niah_{length}.jsonl")
        assert [line["fathom"]["depth"] for line in lines] == [0.0, 0.5, 1.0]
        for line in lines:
            facts = line["fathom"]
            assert len(encode(line["prompt"])) == length
            assert facts["length"] == facts["target_tokens"] == facts["actual_tokens"] == length
            assert facts["grader"] == {"method": "contains"}
            assert facts["tokenizer"] == "cl100k_base" and facts["needle_roles"] == ["gold"]
            assert line["target"] == facts["answers"][0] and facts["answers"][0].isdigit()
            assert facts["id"] == f"niah|L{length}|D{facts['depth']:.4f}|S0"


def test_a_models_own_tokenizer_gets_its_chat_template_and_exact_lengths(
    hf_model_dir: Path, tmp_path: Path
) -> None:
    """With a model folder's tokenizer (ChatML), each prompt is the whole templated conversation up to
    the answer prefix, and transformers' tokenizer, as lm-eval's hf model encodes a prompt, counts it
    at its length: the reason no --apply_chat_template is passed."""
    transformers = pytest.importorskip("transformers")
    out = tmp_path / "chatml"
    grid = ["--lengths", "1k,2k", "--depths", "2", "--samples", "1"]
    assert cli("export-lm-eval", "niah", "--tokenizer", f"hf:{hf_model_dir}", *grid, "--out", out) == 0
    counted = transformers.PreTrainedTokenizerFast(tokenizer_file=str(hf_model_dir / "tokenizer.json"))
    for length in (1024, 2048):
        for line in docs(out / f"fathom_niah_{length}.jsonl"):
            prompt = line["prompt"]
            assert prompt.startswith("<|im_start|>user\n") and prompt.endswith(
                "<|im_start|>assistant\nAnswer:"
            )
            assert len(counted(prompt)["input_ids"]) == length


def test_the_prompts_are_the_runs_prompts(niah: Path, tmp_path: Path) -> None:
    """The same spec's run (without its controls) builds the same samples: each doc's prompt encodes
    to the ids its record hashes, and asks the same question of the same needle."""
    run = tmp_path / "run"
    assert cli("run", *NIAH, "--model", "sim:perfect", "--no-control", "--run-dir", run, "--no-progress") == 0
    records = {r["sample_id"]: r for r in docs(run / "samples.jsonl")}
    exported = [line for length in (1024, 2048) for line in docs(niah / f"fathom_niah_{length}.jsonl")]
    assert sorted(records) == sorted(line["fathom"]["id"] for line in exported)
    encode = load_tokenizer("cl100k_base").encode_with_specials
    for line in exported:
        record, facts = records[line["fathom"]["id"]], line["fathom"]
        ids = np.asarray(encode(line["prompt"]), dtype=np.int32)
        assert hashlib.sha256(ids.tobytes()).hexdigest() == record["prompt_sha256"]
        assert (record["answers"], record["question"]) == (facts["answers"], facts["question"])


def test_lm_evals_dummy_model_scores_zero(tmp_path: Path, offline: None) -> None:
    """On a folder moved after its export: it names no path outside itself."""
    written, moved = tmp_path / "written", tmp_path / "moved"
    assert cli("export-lm-eval", *NIAH, "--out", written) == 0
    written.rename(moved)
    results = evaluate(moved, ["fathom_niah"], "dummy")  # it answers "lol" to everything
    for name in ("fathom_niah_1024", "fathom_niah_2048"):
        assert results[name]["sample_len"] == 3
        assert (results[name]["score,none"], results[name]["lured,none"]) == (0.0, 0.0)
    assert results["fathom_niah"]["sample_len"] == 6 and results["fathom_niah"]["score,none"] == 0.0


def test_a_reader_of_the_needles_scores_what_it_answered_right(niah: Path, offline: None) -> None:
    """Right everywhere but at 1k's deepest needle, where it names another number: 2 of 3 at 1k, 3 of 3
    at 2k, 5 of 6 in the group. lm-eval sends each prompt as written, and fathom's answer budget."""

    def answer(facts: dict[str, Any]) -> str:
        wrong = facts["length"] == 1024 and facts["depth"] == 1.0
        return "The number is 1234567." if wrong else f"The number is {facts['answers'][0]}."

    model = reader(answer)
    results = evaluate(niah, ["fathom_niah"], model)
    assert results["fathom_niah_1024"]["score,none"] == pytest.approx(2 / 3)
    assert results["fathom_niah_2048"]["score,none"] == 1.0
    assert results["fathom_niah"]["score,none"] == pytest.approx(5 / 6)
    assert len(model.asked) == 6
    for doc, context, options in model.asked:
        assert context == doc["prompt"]  # no template, description or delimiter added
        assert options["until"] == [] and options["max_gen_toks"] == 32 and options["do_sample"] is False


def test_an_answer_taken_in_by_a_distractor_scores_zero_and_is_lured(tmp_path: Path, offline: None) -> None:
    out = tmp_path / "hard"
    spec = RunSpec("niah", "lm-eval", "cl100k_base", (1024,), (0.25, 0.75), 1, distractors=1, control=False)
    export_lm_eval(spec, out)
    written = docs(out / "fathom_niah_1024.jsonl")
    assert [line["fathom"]["needle_roles"] for line in written] == [["gold", "key-distractor"]] * 2
    assert [len(line["fathom"]["lures"]) for line in written] == [1, 1]

    def answer(facts: dict[str, Any]) -> str:  # the shallow doc's distractor, the deep doc's gold
        taken = facts["depth"] == 0.25
        return facts["lures"][0] if taken else facts["answers"][0]

    results = evaluate(out, ["fathom_niah"], reader(answer))
    assert results["fathom_niah_1024"]["score,none"] == 0.5
    assert results["fathom_niah_1024"]["lured,none"] == 0.5


def test_lm_evals_own_command_runs_the_folder(niah: Path, tmp_path: Path) -> None:
    """``lm_eval --model dummy --include_path DIR --tasks fathom_niah`` as a user types it (some 20 s on
    a loaded 2-core machine, most of it lm-eval's imports)."""
    pytest.importorskip("lm_eval")
    command = shutil.which("lm_eval", path=str(Path(sys.executable).parent))
    assert command is not None
    done = subprocess.run(
        [command, "--model", "dummy", "--include_path", str(niah), "--tasks", "fathom_niah"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, **OFFLINE},
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    rows = [line for line in done.stdout.splitlines() if "fathom_niah" in line]
    assert any("fathom_niah_1024" in row and "|lured |" in row for row in rows)
    assert "|score |↑  |    0|" in done.stdout


def test_the_folders_hooks_say_when_fathom_cannot_be_imported(niah: Path) -> None:
    """Without site-packages or PYTHONPATH (python -I -S), fathom is not importable: one clear ImportError."""
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", f"import runpy; runpy.run_path({str(niah / 'utils.py')!r})"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1
    assert (
        "ImportError: these fathom tasks are graded by fathom, which this Python cannot import: install "
        "fathom-eval (fathom's distribution; not the package named fathom) where lm_eval runs" in done.stderr
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["niah", "--tokenizer", "hf:/no/such/tokenizer", "--lengths", "1k"], "no tokenizer.json at"),
        (["niah", "--lengths", "1k"], "export-lm-eval has no model whose own tokenizer 'auto' could be"),
        (["nosuch", "--tokenizer", "cl100k_base"], "unknown task 'nosuch'"),
        (["niah", "--tokenizer", "cl100k_base", "--lengths", "64"], "length 64 is below this prompt's"),
        (["perplexity", "--tokenizer", "cl100k_base"], "'perplexity' scores documents"),
        (["longbench", "--tokenizer", "cl100k_base"], "'longbench' reads a real suite's official files"),
        (["niah", "--tokenizer", "cl100k_base", "--ops", "4"], "--ops goes with state runs"),
        (["listing", "--tokenizer", "cl100k_base", "--lengths", "1k", "--items", "128"], "--items 128 does"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_no_folder(
    args: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    assert cli("export-lm-eval", *args, "--out", out) == 2
    error = capsys.readouterr().err
    assert error.startswith("fathom: error: ") and message in error and error.count("\n") == 1
    assert not out.exists()


class Lengthening:
    """cl100k_base whose decoded text gains words: a tokenizer whose text does not encode back to the
    prompt's length."""

    def __init__(self) -> None:
        self.inner = load_tokenizer("cl100k_base")

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def decode(self, ids: list[int]) -> str:
        return self.inner.decode(ids) + " and twenty more words" * 4  # 16 tokens more


def test_a_text_that_does_not_encode_back_to_its_length_is_refused_before_any_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(lm_eval_export, "load_tokenizer", lambda name: Lengthening())
    out = tmp_path / "out"
    assert cli("export-lm-eval", *NIAH, "--out", out) == 2
    error = capsys.readouterr().err
    assert (
        "sample niah|L1024|D0.0000|S0: its text encodes to 1040 tokens of cl100k_base, built at 1024" in error
    )
    assert not out.exists()


def test_a_task_whose_budgets_differ_asks_for_the_largest(tmp_path: Path) -> None:
    """mrcr's budget is each sample's piece of writing: the task's max_gen_toks is the largest."""
    spec = RunSpec("mrcr", "lm-eval", "cl100k_base", (2048,), (), 4, repeats=(2,), control=False)
    export_lm_eval(spec, tmp_path / "mrcr")
    written = docs(tmp_path / "mrcr" / "fathom_mrcr_2_2048.jsonl")
    budgets = [line["fathom"]["max_new_tokens"] for line in written]
    assert len(set(budgets)) > 1
    assert f"  max_gen_toks: {max(budgets)}\n" in (tmp_path / "mrcr" / "fathom_mrcr_2_2048.yaml").read_text()
    assert {line["fathom"]["grader"]["method"] for line in written} == {"mrcr"}


def test_an_out_holding_anything_else_is_refused_untouched(
    niah: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.yaml").write_text("task: mine\n")
    assert cli("export-lm-eval", *NIAH, "--out", foreign) == 2
    assert "holds other files than an export" in capsys.readouterr().err
    assert files(foreign) == {"notes.yaml": b"task: mine\n"}
    other = tmp_path / "other"
    shutil.copytree(niah, other)
    before = files(other)
    assert cli("export-lm-eval", *NIAH[:-1], "2", "--out", other) == 2  # two samples, not one
    assert "holds an export of another spec" in capsys.readouterr().err
    assert files(other) == before


def test_the_same_spec_again_writes_the_same_files(niah: Path, tmp_path: Path) -> None:
    again = tmp_path / "again"
    shutil.copytree(niah, again)
    (again / "fathom_niah_1024.jsonl").write_text("damaged\n")  # a half-written folder, taken back
    assert cli("export-lm-eval", *NIAH, "--out", again) == 0
    assert files(again) == files(niah)
    empty = tmp_path / "empty"
    empty.mkdir()
    assert cli("export-lm-eval", *NIAH, "--out", empty) == 0
    assert files(empty) == files(niah)


def test_a_link_in_the_folder_is_replaced_never_written_through(niah: Path, tmp_path: Path) -> None:
    again, target = tmp_path / "again", tmp_path / "elsewhere.txt"
    shutil.copytree(niah, again)
    target.write_text("keep me\n")
    (again / "utils.py").unlink()
    (again / "utils.py").symlink_to(target)
    assert cli("export-lm-eval", *NIAH, "--out", again) == 0
    assert target.read_text() == "keep me\n"
    assert not (again / "utils.py").is_symlink() and files(again) == files(niah)


# The graders as lm-eval metrics, on facts written by hand.
def facts(
    answers: list[str], grader: dict[str, Any], lures: tuple[str, ...] = (), alike: tuple[str, ...] = ()
) -> dict[str, Any]:
    return {"answers": answers, "grader": grader, "lures": list(lures), "look_alikes": list(alike)}


@pytest.mark.parametrize(
    ("given", "output", "metrics"),
    [
        (facts(["2484111"], {"method": "contains"}), "It is 2484111.", {"score": 1.0, "lured": 0.0}),
        (facts(["2484111"], {"method": "contains"}), "It is 12484111.", {"score": 0.0, "lured": 0.0}),
        # a distractor's value committed to zeroes the score; one rejected does not
        (
            facts(["2484111"], {"method": "contains"}, ("9546144",)),
            "2484111 or 9546144",
            {"score": 0.0, "lured": 1.0},
        ),
        (
            facts(["2484111"], {"method": "contains"}, ("9546144",)),
            "2484111, not 9546144",
            {"score": 1.0, "lured": 0.0},
        ),
        # RULER's other keys' values are flagged, the score left as the metric gives it
        (facts(["11", "22"], {"method": "all"}, alike=("33",)), "11 and 33", {"score": 0.5, "lured": 1.0}),
        # listing's item F1: one of two ids named, nothing else: precision 1, recall 1/2, F1 2/3
        (
            facts(["#60346", "#91963"], {"task": "listing", "keywords": {}}),
            "#60346",
            {"score": 2 / 3, "lured": 0.0},
        ),
        # babi: right only when the answer names the reference and no other of the story's labels
        (
            facts(
                ["Hall"],
                {"task": "babi", "keywords": {"labels": ["Hall", "Barn"], "question": "Where is Ann?"}},
            ),
            "Hall.",
            {"score": 1.0, "lured": 0.0},
        ),
        (
            facts(
                ["Hall"],
                {"task": "babi", "keywords": {"labels": ["Hall", "Barn"], "question": "Where is Ann?"}},
            ),
            "Hall or Barn.",
            {"score": 0.0, "lured": 0.0},
        ),
    ],
)
def test_the_metrics_are_the_runs_grades(
    given: dict[str, Any], output: str, metrics: dict[str, float]
) -> None:
    assert grade(given, output) == pytest.approx(metrics)
    assert lm_eval_metrics.process_results({"fathom": json.dumps(given)}, [output]) == pytest.approx(metrics)


def test_a_doc_naming_an_unknown_grader_is_refused() -> None:
    with pytest.raises(ExportedGraderError, match="a doc names a grader fathom does not know"):
        grade(facts(["1"], {"task": "os.system"}), "1")


def test_a_sample_names_its_grader_as_data_or_is_refused() -> None:
    spec = RunSpec("babi:qa1", "lm-eval", "cl100k_base", (1024,), (), 1, control=False)
    task = registry.create_task(spec, load_tokenizer("cl100k_base"))
    sample = task.prepare(next(iter(task.cells())))
    assert isinstance(sample, Sample) and isinstance(sample.grader, functools.partial)
    named = grader_of(sample)
    assert named["task"] == "babi" and named["keywords"]["question"] == sample.question
    plain = dataclasses.replace(sample, grader=listing.grade)
    assert grader_of(plain) == {"task": "listing", "keywords": {}}
    assert grader_of(dataclasses.replace(sample, grader=None, scoring="exact")) == {"method": "exact"}
    own = dataclasses.replace(sample, grader=lambda output, references: babi.grade(output, references))
    with pytest.raises(FathomError, match="task 'babi:qa1' grades with a grader of its own"):
        grader_of(own)
