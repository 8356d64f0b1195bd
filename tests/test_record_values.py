"""Records are checked for values as well as types (issue #30): a line with an impossible value (a
score off its method's range, a number that is not finite, a count below 0, a sample the spec never
asks) is a damaged line, refused by readers with the line named and moved aside by the writer; and no
NaN or Infinity reaches summary.json."""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import shutil
from pathlib import Path
from typing import Any

import pytest

from fathom.analysis.summary import Summary, finite, run_summary
from fathom.cli import main
from fathom.errors import RunFolderError
from fathom.judgement import JudgementRecord, QualificationRecord
from fathom.records import Cell, SampleRecord, record_from_json
from fathom.run import lines
from fathom.run.judgements import (
    JUDGEMENTS,
    JUDGEMENTS_QUARANTINE,
    judgement_reader,
    read_judgements,
    read_qualification,
)
from fathom.run.store import QUARANTINE, RunFolder
from fathom.scoring import SCORERS, grade

# A run of two lengths (2048, 65536), two depths (0.25, 0.75) and one sample a cell, with probes,
# controls and literal twins; its line 12 is the sample niah|L2048|D0.2500|S0, graded by "contains".
FIXTURE = Path(__file__).parent / "fixtures" / "records-v11"
SAMPLE_LINE = 12


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "run"
    shutil.copytree(FIXTURE, folder)
    return folder


def sample_data() -> dict[str, Any]:
    return json.loads((FIXTURE / "samples.jsonl").read_text().splitlines()[SAMPLE_LINE - 1])


def at_cell(data: dict[str, Any], **cell: Any) -> dict[str, Any]:
    """``data`` moved to another cell, its sample id made from its new fields (a consistent record)."""
    moved = data | cell
    moved["sample_id"] = Cell(moved["task"], moved["length"], moved["depth"], moved["sample"]).id
    return moved


NAN, INF = math.nan, math.inf
# Each impossible record, made from a good one, and what the damage's reason names.
IMPOSSIBLE: dict[str, tuple[dict[str, Any], str]] = {
    "a score above 1": ({"score": 5.0}, "field 'score' is 5.0, not a finite number in [0, 1]"),
    "a score of NaN": ({"score": NAN}, "field 'score' is nan, not a finite number in [0, 1]"),
    "a score below 0": ({"score": -0.5}, "field 'score' is -0.5"),
    "half a binary grade": ({"score": 0.5}, "field 'score' is 0.5, but 'contains' grades 0 or 1"),
    "an odd-name grade of 2": ({"odd_name_score": 2.0}, "field 'odd_name_score' is 2.0"),
    "Infinity seconds": ({"decode_s": INF}, "field 'decode_s' is inf, not a finite number"),
    "negative seconds": ({"latency_s": -1.0}, "field 'latency_s' is -1.0"),
    "negative tokens": ({"actual_tokens": -3}, "field 'actual_tokens' is -3, not a finite number in [0,"),
    "an integer no float holds": ({"target_tokens": 10**400}, "field 'target_tokens' is 1000000000"),
    "a needle beyond the end": ({"needle_depths": [1.5]}, "field 'needle_depths' is 1.5"),
    "a NaN log-probability": ({"answer_logprobs": [-0.5, NAN]}, "field 'answer_logprobs' is nan"),
    "a negative offset": ({"needle_token_offsets": [-1]}, "field 'needle_token_offsets' is -1"),
    "an id that is not its cell's": ({"sample_id": "niah|L2048|D0.2500|S9"}, "sample id 'niah|L2048|D0.2500"),
}  # fmt: skip
# Records of cells that the run's spec never asks: consistent in themselves, but not of this run.
NOT_ASKED: dict[str, tuple[dict[str, Any], str]] = {
    "a length not the spec's": ({"length": 4096}, "length 4096 is not one of the run's lengths [2048, 6"),
    "a depth not the spec's": ({"depth": 0.5}, "depth 0.5 is not one of the run's depths [0.25, 0.75]"),
    "a sample index beyond the spec's": ({"sample": 7}, "sample index 7 is beyond the run's 1 samples per"),
}  # fmt: skip


def bad_lines() -> dict[str, tuple[dict[str, Any], str]]:
    made = {name: (sample_data() | change, reason) for name, (change, reason) in IMPOSSIBLE.items()}
    return made | {name: (at_cell(sample_data(), **cell), why) for name, (cell, why) in NOT_ASKED.items()}


