"""The runner's details that its behaviour tests leave open, each pinned by a value worked out by
hand: the folder a spec maps to, the record of a sample refused before it was sent, the time spent
inside a scoring backend, and (its private helpers called directly) every field of a sample's
record, of its request and of a perplexity document's record."""

from __future__ import annotations

import hashlib
import json
import random
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, cast

import numpy as np
import pytest
from test_runner import _text_run

from fathom.analysis.failures import failure_kind, hedged_right
from fathom.backends.base import Backend, Request, ScoreRequest, TokenScores
from fathom.backends.sim import SimulatedBackend
from fathom.errors import SpecError
from fathom.prompts.builder import ChatPrompt, Insertion, Prompt, PromptText, TooShort
from fathom.prompts.needle_sets import NeedleSet, Placement
from fathom.prompts.tokenizers import CharTokenizer
from fathom.records import (
    ANSWER_BYTES,
    Cell,
    Completion,
    FirstToken,
    PerplexityRecord,
    SampleRecord,
    Score,
    cap_answer,
)
from fathom.run import runner
from fathom.run.clock import BackendClock
from fathom.run.recording import failed as _failed
from fathom.run.recording import needle_context
from fathom.run.recording import rounded as _rounded
from fathom.run.recording import sample_record as _record
from fathom.run.runner import (
    BATCH_TOKENS,
    _check_shortest,
    _request,
    _score,
    default_run_dir,
    run,
)
from fathom.run.store import RunFolder
from fathom.spec import RunSpec
from fathom.tasks.base import Document, Sample, SourceFacts
from fathom.tasks.control import prepared


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


# The runner's private helpers, called on hand-built inputs: one character per token, so that every
# count, offset and slice below is worked out from the strings themselves.
TEXT = "".join(chr(ord("a") + i % 26) for i in range(100))
WORDS = PromptText("Read: ", " Q: {question}", " A:", system="Be brief.")
QUESTION = "What is the magic number?"
GOLD_NEEDLE = Placement(" The magic number is 7341.", 0.25, "gold", "7341")
LURE = Placement(" The other magic number is 2956.", 0.75, "key-distractor", "2956")


@dataclass(frozen=True)
class _Needles(NeedleSet):
    """A needle set whose overlap with its question is given, not computed (the runner copies it)."""

    @property
    def overlap(self) -> tuple[int, float]:
        return 3, 0.123456


NEEDLES = _Needles("number", QUESTION, ("7341",), (GOLD_NEEDLE, LURE), ("magic number",), ("magic",), ())


@dataclass
class _Backend:
    """What the runner's helpers read of a backend."""

    input: str = "ids"
    trained_window: int | None = None
    max_prompt_tokens: int | None = None
    tokenizer: CharTokenizer = field(default_factory=CharTokenizer)


def _backend(**settings: Any) -> Backend:
    return cast(Backend, _Backend(**settings))


def _prompt(*needles: Insertion) -> Prompt:
    return Prompt(np.array(CharTokenizer().encode(TEXT), dtype=np.int32), 100, 10, 80, needles)


NEEDLE_PROMPT = _prompt(Insertion(45, 5, 0.12345678), Insertion(70, 4, 0.87654321))
SAMPLE = Sample(
    Cell("niah", 100, 0.25, 3),
    NEEDLE_PROMPT,
    WORDS,
    QUESTION,
    ("7341",),
    "number",
    ("magic number",),
    "contains",
    7,
    patterns=("magic",),
    needles=NEEDLES,
    redraws=("the corpus named 7341",),
    haystack_offset=1234,
    similarity=0.25,
)
SPEC = RunSpec("niah", "sim:perfect", "char", (100,), (0.25,), 4, seed=11)
ANSWER = Completion(
    "The number is 7341.",
    100,
    6,
    "stop",
    1.23456789,
    continuation_logprobs=(-0.1234567, -2.000004),
    prefill_s=0.12345678,
    decode_s=1.11111149,
    first_token=FirstToken.FORCED,
)
# Every field of SAMPLE's record for ANSWER, worked out by hand; the tests below change a few.
RECORD = SampleRecord(
    sample_id="niah|L100|D0.2500|S3",
    task="niah",
    length=100,
    depth=0.25,
    sample=3,
    seed=11,
    prompt_sha256=hashlib.sha256(bytes(b for c in TEXT for b in (ord(c), 0, 0, 0))).hexdigest(),
    target_tokens=100,
    actual_tokens=100,
    needle_kind="number",
    needle_token_offsets=(45, 70),
    needle_depths=(0.123457, 0.876543),
    question=QUESTION,
    answers=("7341",),
    output="The number is 7341.",
    output_bytes=None,
    finish_reason="stop",
    score=1.0,
    matched=("7341",),
    scoring="contains",
    latency_s=1.234568,
    prefill_s=0.123457,
    decode_s=1.111111,
    first_token="forced",
    extracted=None,
    beyond_window=False,
    max_new_tokens=7,
    error=None,
    answer_logprobs=(-0.12346, -2.0),
    answer_error=None,
    # Forty characters either side of each needle, cut at the prompt's end.
    needle_context=(TEXT[5:90], TEXT[30:100]),
    control=False,
    needle_roles=("gold", "key-distractor"),
    needle_values=("7341", "2956"),
    lured=(),
    haystack_offset=1234,
    redraws=("the corpus named 7341",),
    haystack_similarity=0.25,
    overlap_words=3,
    overlap_rouge1=0.1235,
    item_id=None,
    item_groups=(),
    original_tokens=None,
    truncated=False,
)


