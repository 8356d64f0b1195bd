"""Degenerate settings and hostile inputs (issue 30, items 8 and 9): each is refused with one line that
names the problem and the fix, exit 2, before anything is written; none is a traceback or accepted
silently."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fathom.cli import main
from fathom.errors import SpecError
from fathom.prompts.template_sandbox import MAX_SIZE, MAX_STEPS
from fathom.prompts.templates import CONTEXT_MARKER, ChatTemplate
from fathom.prompts.tokenizers import load_tokenizer

SMALL = ["--tokenizer", "cl100k_base", "--lengths", "1k", "--depths", "1", "--samples", "1", "--no-progress"]


def cli(*args: str | Path) -> int:
    return main([str(a) for a in args])


def refused(capsys: pytest.CaptureFixture[str], *args: str | Path) -> str:
    """The one error line of a command that must be refused with exit 2."""
    capsys.readouterr()
    assert cli(*args) == 2
    err = capsys.readouterr().err
    assert err.startswith("fathom: error: ") and err.count("\n") == 1, err
    return err


def run_args(folder: Path, *more: str | Path) -> list[str | Path]:
    return ["run", "niah", "--model", "sim:perfect", *SMALL, "--run-dir", folder, *more]


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("finished") / "run"
    assert cli(*run_args(folder)) == 0
    return folder


def test_a_run_dir_not_in_utf8_is_refused_before_the_run(tmp_path: Path) -> None:
    # Python passes a name that is not UTF-8 on as surrogates; the manifest and report.html cannot hold
    # them, which was found only after the whole run.
    folder = os.fsencode(tmp_path) + b"/run-\xff"
    command = [sys.executable, "-m", "fathom.cli", "run", "niah", "--model", "sim:perfect", *SMALL]
    done = subprocess.run([*command, "--run-dir", folder], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert "argument --run-dir: " in done.stderr and "is not UTF-8: name the folder in UTF-8" in done.stderr
    assert "Traceback" not in done.stderr
    assert list(tmp_path.iterdir()) == []


def test_an_out_folder_not_in_utf8_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli("run", "niah", "--model", "sim:perfect", *SMALL, "--out", tmp_path / "runs-\udcff")
    assert exit_.value.code == 2
    assert "argument --out: " in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_a_port_out_of_range_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for port in ("99999", "0"):
        model = f"openai:m@http://127.0.0.1:{port}/v1"
        err = refused(capsys, "run", "niah", "--model", model, *SMALL, "--run-dir", tmp_path / "run")
        assert f"the port in '{model}' is not one of 1..65535" in err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("source", "problem"),
    [
        (
            '{% include "other.jinja" %}',
            "uses {% include %}: a chat template must be one self-contained file",
        ),
        ('{% import "other.jinja" as o %}', "uses {% import %}"),
        ('{% from "other.jinja" import m %}', "uses {% from ... import %}"),
        ('{% extends "base.jinja" %}', "uses {% extends %}"),
        ("{% for i in range(10**9) %}{% endfor %}", "Range too big"),
        ("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", "steps"),
        ("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}", "RecursionError"),
        ('{{ "x" * 10**10 }}', "makes a text or list of more than"),
        ('{% set s = "xxxxxxxx" %}' + "{% set s = s ~ s %}" * 40, "makes a text or list of more than"),
        ('{% set s = ["x"] %}' + "{% set s = s + s %}" * 40, "makes a text or list of more than"),
        ('{{ "x" | center(10**8) }}', "makes a text or list of more than"),
        ('{% for i in range(100000) %}{{ "y" * 1000 }}{% endfor %}', "output grows beyond"),
        ("{{ 7 ** 100000 }}", "raises a number to a power above"),
        ("{{ 1 / 0 }}", "ZeroDivisionError"),
        ("{{ ''.__class__.__mro__ }}", "access to attribute '__class__' of 'str' object is unsafe"),
    ],
)
def test_a_hostile_chat_template_is_refused_with_one_line(source: str, problem: str) -> None:
    """A model's own template and a --template file render alike (ChatTemplate)."""
    template = ChatTemplate(
        "tokenizer:hostile", source + "{% for m in messages %}{{ m['content'] }}{% endfor %}"
    )
    tokenizer = load_tokenizer("char")
    with pytest.raises(SpecError, match="chat template 'tokenizer:hostile' failed to render") as refusal:
        template.wrap(tokenizer, None, f"a{CONTEXT_MARKER}b")
    assert problem in str(refusal.value) and "\n" not in str(refusal.value)
    assert str(refusal.value).endswith("fix the template or choose another with --template")


def test_the_bounds_leave_room_for_real_templates() -> None:
    """A template that loops over many messages and tools, well within the bounds, still renders."""
    assert MAX_STEPS >= 1_000_000 and MAX_SIZE >= 1 << 24
    source = (
        "{% macro tag(r) %}<{{ r }}{{ caller() if caller }}>{% endmacro %}"
        "{% for i in range(50000) %}{{ i % 2 }}{% endfor %}"
        "{% for m in messages %}{% call tag(m['role']) %}!{% endcall %}{{ tag(m['role']) }}"
        "{{ m['content'] | trim }}{% endfor %}{{ 2 ** 64 }}{{ 'ab' * 1000 }}"
    )
    head, tail = ChatTemplate("busy", source).wrap(load_tokenizer("char"), "s", f"a{CONTEXT_MARKER}b")
    assert head.endswith("<user!><user>a") and tail == "b" + str(2**64) + "ab" * 1000


def test_hostile_template_files_are_refused_before_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for source in ('{% include "x.jinja" %}', "{% for i in range(10**9) %}{% endfor %}"):
        path = tmp_path / "template.jinja"
        path.write_text(source + "{{ messages[0]['content'] }}")
        err = refused(capsys, *run_args(tmp_path / "run", "--template", path))
        assert "failed to render" in err
    assert not (tmp_path / "run").exists()


