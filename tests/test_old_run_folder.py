"""A run folder written by an older fathom still reads: report, compare and runs accept it as it is.

``fixtures/run-before-move`` was written by fathom at e93b667, before the package was reorganised
into stages (issue #17), by ``fathom run niah --model sim:cliff --tokenizer char --lengths 1k,2k
--depths 3 --samples 2 --no-progress --run-dir tests/fixtures/run-before-move``. Its derived files
were left out but for summary.json, which a report made today must reproduce number for number (in
today's schema of it: the old one upgraded).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from fathom.analysis.summary import SUMMARIES
from fathom.cli import main

OLD_RUN = Path(__file__).parent / "fixtures" / "run-before-move"
# The spec the fixture was written with; a run of it with another model pairs with the fixture.
SPEC = ["--tokenizer", "char", "--lengths", "1k,2k", "--depths", "3", "--samples", "2", "--no-progress"]


def cli(*args: str | Path) -> int:
    status: int = main([str(a) for a in args])
    return status


def test_report_re_derives_an_old_run_folder_to_the_same_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    copy = shutil.copytree(OLD_RUN, tmp_path / "old")
    assert cli("report", copy) == 0
    summary, old = (json.loads((folder / "summary.json").read_text()) for folder in (copy, OLD_RUN))
    assert summary == SUMMARIES.upgrade(old)
    assert (copy / "report.html").is_file() and (copy / "heatmap.png").is_file()
    assert "effective length" in capsys.readouterr().out


def test_compare_pairs_an_old_run_folder_with_a_run_made_today(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Today's prompts for the same spec are byte-identical to the old run's (compare refuses
    otherwise), so a baseline from before the reorganisation still compares."""
    new = tmp_path / "new"
    assert cli("run", "niah", "--model", "sim:perfect", *SPEC, "--run-dir", new) == 0
    capsys.readouterr()
    assert cli("compare", OLD_RUN, new, "--out", tmp_path / "compared") == 0
    out = capsys.readouterr().out
    assert "pairs: 12; left out: 0" in out and "regressed cells" in out
    assert (tmp_path / "compared" / "compare.json").is_file()
    assert sorted(p.name for p in OLD_RUN.iterdir()) == ["manifest.json", "samples.jsonl", "summary.json"]


def test_runs_lists_an_old_run_folder_as_complete(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli("runs", OLD_RUN) == 0
    line = capsys.readouterr().out.strip()
    assert "run-before-move  sim:cliff  niah  1k-2k  k=2  complete" in line