def test_a_needle_samples_record_holds_each_of_its_facts_with_the_times_rounded() -> None:
    assert _record(SPEC, _backend(), SAMPLE, 100, ANSWER) == RECORD


@pytest.mark.parametrize(("window", "beyond"), [(None, False), (100, False), (99, True)])
def test_a_prompt_is_beyond_the_window_only_when_longer_than_it(window: int | None, beyond: bool) -> None:
    record = _record(SPEC, _backend(trained_window=window), SAMPLE, 100, ANSWER)
    assert record == replace(RECORD, beyond_window=beyond)


def test_an_answer_naming_a_distractors_value_scores_zero_and_records_it() -> None:
    answer = replace(ANSWER, text="7341, or 2956")
    record = _record(SPEC, _backend(), SAMPLE, 100, answer)
    assert record == replace(RECORD, output="7341, or 2956", score=0.0, lured=("2956",))


def test_a_control_records_no_needles_though_its_sample_has_them() -> None:
    # control.without_context keeps the sample's needles (and look-alikes) but takes them out of the
    # prompt: an answer naming one without the context is no lure.
    control = replace(
        SAMPLE, cell=Cell("niah", 100, 0.25, 3, control=True), prompt=_prompt(), look_alikes=("2956",)
    )
    answer = replace(ANSWER, text="7341, or 2956")
    record = _record(SPEC, _backend(), control, 100, answer)
    assert record == replace(
        RECORD,
        sample_id="control|niah|L100|D0.2500|S3",
        control=True,
        output="7341, or 2956",
        needle_token_offsets=(),
        needle_depths=(),
        needle_context=(),
        needle_roles=(),
        needle_values=(),
        overlap_words=None,
        overlap_rouge1=None,
    )


def test_a_suite_samples_record_holds_its_item_and_flags_a_look_alike_without_scoring_it() -> None:
    suite = replace(
        SAMPLE,
        prompt=_prompt(Insertion(45, 5, 0.5)),
        needles=None,
        redraws=(),
        haystack_offset=None,
        similarity=None,
        source=SourceFacts("qa-17", ("length:0-4k", "difficulty:hard"), 5000, True),
        look_alikes=("2956",),
    )
    answer = replace(
        ANSWER,
        text="7341, or 2956",
        prefill_s=None,
        decode_s=None,
        first_token=None,
        continuation_logprobs=None,
        continuation_error="no_logprobs: none for token 2",
    )
    record = _record(SPEC, _backend(), suite, 100, answer)
    assert record == replace(
        RECORD,
        output="7341, or 2956",
        lured=("2956",),
        needle_token_offsets=(45,),
        needle_depths=(0.5,),
        needle_context=(TEXT[5:90],),
        needle_roles=(),
        needle_values=(),
        haystack_offset=None,
        redraws=(),
        haystack_similarity=None,
        overlap_words=None,
        overlap_rouge1=None,
        item_id="qa-17",
        item_groups=("length:0-4k", "difficulty:hard"),
        original_tokens=5000,
        truncated=True,
        prefill_s=None,
        decode_s=None,
        first_token=None,
        answer_logprobs=None,
        answer_error="no_logprobs: none for token 2",
    )


def test_a_samples_own_grader_grades_the_answer_and_what_it_extracted_is_capped() -> None:
    asked: list[tuple[str, tuple[str, ...]]] = []

    def grader(output: str, references: Sequence[str]) -> Score:
        asked.append((output, tuple(references)))
        return Score(0.5, ("7341",), "halves", extracted="y" * (ANSWER_BYTES + 10))

    record = _record(SPEC, _backend(), replace(SAMPLE, grader=grader), 100, ANSWER)
    assert asked == [("The number is 7341.", ("7341",))]
    assert record == replace(RECORD, score=0.5, scoring="halves", extracted="y" * ANSWER_BYTES)


