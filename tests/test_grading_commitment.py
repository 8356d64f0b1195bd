"""Grading that reads what the answer commits to (issue 29, item 4): numbers on digit boundaries, a
split code's halves in order, and a look-alike that counts only when the answer commits to it. Every
case is a hand-written answer."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from fathom.analysis.failures import REJECTED, failure_kind, rejected_lure, rejected_lures
from fathom.analysis.hard import lure_outcome
from fathom.analysis.paired import compare_records
from fathom.analysis.pairing import RunRecords
from fathom.analysis.summary import run_summary
from fathom.backends.base import Completion
from fathom.prompts.tokenizers import load_tokenizer
from fathom.records import Cell, SampleRecord
from fathom.registry import create_backend
from fathom.report.compare_text import failures_line
from fathom.report.html.failures import failures_section
from fathom.report.html.hard import hard_section
from fathom.report.text import hard_text
from fathom.run.manifest import manifest
from fathom.run.recording import sample_record as _record
from fathom.scoring import SCORERS, SCORING_VERSIONS, committed_lures, found_in, named_in
from fathom.spec import RunSpec
from fathom.tasks.base import Sample
from fathom.tasks.niah import NiahTask

GOLD, LURE = "2484111", "9546144"
CHAR = load_tokenizer("char")


def contains(output: str, *references: str) -> float:
    return SCORERS["contains"].grade(output, references).value


@pytest.mark.parametrize(
    ("output", "score"),
    [
        ("The number is 2484111.", 1.0),  # at a sentence's end
        ("2484111", 1.0),
        ("**2484111**", 1.0),
        ("It is 2,484,111.", 1.0),  # thousands grouped by commas: the same number
        ("The number is 12484111.", 0.0),  # a digit superstring
        ("24841119", 0.0),
        ("12,484,111", 0.0),
        ("2484111.5", 0.0),  # a decimal part makes it another number
        ("3.2484111", 0.0),
        ("248 4111", 0.0),
    ],
)
def test_a_number_is_found_only_as_a_whole_number(output: str, score: float) -> None:
    assert contains(output, GOLD) == score


def test_rulers_metrics_keep_their_plain_containment() -> None:
    """RULER's all and any stay string containment, as RULER scores: a digit superstring still counts."""
    assert SCORERS["all"].grade("12484111", (GOLD,)).value == 1.0
    assert SCORERS["any"].grade("12484111", (GOLD,)).value == 1.0
    assert found_in("12484111", (GOLD,)) == (GOLD,) and named_in("12484111", (GOLD,)) == ()


def test_a_word_reference_is_still_found_anywhere_case_insensitively() -> None:
    assert contains("The key is Amber-Falcon-Seven.", "amber-falcon-seven") == 1.0


@pytest.mark.parametrize(
    ("output", "score"),
    [
        ("2449 9056", 1.0),
        ("The whole code: 2449-9056.", 1.0),
        ("First half 2449, second half 9056.", 1.0),
        ("9056 2449", 0.0),  # the halves reversed
        ("The code is 9056, then 2449.", 0.0),
        ("2449", 0.0),
        ("12449 9056", 0.0),  # a superstring of the first half
    ],
)
def test_a_split_codes_halves_count_only_in_the_order_asked(output: str, score: float) -> None:
    graded = SCORERS["ordered"].grade(output, ("2449", "9056"))
    assert graded.value == score and graded.method == "ordered"


def test_a_split_code_of_two_equal_halves_needs_both_said() -> None:
    assert SCORERS["ordered"].grade("4242", ("4242", "4242")).value == 0.0
    assert SCORERS["ordered"].grade("4242 4242", ("4242", "4242")).value == 1.0


@pytest.mark.parametrize(
    ("output", "committed"),
    [
        # The answer names the gold and rejects the look-alike: no lure taken.
        ("2484111. (9546144 is mellow-blanket's number, not mellow-spoon's.)", ()),
        ("It is 2484111, not 9546144.", ()),
        ("2484111 (not 9546144)", ()),
        ("2484111, rather than '9546144'.", ()),
        ("9546144 isn\u2019t it; 2484111 is.", ()),
        ("9546144 is not the answer, 2484111 is.", ()),
        # It commits to the look-alike, or hedges between the two.
        ("2484111 or 9546144", (LURE,)),
        ("9546144", (LURE,)),
        ("The number is 9546144, not 2484111.", (LURE,)),  # the negation governs the gold
        ("I'm not sure, maybe 9546144 or 2484111.", (LURE,)),  # "not sure" hedges
        ("9546144 or 2484111, I'm not sure.", (LURE,)),  # another value before the negation
        ("I don't know: 9546144 or 2484111.", (LURE,)),
        ("2484111. Not 9546144. Well, 9546144.", (LURE,)),  # one mention rejected, one not
        ("2484111; 9546144 is mellow-blanket's. Not mellow-spoon's.", (LURE,)),  # another clause
        ("12484111, not 9546144, 29546144", ()),  # superstrings name nothing
    ],
)
def test_a_look_alike_counts_only_where_the_answer_commits_to_it(
    output: str, committed: tuple[str, ...]
) -> None:
    assert committed_lures(output, (LURE,), (GOLD,)) == committed


