"""The simulated readers beyond retrieval: ``sim:one-fact`` (answers from one located fact alone) and
``sim:recent`` (reads only the prompt's last ``window`` tokens), each told apart from ``sim:perfect``
and from the other on NIAH, RULER's several-key needles and state tracking. Every expected number
is reasoned from what the reader does, not read off a run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fathom.backends.base import Request
from fathom.backends.sim import SimulatedBackend
from fathom.cli import main
from fathom.errors import SpecError
from fathom.prompts import list_ops
from fathom.prompts.tokenizers import load_tokenizer

CHAR = load_tokenizer("char")
READERS = {"perfect": "sim:perfect", "one-fact": "sim:one-fact", "recent": "sim:recent?window=1024"}


def run(folder: Path, task: str, model: str, *options: str) -> dict[str, Any]:
    """A small run on the char tokenizer (a token a character), its summary."""
    args = ["run", task, "--model", model, "--tokenizer", "char", "--no-control", *options]
    assert main([*args, "--run-dir", str(folder)]) == 0
    summary: dict[str, Any] = json.loads((folder / "summary.json").read_text())
    return summary


def lines_request(lines: list[str], kind: str) -> Request:
    """A state question on ``lines``, the haystack all lines of code, the question after it."""
    context = "".join(f"{line}\n" for line in lines)
    text = context + list_ops.question(kind)
    ids = np.asarray(CHAR.encode(text), dtype=np.int32)
    return Request("s", ids, 16, query_keys=("items.",), context=(0, len(context)),
                   question=list_ops.question(kind))  # fmt: skip


def answer(model: str, request: Request) -> str:
    return SimulatedBackend(model, CHAR).generate([request])[0].text


def test_each_reader_replays_the_lines_it_combines() -> None:
    lines = ["items.append(3)", "notes.append(4)", "items.append(5)", "items.insert(0, 7)"]
    request = lines_request(lines, "list")
    assert answer("perfect", request) == "[7, 3, 5]"
    assert answer("one-fact", request) == "[7]"  # the last line on items alone, replayed on []
    # The question is 100 characters and the last line with its newline 19: a window of 120 holds
    # that line and not the one before it (16 characters more); one of 140 holds both.
    assert len(list_ops.question("list")) == 100
    assert answer("recent?window=120", request) == "[7]"
    assert answer("recent?window=140", request) == "[7, 5]"
    assert answer("recent?window=1000", request) == "[7, 3, 5]"  # the whole prompt fits
    assert answer("recent?window=90", request) == "I could not find the answer in the document."


def test_the_window_is_a_reading_setting_in_the_identity_and_bad_ones_are_refused() -> None:
    backend = SimulatedBackend("recent?window=8k", CHAR)
    assert backend.settings() == {
        "params": {}, "seed": 0, "input": "ids", "nll": 2.5, "reading": {"window": 8192}
    }  # fmt: skip
    assert backend.trained_window is None  # a window it reads in, not one it was trained to
    one_fact = SimulatedBackend("one-fact", CHAR).settings()
    assert one_fact == {"params": {}, "seed": 0, "input": "ids", "nll": 2.5}
    with pytest.raises(SpecError, match="sim:recent setting 'window' must be a whole number of tokens"):
        SimulatedBackend("recent?window=0", CHAR)
    with pytest.raises(SpecError, match="sim:one-fact has no setting 'window=4k'"):
        SimulatedBackend("one-fact?window=4k", CHAR)


def test_niah_recent_finds_the_last_needle_only_past_its_window(tmp_path: Path) -> None:
    """At 1k the whole prompt fits a window of 1024: every needle found. At 4k the window holds the
    haystack's last ~900 tokens (the question takes the rest): the needle at depth 1.0 ends the
    haystack and is found, the one at 0.0 and 0.5 lie thousands of tokens before it. sim:one-fact
    reads one needle as sim:perfect does."""
    means = {}
    for name, model in READERS.items():
        summary = run(tmp_path / name, "niah", model, "--lengths", "1k,4k", "--depths", "0,0.5,1")
        means[name] = {(c["length"], c["depth"]): c["mean"] for c in summary["cells"]}
    everywhere = {(n, d): 1.0 for n in (1024, 4096) for d in (0.0, 0.5, 1.0)}
    assert means["perfect"] == everywhere and means["one-fact"] == everywhere
    assert means["recent"] == everywhere | {(4096, 0.0): 0.0, (4096, 0.5): 0.0}


def test_one_fact_scores_a_quarter_of_four_needles_asked_at_once(tmp_path: Path) -> None:
    """--needles 4 asks four keys at once, graded as the share found: one fact is 1 of 4. All four
    lie in a 1k prompt, which sim:recent's window holds whole."""
    scores = {}
    for name, model in READERS.items():
        summary = run(tmp_path / name, "niah", model, "--lengths", "1k", "--depths", "0.5", "--needles", "4")
        scores[name] = [c["mean"] for c in summary["cells"]]
    assert scores == {"perfect": [1.0], "one-fact": [0.25], "recent": [1.0]}


