"""Fixtures that hold the awkward case the common one leaves out: errored samples in a comparison, a
series and a suite's task table; samples written twice, of which only the latest counts; an item
asked at several limits with one of them errored; the less common needle kinds (words, uuid, fact,
split, chain) graded and read by the hard-needle table as the number is. Each expected number is
counted by hand from the fixture, in the comment beside it.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from test_store import manifest, record

from fathom.analysis.checkpoint import run_numbers
from fathom.analysis.failures import REJECTED
from fathom.analysis.hard import HEDGED, LURED, lure_outcome
from fathom.analysis.pairing import RunRecords
from fathom.analysis.suite_pairs import compare_suites
from fathom.analysis.suites import task_table
from fathom.errors import RunFolderError
from fathom.prompts.needle_sets import Hardness, needle_set
from fathom.prompts.needles import needle_rng
from fathom.records import SampleRecord
from fathom.registry import score
from fathom.report.compare import compare_runs, read_run
from fathom.run.store import RunFolder
from fathom.scoring import committed_lures

FAILED = "backend_error: the server answered 500"


def graded(index: int, score: float) -> SampleRecord:
    return dataclasses.replace(record(index), score=score, output="1234567" if score else "no")


def errored(index: int) -> SampleRecord:
    return dataclasses.replace(record(index), score=0.0, output="", matched=(), error=FAILED)


def folder(path: Path, records: list[SampleRecord]) -> Path:
    run = RunFolder(path)
    run.start(manifest())
    with run:
        for r in records:
            run.append(r)
    return path


@pytest.fixture
def with_errors(tmp_path: Path) -> tuple[Path, Path]:
    """Twenty samples. Base: all right but sample 10, errored, and a 21st (20) that the new run has
    not asked yet. New: 0-6 wrong, 7-9 errored, 10 and the rest right; and sample 0 written twice, an
    error first and its retry after (latest counts)."""
    base = [errored(i) if i == 10 else graded(i, 1.0) for i in range(21)]
    new = [errored(0)] + [
        graded(i, 0.0) if i < 7 else errored(i) if i < 10 else graded(i, 1.0) for i in range(20)
    ]
    return folder(tmp_path / "base", base), folder(tmp_path / "new", new)


def test_a_comparison_leaves_out_each_pair_with_an_error_on_either_side(
    with_errors: tuple[Path, Path],
) -> None:
    comparison = compare_runs(*with_errors)
    # Errors: new's 7, 8, 9 and base's 10: four pairs out. Sample 0's error was retried: it counts.
    assert (comparison.left_out_errors, comparison.left_out_unpaired) == (4, 1)
    overall = comparison.overall
    # 16 pairs: 0-6 right to wrong (7 worse), 11-19 right in both; 9 of 16 right in the new run.
    assert (overall.pairs, overall.worse, overall.better) == (16, 7, 0)
    assert (overall.base_mean, overall.new_mean) == (1.0, 9 / 16)
    # The gate tests the same 16 pairs: overall and the one cell, 7 worse, p = 0.5^7 each.
    assert [(t.level, t.pairs, t.worse, t.better, t.p_value) for t in comparison.gate.tests] == [
        ("overall", 16, 7, 0, 0.5**7),
        ("cell", 16, 7, 0, 0.5**7),
    ]
    assert [(c.length, c.test.pairs, c.test.worse) for c in comparison.cells] == [(1024, 16, 7)]


def test_only_a_samples_latest_record_is_read(with_errors: tuple[Path, Path]) -> None:
    new = read_run(with_errors[1])
    assert len(new.samples) == 20  # 21 lines, 20 samples
    first = next(r for r in new.samples if r.sample == 0)
    assert (first.error, first.score) == (None, 0.0)


def test_a_series_counts_errors_apart_from_the_score(with_errors: tuple[Path, Path]) -> None:
    numbers = run_numbers(read_run(with_errors[1]))
    # 20 samples, 3 errored (7, 8, 9: sample 0's retry graded); 17 graded, 10 of them right.
    assert (numbers.samples, numbers.errors) == (20, 3)
    assert (numbers.overall.n, numbers.overall.mean) == (17, 10 / 17)
    assert [(at.length, at.score.n, at.score.mean) for at in numbers.lengths] == [(1024, 17, 10 / 17)]


def item(task: str, index: int, limit: int, score: float, error: str | None = None) -> SampleRecord:
    """A suite's sample: item ``index`` of ``task`` asked at the length limit ``limit``."""
    return dataclasses.replace(
        record(index),
        sample_id=f"{task}|L{limit}|S{index}",
        task=task,
        length=limit,
        depth=None,
        target_tokens=limit,
        actual_tokens=limit,
        item_id=f"{task}-{index}",
        original_tokens=3000,
        score=score,
        error=error,
    )


def suite_run(path: str, records: list[SampleRecord]) -> RunRecords:
    return RunRecords(Path(path), manifest(), records)


