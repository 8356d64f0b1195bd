"""The comparison's pieces that its end-to-end tests leave open, each pinned by a value worked out
by hand: how a machine difference is shown, a run's reference in compare.json, the order of the
cells and the verdict where the mean and the signs disagree."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from test_store import manifest, record

from fathom.analysis.failures import FAILURE_KINDS
from fathom.analysis.gate import gate
from fathom.analysis.paired import (
    CellComparison,
    EffectiveLength,
    Pair,
    PairedTest,
    RunRecords,
    RunRef,
    _check_same_prompts,
    _compare_cells,
    _short,
    compare_records,
    failure_changes,
    holm_adjust,
    machine_differences,
    machine_warning,
    paired_test,
    run_effective_length,
    sign_test,
)
from fathom.analysis.pairing import (
    _by_id,
    _check_same_hashes,
    _verdict,
    compare_tasks,
    differences,
    item_pairs,
    twins,
)
from fathom.errors import RunFolderError
from fathom.manifest import Environment, Identity, Manifest
from fathom.records import SampleRecord


def test_a_cpu_reads_as_its_model_and_how_many_simd_flags_it_has() -> None:
    cpu = {"model": "Xeon Platinum 8480", "simd": ["avx2", "avx512f", "amx"], "cores": 8}
    assert _short(cpu) == "Xeon Platinum 8480, 3 SIMD flags"
    assert _short({"model": "EPYC 9654", "simd": None}) == "EPYC 9654, 0 SIMD flags"
    assert _short({"model": "EPYC 9654"}) == "EPYC 9654, 0 SIMD flags"


def test_anything_else_reads_as_its_json_with_sorted_keys_and_at_most_80_characters() -> None:
    assert _short({"version": "0.3.36", "commit": "abc123"}) == '{"commit": "abc123", "version": "0.3.36"}'
    # A string that merely mentions a model is no CPU record.
    assert _short("a model built here") == '"a model built here"'
    assert _short(["b", "a"]) == '["b", "a"]'
    long = {"flags": "x" * 100}
    assert _short(long) == '{"flags": "' + "x" * 69
    assert len(_short(long)) == 80


def test_a_run_is_named_in_compare_json_by_its_folder_and_model() -> None:
    ref = RunRef(Path("runs") / "niah-sim-perfect-1a2b3c4d", "sim:perfect")
    assert ref.to_json() == {"path": "runs/niah-sim-perfect-1a2b3c4d", "model": "sim:perfect"}


def _pair(sample_id: str, task: str, length: int, depth: float | None, base: float, new: float) -> Pair:
    twin = dataclasses.replace(record(0), sample_id=sample_id, task=task, length=length, depth=depth)
    return dataclasses.replace(twin, score=base), dataclasses.replace(twin, score=new)


def _cells(pairs: list[Pair]) -> tuple[CellComparison, ...]:
    """The cells of a comparison of these pairs, with the gate's verdicts."""
    return _compare_cells(pairs, gate(pairs, 0.05, lambda r: r.sample_id))


def test_ruler_cells_come_in_the_suites_task_order_then_by_length() -> None:
    # Sample ids sort cwe before vt, and 16384 before 4096 as text: the order must come from neither.
    pairs = [
        _pair("cwe|L16384|S0", "cwe", 16384, None, 1.0, 0.0),
        _pair("cwe|L4096|S0", "cwe", 4096, None, 1.0, 1.0),
        _pair("vt|L16384|S0", "vt", 16384, None, 0.0, 1.0),
        _pair("vt|L4096|S0", "vt", 4096, None, 1.0, 1.0),
    ]
    cells = _cells(pairs)
    assert [(c.task, c.length, c.depth) for c in cells] == [
        ("vt", 4096, None),
        ("vt", 16384, None),
        ("cwe", 4096, None),
        ("cwe", 16384, None),
    ]
    assert [(c.test.worse, c.test.better) for c in cells] == [(0, 0), (0, 1), (0, 0), (1, 0)]


