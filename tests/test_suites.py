"""The real suites end to end: files in each suite's exact layout (written here, never copies of real
data), the middle truncation recorded, and bad input refused in one line before any folder is made."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fathom import registry
from fathom.backends.base import BackendEntry, Completion, Request
from fathom.backends.sim import SimulatedBackend
from fathom.cli import main
from fathom.prompts.tokenizers import load_tokenizer
from fathom.records import record_from_json
from fathom.tasks.suites.truncation import cut_middle, kept_ends

FILLER = "The river ran past the mill and the town slept. " * 40  # about 2,000 characters


def _jsonl(path: Path, items: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(item, ensure_ascii=False) + "\n" for item in items), encoding="utf-8")


def longbench_item(number: int, context: str = FILLER) -> dict[str, Any]:
    return {
        "input": f"Who built mill {number}?",
        "context": f"{context} Mill {number} was built by Ada Lovelace. {context}",
        "answers": ["Ada Lovelace"],
        "length": 3000 + 3000 * number,
        "dataset": "hotpotqa",
        "language": "en",
        "all_classes": None,
        "_id": f"id{number}",
    }


def write_suites(folder: Path) -> Path:
    """One small file of every layout: LongBench, LongBench-E, LongBench v2 and InfiniteBench."""
    folder.mkdir(parents=True, exist_ok=True)
    _jsonl(folder / "hotpotqa.jsonl", [longbench_item(i) for i in range(3)])
    _jsonl(folder / "hotpotqa_e.jsonl", [longbench_item(i) for i in range(3)])
    v2 = {
        "_id": "v2a",
        "domain": "Single-Document QA",
        "sub_domain": "Novel",
        "difficulty": "hard",
        "length": "short",
        "question": "Who built the mill?",
        "choice_A": "Ada",
        "choice_B": "Bob",
        "choice_C": "Cy",
        "choice_D": "Di",
        "answer": "A",
        "context": FILLER,
    }
    (folder / "data.json").write_text(json.dumps([v2, {**v2, "_id": "v2b", "difficulty": "easy"}]))
    passkey = {"id": 0, "context": FILLER + " The pass key is 71432. " + FILLER, "answer": ["71432"]}
    _jsonl(folder / "passkey.jsonl", [{**passkey, "input": "What is the pass key?", "options": []}])
    return folder


def run(*args: str) -> int:
    return main(["run", *args, "--model", "sim:perfect", "--no-progress"])


def records(folder: Path) -> list[Any]:
    lines = (folder / "samples.jsonl").read_text().splitlines()
    return [record_from_json(json.loads(line)) for line in lines]


def test_the_suites_keep_their_ends_and_cut_the_middle() -> None:
    assert kept_ends(10, 4, "longbench") == (2, 2)
    assert kept_ends(10, 5, "longbench") == (2, 2)  # int(5 / 2) at each end
    assert kept_ends(10, 5, "longbench-v2") == (2, 3)  # -5 // 2 is -3: one more at the end
    assert kept_ends(10, 10, "infinitebench") == (10, 0)
    ids = [np.arange(a, b, dtype=np.int32) for a, b in ((1, 3), (3, 9), (9, 11))]
    kept = cut_middle(*ids, limit=6, suite="longbench")
    assert [k.tolist() for k in (kept.before, kept.context, kept.after)] == [[1, 2], [3, 8], [9, 10]]
    kept = cut_middle(*ids, limit=2, suite="longbench")  # shorter than the ends: they are cut too
    assert [k.tolist() for k in (kept.before, kept.context, kept.after)] == [[1], [], [10]]


def test_a_longbench_run_records_its_truncation(tmp_path: Path) -> None:
    data = write_suites(tmp_path / "data")
    out = tmp_path / "run"
    argv = ["longbench", "--suite-tasks", "hotpotqa", "--data", str(data), "--tokenizer", "char"]
    assert run(*argv, "--lengths", "1k,8k", "--samples", "3", "--run-dir", str(out), "--no-control") == 0
    by_id = {r.sample_id: r for r in records(out)}
    cut, whole = by_id["hotpotqa|L1024|S0"], by_id["hotpotqa|L8192|S0"]
    assert cut.truncated and not whole.truncated
    assert cut.original_tokens == whole.original_tokens == whole.actual_tokens
    assert cut.actual_tokens < cut.original_tokens
    assert cut.scoring == "longbench:qa_f1" and cut.max_new_tokens == 32  # LongBench's hotpotqa budget
    # The simulated model answers with the evidence's sentence, "Mill 0 was built by Ada Lovelace.":
    # 7 words against the reference's 2, both shared, so p = 2/7, r = 1 and F1 = 4/9.
    assert whole.item_id == "id0" and whole.score == pytest.approx(4 / 9)
    suites = json.loads((out / "summary.json").read_text())["suites"]
    assert suites["truncated"] == 3 and suites["samples"] == 6
    # The 1k limit keeps 1,024 tokens of the filled prompt; the template's own tokens come on top, so
    # those prompts sit in the 2k bin of the actual-length grid (the uncut ones, ~4.2k, in the 8k one).
    assert {row["length"] for row in suites["by_actual_length"]} == {2048, 8192}


def test_longbench_e_v2_and_infinitebench_read_their_layouts(tmp_path: Path) -> None:
    data = write_suites(tmp_path / "data")
    common = ["--data", str(data), "--tokenizer", "char", "--lengths", "8k", "--no-control"]
    for suite, task in (
        ("longbench-e", "hotpotqa"),
        ("longbench-v2", "longbench-v2"),
        ("infinitebench", "passkey"),
    ):
        out = tmp_path / suite
        assert run(suite, "--suite-tasks", task, *common, "--run-dir", str(out)) == 0
        rows = records(out)
        assert rows and all(r.task == task for r in rows)
    groups = {r.item_id: r.item_groups for r in records(tmp_path / "longbench-v2")}
    assert groups["v2a"] == ("difficulty:hard", "length:short", "domain:Single-Document QA")
    e_groups = [r.item_groups for r in records(tmp_path / "longbench-e")]
    assert e_groups == [("length:0-4k",), ("length:4-8k",), ("length:8k+",)]
    (passkey,) = records(tmp_path / "infinitebench")
    assert passkey.scoring == "infinitebench:passkey" and passkey.max_new_tokens == 6


# Answers set by hand, by sample (each suite's items in file order), for the scores worked out below.
SCRIPT = {
    "longbench-v2": [
        "The correct answer is (A)",  # item A: A, right
        "The correct answer is **(B)**",  # item B: markdown's asterisks dropped first: B, right
        "Not (C): The correct answer is (D)",  # item C: the pattern's letter, D, wrong
        "The answer is D",  # item D: not the official wording, no letter: wrong
    ],
    "passkey": [
        "The pass key is 71432.",  # the first run of digits is the key: right
        "71432",  # right
        "Key 7, then 71432",  # the first run of digits is 7: wrong
        "714320",  # a run of digits, not the key: wrong
    ],
}


class _Scripted(SimulatedBackend):
    """Answers each sample with SCRIPT's answer for its task and sample number."""

    def generate(self, requests: Sequence[Request]) -> list[Completion]:
        def scripted(request: Request, answer: Completion) -> Completion:
            task, _, sample = request.sample_id.split("|")
            return dataclasses.replace(answer, text=SCRIPT[task][int(sample.removeprefix("S"))])

        return [scripted(r, a) for r, a in zip(requests, super().generate(requests), strict=True)]