REFUSAL = "too_long: 100 prompt tokens + 7 new exceed the backend's limit of 106"
# RECORD, for a sample refused with REFUSAL: nothing answered, nothing scored.
REFUSED = replace(
    RECORD,
    output="",
    finish_reason="error",
    score=0.0,
    matched=(),
    latency_s=0.0,
    prefill_s=None,
    decode_s=None,
    first_token=None,
    answer_logprobs=None,
    error=REFUSAL,
)


def test_a_refused_samples_completion_is_empty_and_its_record_unscored() -> None:
    failed = _failed(REFUSAL, 100)
    assert failed == Completion("", 100, 0, "error", 0.0, error=REFUSAL)
    assert _record(SPEC, _backend(), SAMPLE, 100, failed) == REFUSED


def test_answer_logprobs_are_rounded_to_five_decimals() -> None:
    assert _rounded((-0.1234567, -2.000004, -7.654321)) == (-0.12346, -2.0, -7.65432)
    assert _rounded(()) == ()
    assert _rounded(None) is None


def _fields(request: Request) -> dict[str, Any]:
    """The request's fields, with arrays as lists (an array's == is no truth value)."""
    return {
        f.name: value.tolist() if isinstance(value, np.ndarray) else value
        for f in fields(request)
        for value in [getattr(request, f.name)]
    }


REQUEST = {
    "sample_id": "niah|L100|D0.2500|S3",
    "ids": [ord(c) for c in TEXT],
    "max_new_tokens": 7,
    "text": None,
    "chat": None,
    "stop": (),
    "query_keys": ("magic number",),
    "context": (10, 90),
    "patterns": ("magic",),
    "question": QUESTION,
    "continuation": None,
}


@pytest.mark.parametrize(
    ("kind", "text", "chat"),
    [
        ("ids", None, None),
        ("text", TEXT, None),
        # The context (characters 10 to 90) between the task's words, the question in its place.
        ("chat", None, ChatPrompt("Be brief.", f"Read: {TEXT[10:90]} Q: {QUESTION}", " A:")),
    ],
    ids=["ids", "text", "chat"],
)
def test_a_request_carries_the_prompt_in_the_form_its_backend_reads(
    kind: str, text: str | None, chat: ChatPrompt | None
) -> None:
    request, actual, refusal = _request(_backend(input=kind), SAMPLE, False)
    assert (actual, refusal) == (100, None)
    assert _fields(request) == REQUEST | {"text": text, "chat": chat}


def test_a_request_for_the_answers_logprob_carries_the_answer_one_space_on_as_int32_ids() -> None:
    request, _, _ = _request(_backend(), SAMPLE, True)
    assert _fields(request) == REQUEST | {"continuation": [32, 55, 51, 52, 49]}  # " 7341"
    assert request.continuation is not None and request.continuation.dtype == np.int32


@pytest.mark.parametrize(
    ("limit", "refusal"),
    [
        (None, None),
        (107, None),  # 100 prompt tokens + 7 new: just within
        (106, "too_long: 100 prompt tokens + 7 new exceed the backend's limit of 106"),
    ],
    ids=["no-limit", "just-within", "one-over"],
)
def test_a_prompt_is_refused_when_it_and_its_new_tokens_exceed_the_backends_limit(
    limit: int | None, refusal: str | None
) -> None:
    request, actual, refused = _request(_backend(max_prompt_tokens=limit), SAMPLE, False)
    assert (actual, refused) == (100, refusal)
    assert _fields(request) == REQUEST


class _Scorer(_Backend):
    """A scoring backend (limit 10 tokens, window 9) that answers each document as told and records
    the ids it was asked for, call by call."""

    def __init__(self, answers: dict[str, TokenScores], drop: int = 0) -> None:
        super().__init__(trained_window=9, max_prompt_tokens=10)
        self.answers, self.drop = answers, drop
        self.asked: list[list[str]] = []

    def score(self, requests: Sequence[ScoreRequest]) -> list[TokenScores]:
        self.asked.append([r.sample_id for r in requests])
        scores = [self.answers[r.sample_id] for r in requests]
        return scores[: len(scores) - self.drop]


def _document(length: int, sample: int) -> Document:
    return Document(Cell("perplexity", length, None, sample), np.arange(length, dtype=np.int32), "prose", 100)


