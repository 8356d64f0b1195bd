"""The import rules CI checks (lint-imports, contracts in pyproject.toml) catch an upward import."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
LINT = Path(sys.executable).parent / "lint-imports"


@pytest.mark.skipif(not LINT.exists(), reason="import-linter is not installed: pip install '.[test]'")
def test_a_planted_upward_import_fails_the_layers_contract_and_names_it(tmp_path: Path) -> None:
    copy = shutil.copytree(ROOT / "src" / "fathom", tmp_path / "fathom")
    stats = copy / "analysis" / "stats.py"
    # Analysis is below report: a statistic that imports a page is the layering this forbids.
    stats.write_text(stats.read_text() + "\nimport fathom.report.files  # planted\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    run = subprocess.run(
        [str(LINT), "--config", str(ROOT / "pyproject.toml"), "--no-cache"],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300,
    )  # fmt: skip
    assert run.returncode != 0
    assert "BROKEN" in run.stdout and "fathom.analysis.stats -> fathom.report.files" in run.stdout
    # The same copy without the planted line keeps every contract.
    stats.write_text(stats.read_text().replace("\nimport fathom.report.files  # planted\n", ""))
    clean = subprocess.run(
        [str(LINT), "--config", str(ROOT / "pyproject.toml"), "--no-cache"],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300,
    )  # fmt: skip
    assert clean.returncode == 0, clean.stdout