@pytest.mark.essays
@pytest.mark.parametrize("task", ["niah_multivalue", "niah_multiquery"])
def test_ruler_several_values_or_queries_take_every_fact(task: str, tmp_path: Path) -> None:
    """Multi-value hides four values of one key, multi-query asks four keys; RULER grades the share
    of the four an answer holds (string_match_all), so one fact scores 0.25 in every sample. At 1k
    the prompt fits sim:recent's 1024 window whole: it scores as sim:perfect."""
    means = {}
    for name, model in READERS.items():
        summary = run(tmp_path / name, task, model, "--lengths", "1k", "--samples", "3")
        means[name] = [(c["n"], c["mean"]) for c in summary["grid"]]
    assert means == {"perfect": [(3, 1.0)], "one-fact": [(3, 0.25)], "recent": [(3, 1.0)]}


def test_ruler_multikey_asks_one_key_and_recent_finds_it_by_its_depth(tmp_path: Path) -> None:
    """niah_multikey_2 hides one asked key among needles of others: one fact is the whole answer, so
    sim:one-fact scores as sim:perfect. sim:recent, with a 1024 window on 4k prompts (3,968 tokens:
    the haystack's 3,666, then ~170 of question), finds the needle exactly where it lies in the
    haystack's last ~850 tokens: past depth ~0.77; the test keeps a margin either side."""
    options = ("--lengths", "4k", "--samples", "12")
    perfect = run(tmp_path / "perfect", "niah_multikey_2", "sim:perfect", *options)
    one_fact = run(tmp_path / "one-fact", "niah_multikey_2", "sim:one-fact", *options)
    assert [c["mean"] for c in perfect["grid"]] == [1.0] == [c["mean"] for c in one_fact["grid"]]
    run(tmp_path / "recent", "niah_multikey_2", READERS["recent"], *options)
    records = [json.loads(line) for line in (tmp_path / "recent" / "samples.jsonl").read_text().splitlines()]
    by_depth = [(r["needle_depths"][0], r["score"]) for r in records if r.get("needle_depths")]
    assert len(by_depth) == 12
    early, late = [s for d, s in by_depth if d < 0.7], [s for d, s in by_depth if d > 0.85]
    assert early and late  # the seed puts needles on both sides
    assert set(early) == {0.0} and set(late) == {1.0}


def test_one_fact_answers_babis_one_fact_question_and_misses_those_of_two_and_three(tmp_path: Path) -> None:
    """qa1 asks where a person is: the last sentence naming them is their last move (the others'
    sentences are of other people), which one fact answers. qa2 (a thing's place: who took it, where
    they went) and qa3 (its place before one) take two and three: no one sentence says where a thing
    is, or was before a place. A 2k prompt fits sim:recent's 2048 window: it scores as sim:perfect."""
    means = {}
    for name, model in {**READERS, "recent": "sim:recent?window=2048"}.items():
        summary = run(tmp_path / name, "babi", model, "--lengths", "2k", "--samples", "3")
        means[name] = {
            c["task"]: c["mean"] for c in summary["grid"] if c["task"] in ("babi:qa1", "babi:qa2", "babi:qa3")
        }
    everywhere = {"babi:qa1": 1.0, "babi:qa2": 1.0, "babi:qa3": 1.0}
    assert means == {"perfect": everywhere, "recent": everywhere,
                     "one-fact": {"babi:qa1": 1.0, "babi:qa2": 0.0, "babi:qa3": 0.0}}  # fmt: skip


def test_state_tracking_fails_both_readers_in_their_own_way(tmp_path: Path) -> None:
    """sim:perfect replays every line: 100%. sim:one-fact replays one line (the last), so its list
    holds at most one value: right only where the final list is empty or one value by chance (at
    most a third here). sim:recent with a 2k window sees every line of a 2k prompt (100%) and, in an
    8k prompt, only the lines of its last quarter: with the operations spread uniformly, it misses
    some in nearly every sample, and a list replayed without them is wrong but by chance."""
    options = ("--lengths", "2k,8k", "--ops", "2,8", "--samples", "6")
    means = {}
    for name, model in {**READERS, "recent": "sim:recent?window=2048"}.items():
        state = run(tmp_path / name, "state", model, *options)["state"]
        means[name] = {(c["ops"], c["length"]): c["mean"] for c in state["cells"]}
    assert set(means["perfect"].values()) == {1.0}
    assert all(mean <= 1 / 3 for mean in means["one-fact"].values())
    assert means["recent"][2, 2048] == means["recent"][8, 2048] == 1.0
    assert means["recent"][8, 8192] <= 1 / 3
