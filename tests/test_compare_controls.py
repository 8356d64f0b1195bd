"""fathom compare's no-context controls, and fathom runs' control column.

A checkpoint that starts answering questions without their context has memorised them or trained on
them: compare tests the controls pair by pair, as it tests the cells, and flags it, without failing
the gate (a CI that gates on the exit status gates on retrieval). Every p-value here is worked out by
hand: with no pair lower and b pairs higher, the two-sided exact sign test gives 2 / 2**b.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from test_store import manifest, record

from fathom.analysis.paired import compare_records
from fathom.analysis.pairing import RunRecords
from fathom.cli import main
from fathom.records import SampleRecord
from fathom.report.compare import compare_runs
from fathom.report.derive import run_spec
from fathom.report.runs import list_runs
from fathom.spec import RunSpec

# One cell of twenty samples, each with its no-context control.
SPEC = RunSpec(
    task="niah", model="sim:perfect", tokenizer="cl100k_base", lengths=(1024,), depths=(0.5,), samples=20
)
FLAG = "warning: the new checkpoint answers more questions without their context than the base"


def cli(*args: str | Path) -> int:
    status: int = main([str(a) for a in args])
    return status


# --- the statistics, on records alone ----------------------------------------------------------------


def control(sample: SampleRecord, score: float, **fields: Any) -> SampleRecord:
    """The no-context control of ``sample``, scored ``score``."""
    sample_id = f"control|{sample.sample_id}"
    return dataclasses.replace(sample, sample_id=sample_id, control=True, score=score, **fields)


def run(name: str, answered: Sequence[int], count: int = 20, task: str = "niah") -> RunRecords:
    """A run of ``count`` right samples of ``task`` whose controls ``answered`` (by index) are right."""
    samples = [
        dataclasses.replace(record(i), task=task, sample_id=f"{task}|L1024|D0.5000|S{i}")
        for i in range(count)
    ]
    controls = [control(s, float(i in answered)) for i, s in enumerate(samples)]
    return RunRecords(Path(name), manifest(model=name), samples, controls)


def merged(first: RunRecords, second: RunRecords) -> RunRecords:
    samples, controls = [*first.samples, *second.samples], [*first.controls, *second.controls]
    return RunRecords(first.path, first.manifest, samples, controls)


def test_controls_that_jump_from_0_to_15_of_20_are_flagged_with_the_exact_p_value() -> None:
    comparison = compare_records(run("base", []), run("new", range(15)))
    controls = comparison.controls
    assert controls.overall is not None
    test = controls.overall
    assert (test.pairs, test.worse, test.better) == (20, 0, 15)
    assert (test.base_mean, test.new_mean) == (0.0, 0.75)
    # 15 of 15 discordant pairs higher: 2 * P(X = 0), X ~ Binomial(15, 1/2) = 2 / 32768.
    assert test.p_value == pytest.approx(6.103515625e-05, rel=1e-12)
    (task,) = controls.tasks
    assert task.task == "niah" and task.p_adjusted == pytest.approx(6.103515625e-05, rel=1e-12)
    assert [t.task for t in controls.flagged] == ["niah"]
    assert 0.0 < controls.ci_low < 0.75 < controls.ci_high <= 1.0  # the difference excludes 0
    # The controls are no cell: the samples did not move, so there is no regression to gate on.
    assert not comparison.regressed and not comparison.improved
    data = comparison.to_json()["controls"]
    assert data["flagged"] == ["niah"] and data["tasks"][0]["verdict"] == "higher"
    assert data["base"] == {"graded": 20, "answered": 0} and data["new"] == {"graded": 20, "answered": 15}
    assert data["overall"]["better"] == 15 and data["overall"]["p_value"] == pytest.approx(2 / 2**15)


def test_equal_or_fewer_answers_without_the_context_are_not_flagged() -> None:
    # Five answered in each run, by other questions: 5 pairs lower, 5 higher, p = 1.
    swapped = compare_records(run("base", range(5)), run("new", range(5, 10))).controls
    assert swapped.overall is not None and swapped.overall.p_value == 1.0
    assert swapped.flagged == [] and swapped.tasks[0].verdict == "unchanged"
    # The same five: no discordant pair, no evidence either way.
    same = compare_records(run("base", range(5)), run("new", range(5))).controls
    assert same.overall is not None and same.flagged == []
    assert (same.overall.worse, same.overall.better, same.overall.p_value) == (0, 0, 1.0)
    # Ten fewer: significant (p = 2 / 1024) but the other way, which is no sign of memorisation.
    fewer = compare_records(run("base", range(10)), run("new", [])).controls
    assert fewer.flagged == [] and fewer.tasks[0].verdict == "regressed"
    assert fewer.to_json()["tasks"][0]["verdict"] == "lower"


def test_holm_adjusts_over_the_control_tasks_alone() -> None:
    """Two tasks: 10 of 10 higher (p = 2/1024) and 5 of 5 higher (p = 2/32 = 0.0625). Holm over the
    two: 2/1024 x 2 = 0.00390625, flagged; 0.0625 x 1 = 0.0625 (kept at least the one before), not."""
    base = merged(run("base", [], 10), run("base", [], 10, task="niah:code"))
    new = merged(run("new", range(10), 10), run("new", range(5), 10, task="niah:code"))
    controls = compare_records(base, new).controls
    by_task = {t.task: t for t in controls.tasks}
    assert by_task["niah"].test.p_value == pytest.approx(2 / 1024)
    assert by_task["niah"].p_adjusted == pytest.approx(0.00390625)
    assert by_task["niah:code"].test.p_value == pytest.approx(0.0625)
    assert by_task["niah:code"].p_adjusted == pytest.approx(0.0625)
    assert [t.task for t in controls.flagged] == ["niah"]
    # Pooled over the 20 questions, 15 higher: reported, and no verdict of its own.
    assert controls.overall is not None and controls.overall.p_value == pytest.approx(2 / 2**15)


def test_a_suite_item_asked_at_two_limits_is_one_question() -> None:
    """Four items, each at two length limits: the new run answers all eight controls, the base none.
    Four questions, not eight: p = 2 / 2**4 = 0.125, not 2 / 2**8, and so nothing is flagged."""

    def suite_run(name: str, score: float) -> RunRecords:
        samples = [
            dataclasses.replace(
                record(item),
                sample_id=f"qa|L{limit}|S{item}",
                length=limit,
                depth=None,
                item_id=f"item-{item}",
                original_tokens=5000,
                task="qa",
            )
            for item in range(4)
            for limit in (1024, 2048)
        ]
        return RunRecords(Path(name), manifest(model=name), samples, [control(s, score) for s in samples])

    controls = compare_records(suite_run("base", 0.0), suite_run("new", 1.0)).controls
    assert controls.overall is not None
    assert (controls.overall.pairs, controls.overall.better) == (4, 4)
    assert controls.overall.p_value == pytest.approx(0.125)
    (task,) = controls.tasks
    assert (task.pairs, task.test.pairs) == (8, 4) and controls.flagged == []


# --- run folders and the command -------------------------------------------------------------------


def sweep(folder: Path, **changes: Any) -> Path:
    run_spec(dataclasses.replace(SPEC, **changes), folder, show_progress=False)
    return folder


def rewrite_controls(folder: Path, edit: Callable[[list[dict[str, Any]]], list[dict[str, Any]]]) -> None:
    """``edit`` the run's no-context controls, in their order; its samples stay as they were."""
    path = folder / "samples.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines()]
    controls = [r for r in records if r.get("control")]
    samples = [r for r in records if not r.get("control")]
    path.write_text("".join(json.dumps(r) + "\n" for r in edit(controls) + samples))


