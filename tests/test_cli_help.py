"""The command line a newcomer can read: help and defaults on every option of every command,
``fathom --version``, ``fathom report --open`` with and without a browser, install hints that fit
how fathom was installed."""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import re
import sys
import tomllib
import webbrowser
from collections.abc import Iterator
from pathlib import Path

import pytest

from fathom.cli import main
from fathom.cli.arguments import parser
from fathom.version import __version__

ROOT = Path(__file__).resolve().parents[1]


def _arguments(
    command: argparse.ArgumentParser, path: str = "fathom"
) -> Iterator[tuple[str, argparse.ArgumentParser, argparse.Action]]:
    """Every argument of every command and subcommand, with the parser whose help shows it."""
    for action in command._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _arguments(sub, f"{path} {name}")
        elif not isinstance(action, argparse._HelpAction | argparse._VersionAction):
            yield path, command, action


def help_problems(command: argparse.ArgumentParser) -> list[str]:
    """Each argument without help, and each option whose default (neither None nor False: a flag's
    default is its absence) its help, as shown, does not give."""
    problems = []
    for path, owner, action in _arguments(command):
        name = f"{path} {'/'.join(action.option_strings) or action.dest}"
        if not action.help:
            problems.append(f"{name}: no help")
            continue
        shown = owner._get_formatter()._expand_help(action)
        default = action.default
        silent = default is None or default is False or action.nargs == 0
        if action.option_strings and not silent and str(default) not in shown:
            problems.append(f"{name}: default {default} not shown")
        if shown.count("default") > 1:
            problems.append(f"{name}: default said twice")
    return problems


def test_every_argument_of_every_command_has_help_and_shows_its_default() -> None:
    assert help_problems(parser()) == []


def test_the_check_finds_an_argument_without_help_and_a_hidden_default() -> None:
    bare = argparse.ArgumentParser(prog="fathom")
    commands = bare.add_subparsers(dest="command")
    report = commands.add_parser("report")
    report.add_argument("run_dir")
    report.add_argument("--threshold", type=float, default=0.85, help="the share a length must reach")
    report.add_argument("--open", action="store_true", help="open it")
    report.add_argument("--alpha", default=0.05, help="the gate's alpha (default 0.05) (default: 0.05)")
    assert help_problems(bare) == [
        "fathom report run_dir: no help",
        "fathom report --threshold: default 0.85 not shown",
        "fathom report --alpha: default said twice",
    ]


@pytest.mark.parametrize(
    ("command", "shown"),
    [
        ("report", "(default: 0.85)"),
        ("compare", "(default: 0.05)"),
        ("judge", "(default: qa-correctness)"),
        ("gallery", "(default: gallery)"),
        ("suites make-demo", "(default: 20)"),
        ("series", "(default: 0.05)"),
    ],
)
def test_each_command_shows_its_defaults_once(
    command: str, shown: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main([*command.split(), "--help"])
    assert exit_.value.code == 0
    text = " ".join(capsys.readouterr().out.split())  # argparse wraps lines where it likes
    assert text.count(shown) == 1


def test_version_is_the_distributions(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out == f"fathom {__version__}\n"
    # One version: the one pip installs (pyproject.toml) is the one manifests record (fathom.version).
    assert tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"] == __version__


@pytest.fixture(scope="module")
def reported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("open") / "run"
    options = "--model sim:perfect --tokenizer char --lengths 1k --depths 2 --samples 1 --no-progress"
    assert main(["run", "niah", *options.split(), "--run-dir", str(folder)]) == 0
    return folder


def _desktop(monkeypatch: pytest.MonkeyPatch, display: str | None) -> None:
    monkeypatch.setattr(sys, "platform", "linux")
    for name in ("DISPLAY", "WAYLAND_DISPLAY", "BROWSER"):
        monkeypatch.delenv(name, raising=False)
    if display is not None:
        monkeypatch.setenv("DISPLAY", display)


def test_report_open_without_a_desktop_prints_the_path_and_says_so(
    reported: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _desktop(monkeypatch, None)

    def no_browser(url: str) -> bool:
        raise AssertionError(f"a headless machine has no browser to open {url} in")

    monkeypatch.setattr(webbrowser, "open", no_browser)
    assert main(["report", str(reported), "--open"]) == 0
    last = capsys.readouterr().out.splitlines()[-1]
    page = reported.resolve() / "report.html"
    assert last == f"no browser found (no desktop: DISPLAY and WAYLAND_DISPLAY are unset); open {page} in one"


def test_report_open_opens_report_html_in_the_browser(
    reported: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _desktop(monkeypatch, ":0")
    opened: list[str] = []
    monkeypatch.setattr(webbrowser, "open", lambda url: opened.append(url) or True)
    assert main(["report", str(reported), "--open"]) == 0
    page = reported.resolve() / "report.html"
    assert opened == [page.as_uri()]
    assert capsys.readouterr().out.splitlines()[-1] == f"opened {page} in a browser"


@pytest.mark.parametrize("failure", ["none found", "BROWSER unusable"])
def test_report_open_says_when_webbrowser_finds_no_browser(
    reported: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], failure: str
) -> None:
    _desktop(monkeypatch, ":0")

    def fails(url: str) -> bool:
        if failure == "BROWSER unusable":
            raise webbrowser.Error("could not locate runnable browser")
        return False

    monkeypatch.setattr(webbrowser, "open", fails)
    assert main(["report", str(reported), "--open"]) == 0
    page = reported.resolve() / "report.html"
    assert capsys.readouterr().out.splitlines()[-1] == f"no browser found; open {page} in one"


def test_report_without_open_opens_nothing(
    reported: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _desktop(monkeypatch, ":0")
    monkeypatch.setattr(webbrowser, "open", lambda url: pytest.fail(f"opened {url} unasked"))
    assert main(["report", str(reported)]) == 0
    assert "browser" not in capsys.readouterr().out


def test_the_help_gives_the_install_command_that_fits_this_install(monkeypatch: pytest.MonkeyPatch) -> None:
    class Editable:
        def read_text(self, name: str) -> str:
            return json.dumps({"url": "file:///src/fathom", "dir_info": {"editable": True}})

    monkeypatch.setattr(importlib.metadata, "distribution", lambda name: Editable())
    shown = {f"{path} {action.dest}": action.help or "" for path, _, action in _arguments(parser())}
    assert "pip install -e '/src/fathom[ray]'" in shown["fathom run executor"]
    trackers = "pip install -e '/src/fathom[mlflow]' or pip install -e '/src/fathom[wandb]'"
    assert all(trackers in shown[f"fathom {command} log"] for command in ("run", "compare", "series"))


def test_a_clone_path_holding_a_percent_sign_still_prints_the_help(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    class Odd:
        def read_text(self, name: str) -> str:
            return json.dumps({"url": "file:///src/100%25%20fathom", "dir_info": {"editable": True}})

    monkeypatch.setattr(importlib.metadata, "distribution", lambda name: Odd())
    with pytest.raises(SystemExit) as exited:
        main(["run", "--help"])
    assert exited.value.code == 0
    assert "pip install -e '/src/100% fathom[ray]'" in " ".join(capsys.readouterr().out.split())


def test_no_module_spells_an_extras_install_command_itself() -> None:
    """Every hint for an extra goes through packages.install_command, which knows how fathom was
    installed; a hand-written ``pip install 'fathom-eval[...]'`` fails from a clone."""
    spelled = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in sorted((ROOT / "src" / "fathom").rglob("*.py"))
        if path.name != "packages.py"
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if re.search(r"pip install[^\"]*\[|fathom-eval\[", line)
    ]
    assert spelled == []
