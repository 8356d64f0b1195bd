"""The runner's details that its behaviour tests leave open, each pinned by a value worked out by
hand: the folder a spec maps to, the record of a sample refused before it was sent, and the time
spent inside a scoring backend."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from test_runner import _text_run

from fathom.backends.base import ScoreRequest, TokenScores
from fathom.backends.sim import SimulatedBackend
from fathom.prompts.builder import Insertion, Prompt
from fathom.prompts.tokenizers import CharTokenizer
from fathom.records import Cell, SampleRecord, cap_answer
from fathom.run.runner import BackendClock, default_run_dir, needle_context
from fathom.run.store import RunFolder
from fathom.spec import RunSpec
from fathom.tasks.base import Document


def _spec(model: str) -> RunSpec:
    return RunSpec("niah", model, "cl100k_base", (1024,), (0.5,), 1)


@pytest.mark.parametrize(
    ("model", "name"),
    [
        ("sim:perfect", "niah-sim-perfect"),
        # Runs of other characters become one dash; none is left at either end; case is kept.
        ("hf:./models/SmolLM2-135M/", "niah-hf-models-SmolLM2-135M"),
        ("hf:models/GPT-X", "niah-hf-models-GPT-X"),
        # The model's part is cut at 48 characters.
        (
            "openai:http://localhost:8080/v1?model=Qwen2.5-7B-Instruct&temperature=0",
            "niah-openai-http-localhost-8080-v1-model-Qwen2-5-7B-I",
        ),
    ],
)
def test_a_spec_maps_to_a_folder_named_by_task_model_and_hash(model: str, name: str) -> None:
    spec = _spec(model)
    folder = default_run_dir(spec, Path("runs"))
    assert folder == Path("runs") / f"{name}-{spec.sha256[:8]}"
    assert len(folder.name) == len(name) + 9  # the dash and eight hex digits of the spec's hash


def test_a_refused_sample_is_recorded_unanswered_and_unsent(
    runs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = _text_run(runs, monkeypatch, 9)
    refused = [r for r in RunFolder(result.folder).records() if isinstance(r, SampleRecord) and r.error]
    assert len(refused) == 2
    for record in refused:
        assert (record.output, record.output_bytes, record.finish_reason, record.latency_s) == (
            "",
            None,
            "error",
            0.0,
        )
        assert (record.score, record.matched, record.actual_tokens) == (0.0, (), 1033)


class _SlowScorer(SimulatedBackend):
    """sim:perfect that takes ``DELAY`` seconds over each score call and records what it was asked."""

    DELAY = 0.05

    def __init__(self) -> None:
        super().__init__("perfect?nll=2", CharTokenizer())
        self.asked: list[ScoreRequest] = []

    def score(self, requests: Sequence[ScoreRequest]) -> list[TokenScores]:
        self.asked += requests
        time.sleep(self.DELAY)
        return super().score(requests)


def test_the_clock_adds_up_the_time_inside_each_score_call_and_scores_from_the_second_token() -> None:
    backend = _SlowScorer()
    clock = BackendClock(backend)
    documents = [
        Document(Cell("perplexity", 8, None, i), np.arange(10 + i, 18 + i, dtype=np.int32), "prose", i)
        for i in range(2)
    ]
    started = time.perf_counter()
    for _ in range(3):
        scores = clock.score(documents)
        assert [s.first_position for s in scores] == [1, 1]
        assert [len(s.logprobs) for s in scores] == [7, 7]
    elapsed = time.perf_counter() - started
    assert 3 * _SlowScorer.DELAY <= clock.seconds <= elapsed
    asked = backend.asked[:2]
    assert [(r.sample_id, r.start, r.ids.tolist()) for r in asked] == [
        (documents[0].cell.id, 1, list(range(10, 18))),
        (documents[1].cell.id, 1, list(range(11, 19))),
    ]


def test_a_needles_context_is_the_text_forty_tokens_either_side_of_it() -> None:
    # One character per token: the context of each needle is a slice of the prompt's text.
    text = "".join(chr(ord("a") + i % 26) for i in range(200))
    needles = (Insertion(5, 10, 0.0), Insertion(100, 3, 0.5), Insertion(180, 20, 1.0))
    prompt = Prompt(np.array(CharTokenizer().encode(text), dtype=np.int32), 200, 0, 200, needles)
    assert needle_context(CharTokenizer(), prompt) == (text[0:55], text[60:143], text[140:200])


def test_an_answer_that_a_strict_encoder_refuses_is_recorded_whole() -> None:
    # A lone surrogate (what a decoder that escapes undecodable bytes leaves) is counted, not refused.
    assert cap_answer("7\ud8004") == ("7\ud8004", None)
