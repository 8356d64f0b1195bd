"""What the tests of fathom inside inspect_ai share (test_inspect.py, test_inspect_families.py): the
warnings inspect leaves, the running-loop mark lifted, an eval on inspect's mock model, its scores and
its log imported. Imported after ``pytest.importorskip("inspect_ai")``: it imports inspect_ai."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import inspect_ai
import pytest
from inspect_ai.log import EvalLog, read_eval_log
from inspect_ai.model import ModelOutput, ModelUsage

from fathom.cli import main

# inspect_ai 0.3.285's own warnings: it leaves a stream of anyio's unclosed per sample it runs (warned
# of when garbage is collected), and calls tenacity's wait with a parameter tenacity deprecates.
INSPECT_WARNINGS = [
    pytest.mark.filterwarnings("ignore:The 'initial' parameter is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:Unclosed <MemoryObjectReceiveStream:ResourceWarning"),
    pytest.mark.filterwarnings(
        "ignore:Exception ignored in.*MemoryObjectReceiveStream:pytest.PytestUnraisableExceptionWarning"
    ),
]


@pytest.fixture(autouse=True, scope="module")
def no_loop_marked_running() -> Iterator[None]:
    """conftest's session browser (playwright's sync API) marks its event loop as running in this
    thread between its calls; inspect's eval and log reader start loops of their own (anyio.run),
    which refuse to while one is marked. So in a worker that ran a page test first, every test of a
    module importing this fixture failed. The mark is lifted for the module and put back after it
    (autouse fixtures of a scope are made before the others of that scope, so before its logs)."""
    marked = asyncio.events._get_running_loop()
    asyncio.events._set_running_loop(None)
    yield
    asyncio.events._set_running_loop(marked)


def output(text: str, read: str, stop: str = "stop") -> ModelOutput:
    """The mock model's answer ``text`` to a prompt ``read``, with its usage: without one the mock model
    counts it with tiktoken's o200k_base, which it would download."""
    made = ModelOutput.from_content(model="mockllm", content=text, stop_reason=stop)  # type: ignore[arg-type]
    made.usage = ModelUsage(input_tokens=len(read) // 4, output_tokens=4, total_tokens=len(read) // 4 + 4)
    return made


def evaluate(task: str, args: dict[str, object], model: Any, logs: Path) -> EvalLog:
    [log] = inspect_ai.eval(task, task_args=args, model=model, log_dir=str(logs), display="none")
    return log


def scores(log: EvalLog) -> dict[str, float]:
    samples = read_eval_log(log.location).samples or []
    return {str(s.id): float(s.scores["grade"].value) for s in samples if s.scores}  # type: ignore[arg-type]


def import_folder(log: EvalLog, folder: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    status = main(["import-inspect", log.location, "--run-dir", str(folder)])
    out, err = capsys.readouterr()
    return status, out + err
