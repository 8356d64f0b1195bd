"""What ``import fathom`` offers a Python user, pinned: a name added to or dropped from the public
surface is a decision, made here and in fathom/__init__.py together. And fathom says it is typed."""

from __future__ import annotations

import inspect
import tomllib
from importlib import resources
from pathlib import Path

import fathom

PUBLIC = {
    "__version__",
    # run a spec
    "RunResult", "RunSpec", "run_spec",
    # read a run folder, re-derive its files, compare two
    "Comparison", "PerplexityRecord", "RunFolder", "SampleRecord", "compare_runs", "derive",
    # write a task
    "Cell", "Document", "Needle", "Prompt", "PromptBuilder", "PromptText", "Sample", "Task", "TaskEntry",
    "TaskFactory", "Tokenizer", "load_tokenizer",
    # write a backend
    "Backend", "BackendEntry", "BackendFactory", "BatchSized", "Built", "ChatPrompt", "Completion",
    "FirstToken", "Request", "ScoreRequest", "Scorer", "Streamer", "TokenScores", "Tuned",
    # write a scoring method
    "Score", "ScoringEntry",
    # errors
    "FathomError", "SpecError",
}  # fmt: skip


def test_the_public_names_are_pinned() -> None:
    assert len(fathom.__all__) == len(set(fathom.__all__))
    assert set(fathom.__all__) == PUBLIC


def test_every_public_name_is_there_and_says_what_it_is() -> None:
    for name in PUBLIC - {"__version__"}:
        value = getattr(fathom, name)
        assert value.__module__.startswith("fathom."), name  # the stage's own object, re-exported
        assert inspect.getdoc(value), f"fathom.{name} has no docstring"
    assert fathom.__version__ == tomllib.loads(_pyproject())["project"]["version"]


def test_fathom_ships_py_typed() -> None:
    assert resources.files("fathom").joinpath("py.typed").is_file()
    package_data = tomllib.loads(_pyproject())["tool"]["setuptools"]["package-data"]["fathom"]
    assert "py.typed" in package_data


def _pyproject() -> str:
    return (Path(__file__).resolve().parents[1] / "pyproject.toml").read_text(encoding="utf-8")