def test_niah_cells_come_by_length_then_depth_whatever_their_ids() -> None:
    pairs = [
        _pair("a", "niah", 2048, 1.0, 1.0, 1.0),
        _pair("b", "niah", 1024, 1.0, 1.0, 0.0),
        _pair("c", "niah", 1024, 0.0, 0.0, 1.0),
        _pair("d", "niah", 1024, 0.5, 1.0, 1.0),
    ]
    cells = _cells(pairs)
    assert [(c.task, c.length, c.depth) for c in cells] == [
        (None, 1024, 0.0),
        (None, 1024, 0.5),
        (None, 1024, 1.0),
        (None, 2048, 1.0),
    ]
    assert [c.test.difference for c in cells] == [1.0, 0.0, -1.0, 0.0]


def test_a_mean_that_did_not_move_is_no_verdict_whatever_the_signs_say() -> None:
    # Fractional scores: ten small drops and one large gain that cancel in the mean.
    test = PairedTest(pairs=11, base_mean=0.5, new_mean=0.5, worse=10, better=1, p_value=0.0117)
    assert _verdict(test, 0.0117, 0.05) == "unchanged"
    assert _verdict(dataclasses.replace(test, new_mean=0.4), 0.0117, 0.05) == "regressed"
    assert _verdict(dataclasses.replace(test, new_mean=0.6), 0.0117, 0.05) == "unchanged"  # signs disagree


def test_an_improvement_needs_the_mean_to_rise_too() -> None:
    test = PairedTest(pairs=11, base_mean=0.5, new_mean=0.5, worse=1, better=10, p_value=0.0117)
    assert _verdict(test, 0.0117, 0.05) == "unchanged"
    assert _verdict(dataclasses.replace(test, new_mean=0.6), 0.0117, 0.05) == "improved"


def test_negative_counts_and_no_pairs_are_refused_with_the_reason() -> None:
    with pytest.raises(ValueError) as raised:
        sign_test(-1, 3)
    assert str(raised.value) == "counts must be >= 0, got worse=-1, better=3"
    with pytest.raises(ValueError) as raised:
        paired_test([])
    assert str(raised.value) == "no pairs to test"


def test_holm_caps_every_adjusted_p_at_one() -> None:
    # 3 x 0.4 = 1.2 and 2 x 0.5 = 1.0 by hand: capped, then kept non-decreasing.
    assert holm_adjust([0.4, 0.5, 0.9]) == [1.0, 1.0, 1.0]
    assert holm_adjust([0.9, 0.01, 0.3]) == [0.9, 0.03, 0.6]


def test_a_run_without_samples_has_no_effective_length() -> None:
    assert run_effective_length([]) == EffectiveLength(None, None)


def test_a_ruler_runs_effective_length_on_the_mean_and_on_the_lower_bound() -> None:
    # One task: 40/40 at 1k (Wilson lower bound 91.2%) and 36/40 at 2k (mean 90%, lower bound 77.0%),
    # against RULER's threshold of 85.6%.
    samples = [
        dataclasses.replace(record(i), sample_id=f"vt|L{length}|S{i}", task="vt", length=length, depth=None,
                            score=float(length == 1024 or i < 36))
        for length in (1024, 2048)
        for i in range(40)
    ]  # fmt: skip
    assert run_effective_length(samples) == EffectiveLength(2048, 1024)


def _identity(**changes: Any) -> Identity:
    written = manifest().identity.written
    return Identity.from_json({**written, **changes})


def test_a_key_one_identity_lacks_is_a_difference_in_the_prompts() -> None:
    base = _identity()
    spec = {k: v for k, v in base.written["spec"].items() if k != "template"}
    new = _identity(spec=spec, task={**base.written["task"], "extra": 2})
    with pytest.raises(RunFolderError) as raised:
        _check_same_prompts(base, new)
    assert str(raised.value) == (
        "the runs did not see the same prompts; they differ in spec.template (base 'auto', new None); "
        "task.extra: compare two runs of one spec (same task, lengths, depths, samples, seed, tokenizer, "
        "corpus and template) that differ only in --model"
    )


def test_twins_with_different_prompts_are_refused_with_the_reason() -> None:
    base = {"a": record(0), "b": record(1)}
    new = {"a": dataclasses.replace(record(0), prompt_sha256="1" * 64), "b": record(1)}
    with pytest.raises(RunFolderError) as raised:
        _check_same_hashes(base, new)
    assert str(raised.value) == (
        "1 paired samples have different prompts (first: a) although the manifests match: the prompt "
        "builder changed between the runs; re-run both with one fathom version"
    )


