"""The records of a run: frozen dataclasses with a versioned JSON form.

A run folder holds a manifest and an append-only JSONL of ``SampleRecord``; everything else
(summaries, plots, reports) is derived from them, so these types are the project's contract.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field
from typing import Any

# 2: depth may be None (tasks that draw depths at random), several needles per sample, max_new_tokens.
# 3: the gold answer's teacher-forced log-probabilities; perplexity records beside sample records.
# 4: every record carries its run's identity fingerprint; answers over ANSWER_BYTES are cut there.
RECORD_SCHEMA = 4
# The most of an answer a record keeps, in UTF-8 bytes: far beyond any answer the tasks ask for, and
# a bound on what a runaway or hostile backend can make fathom write, hold and render.
ANSWER_BYTES = 64 * 1024
CONTROL = "control"  # the prefix of a no-context control's sample id


@dataclass(frozen=True)
class Cell:
    """One point of the sweep: a task at a context length and needle depth, and a sample index.

    ``depth`` is None for tasks that place their needles at depths drawn per sample (RULER's way);
    the depths they landed at are in the sample's record.
    """

    task: str
    length: int
    depth: float | None
    sample: int
    # The no-context control of this cell's sample: its question asked with the context left out.
    control: bool = False

    @property
    def id(self) -> str:
        # Stable across runs and processes: resume matches finished samples by this id.
        if self.depth is None:
            own = f"{self.task}|L{self.length}|S{self.sample}"
        else:
            own = f"{self.task}|L{self.length}|D{self.depth:.4f}|S{self.sample}"
        return f"{CONTROL}|{own}" if self.control else own


@dataclass(frozen=True)
class Needle:
    """A fact hidden in the haystack, the question only it answers, and the answers that count."""

    kind: str
    text: str  # the sentence placed in the haystack, with its leading space
    question: str
    answers: tuple[str, ...]
    key: str  # the phrase the question asks about; it appears in both question and text


@dataclass(frozen=True)
class Completion:
    """What a backend returned for one request."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str
    latency_s: float
    error: str | None = None
    # The teacher-forced log-probabilities of the request's continuation (the gold answer), or
    # why they could not be read; None when none was asked for.
    continuation_logprobs: tuple[float, ...] | None = None
    continuation_error: str | None = None


@dataclass(frozen=True)
class Score:
    """A deterministic grade in [0, 1] and the references it found in the output."""

    value: float
    matched: tuple[str, ...]
    method: str


@dataclass(frozen=True)
class SampleRecord:
    """One line of samples.jsonl: everything needed to analyse a sample without its prompt."""

    sample_id: str
    task: str
    length: int
    depth: float | None
    sample: int
    seed: int
    prompt_sha256: str
    target_tokens: int
    actual_tokens: int
    needle_kind: str
    # Where each needle (or chain statement, or gold document) landed: its first token in the final
    # prompt, and its depth inside the haystack, 0..1. Empty for tasks without needles (cwe, fwe).
    needle_token_offsets: tuple[int, ...]
    needle_depths: tuple[float, ...]
    question: str
    answers: tuple[str, ...]
    output: str
    finish_reason: str
    score: float
    matched: tuple[str, ...]
    scoring: str
    latency_s: float
    beyond_window: bool  # the prompt is longer than the model's trained window
    max_new_tokens: int = 32  # the generation budget, counted in the length by RULER tasks
    error: str | None = None
    # With --answer-logprob: log p of each token of the first answer, right after the prompt
    # (teacher forcing), or why it could not be read.
    answer_logprobs: tuple[float, ...] | None = None
    answer_error: str | None = None
    # The decoded prompt around each needle (a few dozen tokens either side of it), so a report can
    # show what the model read there without the prompt; None in records written before it existed.
    needle_context: tuple[str, ...] | None = None
    # The no-context control of the sample at (task, length, depth, sample): the same question asked
    # with the context left out. Its tokens are the shorter prompt's; it is no cell of the grid.
    control: bool = False
    # The answer's size in UTF-8 bytes when ``output`` holds only its first ANSWER_BYTES (it was
    # graded whole); None when ``output`` is the whole answer.
    output_bytes: int | None = None
    # identity_sha256 of the run that wrote the record; None in records written before schema 4.
    run_identity: str | None = None
    schema: int = field(default=RECORD_SCHEMA)

    def to_json(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        # Optional: left out when absent, so such records keep their form and readers that predate
        # them (which drop unknown fields) still read the rest.
        for key in ("needle_context", "output_bytes"):
            if data[key] is None:
                del data[key]
        if not self.control:
            del data["control"]
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SampleRecord:
        return cls(**_typed(cls, _upgrade(data)))

    @property
    def output_truncated(self) -> bool:
        return self.output_bytes is not None

    @property
    def answer_logprob(self) -> float | None:
        """The whole answer's log-probability."""
        return None if self.answer_logprobs is None else sum(self.answer_logprobs)


@dataclass(frozen=True)
class PerplexityRecord:
    """One line of samples.jsonl for a perplexity document: exactly which tokens were scored.

    The document is ``actual_tokens`` tokens of the tokenised corpus from ``corpus_offset`` on
    (after the BOS where the model has one); ``logprobs[i]`` is log p of the token at position
    ``first_position + i`` given all before it, in the backend's own tokens.
    """

    sample_id: str
    task: str
    length: int
    sample: int
    seed: int
    corpus: str
    corpus_offset: int
    ids_sha256: str
    target_tokens: int
    actual_tokens: int
    first_position: int
    logprobs: tuple[float, ...]
    latency_s: float
    beyond_window: bool
    error: str | None = None
    run_identity: str | None = None  # as in SampleRecord
    record: str = "perplexity"
    schema: int = field(default=RECORD_SCHEMA)

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PerplexityRecord:
        return cls(**_typed(cls, data))


AnyRecord = SampleRecord | PerplexityRecord


def record_from_json(data: dict[str, Any]) -> AnyRecord:
    """A line of samples.jsonl as the record it holds."""
    if data.get("record") == "perplexity":
        return PerplexityRecord.from_json(data)
    return SampleRecord.from_json(data)


def _typed(cls: Any, data: dict[str, Any]) -> dict[str, Any]:
    """The record's fields from ``data``, lists as tuples, each checked against its annotation: a
    line that is JSON but no record (a field of the wrong type, one missing) is a TypeError here,
    never a crash later in the analysis. Unknown keys are dropped."""
    values = {}
    for name, kind in _annotations(cls).items():
        if name not in data:
            continue
        value = data[name]
        if isinstance(value, list):
            value = tuple(value)
        if not _is(value, kind):
            raise TypeError(f"field '{name}' is {value!r:.40}, not {kind}")
        values[name] = value
    return values


@functools.cache
def _annotations(cls: Any) -> dict[str, str]:
    return {f.name: str(f.type) for f in dataclasses.fields(cls)}


_SCALARS: dict[str, tuple[type, ...]] = {
    "str": (str,),
    "int": (int,),
    "float": (float, int),
    "bool": (bool,),
    "None": (type(None),),
}


def _is(value: Any, kind: str) -> bool:
    """Whether a JSON value fits an annotation as records write them: ``str``, ``int``, ``float``,
    ``bool``, ``X | None``, ``tuple[X, ...]``."""
    if "|" in kind:
        return any(_is(value, part.strip()) for part in kind.split("|"))
    if kind.startswith("tuple["):
        inner = kind[len("tuple[") : -len(", ...]")]
        return isinstance(value, tuple) and all(_is(item, inner) for item in value)
    if kind in ("int", "float") and isinstance(value, bool):
        return False  # JSON true is no number
    return isinstance(value, _SCALARS[kind])


def _upgrade(data: dict[str, Any]) -> dict[str, Any]:
    """A record of an older schema in the current one's terms."""
    if data.get("schema", 1) < 2 and "needle_token_offset" in data:
        data = dict(data)
        data["needle_token_offsets"] = (data.pop("needle_token_offset"),)
        data["needle_depths"] = (data.pop("needle_depth"),)
    return data