def append(path: Path, data: dict[str, Any]) -> bytes:
    line = json.dumps(data, sort_keys=True).encode() + b"\n"  # NaN and Infinity as Python writes them
    with path.open("ab") as handle:
        handle.write(line)
    return line


@pytest.mark.parametrize("name", sorted(bad_lines()))
def test_an_impossible_record_is_refused_by_readers_naming_its_line(run_dir: Path, name: str) -> None:
    data, reason = bad_lines()[name]
    append(run_dir / "samples.jsonl", data)
    with pytest.raises(RunFolderError) as refused:
        RunFolder(run_dir).records()
    assert f"samples.jsonl line 20 is not a record of this run: not a record ({reason}" in str(refused.value)
    assert "'fathom repair" in str(refused.value)


@pytest.mark.parametrize("name", sorted(bad_lines()))
def test_an_impossible_record_is_moved_aside_by_the_writer(run_dir: Path, name: str) -> None:
    before = RunFolder(run_dir).records()
    line = append(run_dir / "samples.jsonl", bad_lines()[name][0])
    assert main(["repair", str(run_dir)]) == 0
    assert (run_dir / QUARANTINE).read_bytes() == line
    assert RunFolder(run_dir).records() == before


def test_a_nan_score_stops_the_report_in_one_line_and_writes_no_nan(
    run_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    summary = (run_dir / "summary.json").read_bytes()
    append(run_dir / "samples.jsonl", sample_data() | {"score": NAN})
    assert main(["report", str(run_dir)]) == 2
    (message,) = capsys.readouterr().err.splitlines()
    assert message.startswith("fathom: error: ") and "line 20" in message and "'score' is nan" in message
    assert (run_dir / "summary.json").read_bytes() == summary


def test_the_values_each_record_of_every_kind_may_take_are_accepted(run_dir: Path) -> None:
    records = RunFolder(run_dir).records()
    assert len(records) == 19  # probes (length 0, at no cell), controls, samples and literal twins
    # A fraction of the references ("all", RULER's) and a plugin's method grade in [0, 1].
    for method in ("all", "my-plugin:rouge"):
        append(run_dir / "samples.jsonl", sample_data() | {"score": 0.5, "scoring": method})
    assert [r.score for r in RunFolder(run_dir).records()[-2:]] == [0.5, 0.5]


def test_the_binary_methods_are_fathoms_own_and_grade_0_or_1() -> None:
    assert SCORERS.keys() > lines._BINARY
    outputs = ["1234567", "12345678", "It is 1234567 and 7654321.", "", "7654321 1234567", "no"]
    for name in lines._BINARY:
        assert {grade(SCORERS[name], out, ["1234567", "7654321"]).value for out in outputs} <= {0.0, 1.0}
    assert grade(SCORERS["all"], "It is 1234567.", ["1234567", "7654321"]).value == 0.5  # so not binary


def test_a_record_read_without_a_run_is_checked_for_values_too() -> None:
    with pytest.raises(ValueError, match=r"field 'score' is 5\.0"):
        record_from_json(sample_data() | {"score": 5.0})


# No NaN or Infinity in summary.json.


def test_no_nan_or_infinity_reaches_the_summary_even_from_records_made_in_python() -> None:
    # Records made in Python are not read through the checks: the summary holds no NaN all the same.
    good = record_from_json(sample_data())
    assert isinstance(good, SampleRecord)
    records = [
        dataclasses.replace(good, score=NAN, latency_s=INF),
        dataclasses.replace(good, sample_id="niah|L2048|D0.7500|S0", depth=0.75, latency_s=-INF),
    ]
    summary = run_summary(records, threshold=NAN)
    text = json.dumps(summary.to_json(), allow_nan=False)  # raises on a NaN or an Infinity
    assert json.loads(text)["effective_length"]["threshold"] is None


def test_a_summary_read_with_nan_holds_none() -> None:
    read = finite({"a": [NAN, 1.0, (INF, -INF)], "b": "nan", "c": 2})
    assert read == {"a": [None, 1.0, (None, None)], "b": "nan", "c": 2}
    written = json.loads((FIXTURE / "summary.json").read_text())
    written["lost_in_the_middle_index"] = NAN
    assert Summary.from_json(written).sweep.lost_in_the_middle_index is None  # type: ignore[union-attr]


# judgements.jsonl and qualifications.jsonl.


@pytest.fixture
def judged(tmp_path: Path) -> Path:
    folder = tmp_path / "run"
    args = ["run", "niah", "--model", "sim:perfect", "--lengths", "1k", "--depths", "2", "--samples", "2"]
    assert main([*args, "--run-dir", str(folder), "--no-progress", "--no-control"]) == 0
    assert main(["judge", str(folder), "--judge", "sim-judge:reference", "--no-progress"]) == 0
    return folder


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"score": 7}, "score 7 is not on its judge's scale [0, 1]"),
        ({"score": None}, "a judgement has a score or an error, one of the two"),
        ({"attempts": 0}, "field 'attempts' is 0, not 1 or more"),
        ({"latency_s": NAN}, "field 'latency_s' holds nan"),
        # JSON's integers have no bound: one too large for a float is damage, not an OverflowError
        ({"latency_s": 10**400}, "field 'latency_s' holds 1000000"),
    ],
)
def test_an_impossible_judgement_is_left_out_then_moved_aside(
    judged: Path, caplog: pytest.LogCaptureFixture, change: dict[str, Any], reason: str
) -> None:
    path = judged / JUDGEMENTS
    first = json.loads(path.read_text().splitlines()[0])
    line = append(path, first | change)
    with caplog.at_level(logging.WARNING, logger="fathom"):
        assert len(read_judgements(judged)) == 4
    assert f"left out 1 damaged line(s) of {path} (line 5: not a record ({reason}" in caplog.text
    assert main(["judge", str(judged), "--judge", "sim-judge:reference", "--no-progress"]) == 0
    assert (judged / JUDGEMENTS_QUARANTINE).read_bytes() == line
    assert len(read_judgements(judged)) == 4


