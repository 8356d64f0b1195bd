"""The records of a run: frozen dataclasses with a versioned JSON form.

A run folder holds a manifest and an append-only JSONL of ``SampleRecord``; everything else
(summaries, plots, reports) is derived from them, so these types are the project's contract.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
from dataclasses import dataclass, field
from typing import Any

from fathom.floats import Floats
from fathom.record_bounds import field_bounds, within
from fathom.record_versions import ADDED, RECORDS
from fathom.schemas import RECORD_SCHEMA, read

# The most of an answer a record keeps, in UTF-8 bytes: far beyond any answer the tasks ask for, and
# a bound on what a runaway or hostile backend can make fathom write, hold and render.
ANSWER_BYTES = 64 * 1024
# The finish reason of a reply that ended inside its reasoning (an unclosed think block, or a reply
# cut while thinking): still thinking, with no answer.
THINKING = "thinking"
CONTROL = "control"  # the prefix of a no-context control's sample id
PROBE = "probe"  # the prefix of a closed-book probe's sample id: "probe|" and the item's id
# The roles of a NIAH sample's needles (fathom.prompts.needle_sets names the same): a needle the
# question asks about, one part of a fact split in two, and look-alikes that answer nothing.
GOLD_ROLE, PART_ROLE = "gold", "part"
DISTRACTOR_ROLES = ("key-distractor", "class-distractor")
# A sentence naming a low-overlap question's place and nothing else of its needle (--literal-distractor):
# a literal match placed on purpose, with no value an answer could take.
LITERAL_ROLE = "literal-distractor"
# SampleRecord fields left out of a line at their defaults: those of schemas 3 and 4, and every one a
# later schema added.
_OPTIONAL = ("needle_context", "output_bytes", *(name for names in ADDED.values() for name in names))


class ErrorKind(enum.StrEnum):
    """Why a record holds no graded answer (or no log-probabilities): the first word of its error
    text, which records write as ``"kind: detail"``."""

    BACKEND_ERROR = "backend_error"  # the backend failed or timed out: the next attempt may pass
    REJECTED = "rejected"  # the server refused this request (an HTTP 4xx): it would again
    TOO_LONG = "too_long"  # the prompt and its new tokens exceed the backend's limit
    LENGTH_MISMATCH = "length_mismatch"  # the prompt missed its target length
    NO_LOGPROBS = "no_logprobs"  # the server gave no log-probability for some token

    def error(self, detail: str) -> str:
        """The error text a record holds."""
        return f"{self.value}: {detail}"

    @property
    def retried(self) -> bool:
        """Whether resuming a run asks again: only a failure that another attempt may not repeat."""
        return self is ErrorKind.BACKEND_ERROR


RETRIED = frozenset(kind.value for kind in ErrorKind if kind.retried)


class FirstToken(enum.StrEnum):
    """What came first of an answer (a record's ``first_token``): a model whose first choice is to end
    its turn fails otherwise than one that answers wrong, or blank (``fathom.analysis.failures``)."""

    FORCED = "forced"  # the backend kept end-of-generation tokens from coming first
    UNFORCED = "unforced"  # nothing kept them (a server that refused min_tokens), and none came first
    END = "end"  # one came first: the model stopped before any token of an answer

    @classmethod
    def of(cls, forced: bool, ended_at_once: bool) -> FirstToken:
        """An answer's first token as seen: the end, whatever was asked of the backend (a server can
        take min_tokens and ignore it), else forced or not."""
        if ended_at_once:
            return cls.END
        return cls.FORCED if forced else cls.UNFORCED


def error_kind(error: str) -> str:
    """An error text's kind, as written: an ``ErrorKind``'s value, or the first word of an error that
    another backend (a plugin, an older fathom) wrote ("http: 500" -> "http")."""
    return error.split(":", 1)[0].strip()


def is_retried(error: str | None) -> bool:
    """Whether a record with this error is tried again when its run resumes."""
    return error is not None and error_kind(error) in RETRIED


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
    # A closed-book probe (``fathom.tasks.probe``): the id of the low-overlap item whose fact it asks
    # alone. A probe is a control of no sample (``control`` is True): once per item and run, at no
    # length, depth or index of the grid, which its id leaves out.
    probe: str | None = None

    @property
    def id(self) -> str:
        # Stable across runs and processes: resume matches finished samples by this id.
        if self.probe is not None:
            return f"{PROBE}|{self.probe}"
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
    # Where the backend can tell them apart: the seconds until its first new token (the prompt's
    # prefill, with what its cache spared) and those of the rest of the answer.
    prefill_s: float | None = None
    decode_s: float | None = None
    first_token: FirstToken | None = None  # what came first of the answer; None: the backend does not say
    # A thinking model's reasoning, apart from ``text`` (the answer): its text and its tokens; None
    # where the backend gave none (``fathom.backends.reasoning``).
    reasoning: str | None = None
    reasoning_tokens: int | None = None


@dataclass(frozen=True)
class Score:
    """A deterministic grade in [0, 1] and the references it found in the output; ``extracted``: what
    ``exact`` took out of a chatty output and compared, where that is not the output, stripped."""

    value: float
    matched: tuple[str, ...]
    method: str
    extracted: str | None = None


@dataclass(frozen=True, slots=True)
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
    # (teacher forcing), or why it could not be read. A tuple as the runner makes them, Floats (8 bytes
    # each) as read from a file.
    answer_logprobs: Floats | tuple[float, ...] | None = None
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
    # NIAH's needles (schema 5), in the order of needle_depths: each one's role (GOLD_ROLE,
    # PART_ROLE, one of DISTRACTOR_ROLES or LITERAL_ROLE) and the value it states; and the
    # distractors' values the answer holds, any of which makes the score 0 (an answer that also
    # names a look-alike's value is hedged, not right). RULER's multi-key tasks (schema 8): the other
    # keys' values it names too, flagged only: the score stays RULER's metric's, comparable with
    # RULER's published scores.
    needle_roles: tuple[str, ...] = ()
    needle_values: tuple[str, ...] = ()
    lured: tuple[str, ...] = ()
    # The corpus token the haystack began at (--haystack-offset random), and why the needles were
    # drawn again before this sample (their corpus already held one of their values).
    haystack_offset: int | None = None
    redraws: tuple[str, ...] = ()
    # How alike the gold needles are to their corpus (the best content-word Jaccard index over one
    # sentence of it), and how much of their wording the question repeats (content words, ROUGE-1).
    haystack_similarity: float | None = None
    overlap_words: int | None = None
    overlap_rouge1: float | None = None
    # A real suite's sample (schema 6): the item's id in its file, the splits it belongs to
    # ("length:0-4k", "difficulty:hard"), and the suite's length protocol made visible: the prompt's
    # tokens before its middle was cut to the run's length (actual_tokens are those after), and
    # whether it was cut.
    item_id: str | None = None
    item_groups: tuple[str, ...] = ()
    original_tokens: int | None = None
    truncated: bool = False
    # Schema 7: the backend's prefill and decode seconds, where it reports them (``Completion``);
    # a sample far slower per token than its task's others at its length is listed (``fathom.analysis.slow``).
    prefill_s: float | None = None
    decode_s: float | None = None
    # Schema 8: what came first of the answer (a ``FirstToken``: "end" is a model that stopped before
    # any token, not one that answered blank), None where the backend does not say; and the answer
    # ``exact`` took out of a chatty output and compared, where it differs (``Score.extracted``).
    first_token: str | None = None
    extracted: str | None = None
    # Schema 9: a closed-book probe's item (its id in the latent items; such a record is a control of
    # no sample: ``control`` is True), and the ids of the low-overlap items a sample's gold needles
    # are of, in the order of its answers, so that its score can be read on the items the model knows.
    probe: str | None = None
    latent_items: tuple[str, ...] = ()
    # Schema 10: on a low-overlap sample, the grade of the odd-name reader's answer on its prompt
    # (``fathom.prompts.odd_names``: a name the context holds once, no model), graded as an answer is:
    # the knowledge-free baseline its score must beat. None on any other sample.
    odd_name_score: float | None = None
    # Schema 11: on a low-overlap sample, the near neighbours of its items' places that its window
    # names ("Washington" beside a question about Washington, D.C.; ``fathom.tasks.latent_hygiene``):
    # accidental literal distractors, recorded so that those samples can be read apart.
    literal_neighbours: tuple[str, ...] = ()
    # Schema 12: on a low-overlap sample, each gold needle's form (relation/order/template,
    # ``fathom.prompts.latent_forms``), in the order of ``answers``.
    needle_forms: tuple[str, ...] = ()
    # Schema 13: a thinking model's reasoning, kept apart from ``output`` (the answer, all that is
    # graded): its tokens, None where the backend gave no reasoning; and its text with --keep-reasoning
    # (bounded as an answer is), None otherwise. A reply that ended inside its reasoning has
    # ``finish_reason`` THINKING and no answer.
    reasoning_tokens: int | None = None
    reasoning: str | None = None
    schema: int = field(default=RECORD_SCHEMA)

    def to_json(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["answer_logprobs"] = _plain(self.answer_logprobs)
        # Optional: left out when absent, so records without them (RULER's, perplexity runs') keep
        # their form.
        for key, default in _optional_defaults().items():
            if data[key] == default:
                del data[key]
        if not self.control:
            del data["control"]
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SampleRecord:
        return read(cls, RECORDS.upgrade(data))

    @property
    def output_truncated(self) -> bool:
        return self.output_bytes is not None

    @property
    def answer_logprob(self) -> float | None:
        """The whole answer's log-probability."""
        return None if self.answer_logprobs is None else sum(self.answer_logprobs)


