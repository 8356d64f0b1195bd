"""The no-context control's figures say what they count (issue #33, item 5): the percentage printed
with a count of answered controls is that count's share, in the terminal and in report.html; a
refusal that a metric scores above 0 is no answer."""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Sequence
from pathlib import Path

import pytest
from test_store import record

from fathom import BackendEntry, registry
from fathom.analysis.checkpoint import run_numbers
from fathom.analysis.control import answered, control_summary
from fathom.backends.base import Completion, Request
from fathom.backends.sim import SimulatedBackend
from fathom.cli import main
from fathom.prompts.tokenizers import load_tokenizer
from fathom.records import SampleRecord
from fathom.report.compare import read_run
from fathom.scoring import SCORERS, grade
from fathom.track.logged import run_metrics

# "no-context control: 16.7% (2 of 12 prompts answered without the context), mean score 2.0%"
_LINE = re.compile(r"no-context control: ([\d.]+)% \((\d+) of (\d+) prompts answered without the context\)")


class _PartlyRight(SimulatedBackend):
    """A model that always answers with two words of one demo item's gold answer and one of another's:
    LongBench's token F1 gives it partial credit on those two items and nothing elsewhere."""

    def generate(self, requests: Sequence[Request]) -> list[Completion]:
        return [Completion("South Park rainfall", len(r.ids), 3, "stop", 0.0) for r in requests]


def test_a_suite_runs_control_percentage_is_the_share_its_count_gives(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Partial credit: the controls' mean score falls below the share answered (in part) without the
    # context, so the mean printed beside the count read as "5.9% (1 of 2 answered)".
    partly = lambda rest, _: _PartlyRight(rest, load_tokenizer("cl100k_base"))  # noqa: E731
    monkeypatch.setitem(registry.BACKENDS, "partly", BackendEntry(partly, "partly right"))
    assert main(["suites", "make-demo", str(tmp_path / "data"), "--items", "3"]) == 0
    run = ["run", "longbench", "--data", str(tmp_path / "data"), "--suite-tasks", "hotpotqa,multifieldqa_en",
           "--model", "partly:perfect", "--tokenizer", "cl100k_base", "--lengths", "1k,4k", "--samples", "3",
           "--run-dir", str(tmp_path / "run"), "--no-progress"]  # fmt: skip
    capsys.readouterr()
    assert main(run) == 0
    found = _LINE.search(capsys.readouterr().out)
    assert found is not None
    percentage, answered_, n = float(found[1]), int(found[2]), int(found[3])
    control = json.loads((tmp_path / "run" / "summary.json").read_text())["control"]
    # 2 tasks x 3 items x 2 limits; South Park Mexican (F1 2/3) and the rainfall answer (F1 1/4), each
    # at both limits.
    assert (answered_, n) == (control["answered"], control["n"]) == (4, 12)
    assert percentage == 33.3
    assert control["mean"] == pytest.approx((2 / 3 + 1 / 4) * 2 / 12)
    assert f"mean score {control['mean']:.1%}" in found.string  # the mean printed apart, named
    page = (tmp_path / "run" / "report.html").read_text()
    assert "<b>33.3%</b><span>no-context control: 4 of 12 prompts answered" in page
    # The trackers' "control/answered" is that share too, not the mean score.
    assert run_metrics(run_numbers(read_run(tmp_path / "run")))["control/answered"] == 4 / 12


REFUSAL = "I could not find the answer in the document."


def qa_2_control(index: int, answer: str, output: str) -> SampleRecord:
    """A RULER qa_2 control (a HotpotQA question; some are answered yes or no), graded as RULER grades
    it: string_match_part, plain containment."""
    score = grade(SCORERS["any"], output, (answer,))
    return dataclasses.replace(
        record(index), sample_id=f"control|qa_2|L1024|S{index}", task="qa_2", control=True, answers=(answer,),
        output=output, score=score.value, matched=score.matched, scoring="any", needle_kind="qa",
    )  # fmt: skip


def test_a_refusal_is_no_answer_though_rulers_containment_scores_it() -> None:
    controls = [
        qa_2_control(0, "no", REFUSAL),  # "no" inside "not"
        qa_2_control(1, "yes", REFUSAL),
        qa_2_control(2, "no", "No."),
        qa_2_control(3, "yes", "Yes, it is."),
        qa_2_control(4, "no", "No, I could not find it, but no is my guess."),  # a refusal naming "no"
    ]
    assert [c.score for c in controls] == [1.0, 0.0, 1.0, 1.0, 1.0]  # RULER's score, kept
    assert [c.sample_id for c in answered(controls)] == [f"control|qa_2|L1024|S{i}" for i in (2, 3, 4)]
    summary = control_summary(controls, [])
    assert summary["answered"] == 3 and summary["mean"] == pytest.approx(0.8)