def qualification(**change: Any) -> dict[str, Any]:
    record = QualificationRecord(
        judge="sim-judge:reference", judge_identity="1" * 16, rubric="qa-correctness@1",
        rubric_sha256="2" * 64, set="qa-judge@1", set_sha256="3" * 64, items=10, agreed=9, unreadable=0,
        accuracy=0.9, kappa=0.8, adversarial=4, flips=1, flip_rate=0.25,
        by_category={"plain": {"items": 6, "agreed": 6, "flips": 0, "unreadable": 0}},
        thresholds={"accuracy": 0.8, "kappa": 0.6, "flip_rate": 0.1}, passed=False,
        failures=("flip rate 0.25 above 0.1",), verdicts={"a": 1, "b": None},
    )  # fmt: skip
    return record.to_json() | change


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"accuracy": 1.5}, "field 'accuracy' holds 1.5"),
        ({"flip_rate": NAN}, "field 'flip_rate' holds nan"),
        ({"kappa": -2.0}, "field 'kappa' holds -2.0"),
        ({"agreed": 11}, "field 'agreed' holds 11, not a finite number in [0, 10]"),
        ({"flips": 5}, "field 'flips' holds 5, not a finite number in [0, 4]"),
        ({"items": -1}, "field 'items' holds -1"),
        ({"by_category": {"plain": {"items": -6}}}, "field 'items' holds -6"),
        ({"thresholds": {"accuracy": INF}}, "field 'thresholds' holds inf"),
    ],
)
def test_an_impossible_qualification_is_no_record(change: dict[str, Any], reason: str) -> None:
    assert read_qualification(qualification()) == QualificationRecord.from_json(qualification())
    with pytest.raises(ValueError) as refused:
        read_qualification(qualification(**change))
    assert str(refused.value).startswith(reason)


def test_a_judgement_of_a_judge_the_manifest_does_not_list_is_checked_without_a_scale() -> None:
    first = JudgementRecord(
        sample_id="niah|L1024|D0.0000|S0", prompt_sha256="0" * 64, answer_sha256="1" * 64, role="judge",
        judge="sim-judge:reference", judge_identity="2" * 16, rubric="mine@1", rubric_sha256="3" * 64,
        score=9, reason="", reply="", attempts=1, latency_s=0.1,
    )  # fmt: skip
    assert judgement_reader(())(first.to_json()) == first