def answering(indices: range) -> Callable[[list[dict[str, Any]]], list[dict[str, Any]]]:
    # The gold answer as the output: sim's control refuses, and a refusal is no answer, whatever its score.
    return lambda rs: [
        dict(r, score=1.0, output=r["answers"][0]) if i in indices else r for i, r in enumerate(rs)
    ]


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return sweep(tmp_path_factory.mktemp("controls") / "base")


@pytest.fixture(scope="module")
def bare(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same spec without controls (--no-control)."""
    return sweep(tmp_path_factory.mktemp("bare") / "bare", control=False)


def test_a_checkpoint_answering_without_the_context_is_flagged_but_passes_the_gate(
    base: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    new = shutil.copytree(base, tmp_path / "new")
    rewrite_controls(new, answering(range(15)))
    assert cli("compare", base, new, "--out", tmp_path / "out") == 0  # no cell regressed
    out = capsys.readouterr().out
    assert (
        "no-context controls (every question asked again without its context; exact sign test per task, "
        "Holm-adjusted over 1 task): 0.0% → 75.0% (+75.0 points, 95% interval "
    ) in out
    assert "20 questions: 0 lower, 15 higher), p = 6.1e-05" in out
    flag = next(line for line in out.splitlines() if line.startswith(FLAG))
    assert "(niah: 0.0% → 75.0%, adjusted p = 6.1e-05)" in flag
    assert "memorised" in flag and "leaked" in flag and "exit status does not count it" in flag
    data = json.loads((tmp_path / "out" / "compare.json").read_text())
    assert data["regressions"] == 0 and data["controls"]["flagged"] == ["niah"]
    assert data["controls"]["overall"]["p_value"] == pytest.approx(2 / 2**15)
    assert data["controls"]["left_out"] == {"errors": 0, "unpaired": 0}
    page = (tmp_path / "out" / "compare.html").read_text()
    assert "<h3>No-context controls</h3><p><strong>The new checkpoint answers significantly more" in page
    row = "<td>niah</td><td>0.0%</td><td>75.0%</td><td>+75.0</td>"
    assert row in page and "<td>higher</td>" in page.split(row)[1].split("</tr>")[0]

    # Both at once: the regression still fails the gate, the flag still shows.
    rewrite_samples_scores(new, 0.0)
    assert cli("compare", base, new, "--out", tmp_path / "out") == 1
    assert FLAG in capsys.readouterr().out


def rewrite_samples_scores(folder: Path, score: float) -> None:
    path = folder / "samples.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines()]
    edited = [r if r.get("control") else dict(r, score=score) for r in records]
    path.write_text("".join(json.dumps(r) + "\n" for r in edited))


def test_equal_controls_are_compared_and_not_flagged(
    base: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli("compare", base, base, "--out", tmp_path / "out") == 0
    out = capsys.readouterr().out
    assert (
        "0.0% → 0.0% (+0.0 points, 95% interval +0.0 to +0.0; 20 questions: 0 lower, 0 higher), p = 1" in out
    )
    assert FLAG not in out and "left out" not in out.split("no-context controls")[1]
    data = json.loads((tmp_path / "out" / "compare.json").read_text())["controls"]
    assert data["flagged"] == [] and data["tasks"][0]["verdict"] == "unchanged"
    page = (tmp_path / "out" / "compare.html").read_text()
    assert "<h3>No-context controls</h3><p>Every question asked again" in page
    assert "significantly more" not in page


@pytest.mark.parametrize("order", ["bare new", "bare base"])
def test_one_run_without_controls_is_said_and_compared_otherwise(
    base: Path, bare: Path, tmp_path: Path, order: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with_controls = shutil.copytree(base, tmp_path / "with")
    rewrite_controls(with_controls, answering(range(2)))
    runs = (with_controls, bare) if order == "bare new" else (bare, with_controls)
    assert cli("compare", *runs, "--out", tmp_path / "out") == 0  # spec.control may differ
    out = capsys.readouterr().out
    which = "base" if order == "bare new" else "new"
    assert (
        f"no-context controls: only the {which} run has them (2 of 20 answered without the context): "
        "not compared"
    ) in out
    assert "pairs: 20; left out: 0" in out  # the samples are compared as ever
    data = json.loads((tmp_path / "out" / "compare.json").read_text())["controls"]
    assert data[which] == {"graded": 20, "answered": 2}
    assert data["new" if which == "base" else "base"] is None
    assert (data["overall"], data["tasks"], data["flagged"]) == (None, [], [])
    page = (tmp_path / "out" / "compare.html").read_text()
    assert f"Only the {which} run asked its questions without their context (2 of 20 answered)" in page


def test_neither_run_with_controls_says_nothing_of_them(
    bare: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli("compare", bare, bare, "--out", tmp_path / "out") == 0
    assert "no-context control" not in capsys.readouterr().out
    data = json.loads((tmp_path / "out" / "compare.json").read_text())["controls"]
    assert (data["base"], data["new"], data["overall"], data["flagged"]) == (None, None, None, [])
    assert "No-context controls" not in (tmp_path / "out" / "compare.html").read_text()


def test_mismatched_controls_pair_what_matches_and_warn_on_the_rest(
    base: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old, new = shutil.copytree(base, tmp_path / "old"), shutil.copytree(base, tmp_path / "new")
    # The base lacks the last 4 controls; the new run answers 12 of the first 16, and one more of
    # them ends in an error.
    rewrite_controls(old, lambda rs: rs[:16])
    rewrite_controls(new, lambda rs: [dict(r, error="length_mismatch: 90 tokens") if i == 15 else r
                                      for i, r in enumerate(answering(range(12))(rs))])  # fmt: skip
    comparison = compare_runs(old, new)
    controls = comparison.controls
    assert (controls.left_out_errors, controls.left_out_unpaired) == (1, 4)
    assert controls.overall is not None and (controls.overall.pairs, controls.overall.better) == (15, 12)
    assert controls.overall.p_value == pytest.approx(2 / 2**12)
    assert controls.base is not None and controls.new is not None
    assert (controls.base.graded, controls.new.graded, controls.new.answered) == (16, 19, 12)
    assert comparison.left_out_unpaired == 0  # the samples all pair
    assert cli("compare", old, new, "--out", tmp_path / "out") == 0
    out = capsys.readouterr().out
    assert ("warning: no-context controls left out: 1 with an error in either run, 4 in one run only") in out
    assert FLAG in out

    # No control both graded: nothing to compare, said so.
    rewrite_controls(new, lambda rs: [dict(r, error="length_mismatch: 90 tokens") for r in rs])
    nothing = compare_runs(old, new).controls
    assert nothing.overall is None and (nothing.left_out_errors, nothing.left_out_unpaired) == (16, 4)
    assert cli("compare", old, new, "--out", tmp_path / "out") == 0
    assert (
        "no-context controls: the runs share none that both graded: not compared" in capsys.readouterr().out
    )


# --- fathom runs ------------------------------------------------------------------------------------


def test_runs_shows_the_controls_answered_of_those_graded(
    base: Path, bare: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "runs"
    leaky = shutil.copytree(base, folder / "leaky")
    shutil.copytree(bare, folder / "bare")
    # Two answered, one failed: 2 of the 19 graded.
    rewrite_controls(leaky, lambda rs: [dict(r, error="length_mismatch: 90") if i == 19 else r
                                        for i, r in enumerate(answering(range(2))(rs))])  # fmt: skip
    by_name = {e.folder.name: e for e in list_runs(folder)}
    assert by_name["leaky"].controls is not None
    assert (by_name["leaky"].controls.answered, by_name["leaky"].controls.graded) == (2, 19)
    assert by_name["bare"].controls is None
    assert cli("runs", folder) == 0
    lines = {line.split()[2]: line.split() for line in capsys.readouterr().out.splitlines()}
    assert lines["leaky"][-4:] == ["ctl", "2/19", "effective", "1k"]
    assert lines["bare"][-4:] == ["ctl", "—", "effective", "1k"]
