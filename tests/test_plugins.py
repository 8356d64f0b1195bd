"""Plugins as users install them: real packages (tests/fixtures/plugins), installed with pip into a
folder of their own and found through their entry points. A plugin's task, backend and scoring
method are listed and run beside fathom's own; a broken plugin is reported and breaks no other;
a name that two claim is refused."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from fathom import registry
from fathom.cli import main

PLUGINS = Path(__file__).parent / "fixtures" / "plugins"
Use = Callable[..., None]


@pytest.fixture(scope="session")
def installed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each plugin package pip-installed (offline, no dependencies) into a folder of its own."""
    folders = {}
    for package in ("fathom-echo", "fathom-clumsy"):
        source = tmp_path_factory.mktemp("source") / package
        shutil.copytree(PLUGINS / package, source)  # the build writes into its source folder
        target = tmp_path_factory.mktemp(package)
        pip = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
        options = ["--no-deps", "--no-build-isolation", "--no-index", "--target", str(target)]
        subprocess.run([*pip, *options, str(source)], check=True)
        folders[package] = target
    return folders


@pytest.fixture
def plugins(installed: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> Iterator[Use]:
    """``use("fathom-echo", ...)`` puts installed plugins on sys.path for the test; their modules
    are forgotten after it."""

    def use(*packages: str) -> None:
        for package in packages:
            monkeypatch.syspath_prepend(str(installed[package]))

    yield use
    for module in [name for name in sys.modules if name.startswith(("fathom_echo", "fathom_clumsy"))]:
        del sys.modules[module]


def cli(*args: str | Path) -> int:
    return main([str(a) for a in args])


def records(folder: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in (folder / "samples.jsonl").read_text().splitlines()]


def test_a_plugins_names_are_listed_beside_fathoms_own(
    plugins: Use, capsys: pytest.CaptureFixture[str]
) -> None:
    plugins("fathom-echo")
    assert registry.BACKEND.names() == [
        "llamacpp",
        "hf",
        "vllm",
        "openai",
        "anthropic",
        "sim",
        "sim-judge",
        "echo",
    ]
    assert registry.TASK.names()[-1] == "recall" and registry.SCORING.names()[-1] == "echoed"
    assert cli("models") == 0
    out = capsys.readouterr().out
    assert re.search(
        r"^  echo +answers with the context it read \[plugin fathom-echo 0\.1\.0\]; ready$", out, re.M
    )
    assert re.search(r"^  sim +simulated models", out, re.M)
    with pytest.raises(SystemExit):
        cli("run", "--help")
    assert "from plugins: recall" in " ".join(capsys.readouterr().out.split())  # as argparse wraps it
    assert cli("run", "niah", "--model", "gpt5") == 2
    known = "llamacpp:..., hf:..., vllm:..., openai:..., anthropic:..., sim:..., sim-judge:..., echo:..."
    assert f"with backend one of {known}" in capsys.readouterr().err


def test_a_plugins_task_backend_and_scoring_method_run_end_to_end(plugins: Use, runs: Path) -> None:
    plugins("fathom-echo")
    common = ["--tokenizer", "char", "--lengths", "1k", "--samples", "1", "--no-control", "--no-progress"]
    # No --depths: the plugin's task sweeps them, so the CLI gives it the default eleven.
    assert (
        cli("run", "recall", "--model", "echo:x", "--scoring", "echoed", *common, "--run-dir", runs / "r")
        == 0
    )
    found = records(runs / "r")
    assert len(found) == 11 and {r["task"] for r in found} == {"recall"}
    assert all(r["score"] == 1.0 and r["scoring"] == "echoed" for r in found)
    # The plugin's backend answers fathom's own task, and fathom's backend the plugin's task.
    assert cli("run", "niah", "--model", "echo:x", "--depths", "2", *common, "--run-dir", runs / "n") == 0
    assert [r["score"] for r in records(runs / "n")] == [1.0, 1.0]
    assert (
        cli("run", "recall", "--model", "sim:perfect", "--depths", "2", *common, "--run-dir", runs / "s") == 0
    )
    assert [r["score"] for r in records(runs / "s")] == [1.0, 1.0]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["recall", "--model", "echo:x", "--needle", "uuid"],
            "--needle goes with niah runs, not 'recall': drop",
        ),
        (
            ["niah", "--model", "echo:x", "--depths", "2", "--answer-logprob"],
            "backend 'echo:x' cannot read log-probabilities .*: use one of llamacpp, hf, vllm, openai or sim",
        ),
        (
            ["recall", "--model", "echo:x", "--scoring", "echoe"],
            r"unknown scoring 'echoe' \(did you mean 'echoed'\?\)",
        ),
    ],
)
def test_a_plugins_task_and_backend_are_checked_like_fathoms_own(
    plugins: Use, runs: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    plugins("fathom-echo")
    assert cli("run", *args, "--tokenizer", "char", "--lengths", "256", "--out", runs, "--no-progress") == 2
    assert re.search(message, capsys.readouterr().err)
    assert not runs.exists()


def test_a_broken_plugin_is_reported_and_breaks_no_other(
    plugins: Use, runs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plugins("fathom-echo", "fathom-clumsy")
    assert cli("models") == 0
    out, err = capsys.readouterr()
    warnings = err.splitlines()
    assert all(line.startswith("fathom: warning: ") for line in warnings)
    assert any(
        "backend 'broken' of the plugin fathom-clumsy 0.1.0 failed to load (ModuleNotFoundError: No module "
        "named 'fathom_clumsy_missing_dependency'): fix or uninstall it" in line
        for line in warnings
    )
    assert re.search(
        r"^  llamacpp .*\n  hf .*\n  vllm .*\n  openai .*\n  anthropic .*\n  sim .*\n  sim-judge .*\n\Z",
        out,
        re.M,
    )  # no plugin's
    # Each entry a plugin got wrong is an error of its own, one line naming the plugin and the fix.
    refusals = {
        ("niah", "--model", "broken:x"): "backend 'broken' of the plugin fathom-clumsy 0.1.0 failed to load",
        ("typo", "--model", "sim:perfect"): "task 'typo' declares knobs that are no RunSpec option, neddle",
        ("niah", "--model", "sim:perfect", "--scoring", "bare"): "scoring 'bare' of the plugin fathom-clumsy "
        "0.1.0 loads fathom_clumsy:bare, a function, not a fathom.ScoringEntry: fix or uninstall the plugin",
    }
    for args, message in refusals.items():
        assert (
            cli("run", *args, "--tokenizer", "char", "--lengths", "256", "--out", runs, "--no-progress") == 2
        )
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1
    # The working plugin's task still runs.
    common = ["--tokenizer", "char", "--lengths", "256", "--depths", "2", "--samples", "1", "--no-progress"]
    assert cli("run", "recall", "--model", "sim:perfect", *common, "--run-dir", runs / "ok") == 0


def test_a_name_two_claim_is_refused(plugins: Use, runs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plugins("fathom-echo", "fathom-clumsy")
    common = ["--tokenizer", "char", "--lengths", "1k", "--depths", "2", "--samples", "1", "--no-progress"]
    # Two plugins: neither is used.
    assert cli("run", "niah", "--model", "echo:x", *common, "--out", runs) == 2
    assert re.search(
        r"backend 'echo' is claimed by the plugins fathom-(echo|clumsy) 0\.1\.0 and "
        r"fathom-(echo|clumsy) 0\.1\.0, so neither is used: uninstall one of them",
        capsys.readouterr().err,
    )
    # A plugin and fathom: fathom's own is used, and the plugin's refusal said.
    assert cli("run", "niah", "--model", "sim:perfect", *common, "--run-dir", runs / "sim") == 0
    assert (
        "fathom: warning: the plugin fathom-clumsy 0.1.0's backend 'sim' is refused: fathom has one of that "
        "name, which it uses; the plugin must rename its entry point" in capsys.readouterr().err
    )
