"""A suite comparison's pieces that its other tests leave open (``fathom.analysis.suite_pairs``):
the alpha its gate is run at, and the data files that differ between two runs, one run's only file
among them. Each expected value is worked out in the comment beside it."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from test_awkward_fixtures import item, suite_run
from test_store import identity, manifest

from fathom.analysis.pairing import RunRecords
from fathom.analysis.suite_pairs import compare_suites
from fathom.manifest import Manifest


def test_the_tasks_verdicts_are_the_gates_at_the_alpha_asked() -> None:
    # qasper: 6 items right in the base and wrong in the new run; hotpotqa: 6 right in both. The gate's
    # one-sided sign test of qasper's items: p = 0.5^6 = 0.015625, a regression at alpha 0.05 and none
    # at 0.01.
    tasks = ("qasper", "hotpotqa")
    base = [item(task, i, 1024, 1.0) for task in tasks for i in range(6)]
    new = [item(task, i, 1024, 0.0 if task == "qasper" else 1.0) for task in tasks for i in range(6)]
    for alpha, verdict in ((0.05, "regressed"), (0.01, "unchanged")):
        comparison = compare_suites(suite_run("base", base), suite_run("new", new), alpha)
        assert [(t.task, t.p_adjusted, t.verdict) for t in comparison.tasks] == [
            ("hotpotqa", 1.0, "unchanged"),
            ("qasper", 0.5**6, verdict),
        ]
        assert [test.verdict for test in comparison.gate.tests if test.level == "overall"] == [verdict]


def reading(files: dict[str, str]) -> Manifest:
    """The manifest of a suite run that read ``files`` (name -> sha256)."""
    spec = manifest().identity.spec.to_json()
    made = identity(spec) | {"task": {"task": "longbench", "version": 1, "files": files}}
    return Manifest.from_json({"schema": 1, "identity": made})


def test_a_data_file_that_differs_or_that_one_run_alone_read_is_named() -> None:
    records = [item("qasper", i, 1024, 1.0) for i in range(3)]
    base = RunRecords(
        Path("base"), reading({"qasper.jsonl": "a" * 64, "narrativeqa.jsonl": "b" * 64}), records
    )
    new = RunRecords(Path("new"), reading({"qasper.jsonl": "c" * 64, "hotpotqa.jsonl": "d" * 64}), records)
    # qasper's hash differs; narrativeqa only the base read, hotpotqa only the new run.
    assert compare_suites(base, new).data_differences == (
        "hotpotqa.jsonl",
        "narrativeqa.jsonl",
        "qasper.jsonl",
    )
    same = dataclasses.replace(new, manifest=base.manifest)
    assert compare_suites(base, same).data_differences == ()