def test_an_export_not_in_utf8_is_named_with_its_line(
    finished: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "export.jsonl"
    example = json.dumps({"messages": [{"role": "user", "content": "hi"}]})
    path.write_bytes(f"{example}\n".encode() + b'{"messages": "\xff"}\n')
    err = refused(capsys, "export-check", path, finished)
    assert f"{path} line 2 is not UTF-8 text" in err


def test_a_max_new_tokens_beyond_any_context_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    err = refused(capsys, *run_args(tmp_path / "run", "--max-new-tokens", "10000000000"))
    assert "--max-new-tokens of 10,000,000,000 is beyond fathom's longest context, 32M tokens" in err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("threshold", ["2", "-1", "0", "nan", "inf"])
def test_a_threshold_outside_the_scores_is_refused_and_nothing_written(
    threshold: str, finished: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = {p.name: p.read_bytes() for p in finished.iterdir()}
    err = refused(capsys, "report", finished, "--threshold", threshold)
    assert "--threshold must be a score in (0, 1]" in err
    assert {p.name: p.read_bytes() for p in finished.iterdir()} == before


def test_a_threshold_of_one_is_a_score(finished: Path) -> None:
    assert cli("report", finished, "--threshold", "1") == 0
    assert json.loads((finished / "summary.json").read_text())["effective_length"]["threshold"] == 1.0
    assert cli("report", finished) == 0  # back to the default, for the other tests


@pytest.mark.parametrize("lengths", ["1k,,2k", "1k,2k,", ",1k", "1k, ,2k"])
def test_an_empty_length_is_refused(lengths: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    err = refused(capsys, *run_args(tmp_path / "run", "--lengths", lengths))
    assert f"--lengths '{lengths}' has an empty entry" in err
    assert not (tmp_path / "run").exists()


def test_out_beside_run_dir_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    err = refused(capsys, *run_args(tmp_path / "run", "--out", tmp_path / "runs"))
    assert "--out (the folder new run folders go in) and --run-dir (this exact run folder)" in err
    assert list(tmp_path.iterdir()) == []


def test_out_alone_still_names_the_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["run", "niah", "--model", "sim:perfect", *SMALL, "--no-control", "--out", tmp_path / "runs"]
    assert cli(*args) == 0
    assert [p.parent for p in (tmp_path / "runs").glob("*/manifest.json")] != []


def test_a_simulated_judge_is_no_model_under_test(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["run", "niah", "--model", "sim-judge:reference", *SMALL, "--run-dir", tmp_path / "run"]
    err = refused(capsys, *args)
    assert "'sim-judge:reference' is a simulated judge, not a model to test: give it as --judge" in err
    assert not (tmp_path / "run").exists()


def _rubric(tmp_path: Path, change: tuple[str, str]) -> Path:
    from fathom.prompts.judging import RUBRICS

    text = (RUBRICS / "summary-quality.toml").read_text(encoding="utf-8")
    assert change[0] in text
    path = tmp_path / "rubric.toml"
    path.write_text(text.replace(*change), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (("passing = 4", "passing = 4\npasing = 3"), "has unknown keys pasing: a rubric's keys are name,"),
        (
            ("scale = [1, 2, 3, 4, 5]", f"scale = {list(range(1, 100_001))}"),
            "scale has 100,000 scores: at most",
        ),
    ],
)
def test_a_rubric_with_an_unknown_key_or_a_vast_scale_is_refused_before_the_run(
    change: tuple[str, str], problem: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rubric = _rubric(tmp_path, change)
    judged = ["--judge", "sim-judge:reference", "--rubric", rubric]
    err = refused(capsys, *run_args(tmp_path / "run", *judged))
    assert problem in err
    assert not (tmp_path / "run").exists()


def test_a_rubric_of_a_hundred_points_loads(tmp_path: Path) -> None:
    from fathom.prompts.judging import load_rubric

    rubric = _rubric(tmp_path, ("scale = [1, 2, 3, 4, 5]", f"scale = {list(range(101))}"))
    assert len(load_rubric(str(rubric)).scale) == 101


def test_make_demo_keeps_files_already_there(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "hotpotqa_e.jsonl").write_text("mine\n")
    err = refused(capsys, "suites", "make-demo", tmp_path)
    assert f"{tmp_path} already holds hotpotqa_e.jsonl: pass --force to overwrite them" in err
    assert [p.name for p in tmp_path.iterdir()] == ["hotpotqa_e.jsonl"]
    assert (tmp_path / "hotpotqa_e.jsonl").read_text() == "mine\n"


@pytest.mark.ruler_data
def test_make_demo_overwrites_with_force(tmp_path: Path) -> None:
    (tmp_path / "hotpotqa_e.jsonl").write_text("mine\n")
    assert cli("suites", "make-demo", tmp_path, "--items", "2", "--force") == 0
    assert (tmp_path / "hotpotqa_e.jsonl").read_text() != "mine\n"
    assert cli("suites", "make-demo", tmp_path, "--items", "2") == 2


def test_max_new_tokens_may_reach_the_longest_context_and_no_further() -> None:
    from fathom.spec import MAX_LENGTH, RunSpec

    spec = RunSpec(
        task="niah", model="sim:perfect", tokenizer="char", lengths=(1024,), depths=(0.5,), samples=1
    )
    assert RunSpec.from_json(spec.to_json() | {"max_new_tokens": MAX_LENGTH}).max_new_tokens == MAX_LENGTH
    with pytest.raises(SpecError, match="beyond fathom's longest context"):
        RunSpec.from_json(spec.to_json() | {"max_new_tokens": MAX_LENGTH + 1})
