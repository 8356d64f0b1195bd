"""What the slow-samples line says made them slow (#33): a simulated backend holds no KV cache, so its
slow samples are the machine's load or its simulated delay; a real backend's keep the hint that its KV
cache may have been paged to host memory."""

from __future__ import annotations

from html import unescape
from pathlib import Path

import pytest
from test_slow import stalled_run

from fathom.analysis.summary import RunFacts, Summary
from fathom.cli import main
from fathom.report.html.run import _slow_section
from fathom.report.text import summary_text

SLOW = {"count": 1, "factor": 10, "least_seconds": 1.0, "samples": []}
PAGED = "KV cache paged to host memory"
LOAD = "the machine's load or the simulated delay"


def slow_line(model: str) -> str:
    """The terminal's slow-samples line of a run of ``model``."""
    summary = Summary(0, 0, {}, run=RunFacts("niah", model, "auto", 1, 0, None), slow=SLOW)
    (line,) = [line for line in summary_text(summary) if line.startswith("slow samples:")]
    return line


@pytest.mark.parametrize("model", ["llamacpp:smollm2", "openai:sim@http://127.0.0.1:1", "hf:/models/x"])
def test_a_real_backends_slow_samples_keep_the_kv_cache_hint(model: str) -> None:
    assert PAGED in slow_line(model) and LOAD not in slow_line(model)
    assert PAGED in unescape(_slow_section(SLOW, model))


def test_a_simulated_backends_slow_samples_name_the_load_not_a_kv_cache() -> None:
    assert LOAD in slow_line("sim:cliff?delay=0.01") and "paged" not in slow_line("sim:cliff?delay=0.01")
    section = unescape(_slow_section(SLOW, "sim:perfect"))  # the page escapes the apostrophe
    assert LOAD in section and "paged" not in section


def test_a_summary_without_its_run_keeps_the_hint() -> None:
    (line,) = [line for line in summary_text(Summary(0, 0, {}, slow=SLOW)) if line.startswith("slow")]
    assert PAGED in line


def test_a_simulated_runs_report_and_terminal_say_no_kv_cache(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "run"
    stalled_run(folder)
    capsys.readouterr()
    assert main(["report", str(folder)]) == 0
    out = capsys.readouterr().out
    assert "slow samples: 1" in out and LOAD in out and "paged" not in out
    html = unescape((folder / "report.html").read_text())
    assert '<section id="slow">' in html and LOAD in html and "paged" not in html
