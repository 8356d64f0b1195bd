"""fathom export-lm-eval --name: two exports of one task, each under a name of its own, run by one
lm-eval call over one include path (lm-eval keeps one task of a name, so the default names of two
exports would clash); a name lm-eval cannot take, and the same spec under another name in one folder,
refused with nothing written. Offline, with lm-eval's dummy model."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fathom.cli import main
from fathom.integrations.lm_eval_export import MARKER

NIAH = ["niah", "--lengths", "1k", "--depths", "0.5", "--samples", "2"]
OFFLINE = {"HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def cli(*args: str | Path) -> int:
    return main([str(a) for a in args])


def files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name, value in OFFLINE.items():
        monkeypatch.setenv(name, value)
    yield


def test_two_named_exports_of_one_task_run_side_by_side_in_one_include_path(
    tmp_path: Path, offline: None
) -> None:
    root = tmp_path / "exports"
    assert (
        cli("export-lm-eval", *NIAH, "--tokenizer", "cl100k_base", "--name", "gpt4_tok", "--out", root / "a")
        == 0
    )
    assert (
        cli("export-lm-eval", *NIAH, "--tokenizer", "o200k_base", "--name", "gpt4o_tok", "--out", root / "b")
        == 0
    )
    assert sorted(files(root / "a")) == [
        MARKER, "gpt4_tok_niah.yaml", "gpt4_tok_niah_1024.jsonl", "gpt4_tok_niah_1024.yaml", "utils.py"
    ]  # fmt: skip
    marker = json.loads((root / "b" / MARKER).read_text())
    assert marker["group"] == "gpt4o_tok_niah" and marker["spec"]["tokenizer"] == "o200k_base"
    lm_eval = pytest.importorskip("lm_eval")
    from lm_eval.tasks import TaskManager

    manager = TaskManager(include_path=str(root), include_defaults=False)
    tasks = ["gpt4_tok_niah", "gpt4o_tok_niah"]
    results: dict[str, Any] = lm_eval.simple_evaluate(model="dummy", tasks=tasks, task_manager=manager)
    scored = results["results"]
    # Each export's two samples, under its own names: none hidden by the other's.
    for name in ("gpt4_tok_niah", "gpt4_tok_niah_1024", "gpt4o_tok_niah", "gpt4o_tok_niah_1024"):
        assert scored[name]["sample_len"] == 2 and scored[name]["score,none"] == 0.0


@pytest.mark.parametrize("name", ["9lives", "a-b", "", "_x", "x y"])
def test_a_name_lm_eval_cannot_take_is_one_line_exit_2_and_no_folder(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    assert cli("export-lm-eval", *NIAH, "--tokenizer", "cl100k_base", "--name", name, "--out", out) == 2
    assert capsys.readouterr().err == (
        f"fathom: error: --name '{name}' is no lm-eval task name: give letters, digits and underscores, "
        "opening with a letter (e.g. fathom_tokenizer_b)\n"
    )
    assert not out.exists()


def test_the_same_spec_under_another_name_is_another_export_refused_untouched(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    spec = [*NIAH, "--tokenizer", "cl100k_base", "--out", out]
    assert cli("export-lm-eval", *spec) == 0  # the default name: fathom_niah
    before = files(out)
    assert cli("export-lm-eval", *spec, "--name", "mine") == 2
    assert "holds an export of another spec" in capsys.readouterr().err
    assert files(out) == before
    # Under its own name again, the same files (a folder left half written is taken back so).
    assert cli("export-lm-eval", *spec, "--name", "fathom") == 0
    assert files(out) == before