def test_a_run_without_graded_samples_cannot_be_compared() -> None:
    with pytest.raises(RunFolderError) as raised:
        _by_id(RunRecords(Path("runs/a"), manifest(), []))
    assert str(raised.value) == (
        "run folder 'runs/a' has no graded samples to compare (it has not run yet, or it holds "
        "perplexity documents only): run it first"
    )


def test_a_different_backend_build_is_named() -> None:
    def with_build(build: dict[str, Any]) -> Manifest:
        return dataclasses.replace(manifest(), environment=Environment(backend_build=build))

    found = machine_differences(with_build({"llama_cpp": "0.3.36"}), with_build({"llama_cpp": "0.3.37"}))
    assert found == ['backend build ({"llama_cpp": "0.3.36"} vs {"llama_cpp": "0.3.37"})']


def test_a_niah_run_of_several_variants_compares_each_variant_apart() -> None:
    pairs = [
        _pair("b", "niah:distractors", 1024, 0.5, 1.0, 0.0),
        _pair("a", "niah", 1024, 0.5, 1.0, 1.0),
        _pair("c", "niah", 1024, 0.0, 0.0, 1.0),
    ]
    cells = _cells(pairs)
    assert [(c.task, c.length, c.depth) for c in cells] == [
        ("niah", 1024, 0.0),
        ("niah", 1024, 0.5),
        ("niah:distractors", 1024, 0.5),
    ]
    assert [(c.test.worse, c.test.better) for c in cells] == [(0, 1), (0, 0), (1, 0)]
    # One variant: the cells have no task, as compare.json always had them.
    assert [c.task for c in _cells(pairs[1:])] == [None, None]


def test_a_run_of_literal_twins_alone_has_no_effective_length() -> None:
    twins = [
        dataclasses.replace(record(i), sample_id=f"niah:literal|L1024|D0.5000|S{i}", task="niah:literal")
        for i in range(3)
    ]
    assert run_effective_length(twins) == EffectiveLength(None, None)


def test_failure_changes_count_each_kind_in_both_runs() -> None:
    wrong = {"score": 0.0, "output": "7654321", "matched": ()}
    pairs = [
        (record(0), dataclasses.replace(record(0), **wrong)),  # type: ignore[arg-type]
        (dataclasses.replace(record(1), output="", score=0.0, matched=()), record(1)),
        (record(2), dataclasses.replace(record(2), output="", score=0.0, matched=())),
    ]
    changes = {c.kind: (c.base, c.new) for c in failure_changes(pairs)}
    assert list(changes) == list(FAILURE_KINDS)
    assert changes == dict.fromkeys(FAILURE_KINDS, (0, 0)) | {"empty": (1, 1), "wrong_answer": (0, 1)}


def test_a_task_counts_an_item_asked_at_several_lengths_once_at_its_mean_scores() -> None:
    """Item A at two lengths (base 1 then 0, new 0.25 then 0.75) is one item of base 0.5 and new 0.5;
    items B (1 -> 0) and C (0.25 -> 1) once each. Worked by hand: base mean 1.75/3, new 1.5/3, one
    item worse and one better, differences (0, -1, 0.75) whose bootstrap bounds lie within them."""

    def asked(item: str, length: int, base: float, new: float) -> Pair:
        base_record, new_record = _pair(f"qa|{item}|L{length}", "qa", length, None, base, new)
        return dataclasses.replace(base_record, question=item), dataclasses.replace(new_record, question=item)

    pairs = [asked("A", 1024, 1.0, 0.25), asked("A", 2048, 0.0, 0.75), asked("B", 1024, 1.0, 0.0)]
    pairs.append(asked("C", 1024, 0.25, 1.0))
    (task,) = compare_tasks(pairs, 0.05, lambda record: record.question)
    assert (task.task, task.pairs, task.test.pairs, task.test.worse, task.test.better) == ("qa", 4, 3, 1, 1)
    assert task.test.base_mean == pytest.approx(1.75 / 3) and task.test.new_mean == pytest.approx(0.5)
    assert -1.0 <= task.ci_low <= task.ci_high <= 0.75
    assert sorted(differences(item_pairs(pairs, lambda record: record.question)["qa"])) == [-1.0, 0.0, 0.75]
    written = task.to_json()
    assert (written["items"], written["pairs"], written["verdict"]) == (3, 4, "unchanged")
    assert written["difference"] == pytest.approx(-0.25 / 3)