def _sha(length: int) -> str:
    # The ids 0..length-1 as little-endian int32.
    return hashlib.sha256(b"".join(i.to_bytes(4, "little") for i in range(length))).hexdigest()


def _perplexity(length: int, sample: int, **facts: Any) -> PerplexityRecord:
    return PerplexityRecord(
        sample_id=f"perplexity|L{length}|S{sample}",
        task="perplexity",
        length=length,
        sample=sample,
        seed=11,
        corpus="prose",
        corpus_offset=100,
        ids_sha256=_sha(length),
        target_tokens=length,
        **facts,
    )


def test_documents_are_scored_refused_or_failed_and_each_counts_what_was_read() -> None:
    read = _document(8, 0)  # a text backend read 1 + 9 tokens of its own for these 8
    failed = _document(10, 1)  # at the limit: sent, and the backend failed on it
    long = _document(11, 2)  # past the limit: refused
    backend = _Scorer(
        {
            read.cell.id: TokenScores(np.full(9, -1.234567), 1, 0.123456789),
            failed.cell.id: TokenScores(np.array([]), 2, 0.25, error="no_logprobs: none for token 3"),
        }
    )
    records = _score(SPEC, BackendClock(cast(Backend, backend)), [read, failed, long])
    assert backend.asked == [[read.cell.id, failed.cell.id]]
    assert records == [
        _perplexity(
            8,
            0,
            actual_tokens=10,
            first_position=1,
            logprobs=(-1.23457,) * 9,
            latency_s=0.123457,
            beyond_window=True,
        ),
        _perplexity(
            10,
            1,
            actual_tokens=10,
            first_position=2,
            logprobs=(),
            latency_s=0.25,
            beyond_window=True,
            error="no_logprobs: none for token 3",
        ),
        _perplexity(
            11,
            2,
            actual_tokens=11,
            first_position=1,
            logprobs=(),
            latency_s=0.0,
            beyond_window=True,
            error="too_long: 11 tokens exceed the backend's limit of 10",
        ),
    ]


class _DocumentsOnly:
    """A task that prepares every cell as a perplexity document, its controls' too."""

    def prepare(self, cell: Cell) -> Document:
        return _document(cell.length, cell.sample)


def test_a_control_of_a_task_that_prepares_no_sample_is_refused_naming_its_cell() -> None:
    cell = Cell("niah", 8, 0.5, 0, control=True)
    with pytest.raises(TypeError, match=r"^control cell control\|niah\|L8\|D0\.5000\|S0 is not a sample's$"):
        prepared(cast(Any, _DocumentsOnly()), cell)


@pytest.mark.parametrize(("read", "beyond"), [(9, False), (10, True)])
def test_a_document_is_beyond_the_window_only_when_more_of_it_was_read(read: int, beyond: bool) -> None:
    document = _document(read, 0)  # window 9: a document read to exactly it is inside it
    backend = _Scorer({document.cell.id: TokenScores(np.zeros(read - 1), 1, 0.1)})
    [record] = _score(SPEC, BackendClock(cast(Backend, backend)), [document])
    assert (record.actual_tokens, record.beyond_window, record.error) == (read, beyond, None)


def test_documents_all_refused_ask_the_backend_nothing() -> None:
    backend = _Scorer({})
    records = _score(SPEC, BackendClock(cast(Backend, backend)), [_document(11, 0), _document(12, 1)])
    assert backend.asked == []
    assert [r.error for r in records] == [
        "too_long: 11 tokens exceed the backend's limit of 10",
        "too_long: 12 tokens exceed the backend's limit of 10",
    ]


def test_a_backend_that_scores_fewer_documents_than_it_was_sent_is_an_error() -> None:
    documents = [_document(8, 0), _document(9, 1)]
    backend = _Scorer({d.cell.id: TokenScores(np.zeros(7), 1, 0.1) for d in documents}, drop=1)
    with pytest.raises(ValueError, match="shorter"):
        _score(SPEC, BackendClock(cast(Backend, backend)), documents)


class _KeptStream:
    """A Streamer that keeps a reference to its stream (so only an explicit close ends it) and
    spends 15 ms on each answer."""

    def __init__(self) -> None:
        self.closed = False
        self.kept: Any = None

    def stream(self, requests: Sequence[Request]) -> Any:
        def answers() -> Any:
            try:
                for index in range(len(requests)):
                    time.sleep(0.015)
                    yield index, Completion("a", 1, 1, "stop", 0.015)
            finally:
                self.closed = True

        self.kept = answers()
        return self.kept