def test_longbench_v2_and_infinitebench_score_by_their_official_rules_end_to_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scripted = lambda rest, _: _Scripted(rest, load_tokenizer("char"))  # noqa: E731
    monkeypatch.setitem(registry.BACKENDS, "scripted", BackendEntry(scripted, "answers set by hand"))
    data = tmp_path / "data"
    data.mkdir()
    v2 = [
        {"_id": f"v2{letter}", "domain": "Single-Document QA", "sub_domain": "Novel",
         "difficulty": difficulty, "length": "short", "question": f"Who built mill {letter}?",
         "choice_A": "Ada", "choice_B": "Bob", "choice_C": "Cy", "choice_D": "Di", "answer": letter,
         "context": FILLER}
        for letter, difficulty in zip("ABCD", ("easy", "easy", "hard", "hard"), strict=True)
    ]  # fmt: skip
    (data / "data.json").write_text(json.dumps(v2))
    passkey = {"context": FILLER + " The pass key is 71432. " + FILLER, "answer": ["71432"]}
    items = [{**passkey, "id": i, "input": "What is the pass key?", "options": []} for i in range(4)]
    _jsonl(data / "passkey.jsonl", items)
    common = ["--data", str(data), "--tokenizer", "char", "--lengths", "8k", "--samples", "4", "--no-control"]
    for suite, task in (("longbench-v2", "longbench-v2"), ("infinitebench", "passkey")):
        argv = ["run", suite, "--suite-tasks", task, *common, "--model", "scripted:perfect"]
        assert main([*argv, "--run-dir", str(tmp_path / suite), "--no-progress"]) == 0
    v2_scores = {r.item_id: r.score for r in records(tmp_path / "longbench-v2")}
    assert v2_scores == {"v2A": 1.0, "v2B": 1.0, "v2C": 0.0, "v2D": 0.0}
    assert [r.score for r in records(tmp_path / "infinitebench")] == [1.0, 1.0, 0.0, 0.0]
    # The suites' numbers: 2 of 4 in each; v2's by difficulty, both easy items and neither hard one.
    for suite in ("longbench-v2", "infinitebench"):
        summary = json.loads((tmp_path / suite / "summary.json").read_text())["suites"]
        assert [(row["n"], row["mean"]) for row in summary["by_task"]] == [(4, 0.5)]
    splits = json.loads((tmp_path / "longbench-v2" / "summary.json").read_text())["suites"]["splits"]
    assert {(s["split"], s["n"], s["mean"]) for s in splits if s["split"].startswith("difficulty")} == {
        ("difficulty:easy", 2, 1.0),
        ("difficulty:hard", 2, 0.0),
    }