@dataclass(frozen=True, slots=True)
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
    logprobs: Floats | tuple[float, ...]  # a tuple as the runner makes them, Floats as read from a file
    latency_s: float
    beyond_window: bool
    error: str | None = None
    run_identity: str | None = None  # as in SampleRecord
    record: str = "perplexity"
    schema: int = field(default=RECORD_SCHEMA)

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self) | {"logprobs": _plain(self.logprobs)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PerplexityRecord:
        return read(cls, RECORDS.upgrade(data))


def _plain(logprobs: Floats | tuple[float, ...] | None) -> list[float] | tuple[float, ...] | None:
    """Log-probabilities as JSON writes them: Floats as a list of its floats."""
    return logprobs.to_json() if isinstance(logprobs, Floats) else logprobs


@functools.cache
def _optional_defaults() -> dict[str, object]:
    """The optional fields' defaults (a needle context of () is no default: it is no needle's)."""
    return {f.name: f.default for f in dataclasses.fields(SampleRecord) if f.name in _OPTIONAL}


AnyRecord = SampleRecord | PerplexityRecord


def cap_answer(text: str) -> tuple[str, int | None]:
    """The answer as recorded: whole, or its first ANSWER_BYTES bytes (at a character boundary) and
    its full size in bytes."""
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= ANSWER_BYTES:
        return text, None
    return data[:ANSWER_BYTES].decode("utf-8", "ignore"), len(data)


def record_from_json(data: dict[str, Any]) -> AnyRecord:
    """A line of samples.jsonl as the record it holds, upgraded from the schema it was written in;
    NewerSchemaError for a record of a newer fathom, TypeError for JSON that is no record (a field
    missing, of the wrong type, or one that no record of its schema has), ValueError for one with an
    impossible value (``check_values``)."""
    record: AnyRecord
    if data.get("record") == "perplexity":
        record = PerplexityRecord.from_json(data)
    else:
        record = SampleRecord.from_json(data)
    check_values(record)
    return record


_BOUNDS = {cls: field_bounds(cls) for cls in (SampleRecord, PerplexityRecord)}


def check_values(record: AnyRecord) -> None:
    """ValueError naming the first impossible value of ``record``: a number that is not finite (NaN,
    Infinity: JSON has neither), a count, offset, index or seconds below 0, a fraction outside [0, 1],
    or a sample id other than the one its task, length, depth and index make (``Cell.id``). Its types
    are checked already (``fathom.schemas.read``)."""
    for name, many, low, high in _BOUNDS[type(record)]:
        value = getattr(record, name)
        values = () if value is None else value if many else (value,)
        if values and not within(values, low, high):
            found = next(v for v in values if not within((v,), low, high))
            raise ValueError(f"field '{name}' is {found!r:.40}, not a finite number in [{low:g}, {high:g}]")
    depth = record.depth if isinstance(record, SampleRecord) else None
    control, probe = (record.control, record.probe) if isinstance(record, SampleRecord) else (False, None)
    made = Cell(record.task, record.length, depth, record.sample, control, probe).id
    if record.sample_id != made:
        raise ValueError(f"sample id '{record.sample_id:.80}' is not its cell's, '{made:.80}'")