def test_a_suites_item_with_an_errored_limit_is_the_mean_of_its_graded_ones() -> None:
    # qasper: 8 items at two limits. Base right everywhere. New: items 0-5 wrong at both limits; item 6
    # wrong at 1k and errored at 2k; item 7 right. Sample 6 at 2k is left out: item 6 is its 1k pair.
    limits = (1024, 2048)
    base = [item("qasper", i, limit, 1.0) for i in range(8) for limit in limits]
    new = [
        item("qasper", i, limit, 1.0 if i == 7 else 0.0, FAILED if (i, limit) == (6, 2048) else None)
        for i in range(8)
        for limit in limits
    ]
    comparison = compare_suites(suite_run("base", base), suite_run("new", new))
    assert comparison.left_out_errors == 1
    (task,) = comparison.tasks
    # Items: 8, of 15 pairs of samples; 7 items worse (0-6), 1 the same; new mean 1/8.
    assert (task.task, task.test.pairs, task.pairs, task.test.worse, task.test.better) == (
        "qasper",
        8,
        15,
        7,
        0,
    )
    assert (task.test.base_mean, task.test.new_mean) == (1.0, 1 / 8)


def test_a_suites_task_table_counts_an_errored_sample_apart() -> None:
    records = [item("qasper", i, 1024, 1.0 if i < 3 else 0.0, FAILED if i == 4 else None) for i in range(6)]
    (row,) = task_table(records)
    # 6 samples of 6 items, item 4 errored: 5 items graded, 3 of them right, at the one limit too.
    assert (row["task"], row["items"], row["n"], row["errors"]) == ("qasper", 5, 5, 1)
    assert row["mean"] == pytest.approx(3 / 5, abs=1e-12)
    assert [(at["length"], at["n"], at["errors"], at["mean"]) for at in row["lengths"]] == [
        (1024, 5, 1, pytest.approx(3 / 5, abs=1e-12))
    ]


# The needle kinds beside the common number: a passphrase of two words, a UUID, a fact's town, a split
# number's two halves, a chain's second hop. Each checked as the number is: the answer right, shouted,
# a look-alike taken, hedged (both named) and rejected ("..., not X").
KINDS = ("number", "words", "uuid", "fact", "split", "chain")


def answered(kind: str, seed: int, output: str) -> SampleRecord:
    """A sample of ``kind`` with two distractors, answered ``output`` and graded as the runner grades
    it (contains; a look-alike committed to makes the score 0)."""
    made = needle_set(kind, Hardness(distractors=2), 0.5, needle_rng(seed, kind))
    graded = score("contains", output, made.answers)
    lured = committed_lures(output, made.lures, made.answers)
    return dataclasses.replace(
        record(seed),
        needle_kind=kind,
        needle_depths=tuple(p.depth for p in made.placements),
        needle_token_offsets=tuple(range(len(made.placements))),
        needle_roles=tuple(p.role for p in made.placements),
        needle_values=tuple(p.value for p in made.placements),
        answers=made.answers,
        output=output,
        score=0.0 if lured else graded.value,
        matched=graded.matched,
        lured=lured,
    )


def outputs(kind: str, seed: int) -> dict[str, str]:
    made = needle_set(kind, Hardness(distractors=2), 0.5, needle_rng(seed, kind))
    right, lure = " and ".join(made.answers), made.lures[0]
    return {
        "right": right,
        "shouted": right.upper(),
        "lure": lure,
        "hedged": f"{right} or {lure}",
        "rejected": f"{right}, not {lure}",
    }


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("seed", range(3))
def test_every_needle_kind_is_graded_and_its_lures_read_as_the_numbers_are(kind: str, seed: int) -> None:
    said = outputs(kind, seed)
    expected = {  # the score, the look-alikes committed to, and the hard-needle table's outcome
        "right": (1.0, 0, None),
        "shouted": (1.0, 0, None),
        "lure": (0.0, 1, LURED),
        "hedged": (0.0, 1, HEDGED),
        "rejected": (1.0, 0, REJECTED),
    }
    for name, output in said.items():
        graded = answered(kind, seed, output)
        assert (graded.score, len(graded.lured), lure_outcome(graded)) == expected[name], (name, output)


@pytest.mark.parametrize("seed", range(3))
def test_half_a_split_needle_is_wrong(seed: int) -> None:
    made = needle_set("split", Hardness(distractors=2), 0.5, needle_rng(seed, "split"))
    first, second = made.answers
    assert answered("split", seed, first).score == 0.0
    assert answered("split", seed, f"{first}{second}").score == 0.0  # the halves run together: neither
    assert answered("split", seed, f"{first} {second}").score == 1.0
    # Half the gold and a look-alike: taken by the look-alike, not hedged (hedging names all the gold).
    half_and_lure = answered("split", seed, f"{first} or {made.lures[0]}")
    assert (half_and_lure.score, lure_outcome(half_and_lure)) == (0.0, LURED)


def test_a_run_whose_every_sample_errored_is_refused_by_compare_and_scored_none_by_a_series(
    tmp_path: Path,
) -> None:
    base = folder(tmp_path / "base", [graded(i, 1.0) for i in range(4)])
    new = folder(tmp_path / "new", [errored(i) for i in range(4)])
    with pytest.raises(RunFolderError, match="share no sample that both graded without an error"):
        compare_runs(base, new)
    numbers = run_numbers(read_run(new))
    assert (numbers.samples, numbers.errors, numbers.overall.n, numbers.overall.mean) == (4, 4, 0, None)
    assert numbers.effective_length is not None and numbers.effective_length.mean is None
