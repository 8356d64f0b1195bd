"""The command line end to end on simulated models: run, resume, kill, report, bad input."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fathom.cli import main

SWEEP = ["--tokenizer", "cl100k_base", "--lengths", "1k,2k,4k,8k", "--depths", "5", "--samples", "3"]


def cli(*args: str | Path) -> int:
    return main([str(a) for a in args])


def lines(folder: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in (folder / "samples.jsonl").read_text().splitlines()]


def samples(folder: Path) -> list[dict[str, object]]:
    """The graded samples, without their no-context controls."""
    return [r for r in lines(folder) if not r.get("control")]


def test_run_writes_the_folder_and_a_rerun_resumes_without_duplicates(
    runs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = runs / "cliff"
    assert (
        cli("run", "niah", "--model", "sim:cliff?window=2k", *SWEEP, "--run-dir", folder, "--no-progress")
        == 0
    )
    records = samples(folder)
    assert len(records) == 4 * 5 * 3 and len(lines(folder)) == 2 * len(records)  # and a control each
    assert {p.name for p in folder.iterdir()} >= {
        "manifest.json",
        "samples.jsonl",
        "summary.json",
        "heatmap.png",
    }
    summary = json.loads((folder / "summary.json").read_text())
    by_length = {row["length"]: row["mean"] for row in summary["lengths"]}
    assert by_length[1024] > 0.85 and by_length[2048] > 0.85
    assert by_length[4096] < 0.2 and by_length[8192] < 0.2
    assert summary["effective_length"]["mean"] == 2048
    assert all(r["actual_tokens"] == r["target_tokens"] for r in records)
    assert all(r["beyond_window"] == (r["length"] > 2048) for r in records)

    capsys.readouterr()
    before = lines(folder)
    assert (
        cli("run", "niah", "--model", "sim:cliff?window=2k", *SWEEP, "--run-dir", folder, "--no-progress")
        == 0
    )
    assert "samples written: 0, already done: 120" in capsys.readouterr().out
    assert lines(folder) == before


@pytest.mark.parametrize("kind", ["text", "chat"])
def test_text_and_chat_inputs_carry_the_whole_needle(runs: Path, kind: str) -> None:
    folder = runs / kind
    model = f"sim:perfect?input={kind}"
    assert cli("run", "niah", "--model", model, *SWEEP, "--run-dir", folder, "--no-progress") == 0
    records = lines(folder)  # the controls too: their shorter prompts travel the same way
    assert all(r["error"] is None and r["actual_tokens"] == r["target_tokens"] for r in records)
    assert all(r["score"] == (0.0 if r.get("control") else 1.0) for r in records)


@pytest.mark.parametrize(
    ("method", "recorded", "score"),
    [(None, "contains", 1.0), ("contains", "contains", 1.0), ("exact", "exact", 0.0), ("all", "all", 1.0),
     ("any", "any", 1.0)],
)  # fmt: skip
def test_niah_grades_with_the_scoring_it_is_given(
    runs: Path, method: str | None, recorded: str, score: float
) -> None:
    folder = runs / str(method)
    options = "--model sim:perfect --tokenizer char --lengths 1k --depths 2 --samples 2 --no-progress"
    chosen = [] if method is None else ["--scoring", method]
    assert cli("run", "niah", *options.split(), *chosen, "--run-dir", folder) == 0
    assert json.loads((folder / "manifest.json").read_text())["identity"]["spec"]["scoring"] == method
    assert {r["scoring"] for r in lines(folder)} == {recorded}  # the no-context controls too
    graded = samples(folder)
    assert len(graded) == 4
    for r in graded:
        # sim:perfect answers with the whole needle sentence: it holds the one answer (contains, all and
        # any find it) and is longer than it (exact does not).
        (answer,), output = r["answers"], str(r["output"])
        assert answer in output and output.strip(" .") != answer
        assert (r["score"], r["matched"]) == (score, [answer] if score else [])
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["lengths"][0]["mean"] == score


def test_default_folder_is_derived_from_the_spec(runs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = [*"run niah --model sim:perfect --tokenizer char --lengths 2k --depths 3 --samples 1".split(),
            "--out", runs, "--no-progress"]  # fmt: skip
    assert cli(*args) == 0
    assert cli(*args) == 0
    folders = list(runs.iterdir())
    assert len(folders) == 1 and folders[0].name.startswith("niah-sim-perfect-")
    assert "already done: 6" in capsys.readouterr().out  # 3 samples, 3 controls


def test_a_killed_run_loses_nothing_and_resumes(runs: Path) -> None:
    folder = runs / "killed"
    options = "--tokenizer char --corpus noise --lengths 1k,2k --depths 11 --samples 3 --no-progress"
    args = [sys.executable, "-m", "fathom.cli", "run", "niah", "--model", "sim:yarn?delay=0.05",
            *options.split(), "--run-dir", str(folder)]  # fmt: skip
    process = subprocess.Popen(
        args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=os.environ.copy()
    )
    samples = folder / "samples.jsonl"
    deadline = time.monotonic() + 600  # the kill waits for the run's progress: only a hang meets this
    while (
        time.monotonic() < deadline
        and process.poll() is None
        and (not samples.exists() or len(samples.read_text().splitlines()) < 20)
    ):
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait()
    written = samples.read_text().splitlines()
    assert 20 <= len(written) < 132, "the run should have been killed part-way"

    assert subprocess.run(args, check=False).returncode == 0
    ids = [r["sample_id"] for r in lines(folder)]
    assert len(ids) == len(set(ids)) == 132  # 66 samples and their controls
    assert lines(folder)[: len(written) - 1] == [json.loads(x) for x in written[:-1]]


def test_report_rederives_summary_and_heatmap(runs: Path) -> None:
    folder = runs / "rep"
    options = "--model sim:perfect --tokenizer char --lengths 1k --depths 2 --samples 1 --no-progress"
    assert cli("run", "niah", *options.split(), "--run-dir", folder) == 0
    derived = {name: (folder / name).read_bytes() for name in ("summary.json", "heatmap.png", "report.html")}
    for name in derived:
        (folder / name).unlink()
    assert cli("report", folder) == 0
    # The same files as the run wrote, from the records alone.
    assert {name: (folder / name).read_bytes() for name in derived} == derived
    assert json.loads(derived["summary.json"])["samples"] == 2
    assert derived["heatmap.png"].startswith(b"\x89PNG\r\n\x1a\n")


BAD_INPUTS = [
    (["--model", "gpt5"], "unknown model 'gpt5'"),
    (["--model", "sim:psychic"], "unknown simulated model"),
    (["--tokenizer", "nope"], "unknown tokenizer 'nope'"),
    (["--corpus", "nowhere"], "unknown corpus 'nowhere'"),
    (["--lengths", "0"], "positive"),
    (["--lengths", "100"], "below this prompt's fixed overhead"),
    (["--depths", "0,1.5"], r"\[0, 1\]"),
    (["--samples", "0"], r"must lie in 1\.\.100000"),
    (["--samples", "1000000000"], r"must lie in 1\.\.100000.*got 1000000000"),
    (["--lengths", "1000000M"], r"1\.05e\+12 tokens is beyond fathom's limit of 32M"),
    (["--lengths", "99999999999999999999999"], "beyond fathom's limit"),
    (["--depths", "100000000"], r"count of 1\.\.1001 depths, not 100000000"),
    (["--depths", "nan"], "cannot read depths 'nan'"),
    (["--samples", "100000", "--lengths", "1k,2k,4k", "--depths", "11"], r"plans 3\.3e\+06 samples per task"),
    (["--order", "sideways"], "unknown order 'sideways'"),
    (["--needle", "pin"], "unknown needle kind"),
    (["--scoring", "vibes"], "unknown scoring"),
    (["--template", "fancy"], "unknown chat template"),
]


@pytest.mark.parametrize(("extra", "message"), BAD_INPUTS)
def test_bad_input_is_one_clear_line_and_exit_2(
    runs: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    base = {
        "--model": "sim:perfect",
        "--tokenizer": "char",
        "--lengths": "1k",
        "--depths": "3",
        "--samples": "1",
    }
    options = dict(base)
    options.update(dict(zip(extra[::2], extra[1::2], strict=True)))
    args = [x for pair in options.items() for x in pair]
    assert cli("run", "niah", *args, "--out", runs, "--no-progress") == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("fathom: error: ") and "\n" not in err
    assert re.search(message, err)
    assert not runs.exists()  # refused before any folder was made


def test_unknown_task_and_empty_corpus_folder(
    runs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    common = [
        "--model",
        "sim:perfect",
        "--tokenizer",
        "char",
        "--lengths",
        "1k",
        "--out",
        runs,
        "--no-progress",
    ]
    assert cli("run", "ruler9", *common) == 2
    assert "unknown task 'ruler9'" in capsys.readouterr().err
    empty = tmp_path / "empty"
    empty.mkdir()
    assert cli("run", "niah", *common, "--corpus", f"dir:{empty}") == 2
    assert "holds no non-empty .txt" in capsys.readouterr().err
    (empty / "blank.txt").write_text("   \n")
    assert cli("run", "niah", *common, "--corpus", f"dir:{empty}") == 2
    assert "holds no non-empty .txt" in capsys.readouterr().err


def test_a_folder_of_another_spec_is_refused_and_kept(runs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = runs / "mine"
    common = [
        *"--tokenizer char --lengths 1k --depths 2 --samples 1 --no-progress".split(),
        "--run-dir",
        folder,
    ]
    assert cli("run", "niah", "--model", "sim:perfect", *common) == 0
    before = (folder / "samples.jsonl").read_text()
    assert cli("run", "niah", "--model", "sim:cliff", *common) == 2
    err = capsys.readouterr().err
    assert "holds a different run" in err and "--run-dir" in err
    assert (folder / "samples.jsonl").read_text() == before


def test_user_corpus_folder_is_read_sorted_and_hashed(runs: Path, tmp_path: Path) -> None:
    texts = tmp_path / "texts"
    texts.mkdir()
    (texts / "b.txt").write_text("Second file here. It has two sentences.")
    (texts / "a.txt").write_text("First file here.\n\nIt is short. Very short indeed!")
    folder = runs / "user"
    options = "--model sim:perfect --tokenizer char --lengths 1k --depths 3 --samples 2 --no-progress"
    assert cli("run", "niah", *options.split(), "--corpus", f"dir:{texts}", "--run-dir", folder) == 0
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["identity"]["task"]["corpus"] == f"dir:{texts}"
    assert all(r["score"] == 1.0 for r in samples(folder))


def test_a_local_model_folder_brings_its_tokenizer_and_chat_template(runs: Path, hf_model_dir: Path) -> None:
    folder = runs / "hf"
    options = "--model sim:perfect?input=text --lengths 1k,3k --depths 3 --samples 2 --no-progress"
    assert cli("run", "niah", *options.split(), "--tokenizer", f"hf:{hf_model_dir}", "--run-dir", folder) == 0
    identity = json.loads((folder / "manifest.json").read_text())["identity"]
    assert identity["task"]["template"] == f"tokenizer:hf:{hf_model_dir}"
    records = samples(folder)
    assert len(records) == 12
    assert all(r["score"] == 1.0 and r["actual_tokens"] == r["target_tokens"] for r in records)


def test_resume_retries_backend_errors_and_counts_each_sample_once(
    runs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = runs / "retry"
    options = "--model sim:perfect --tokenizer char --lengths 1k,2k --depths 3 --samples 2 --no-progress"
    options += " --no-control"
    assert cli("run", "niah", *options.split(), "--run-dir", folder) == 0
    first = lines(folder)
    # As if a server had failed on three samples and a prompt had missed its length on one.
    failed = [dict(r, error="backend_error: HTTP 503", score=0.0, output="") for r in first[:3]]
    final = dict(first[3], error="length_mismatch: 990 tokens for a target of 1024", score=0.0)
    kept = [*failed, final, *first[4:]]
    (folder / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in kept))

    capsys.readouterr()
    # The length miss is final: the run ends, with status 3 and what a retry cannot mend.
    assert cli("run", "niah", *options.split(), "--run-dir", folder) == 3
    assert "1 samples ended in errors a retry cannot mend" in capsys.readouterr().err
    raw = lines(folder)
    assert len(raw) == len(first) + 3  # the failed attempts stay on record, append-only
    assert [r["sample_id"] for r in raw[-3:]] == [r["sample_id"] for r in failed]
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["samples"] == len(first) and summary["errors"] == 1
    assert summary["error_kinds"] == {"length_mismatch": 1}


def test_models_lists_installed_small_models_and_backends(capsys: pytest.CaptureFixture[str]) -> None:
    from fathom.backends.local_models import LOCAL_MODELS

    assert cli("models") == 0
    out = capsys.readouterr().out
    for model in LOCAL_MODELS:
        path = model.locate()
        assert model.shorthand in out
        assert (f"installed: {path}" if path else "not installed") in out
    assert "sim:cliff" in out and re.search(r"^  llamacpp +llama\.cpp in process", out, re.MULTILINE)


def test_order_changes_when_prompts_are_sent_not_what_they_score(
    runs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    options = (
        "--model sim:lost-in-the-middle?window=4k --tokenizer char --lengths 1k,4k --depths 5 --samples 2"
    )
    results = {}
    for order in ("prefix", "shuffled"):
        folder = runs / order
        assert (
            cli("run", "niah", *options.split(), "--order", order, "--run-dir", folder, "--no-progress") == 0
        )
        results[order] = {r["sample_id"]: (r["prompt_sha256"], r["score"]) for r in lines(folder)}
        lengths = [r["length"] for r in samples(folder)]
        assert (lengths == sorted(lengths)) == (order == "prefix")
    assert results["prefix"] == results["shuffled"]
    assert "fathom's own share" in capsys.readouterr().out
    assert cli("run", "niah", *options.split(), "--order", "random", "--out", runs, "--no-progress") == 2
    assert "unknown order 'random'" in capsys.readouterr().err


def test_unusable_folders_are_one_line_each(
    runs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    afile = tmp_path / "afile"
    afile.write_text("not a folder")
    options = "--model sim:perfect --tokenizer char --lengths 1k --depths 1 --samples 1 --no-progress".split()
    cases: list[tuple[list[str | Path], str]] = [
        (["run", "niah", *options, "--run-dir", afile], r"run folder '.*afile' is a file"),
        (
            ["run", "niah", *options, "--run-dir", afile / "sub"],
            r"cannot create run folder .*Not a directory",
        ),
        (["report", tmp_path / "nope"], r"run folder '.*nope' does not exist"),
        (["report", afile], r"run folder '.*afile' is not a folder"),
    ]
    for args, message in cases:
        assert cli(*args) == 2
        err = capsys.readouterr().err
        assert re.search(f"^fathom: error: {message}", err) and err.count("\n") == 1, err

    good = runs / "good"
    assert cli("run", "niah", *options, "--run-dir", good) == 0
    (good / "summary.json").unlink()
    (good / "summary.json").mkdir()  # stands in for a read-only file: tests may run as root
    assert cli("report", good) == 2
    assert re.search(r"^fathom: error: cannot write .*summary.json: Is a directory$", capsys.readouterr().err)
    assert cli("compare", good, good, "--out", afile / "cmp") == 2
    assert re.search(r"^fathom: error: cannot use .*afile/cmp.*: Not a directory$", capsys.readouterr().err)

    with pytest.raises(SystemExit) as exit_:
        cli("run", "niah", *options, "--run-dir", "")
    assert exit_.value.code == 2
    assert "argument --run-dir: is empty" in capsys.readouterr().err


def test_run_help_shows_the_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli("run", "--help")
    text = " ".join(capsys.readouterr().out.split())
    for default in (
        "(default: 1k,2k,4k,8k)",
        "(default: 3)",
        "default: 11",
        "(default: auto)",
        "(default: 0)",
    ):
        assert default in text
    assert "(default: True)" not in text and "(default: None)" not in text