def test_the_clock_adds_up_the_backends_time_and_closes_its_stream_when_stopped() -> None:
    backend = _KeptStream()
    clock = BackendClock(cast(Backend, backend))
    asks = [Request(f"s{i}", np.zeros(1, dtype=np.int32), 1) for i in range(3)]
    started = time.perf_counter()
    answers = clock.stream(asks)
    assert [index for index, _ in (next(answers), next(answers))] == [0, 1]
    # Both answers' time, not the last one's alone; and no more than passed (however slow the machine).
    assert 0.03 <= clock.seconds <= time.perf_counter() - started
    answers.close()  # an interrupt: the backend's requests in flight stop with it
    assert backend.closed


def test_a_right_answer_that_also_names_a_look_alike_is_hedged_right_and_nothing_else_is() -> None:
    right = replace(RECORD, score=1.0, error=None, lured=("4321",))
    assert hedged_right(right)
    assert not hedged_right(replace(right, lured=()))
    assert not hedged_right(replace(right, score=0.5))
    assert not hedged_right(replace(right, error="backend_error: HTTP 500 (3 attempts)"))


def test_a_stream_without_close_is_read_to_its_end() -> None:
    class ListStream:  # a plugin's Streamer may hand back any iterator, with no close()
        def stream(self, requests: Sequence[Request]) -> Any:
            return iter([(0, Completion("a", 1, 1, "stop", 0.0))])

    answers = BackendClock(cast(Backend, ListStream())).stream([Request("s", np.zeros(1, dtype=np.int32), 1)])
    assert [index for index, _ in answers] == [0]


def test_a_blank_answer_is_stopped_where_its_first_token_was_the_end_and_empty_otherwise() -> None:
    blank = replace(RECORD, output="", score=0.0, matched=())
    assert failure_kind(replace(blank, first_token=FirstToken.END)) == "stopped"
    assert failure_kind(replace(blank, first_token=FirstToken.FORCED)) == "empty"


def _cells(lengths: Sequence[int], controls: int = 0) -> list[Cell]:
    return [Cell("niah", n, None, i, control=i < controls) for i, n in enumerate(lengths)]