@pytest.mark.parametrize(
    ("setup", "args", "message"),
    [
        (None, ["--suite-tasks", "hotpotqa"], "qasper.jsonl, which is missing"),
        ("bad-line", ["--suite-tasks", "hotpotqa"], "hotpotqa.jsonl line 2 is not JSON"),
        ("no-field", ["--suite-tasks", "hotpotqa"], "hotpotqa.jsonl line 1 has no field 'answers'"),
        (None, ["--suite-tasks", "hotpotqa,nosuch"], "has no task 'nosuch': use --suite-tasks with some of"),
        (None, ["--suite-tasks", "hotpotqa", "--no-truncate"], "--no-truncate forbids cutting them"),
    ],
)
def test_bad_input_is_one_line_and_leaves_no_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], setup: str | None, args: list[str], message: str
) -> None:
    data = write_suites(tmp_path / "data")
    if setup == "bad-line":
        (data / "hotpotqa.jsonl").write_text(json.dumps(longbench_item(0)) + "\n{not json\n")
    elif setup == "no-field":
        item = longbench_item(0)
        del item["answers"]
        _jsonl(data / "hotpotqa.jsonl", [item])
    if message.startswith("qasper"):
        args = ["--suite-tasks", "hotpotqa,qasper"]
    out = tmp_path / "runs"
    argv = [
        "longbench",
        *args,
        "--data",
        str(data),
        "--tokenizer",
        "char",
        "--lengths",
        "1k",
        "--out",
        str(out),
    ]
    assert run(*argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err
    assert not out.exists()


def test_a_suite_needs_its_data_folder_and_other_tasks_refuse_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run("longbench", "--lengths", "1k", "--out", str(tmp_path)) == 2
    assert "pass --data DIR" in capsys.readouterr().err
    assert run("niah", "--data", str(tmp_path), "--lengths", "1k", "--out", str(tmp_path)) == 2
    assert "--data goes with longbench" in capsys.readouterr().err


@pytest.mark.ruler_data
def test_the_demo_set_is_in_longbenchs_layout(tmp_path: Path) -> None:
    assert main(["suites", "make-demo", str(tmp_path), "--items", "3"]) == 0
    lines = [json.loads(line) for line in (tmp_path / "hotpotqa.jsonl").read_text().splitlines()]
    assert len(lines) == 3
    assert set(lines[0]) == {
        "input",
        "context",
        "answers",
        "length",
        "dataset",
        "language",
        "all_classes",
        "_id",
    }
    assert lines[0]["context"].startswith("Passage 1:\n")
    assert (tmp_path / "multifieldqa_en_e.jsonl").is_file()


def test_a_suite_run_prints_its_truncation_not_rulers_thresholds() -> None:
    from fathom.report.text import suite_text

    suites = {
        "truncated": 2,
        "samples": 5,
        "truncation": [
            {"task": "hotpotqa", "length": 2048, "truncated": 2, "max_removed_tokens": 1234},
            {"task": "hotpotqa", "length": 8192, "truncated": 0, "max_removed_tokens": 0},
        ],
    }
    (line,) = suite_text(suites)
    assert "2 of 5 prompts cut" in line and "at most 1,234 tokens" in line
    (none,) = suite_text({**suites, "truncated": 0, "truncation": []})
    assert "0 of 5 prompts cut to their limit;" in none
