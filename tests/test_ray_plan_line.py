"""The plan's line on a Ray run: printed once, by the driver, as a local run prints it (#33). The
driver's preparation is called directly, with its replica built in this process and an in-process
stand-in for Ray's calls: the line is the replica's, and Ray only carries it."""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fathom.prompts.tokenizers import load_tokenizer
from fathom.run import distributed
from fathom.run.replica import Replica
from fathom.run.runner import prepare
from fathom.spec import RunSpec

sys.path.append(str(Path(__file__).parents[1] / "benchmarks"))
from prefix_server import Engine, serving

# Ray's calls as the driver makes them, answered here: ``actor.plan.remote()`` is the call's value.
IN_PROCESS_RAY = types.SimpleNamespace(get=lambda value: value)


def in_process(replica: Replica) -> Any:
    """A replica standing in for its Ray actor handle: each method's ``remote`` calls it here."""
    return types.SimpleNamespace(plan=types.SimpleNamespace(remote=replica.plan))


@pytest.fixture
def server_url() -> Iterator[str]:
    with serving(load_tokenizer("cl100k_base"), Engine(slots=2, cache_tokens=1 << 20, scale=0.5)) as server:
        yield server.url


def say_plan(spec: RunSpec) -> None:
    """The driver's preparation's print, with replica 0 built from ``spec``."""
    replica = Replica(spec, "prefix")
    assert replica.problem is None
    distributed._say_plan(IN_PROCESS_RAY, distributed._Slot(0, in_process(replica)))


def test_the_driver_prints_a_real_backends_plan_line_once_as_a_local_run_does(
    server_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = RunSpec("niah", f"openai:sim@{server_url}?retries=1", "cl100k_base", (1024,), (0.0,), 2)
    prepare(spec, say=True)
    local = capsys.readouterr().err
    assert local.startswith("plan: ") and local.count("\n") == 1
    say_plan(spec)
    assert capsys.readouterr().err == local


def test_the_driver_prints_no_plan_line_for_a_simulated_backend(capsys: pytest.CaptureFixture[str]) -> None:
    spec = RunSpec("niah", "sim:cliff?window=1k", "cl100k_base", (512,), (0.0,), 2)
    say_plan(spec)
    assert capsys.readouterr().err == ""
