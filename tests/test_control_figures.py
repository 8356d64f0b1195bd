"""The no-context control's figures say what they count (issue #33, item 5): the percentage printed
with a count of answered controls is that count's share, in the terminal and in report.html."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from fathom.cli import main

# "no-context control: 16.7% (2 of 12 prompts answered without the context), mean score 2.0%"
_LINE = re.compile(r"no-context control: ([\d.]+)% \((\d+) of (\d+) prompts answered without the context\)")


def test_a_suite_runs_control_percentage_is_the_share_its_count_gives(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # LongBench's token F1 gives partial credit: a control's mean score falls far below the share of
    # controls answered (in part) without the context, so printing the mean beside the count read as
    # "2.0% (2 of 12 answered)".
    assert main(["suites", "make-demo", str(tmp_path / "data"), "--items", "3"]) == 0
    run = ["run", "longbench", "--data", str(tmp_path / "data"), "--suite-tasks", "hotpotqa,multifieldqa_en",
           "--model", "sim:noisy", "--lengths", "1k,4k", "--samples", "3", "--run-dir", str(tmp_path / "run"),
           "--no-progress"]  # fmt: skip
    capsys.readouterr()
    assert main(run) == 0
    found = _LINE.search(capsys.readouterr().out)
    assert found is not None
    percentage, answered, n = float(found[1]), int(found[2]), int(found[3])
    control = json.loads((tmp_path / "run" / "summary.json").read_text())["control"]
    assert (answered, n) == (control["answered"], control["n"]) == (2, 12)  # 2 tasks x 3 items x 2 limits
    assert percentage == round(100 * answered / n, 1)
    assert f"mean score {control['mean']:.1%}" in found.string  # the mean printed apart, named
    assert control["mean"] < answered / n  # the two figures differ on this run
    page = (tmp_path / "run" / "report.html").read_text()
    box = f"<b>{percentage}%</b><span>no-context control: {answered} of {n} prompts answered"
    assert box in page