def test_runs_that_hold_other_items_under_every_shared_id_are_refused_naming_the_first() -> None:
    def run(folder: str, items: tuple[str, str]) -> RunRecords:
        samples = [dataclasses.replace(record(i), item_id=item) for i, item in enumerate(items)]
        return RunRecords(Path(folder), manifest(), samples)

    with pytest.raises(RunFolderError) as refused:
        twins(run("base", ("a", "b")), run("new", ("c", "d")))
    assert str(refused.value) == (
        "'base' and 'new' hold different items under all 2 sample ids they share (first: "
        "niah|L1024|D0.5000|S0, item a against c): they read different data files; compare runs of "
        "one --data"
    )


def _run(folder: str, samples: list[SampleRecord], data: str | None = None) -> RunRecords:
    """A run of ``samples`` whose spec read ``--data`` from ``data``."""
    written = manifest().identity.written
    identity = {**written, "spec": {**written["spec"], "data": data}}
    return RunRecords(Path(folder), Manifest(Identity.from_json(identity)), samples)


def test_alpha_lies_strictly_between_0_and_1() -> None:
    runs = _run("base", [record(0)]), _run("new", [record(0)])
    for alpha in (0.0, 1.0):
        with pytest.raises(RunFolderError) as refused:
            compare_records(*runs, alpha=alpha)
        assert str(refused.value) == (
            f"alpha must lie strictly between 0 and 1, got {alpha}: pass e.g. --alpha 0.05"
        )
    assert compare_records(*runs, alpha=0.999).alpha == 0.999


def test_only_a_real_suites_runs_may_have_read_different_data_folders() -> None:
    """A suite's runs may read their files from different folders (each item is paired by its id);
    any other runs that differ in --data did not build the same prompts."""
    suite = [dataclasses.replace(record(0), original_tokens=2000, item_id="a")]
    assert compare_records(_run("base", suite, "/one"), _run("new", suite, "/two")).overall.pairs == 1
    with pytest.raises(RunFolderError, match=r"they differ in spec\.data"):
        compare_records(_run("base", [record(0)], "/one"), _run("new", [record(0)], "/two"))


def test_runs_that_share_no_graded_sample_say_to_finish_them() -> None:
    failed = [dataclasses.replace(record(0), error="backend_error: HTTP 500 (3 attempts)")]
    with pytest.raises(RunFolderError) as refused:
        compare_records(_run("base", failed), _run("new", [record(0)]))
    assert str(refused.value) == (
        "'base' and 'new' share no sample that both graded without an error: finish both runs (run the "
        "same command again to resume), then compare"
    )


def _at(length: int, score: float, task: str = "niah", **fields: Any) -> SampleRecord:
    """Sample 0 of ``task`` at ``length`` and depth 0.5, scored ``score``."""
    twin = dataclasses.replace(
        record(0), sample_id=f"{task}|L{length}|D0.5000|S0", task=task, length=length, target_tokens=length,
        actual_tokens=length, **fields,
    )  # fmt: skip
    return twin if score == 1.0 else dataclasses.replace(twin, score=score, output="7654321", matched=())


def test_a_niah_runs_pairs_flip_one_by_one_not_by_their_sample_number() -> None:
    """Sample 0 at 1k and at 2k, both lost: two flip units, so of the 4 flip vectors only the
    observed one loses both, and the overall drop's adjusted p is 1/4 (read as one item of a suite,
    the two would flip together: 1 of 2 vectors, 1/2)."""
    base, new = [_at(1024, 1.0), _at(2048, 1.0)], [_at(1024, 0.0), _at(2048, 0.0)]
    (overall,) = compare_records(_run("base", base), _run("new", new)).gate.at("overall")
    assert (overall.pairs, overall.worse, overall.p_value, overall.p_adjusted) == (2, 2, 0.25, 0.25)