def test_contains_and_ordered_are_versioned_so_old_runs_do_not_resume_under_them() -> None:
    assert SCORING_VERSIONS["contains"] == 2 and SCORING_VERSIONS["ordered"] == 1


def spec(**changes: object) -> RunSpec:
    base = RunSpec("niah", "sim:perfect", "char", (2048,), (0.5,), 4, distractors=1)
    return dataclasses.replace(base, **changes)


def _samples(run: RunSpec) -> list[Sample]:
    task = NiahTask(run, CHAR)
    made = [task.prepare(Cell("niah", 2048, 0.5, index)) for index in range(run.samples)]
    assert all(isinstance(sample, Sample) for sample in made)
    return [sample for sample in made if isinstance(sample, Sample)]


def _answered(run: RunSpec, answers: list[str]) -> list[SampleRecord]:
    """Each sample's record for a hand-written answer, in which GOLD and LURE stand for the sample's
    gold value (or the split code's halves) and its distractor's."""
    backend = create_backend(run.model, run.tokenizer)
    records = []
    for sample, answer in zip(_samples(run), answers, strict=True):
        assert sample.needles is not None
        text = answer.replace(GOLD, " ".join(sample.answers))
        for lure in sample.needles.lures[:1]:
            text = text.replace(LURE, lure)
        completion = Completion(text, len(sample.prompt.ids), 8, "stop", 0.1)
        records.append(_record(run, backend, sample, len(sample.prompt.ids), completion))
    return records


HEADLINE = "GOLD. (LURE is mellow-blanket's number, not mellow-spoon's.)".replace("GOLD", GOLD)
ANSWERS = [HEADLINE.replace("LURE", LURE), f"{GOLD} or {LURE}", f"{LURE}", f"{GOLD}"]


def test_a_run_scores_the_rejection_right_the_hedge_hedged_and_the_lure_a_distractor() -> None:
    rejected, hedge, lure, plain = _answered(spec(), ANSWERS)
    lure_value = rejected.needle_values[1]
    assert (rejected.score, rejected.lured, rejected_lures(rejected)) == (1.0, (), (lure_value,))
    assert failure_kind(rejected) is None and lure_outcome(rejected) == REJECTED and rejected_lure(rejected)
    assert (hedge.score, failure_kind(hedge), lure_outcome(hedge)) == (0.0, "hedged", "hedged")
    assert (lure.score, failure_kind(lure), lure_outcome(lure)) == (0.0, "distractor", "distractor")
    assert (plain.score, lure_outcome(plain), rejected_lure(plain)) == (1.0, None, False)


def test_a_split_run_grades_by_order_and_records_the_version_of_its_grader() -> None:
    run = spec(needle="split", distractors=0, samples=1)
    task = NiahTask(run, CHAR)
    assert task.scoring == "ordered" and NiahTask(spec(), CHAR).scoring == "contains"
    (right,) = _answered(run, [f"The code is {GOLD}."])
    assert right.score == 1.0 and right.scoring == "ordered"
    (sample,) = _samples(run)
    backend = create_backend(run.model, run.tokenizer)
    flipped = Completion(" ".join(reversed(sample.answers)), 100, 8, "stop", 0.1)
    assert _record(run, backend, sample, 100, flipped).score == 0.0
    written = manifest(run, CHAR, task, backend, 1).identity.written
    assert written["scoring"] == {"ordered": 1}


def test_the_rejected_outcome_is_counted_in_the_summary_and_the_report() -> None:
    records = _answered(spec(), ANSWERS)
    hard = run_summary(records).to_json()["hard"]
    (row,) = hard["rejected_lures"]
    assert (row["length"], row["rejected"]["n"], row["rejected"]["count"]) == (2048, 4, 1)
    (lures,) = hard["lures"]
    assert (lures["lured"]["count"], lures["hedged"]["count"]) == (1, 1)
    assert "      2k: rejected a look-alike 1 of 4 (25.0%), counted right" in hard_text(hard)
    assert "Look-alikes rejected" in hard_section(hard)
    assert "only to reject it (not a failure): 1" in failures_section(records)


def test_a_run_without_rejections_has_no_rejected_section() -> None:
    hard = run_summary(_answered(spec(), [f"{GOLD} or {LURE}", LURE, GOLD, GOLD])).to_json()["hard"]
    assert "rejected_lures" not in hard and hard["lures"]


def test_compare_shows_the_rejected_outcome_in_its_failures_by_kind(tmp_path: Path) -> None:
    run = spec()
    task = NiahTask(run, CHAR)
    written = manifest(run, CHAR, task, create_backend(run.model, run.tokenizer), run.samples)
    base = _answered(run, [f"{GOLD} or {LURE}", LURE, GOLD, GOLD])
    new = _answered(run, ANSWERS)
    comparison = compare_records(
        RunRecords(tmp_path / "base", written, base), RunRecords(tmp_path / "new", written, new)
    )
    line = failures_line(comparison)
    assert line.endswith("hedged 1 → 1, distractor 1 → 1, rejected 0 → 1")
    assert comparison.to_json()["failures"][REJECTED] == {"base": 0, "new": 1}
