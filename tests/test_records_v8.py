"""Records of schema 8: what came first of the answer (``first_token``) and what ``exact`` compared
(``extracted``) round-trip, are left out where absent, and are refused in a record of schema 7; a run
records both (the older schemas' fixtures are read by tests/test_schema.py)."""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Sequence
from pathlib import Path

import pytest
from test_store import record

from fathom import registry
from fathom.backends.base import Request
from fathom.backends.sim import SimulatedBackend
from fathom.cli import main
from fathom.prompts.tokenizers import load_tokenizer
from fathom.records import Completion, FirstToken, SampleRecord, record_from_json
from fathom.registry import BackendEntry
from fathom.schemas import RECORD_SCHEMA


def test_the_fields_of_schema_8_round_trip_and_are_left_out_when_absent() -> None:
    assert RECORD_SCHEMA >= 8  # schema 9 (the knowledge probe) keeps schema 8's fields as they are
    full = dataclasses.replace(
        record(0), first_token=FirstToken.END, extracted="Thundmere", lured=("7654321",)
    )
    written = json.loads(json.dumps(full.to_json()))
    assert (written["first_token"], written["extracted"], written["lured"]) == (
        "end",
        "Thundmere",
        ["7654321"],
    )
    read = record_from_json(written)
    assert read == full and isinstance(read, SampleRecord) and read.first_token == "end"
    plain = record(0).to_json()
    assert "first_token" not in plain and "extracted" not in plain and plain["schema"] == RECORD_SCHEMA


@pytest.mark.parametrize(("field", "value"), [("first_token", "forced"), ("extracted", "x")])
def test_a_record_of_schema_7_with_a_field_of_schema_8_is_no_record(field: str, value: str) -> None:
    line = {**record(0).to_json(), "schema": 7, field: value}
    with pytest.raises(TypeError, match="a field of schema 8, in a record of schema 7"):
        record_from_json(line)
    older = record_from_json({**record(0).to_json(), "schema": 7})  # without them it reads
    assert isinstance(older, SampleRecord) and (older.first_token, older.extracted) == (None, None)


def test_a_field_of_an_older_schema_is_still_refused_by_its_own_step() -> None:
    line = {**record(0).to_json(), "schema": 6, "prefill_s": 1.0}
    with pytest.raises(
        TypeError, match=r"unknown field 'prefill_s' \(a field of schema 7, in a record of schema 6\)"
    ):
        record_from_json(line)


class _Chatty(SimulatedBackend):
    """A model that finds the number and says it in markdown, having been made to start."""

    def generate(self, requests: Sequence[Request]) -> list[Completion]:
        def chatty(answer: Completion) -> Completion:
            number = re.search(r"\d{7}", answer.text)
            text = f"**Answer:** {number[0]}." if number else answer.text
            return dataclasses.replace(answer, text=text, first_token=FirstToken.FORCED)

        return [chatty(answer) for answer in super().generate(requests)]


def test_a_run_records_what_exact_compared_and_what_came_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    chatty = lambda rest, _: _Chatty(rest, load_tokenizer("cl100k_base"))  # noqa: E731
    monkeypatch.setitem(registry.BACKENDS, "chatty", BackendEntry(chatty, "answers in markdown"))
    args = ["run", "niah", "--model", "chatty:perfect", "--tokenizer", "cl100k_base", "--lengths", "512",
            "--depths", "0.5", "--samples", "2", "--scoring", "exact", "--run-dir", str(tmp_path),
            "--no-progress"]  # fmt: skip
    assert main(args) == 0
    lines = [json.loads(line) for line in (tmp_path / "samples.jsonl").read_text().splitlines()]
    found = [r for r in lines if not r.get("control")]
    assert len(found) == 2
    for line in found:
        assert line["score"] == 1.0 and line["output"].startswith("**Answer:** ")
        assert line["extracted"] == line["answers"][0] and line["first_token"] == "forced"
    # Without the context there is no number to say: the sentence it says instead, less its full stop.
    for line in (r for r in lines if r.get("control")):
        assert line["score"] == 0.0 and line["extracted"] == line["output"].strip().removesuffix(".")
