"""Every numeric backend setting has a stated most: past it the value is refused in one line and exit
2, before any work (``?concurrency=100000000`` once took 4 GB and sent nothing in 150 s)."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from fathom.backends import settings
from fathom.backends.settings import Setting, parse_settings
from fathom.cli import main
from fathom.errors import MissingExtraError, SpecError
from fathom.run import runner

# (backend module, setting, the most it takes, what it must be)
LIMITS = [
    ("openai", "concurrency", "4096", "a whole number of requests at a time from 1 to 4096"),
    ("openai", "retries", "100", "a whole number from 1 to 100"),
    ("openai", "timeout", "86400", "a number of seconds above 0 and at most 86400"),
    ("openai", "max_wait", "86400", "a number of seconds above 0 and at most 86400"),
    ("openai", "window", "64M", "a whole number of tokens from 1 to 64M (e.g. 8k)"),
    ("openai", "max_prompt", "64M", "a whole number of tokens from 1 to 64M (e.g. 8k)"),
    ("llamacpp", "n_ctx", "64M", "a whole number of tokens from 1 to 64M (e.g. 16k)"),
    ("llamacpp", "batch", "1M", "a whole number of tokens from 1 to 1M (e.g. 512)"),
    ("llamacpp", "threads", "4096", "a whole number of threads from 1 to 4096"),
    ("hf", "batch", "4096", "auto or a whole number from 1 to 4096"),
    ("vllm", "max_model_len", "64M", "a whole number of tokens from 1 to 64M (e.g. 32k)"),
    ("vllm", "tp", "1024", "a whole number of GPUs from 1 to 1024"),
]
TOO_MANY = {"4096": "4097", "100": "101", "86400": "86400.5", "64M": "65537k", "1M": "1025k", "1024": "1025"}


def table(module: str) -> dict[str, Setting]:
    """A backend's settings table; a backend whose extra is not installed here is skipped."""
    try:
        loaded = importlib.import_module(f"fathom.backends.{module}")
    except (ImportError, MissingExtraError) as exc:
        pytest.skip(f"fathom.backends.{module} needs an extra not installed here ({exc})")
    found: dict[str, Setting] = loaded._SETTINGS
    return found


@pytest.mark.parametrize(("module", "key", "most", "needs"), LIMITS)
def test_each_numeric_setting_takes_its_most_and_refuses_more(
    module: str, key: str, most: str, needs: str
) -> None:
    settings_table = table(module)
    assert parse_settings(module, settings_table, {key: most})[key] not in (None, "auto")
    too_many = TOO_MANY[most]
    with pytest.raises(SpecError) as refused:
        parse_settings(module, settings_table, {key: too_many})
    assert str(refused.value) == f"{module} setting '{key}' must be {needs}, not '{too_many}'"


def test_the_most_requests_in_flight_are_as_many_as_the_runner_hands_over() -> None:
    from fathom.backends import openai

    assert settings.MOST_IN_FLIGHT == openai.RUN_REQUESTS


def test_a_hundred_million_requests_in_flight_are_refused_before_any_work(
    runs: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    tasks: list[object] = []
    monkeypatch.setattr(runner, "create_task", lambda *args: tasks.append(args))
    model = "openai:m@http://127.0.0.1:9/v1?concurrency=100000000"
    code = main(
        ["run", "niah", "--model", model, "--tokenizer", "char", "--lengths", "1k", "--out", str(runs)]
    )
    assert code == 2 and tasks == []  # refused with the backend's settings: no prompt was built
    err = capsys.readouterr().err
    assert err == (
        "fathom: error: openai setting 'concurrency' must be a whole number of requests at a time "
        "from 1 to 4096, not '100000000'\n"
    )
    assert not runs.exists()
