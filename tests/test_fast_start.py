"""A run's fixed cost stays small (issue #31 item 4): the CLI and a simulated run import none of the
heavy libraries they do not use (matplotlib is imported to draw, after the run; an HTTP client, torch
or a tracker only by the backends and commands that use them), and the shortcuts taken on the start
path are exact."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from fathom.prompts.haystack.files import normalise

HEAVY = (
    "matplotlib",
    "PIL",
    "httpx",
    "httpcore",
    "torch",
    "transformers",
    "llama_cpp",
    "vllm",
    "ray",
    "duckdb",
    "mlflow",
    "wandb",
    "scipy",
    "pandas",
    "pyarrow",
)

_SIMULATED_RUN = """
import sys
from pathlib import Path
from fathom.run.runner import run
from fathom.spec import RunSpec

run(RunSpec("niah", "sim:cliff", "auto", (1024,), (0.0, 1.0), 1), Path(sys.argv[1]), show_progress=False)
"""


def imported(code: str, *args: str) -> set[str]:
    """The heavy libraries a fresh interpreter has imported once ``code`` has run."""
    report = f"import sys\nprint(' '.join(m for m in {HEAVY!r} if m in sys.modules))"
    done = subprocess.run(
        [sys.executable, "-c", f"{code}\n{report}", *args], capture_output=True, text=True, check=True
    )
    return set(done.stdout.split())


def test_the_cli_imports_no_heavy_library() -> None:
    assert imported("import fathom.cli") == set()


def test_a_simulated_run_imports_no_heavy_library_before_its_files_are_derived(tmp_path: Path) -> None:
    assert imported(_SIMULATED_RUN, str(tmp_path / "run")) == set()
    assert (tmp_path / "run" / "samples.jsonl").stat().st_size > 0


def test_the_check_sees_a_heavy_library_once_imported() -> None:
    """The checks above can fail: drawing imports matplotlib, and it is seen."""
    assert "matplotlib" in imported("import fathom.report.plots as p\np.pyplot_agg()")


WHITESPACE = "".join(chr(c) for c in range(sys.maxunicode + 1) if chr(c).isspace())


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   ",
        "one",
        f"{WHITESPACE}a{WHITESPACE}b c\n\nd{WHITESPACE}",
        " ".join(f"x{c}y" for c in WHITESPACE),
        "a\u200bb\ufeffc",  # zero-width characters are no whitespace to either
    ],
)
def test_normalise_is_the_regular_expression_it_replaced(text: str) -> None:
    assert normalise(text) == re.sub(r"\s+", " ", text).strip()


def test_every_character_a_regular_expression_calls_whitespace_is_whitespace_to_str() -> None:
    pattern = re.compile(r"\s")
    assert [c for c in range(sys.maxunicode + 1) if bool(pattern.match(chr(c))) != chr(c).isspace()] == []
