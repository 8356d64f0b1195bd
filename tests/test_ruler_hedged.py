"""RULER's multi-key tasks: an answer that lists other keys' values beside the asked one is flagged
(the record's ``lured``), and keeps RULER's own score, so that it stays comparable with RULER's."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path

import pytest

from fathom import registry
from fathom.analysis.failures import failure_kind, hedged_right
from fathom.backends.base import Request
from fathom.backends.sim import SimulatedBackend
from fathom.cli import main
from fathom.prompts.tokenizers import load_tokenizer
from fathom.records import Cell, Completion, SampleRecord
from fathom.registry import BackendEntry
from fathom.report.html.failures import HEDGED_RIGHT
from fathom.report.html.page import DATA_ID, esc
from fathom.spec import RunSpec
from fathom.tasks.base import Sample
from fathom.tasks.ruler.suite import RulerTask

NEEDLE_LINE = re.compile(r"One of the special magic \w+ for ([\w-]+) is: ([\w-]+)\.")
TOKENIZER = load_tokenizer("cl100k_base")


def prepare(task: str, length: int = 4096) -> Sample:
    spec = RunSpec(task, "sim:perfect", "cl100k_base", (length,), (), 1, template="none")
    return RulerTask(spec, TOKENIZER).prepare(Cell(task, length, None, 0))


def placed(sample: Sample) -> list[tuple[str, str]]:
    """Every needle line of the sample's context, as (key, value)."""
    prompt = sample.prompt
    context = prompt.ids[prompt.head_tokens : prompt.head_tokens + prompt.context_tokens]
    return NEEDLE_LINE.findall(TOKENIZER.decode(context.tolist()))


@pytest.mark.parametrize("task", ["niah_multikey_2", "niah_multikey_3"])
def test_the_look_alikes_of_a_haystack_of_needles_are_every_other_keys_value(task: str) -> None:
    sample = prepare(task)
    lines = placed(sample)
    (asked,) = sample.query_keys
    others = [value for key, value in lines if key != asked]
    assert len(others) > 20 and sorted(sample.look_alikes) == sorted(others)
    assert not set(sample.answers) & set(sample.look_alikes)


@pytest.mark.essays
def test_the_look_alikes_of_multikey_1_are_the_other_three_keys_values() -> None:
    sample = prepare("niah_multikey_1")
    others = [value for key, value in placed(sample) if key not in sample.query_keys]
    assert len(others) == 3 and sorted(sample.look_alikes) == sorted(others)


ESSAYS = pytest.mark.essays


@pytest.mark.parametrize(
    "task",
    ["niah_single_1", *(pytest.param(t, marks=ESSAYS) for t in ("niah_multivalue", "niah_multiquery"))],
)
def test_a_task_that_asks_about_every_key_it_placed_has_none(task: str) -> None:
    assert prepare(task).look_alikes == ()


class _Hedger(SimulatedBackend):
    """A model that lists every value it read."""

    def generate(self, requests: Sequence[Request]) -> list[Completion]:
        def values(request: Request) -> str:
            read = self.tokenizer.decode(request.ids.tolist())
            return ", ".join(value for _, value in NEEDLE_LINE.findall(read))

        return [Completion(values(r), len(r.ids), 12, "stop", 0.0) for r in requests]


def run(model: str, folder: Path, monkeypatch: pytest.MonkeyPatch) -> list[SampleRecord]:
    hedger = lambda rest, _: _Hedger(rest, TOKENIZER)  # noqa: E731
    monkeypatch.setitem(registry.BACKENDS, "hedger", BackendEntry(hedger, "lists every value"))
    args = ["run", "niah_multikey_2", "--model", model, "--tokenizer", "cl100k_base", "--lengths", "1k"]
    assert main([*args, "--samples", "2", "--run-dir", str(folder), "--no-progress"]) == 0
    lines = (folder / "samples.jsonl").read_text().splitlines()
    return [SampleRecord.from_json(json.loads(line)) for line in lines]


def test_a_hedged_answer_is_flagged_keeps_rulers_score_and_is_shown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    records = run("hedger:perfect", tmp_path / "hedged", monkeypatch)
    samples = [r for r in records if not r.control]
    assert len(samples) == 2
    for record in samples:
        named = record.output.split(", ")
        assert record.score == 1.0 and set(record.answers) <= set(named)  # RULER's containment
        assert sorted(record.lured) == sorted(set(named) - set(record.answers)) and len(record.lured) > 5
        assert failure_kind(record) is None and hedged_right(record)
    # A control's prompt holds no needle: nothing to name, nothing flagged.
    assert all(r.lured == () and not hedged_right(r) for r in records if r.control)
    page = (tmp_path / "hedged" / "report.html").read_text()
    assert f'data-samples="{HEDGED_RIGHT}"' in page and esc("another key's value (hedged): 2;") in page
    data = json.loads(page.split(f'id="{DATA_ID}">', 1)[1].split("</script>", 1)[0])
    shown = [data["samples"][i] for i in data["lists"][HEDGED_RIGHT]]
    assert sorted(s["id"] for s in shown) == sorted(r.sample_id for r in samples)
    assert all(s["lured"] for s in shown)


def test_a_plain_answer_is_not_flagged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    records = run("sim:perfect", tmp_path / "plain", monkeypatch)
    assert all(r.lured == () for r in records) and any(r.score == 1.0 for r in records)
    assert HEDGED_RIGHT not in (tmp_path / "plain" / "report.html").read_text()