@pytest.mark.parametrize(
    ("lengths", "size", "controls", "batches"),
    [
        ([1] * 7, 3, 0, [3, 3, 1]),  # by count
        ([BATCH_TOKENS // 2] * 5, 16, 0, [2, 2, 1]),  # by tokens: two halves fill a batch exactly
        ([BATCH_TOKENS // 2 + 1, 1, BATCH_TOKENS // 2, 1], 16, 0, [2, 2]),
        ([BATCH_TOKENS + 5, 1], 16, 0, [1, 1]),  # a longer cell alone
        ([1] * 7, 64, 3, [3, 4]),  # a backend that orders its own long batches: the opening controls apart
        ([1] * 7, 16, 3, [7]),  # 16 or fewer: the controls go with the rest
    ],
)
def test_cells_are_batched_by_count_and_by_tokens(
    lengths: list[int], size: int, controls: int, batches: list[int]
) -> None:
    cells = _cells(lengths, controls)
    got = list(runner.batches(iter(cells), size, lambda cell: cell))
    assert [len(batch) for batch in got] == batches
    assert [cell for batch in got for cell in batch] == cells


class _Preparing:
    """A task of two tasks' cells at three lengths that records the cells it prepares."""

    def __init__(self) -> None:
        self.prepared: list[Cell] = []

    def cells(self) -> Iterator[Cell]:
        for length in (300, 100, 200):
            for task in ("a", "b"):
                yield from (Cell(task, length, None, sample) for sample in range(2))

    def prepare(self, cell: Cell) -> None:
        self.prepared.append(cell)


def test_one_prompt_of_the_shortest_length_is_built_for_each_task_before_the_run() -> None:
    task = _Preparing()
    _check_shortest(cast(Any, task), 100)
    assert task.prepared == [Cell("a", 100, None, 0), Cell("b", 100, None, 0)]


SIM = RunSpec("niah", "sim:perfect", "char", (500, 600), (0.25, 0.75), 2, control=False)


def test_a_shuffled_run_sends_the_cells_in_the_seeds_order_and_an_unknown_order_is_refused(
    runs: Path,
) -> None:
    run(SIM, runs / "prefix", show_progress=False)
    run(SIM, runs / "shuffled", show_progress=False, order="shuffled")
    prefix = [r.sample_id for r in RunFolder(runs / "prefix").records()]
    shuffled = [r.sample_id for r in RunFolder(runs / "shuffled").records()]
    expected = list(prefix)
    random.Random(SIM.seed).shuffle(expected)
    assert shuffled == expected != prefix
    with pytest.raises(SpecError, match=r"^unknown order 'random': use one of prefix, shuffled$"):
        run(SIM, runs / "random", show_progress=False, order="random")
    assert not (runs / "random").exists()


def test_a_run_passes_its_progress_and_plan_settings_on(runs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    checks: list[tuple[bool, bool]] = []
    progress: list[tuple[str, bool]] = []
    monkeypatch.setattr(runner, "check_run", lambda _s, _t, _b, say, keep: checks.append((say, keep)))
    shown = runner.RunProgress

    def recorded(label: str, todo: Iterator[Cell], enabled: bool = True) -> Any:
        progress.append((label, enabled))
        return shown(label, todo, enabled=False)

    monkeypatch.setattr(runner, "RunProgress", recorded)
    run(SIM, runs / "defaults")
    run(SIM, runs / "quiet", show_progress=False, keep_too_long=True)
    assert checks == [(True, False), (False, True)]
    assert progress == [("niah sim:perfect", True), ("niah sim:perfect", False)]  # task and model


def test_a_runs_times_are_its_wall_time_and_the_models_loading_and_answering(
    runs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    loading, answering = 0.05, 0.05  # seconds: the simulated model's, slowed
    created, generate = runner.create_backend, SimulatedBackend.generate

    def create(model: str, tokenizer: str) -> Backend:
        time.sleep(loading)
        return created(model, tokenizer)

    def slow(backend: SimulatedBackend, requests: Sequence[Request]) -> list[Completion]:
        time.sleep(answering)
        return generate(backend, requests)

    monkeypatch.setattr(runner, "create_backend", create)
    monkeypatch.setattr(SimulatedBackend, "generate", slow)
    started = time.perf_counter()
    result = run(SIM, runs / "timed", show_progress=False)
    wall = time.perf_counter() - started
    assert result.written == 8 <= runner.BATCH_SIZE  # one batch: one generate call
    # The model's share (its loading and its answers) within the run's wall time, within the test's.
    assert loading + answering <= result.backend_seconds <= result.seconds <= wall


def test_preparing_refuses_a_length_too_short_and_says_a_real_backends_plan_only_when_asked(
    server: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(TooShort, match=r"^length 60 is below this prompt's fixed overhead of \d+ tokens"):
        runner.prepare(replace(SIM, lengths=(60, 500)))  # before any folder: the shortest is built
    spec = RunSpec("niah", f"openai:m@{server.url}", "cl100k_base", (1024, 2048), (0.5,), 1)
    runner.prepare(spec)
    assert capsys.readouterr().err == ""  # quiet by default
    runner.prepare(spec, say=True)
    plan = "plan: 2 x 1 x 1 prompts + 2 controls, 3.2k tokens, longest 2048 + 32 new"
    assert capsys.readouterr().err == f"{plan}; memory not checked: the server's own\n"
    limited = replace(spec, model=f"{spec.model}?max_prompt=2000")
    with pytest.raises(SpecError, match=r"^1 of 4 prompts exceed the backend.s context of 2000 tokens"):
        runner.prepare(limited)  # refused by default, not recorded as too_long


# The eighth round (docs/mutation.md): what the runner's helpers do that no whole run of the
# simulated models meets: a prompt that misses its target, RULER's fill prompt, a sample's own chat,
# a thinking budget, a Pulling backend's refusals and the closed-book check.
class _Padded(CharTokenizer):
    """One character a token, and ``extra`` more for each re-encoded text (a text backend that adds
    special tokens around what it reads): a prompt of n characters counts n + extra."""

    def __init__(self, extra: int) -> None:
        super().__init__()
        self.extra = extra

    def encode_with_specials(self, text: str) -> list[int]:
        return [*super().encode_with_specials(text), *[0] * self.extra]


@pytest.mark.parametrize(
    ("kind", "extra", "size", "fills", "refusal"),
    [
        # A prompt that fills its target is held to the target, 8 tokens either way (0.5% of 100 is less).
        ("ids", 0, 92, True, None),
        ("ids", 0, 91, True, "length_mismatch: 91 tokens for a target of 100"),
        ("text", 8, 100, True, None),
        ("text", 9, 100, True, "length_mismatch: 109 tokens for a target of 100"),
        # RULER's fill: a prompt built below its target is held to its own length, not the target's.
        ("ids", 0, 80, False, None),
        ("text", 8, 80, False, None),
        ("text", 9, 80, False, "length_mismatch: 89 tokens for a target of 100 (built at 80, RULER's fill)"),
    ],
)
def test_a_prompt_is_held_to_its_target_or_a_fill_prompt_to_its_own_length_within_eight_tokens(
    kind: str, extra: int, size: int, fills: bool, refusal: str | None
) -> None:
    ids = np.array(CharTokenizer().encode(TEXT[:size]), dtype=np.int32)
    sample = replace(SAMPLE, prompt=Prompt(ids, 100, 10, size - 20, (), fills_target=fills))
    backend = _backend(input=kind, tokenizer=_Padded(extra))
    request, actual, refused = _request(backend, sample, False)
    assert (actual, refused) == (size + extra if kind == "text" else size, refusal)
    assert request.ids is ids and request.context == (10, size - 10)


def test_a_chat_backend_is_sent_the_samples_own_chat_where_it_has_one() -> None:
    own = ChatPrompt("Answer in one word.", "the sample's own turn", " Answer:")
    request, _, _ = _request(_backend(input="chat"), replace(SAMPLE, chat=lambda: own), False)
    assert _fields(request) == REQUEST | {"chat": own}


class _OneSample:
    """A task that prepares SAMPLE for any cell."""

    def prepare(self, cell: Cell) -> Sample:
        return SAMPLE


@pytest.mark.parametrize(("budget", "new"), [(None, 7), (50, 57)])
def test_a_built_samples_request_asks_for_the_thinking_budget_then_the_answers_tokens(
    budget: int | None, new: int
) -> None:
    built = runner._build(
        replace(SPEC, thinking_budget=budget), _backend(), cast(Any, _OneSample()), SAMPLE.cell
    )
    assert (built.sample, built.actual, built.refusal) == (SAMPLE, 100, None)
    assert _fields(built.request) == REQUEST | {"max_new_tokens": new}


@dataclass
class _Pulling(_Backend):
    """A Pulling backend: reads each request as it sends it, and answers each with ANSWER."""

    pulls_requests: bool = True
    read: list[str] = field(default_factory=list)

    def stream(self, requests: Iterable[Request]) -> Iterator[tuple[int, Completion]]:
        for index, request in enumerate(requests):
            self.read.append(request.sample_id)
            yield index, ANSWER


def test_a_pulling_backend_reads_only_the_samples_not_refused_and_each_record_is_written_in_turn() -> None:
    backend = _Pulling()
    first = replace(SAMPLE, cell=Cell("niah", 100, 0.25, 2))
    request, _, _ = _request(backend, SAMPLE, False)
    refused = runner.BuiltSample(first, _request(backend, first, False)[0], 100, REFUSAL)
    sent = runner.BuiltSample(SAMPLE, request, 100, None)
    written: list[tuple[Any, Any]] = []
    runner._pull(
        SPEC, BackendClock(cast(Backend, backend)), iter([refused, sent]), lambda *pair: written.append(pair)
    )
    assert backend.read == ["niah|L100|D0.2500|S3"]
    assert written == [
        (refused, replace(REFUSED, sample_id="niah|L100|D0.2500|S2", sample=2)),
        (sent, RECORD),
    ]


@dataclass(frozen=True)
class _Probing:
    """A task whose samples hide low-overlap needles of ``items`` (``probe.Probed``)."""

    items: tuple[str, ...]
    name: str = "niah"

    def probed_items(self) -> tuple[str, ...]:
        return self.items


@dataclass
class _Reader(_Backend):
    """A backend that says whether it can answer closed-book (``ClosedBook``)."""

    closed_book: bool = False
    name: str = "reader"


CLOSED_BOOK = (
    "backend 'reader' cannot answer closed-book, and a low-overlap run asks each item's fact alone (its "
    "probe): use --no-control (no probes, no controls) or a backend that can"
)


@pytest.mark.parametrize(
    ("closed_book", "control", "items", "refused"),
    [
        (False, True, ("h1-story-bridge",), True),  # a probe asked of a backend that cannot answer it
        (False, False, ("h1-story-bridge",), False),  # no controls: no probes
        (False, True, (), False),  # a task that probes no item
        (True, True, ("h1-story-bridge",), False),  # a backend that can
    ],
)
def test_a_backend_that_cannot_answer_closed_book_is_refused_only_a_run_that_probes(
    closed_book: bool, control: bool, items: tuple[str, ...], refused: bool
) -> None:
    def check() -> None:
        backend = cast(Backend, _Reader(closed_book=closed_book))
        runner._check_closed_book(cast(Any, _Probing(items)), replace(SPEC, control=control), backend)

    if refused:
        with pytest.raises(SpecError) as caught:
            check()
        assert str(caught.value) == CLOSED_BOOK
    else:
        check()


class _PullingScorer(_Pulling):
    """A Pulling backend that also scores documents: 7 log-probabilities of 0 from the second token."""

    def score(self, requests: Sequence[ScoreRequest]) -> list[TokenScores]:
        return [TokenScores(np.zeros(7), 1, 0.1) for _ in requests]


def test_a_pulling_backend_streams_each_run_of_samples_and_the_documents_between_are_scored() -> None:
    backend = _PullingScorer()
    second, document = replace(SAMPLE, cell=Cell("niah", 100, 0.25, 2)), _document(8, 0)
    built = [
        runner.BuiltSample(sample, _request(backend, sample, False)[0], 100, None)
        for sample in (SAMPLE, second)
    ]
    ready: list[Any] = [built[0], document, built[1]]
    written: list[Any] = []
    ahead = runner.Ahead(
        [r.cell for r in ready], dict(zip([r.cell for r in ready], ready, strict=True)).__getitem__
    )
    try:
        runner.answer_all(SPEC, BackendClock(cast(Backend, backend)), ahead, written.append, 16)
    finally:
        ahead.close()
    assert backend.read == ["niah|L100|D0.2500|S3", "niah|L100|D0.2500|S2"]  # two streams, one sample each
    assert written == [
        RECORD,
        _perplexity(
            8, 0, actual_tokens=8, first_position=1, logprobs=(0.0,) * 7, latency_s=0.1, beyond_window=False
        ),
        replace(RECORD, sample_id="niah|L100|D0.2500|S2", sample=2),
    ]


@dataclass
class _Batched(_Backend):
    """A backend that takes ``requests_per_call`` requests at a time and answers each with ANSWER."""

    requests_per_call: int = 1

    def generate(self, requests: Sequence[Request]) -> list[Completion]:
        return [ANSWER for _ in requests]


def test_the_prompts_built_ahead_hold_a_whole_batch_of_a_backend_that_takes_more_than_8192(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    held: list[int] = []

    class Ahead(runner.Ahead):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            held.append(self.most_prompts)

    monkeypatch.setattr(runner, "Ahead", Ahead)
    for size in (1, 8193):
        written: list[Any] = []
        backend = cast(Backend, _Batched(requests_per_call=size))
        runner.answer_cells(
            SPEC, BackendClock(backend), cast(Any, _OneSample()), [SAMPLE.cell], written.append
        )
        assert written == [RECORD]
    assert held == [8192, 8193]  # HELD_PROMPTS, or the backend's batch where that is more


def test_a_runs_manifest_counts_its_planned_cells_and_keeps_its_labels(runs: Path) -> None:
    run(SIM, runs / "labelled", show_progress=False, labels={"step": "1200"})
    manifest = json.loads((runs / "labelled" / "manifest.json").read_text())
    assert (manifest["planned"], manifest["labels"]) == (8, {"step": "1200"})  # 2 lengths x 2 depths x 2


class _Limited:
    """The simulated model behind a backend that cannot answer closed-book, or whose replies hold at
    most ``most`` new tokens (``OutputCapped``)."""

    def __init__(self, backend: Backend, closed_book: bool, most: int) -> None:
        self._backend, self.closed_book, self.most = backend, closed_book, most

    def __getattr__(self, name: str) -> Any:
        return getattr(self._backend, name)

    def output_refusal(self, new_tokens: int) -> str | None:
        return f"{new_tokens} new tokens exceed the backend's {self.most}" if new_tokens > self.most else None


def test_preparing_refuses_a_backend_that_cannot_give_a_samples_new_tokens_or_answer_its_probes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    made = runner.create_backend
    settings = {"closed_book": True, "most": 32}  # niah's answer budget: 32 new tokens
    monkeypatch.setattr(runner, "create_backend", lambda *a: _Limited(made(*a), **settings))
    latent = replace(SIM, needle="latent-1", control=True)
    runner.prepare(latent)
    settings["most"] = 31
    with pytest.raises(SpecError) as caught:
        runner.prepare(latent)
    assert str(caught.value) == (
        "32 new tokens exceed the backend's 31, the most a sample of this run asks for: lower "
        "--thinking-budget or --max-new-tokens, or raise the backend's limit where the model allows more"
    )
    settings.update(most=32, closed_book=False)
    with pytest.raises(SpecError) as caught:
        runner.prepare(latent)
    assert str(caught.value) == CLOSED_BOOK.replace("'reader'", "'sim:perfect'")
    runner.prepare(replace(latent, control=False))  # no probes to answer