def test_a_niah_variants_task_test_pools_its_pairs_not_its_sample_numbers() -> None:
    """Two variants, sample 0 of each at 1k and 2k: each variant's task test holds its 2 pairs (a
    suite's items would make them 1 each, sample 0 asked at two lengths)."""
    tasks = ("niah", "niah:distractors")
    base = [_at(length, 1.0, task) for task in tasks for length in (1024, 2048)]
    new = [_at(1024, 0.0, task) for task in tasks] + [_at(2048, 1.0, task) for task in tasks]
    gate = compare_records(_run("base", base), _run("new", new)).gate
    assert [(t.task, t.pairs, t.worse, t.better) for t in gate.at("task")] == [
        ("niah", 2, 1, 0),
        ("niah:distractors", 2, 1, 0),
    ]


def test_the_comparison_names_the_backend_builds_its_runs_came_from() -> None:
    def run(folder: str, build: dict[str, str]) -> RunRecords:
        return RunRecords(
            Path(folder),
            dataclasses.replace(manifest(), environment=Environment(backend_build=build)),
            [record(0)],
        )

    compared = compare_records(run("base", {"llama_cpp": "0.3.36"}), run("new", {"llama_cpp": "0.3.37"}))
    shown = 'backend build ({"llama_cpp": "0.3.36"} vs {"llama_cpp": "0.3.37"})'
    assert compared.machine_differences == (shown,)
    assert compared.to_json()["machine_differences"] == [shown]


def test_the_comparison_of_thinking_runs_holds_their_reasoning_and_of_others_none() -> None:
    """Base 100 and 50 reasoning tokens, new 80 and 40: means 75 and 60, a change of -15, at one
    cell; runs that read no reasoning have no thinking key."""
    base = [dataclasses.replace(record(i), reasoning_tokens=t) for i, t in enumerate((100, 50))]
    new = [dataclasses.replace(record(i), reasoning_tokens=t) for i, t in enumerate((80, 40))]
    counts = {"base_tokens_mean": 75.0, "new_tokens_mean": 60.0, "tokens_change": -15.0}
    counts |= {"base_still_thinking": 0, "new_still_thinking": 0}
    cell = {"task": "niah", "length": 1024, "depth": 0.5} | counts
    written = compare_records(_run("base", base), _run("new", new)).to_json()
    assert written["thinking"] == counts | {"cells": [cell]}
    plain = compare_records(_run("base", [record(0)]), _run("new", [record(0)]))
    assert plain.thinking is None and "thinking" not in plain.to_json()


def test_runs_made_on_two_cpus_are_named_by_each_cpu_and_warned_of_whole() -> None:
    def on(cpu: dict[str, Any]) -> Manifest:
        return dataclasses.replace(manifest(), environment=Environment(cpu=cpu))

    xeon = {"model": "Xeon Platinum 8480", "simd": ["avx2", "avx512f", "amx"], "cores": 8}
    found = machine_differences(on(xeon), on({"model": "EPYC 9654", "simd": ["avx2"]}))
    assert found == ["CPU (Xeon Platinum 8480, 3 SIMD flags vs EPYC 9654, 1 SIMD flags)"]
    assert machine_warning([*found, "backend build (a vs b)"]) == (
        "the runs' records come from more than one machine or build (CPU (Xeon Platinum 8480, 3 SIMD "
        "flags vs EPYC 9654, 1 SIMD flags); backend build (a vs b)): a real model's greedy answers can "
        "change with these alone, so part of any difference may be the machine's"
    )


def test_a_cell_at_length_0_holds_its_pair() -> None:
    """A record's length may be 0 (its bounds say at least 0): its cell is read at 0, not at 1."""
    base = dataclasses.replace(_at(1024, 1.0), sample_id="niah|L0|D0.5000|S0", length=0)
    new = dataclasses.replace(base, score=0.0, output="7654321", matched=())
    (cell,) = compare_records(_run("base", [base]), _run("new", [new])).cells
    assert (cell.length, cell.test.pairs, cell.test.worse) == (0, 1, 1)
