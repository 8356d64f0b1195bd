"""The backend protocol: a batch of requests in, one completion per request out."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeVar, runtime_checkable
from urllib.parse import parse_qsl

import numpy as np
from numpy.typing import NDArray

from fathom.errors import SpecError
from fathom.packages import install_command, package_dir
from fathom.prompts import ChatPrompt
from fathom.prompts.haystack.index import Ids
from fathom.prompts.tokenizers import Tokenizer
from fathom.records import Completion

# What a backend consumes: exact token ids, the prompt's text (re-tokenised by the backend), or chat
# messages that the backend's server puts into its own template.
InputKind = Literal["ids", "text", "chat"]
T = TypeVar("T")


@dataclass(frozen=True, eq=False)
class Request:
    """One prompt to complete, greedily, with at least one new token.

    ``ids`` is always the exact prompt; ``text`` is set for text backends and ``chat`` for chat
    backends. ``query_keys`` are the phrases that mark the evidence, ``patterns`` the wording that
    look-alikes share with it, ``question`` the question asked and ``context`` the span of ``ids``
    that holds the haystack: simulated models use them to find (or, as a pattern-matcher, mistake)
    the needles in the prompt; real backends ignore them (the question is in the prompt).
    """

    sample_id: str
    ids: Ids
    max_new_tokens: int  # the thinking budget's tokens (--thinking-budget), then the answer's
    text: str | None = None
    chat: ChatPrompt | None = None
    stop: tuple[str, ...] = ()
    query_keys: tuple[str, ...] = ()
    context: tuple[int, int] | None = None
    patterns: tuple[str, ...] = ()
    question: str = ""
    # The gold answer's ids: the backend also returns their teacher-forced log-probabilities
    # right after the prompt (a continuous retrieval signal beside the greedy answer).
    continuation: Ids | None = None


@dataclass(frozen=True, eq=False)
class ScoreRequest:
    """Teacher forcing: the log-probability of each token of ``ids[start:]`` given all before it.

    ``start`` is at least 1 (the first token has nothing to be predicted from). Text backends
    re-tokenise ``text`` (the ids decoded) and score their own tokens from the character
    ``text_start`` on.
    """

    sample_id: str
    ids: Ids
    start: int
    text: str | None = None
    text_start: int | None = None


@dataclass(frozen=True, eq=False)
class TokenScores:
    """Natural-log probabilities of the scored tokens, in order; ``first_position`` is the index of
    the first of them in the sequence the backend read (its own tokens, for text backends)."""

    logprobs: NDArray[np.float64]
    first_position: int
    latency_s: float
    error: str | None = None


def in_order(done: Iterator[tuple[int, T]], count: int) -> list[T]:
    """``count`` results handed over as ``(index, result)`` as each finished, in their index order:
    what a streaming backend's ``generate`` returns."""
    found = dict(done)
    return [found[index] for index in range(count)]


def split_options(rest: str) -> tuple[str, dict[str, str]]:
    """``"PATH?n_ctx=8k&threads=2"`` -> ``("PATH", {"n_ctx": "8k", "threads": "2"})``. A setting given
    twice is refused: which of the two was meant is not fathom's to guess."""
    target, _, query = rest.partition("?")
    pairs = parse_qsl(query, keep_blank_values=True)
    names = [name for name, _ in pairs]
    if twice := sorted({name for name in names if names.count(name) > 1}):
        raise SpecError(f"'{rest}' sets {', '.join(twice)} more than once: give each setting once")
    return target, dict(pairs)


class Backend(Protocol):
    """A model behind one interface.

    ``tokenizer`` counts every prompt: the model's own where the backend has one, else the one the
    user named. ``exact_lengths`` is False when that tokenizer may not be the model's. What a
    backend may do besides is a protocol of its own below (Scorer, Streamer, Pulling, Built, Tuned,
    BatchSized).
    """

    name: str
    input: InputKind
    exact_lengths: bool
    trained_window: int | None  # the context the model was trained for, if known
    max_prompt_tokens: int | None  # the longest prompt + new tokens it accepts; longer is refused

    # Read-only, so that a backend may hold a Tokenizer of its own kind (hf's TransformersTokenizer)
    # and still be a ScoringBackend.
    @property
    def tokenizer(self) -> Tokenizer: ...

    def settings(self) -> dict[str, Any]:
        """Everything that changes outputs, for the manifest."""
        ...

    def generate(self, requests: Sequence[Request]) -> list[Completion]: ...


@runtime_checkable
class Scorer(Protocol):
    """A backend that can read log-probabilities of given tokens (perplexity, answer likelihood)."""

    def score(self, requests: Sequence[ScoreRequest]) -> list[TokenScores]: ...


@runtime_checkable
class Streamer(Protocol):
    """A backend that hands back each completion as soon as it is done, in any order, as
    ``(index into requests, completion)``: the runner writes each record as its answer arrives, so
    an interrupt loses no answered sample (a paid request, on an API). Every index comes exactly
    once; closing the iterator early cancels the requests still in flight."""

    def stream(self, requests: Sequence[Request]) -> Iterator[tuple[int, Completion]]: ...


@runtime_checkable
class Pulling(Protocol):
    """A Streamer whose ``stream`` takes any iterable of requests and reads each only as it has room
    to send it (an HTTP backend's window), indexed in the order read: the runner hands it the whole run
    as one iterator, each prompt built while earlier requests are in flight, not in batches."""

    pulls_requests: bool

    def stream(self, requests: Iterable[Request]) -> Iterator[tuple[int, Completion]]: ...


@runtime_checkable
class ClosedBook(Protocol):
    """A backend that says whether it can answer a question from what it knows, with no document to
    read (the low-overlap items' closed-book probe, ``fathom.tasks.probe``). Every language model can,
    and fathom's backends (the simulated ones too: ``knows``) need not say so; one that says False
    cannot (a reader that only finds what its context holds), and a run that probes is refused it."""

    closed_book: bool


def answers_closed_book(backend: Backend) -> bool:
    """Whether the backend can answer closed-book: unless it says it cannot (``ClosedBook``)."""
    return not isinstance(backend, ClosedBook) or backend.closed_book


@runtime_checkable
class Thinking(Protocol):
    """A backend that reads a thinking model's reasoning apart from its answer, and can take a thinking
    budget (``--thinking-budget``): ``take_thinking`` takes the run's budget before any request (one
    that passes the model a budget of its own keeps it: Anthropic's budget_tokens), or says in one
    line why it cannot honour it. A backend without it (a plugin's) is refused any budget: it would
    grade reasoning."""

    def take_thinking(self, budget: int) -> str | None: ...


@runtime_checkable
class OutputCapped(Protocol):
    """A backend whose replies, thinking and answer together, hold at most so many tokens (Anthropic's
    ``max_output``): asked before any work with the most new tokens a sample of the run asks for (its
    thinking budget and its answer's), ``output_refusal`` says in one line why it cannot give them,
    else None, so that a run whose every such sample would be refused is refused instead."""

    def output_refusal(self, new_tokens: int) -> str | None: ...


@runtime_checkable
class Built(Protocol):
    """A backend whose build decides its arithmetic (llama.cpp's CPU kernels, say): what the manifest
    records of it, outside the run's identity, so a run resumes on another build but a comparison
    of two runs says when their builds differ."""

    def build(self) -> dict[str, Any]: ...


@runtime_checkable
class Tuned(Protocol):
    """A backend with settings that change how it runs but not what it answers (an HTTP client's
    concurrency, timeout and retries, its entry's ``transport``): the manifest records them outside
    the run's identity, so an interrupted run resumes with others (a longer timeout, say)."""

    def transport_settings(self) -> dict[str, Any]: ...


@runtime_checkable
class Counting(Protocol):
    """A backend whose provider counts each prompt as it was sent (its tokenizer not public), and
    returns that count as each answered completion's ``prompt_tokens``: the record's
    ``actual_tokens`` then, rather than the stand-in tokenizer's count the prompt was built with."""

    provider_counts: bool


@runtime_checkable
class BatchSized(Protocol):
    """A backend that wants at most ``requests_per_call`` requests per ``generate`` call: one that
    answers one at a time sets 1, so that the runner saves each answer as it comes rather than a
    batch of 16 at a time."""

    requests_per_call: int


class ScoringBackend(Backend, Scorer, Protocol):
    """A backend that is also a Scorer."""


def cannot_score(backend: Backend) -> str:
    """Why a backend that is no Scorer cannot serve a run that reads log-probabilities."""
    return (
        f"backend '{backend.name}' cannot read log-probabilities of given tokens, which perplexity "
        "and answer likelihood need"
    )


def scorer(backend: Backend) -> Scorer:
    """The backend as a Scorer, or a clear error (``fathom.registry.check_backend`` refuses such a
    backend before any work, naming those that can)."""
    if not isinstance(backend, Scorer):
        raise SpecError(f"{cannot_score(backend)}: `fathom models` lists the backends that can")
    return backend


class BackendFactory(Protocol):
    """What makes a backend from ``backend:rest``: ``rest`` (the model and its settings, e.g.
    ``cliff?window=8k``) and the tokenizer the user named, or ``"auto"``. A backend class whose
    constructor takes these is one."""

    def __call__(self, rest: str, tokenizer: str, /) -> Backend: ...


@dataclass(frozen=True)
class BackendEntry:
    """Everything fathom knows of a backend before making one: what ``fathom models`` lists, what
    the registry creates, and what must be installed for it.

    ``packages`` are the top-level modules it imports (looked for, never imported, by ``status``);
    ``extra`` is fathom's pip extra that installs them (empty for a plugin, whose own requirements
    bring them); ``scores`` says whether its backends are Scorers; ``transport`` names the settings
    its backends report as ``Tuned.transport_settings``; ``think_tags`` says that its backends read
    a think block off the model's text as the ``think_tags`` setting says (``backends.reasoning``), so
    that the registry can refuse a thinking budget they cannot honour before a model is loaded.
    """

    factory: BackendFactory
    summary: str
    packages: tuple[str, ...] = ()
    extra: str = ""
    scores: bool = False
    # Settings (``?name=``) that change how requests travel, not what the model answers: left out
    # of the run's identity (``fathom.registry.answering_spec``), so a run resumes with others.
    transport: frozenset[str] = frozenset()
    think_tags: bool = False

    def status(self) -> str:
        """'ready', or what to install for it."""
        missing = [p for p in self.packages if package_dir(p) is None]
        if not missing:
            return "ready"
        return f"needs {install_command(self.extra)}" if self.extra else f"needs {', '.join(missing)}"


def failed_scores(error: str, latency_s: float = 0.0) -> TokenScores:
    return TokenScores(np.zeros(0), 0, latency_s, error)


def score_request(backend: Backend, sample_id: str, ids: Ids, start: int) -> ScoreRequest:
    """A ScoreRequest in the form the backend reads: ids, or for text backends also the text."""
    if backend.input == "ids":
        return ScoreRequest(sample_id, ids, start)
    decode = backend.tokenizer.decode
    before = decode(ids[:start].tolist())
    return ScoreRequest(sample_id, ids, start, before + decode(ids[start:].tolist()), len(before))


def attach_continuations(
    backend: ScoringBackend, requests: Sequence[Request], completions: list[Completion]
) -> list[Completion]:
    """Completions with their requests' continuation log-probabilities, read by one ``score`` call
    after generation, for backends that do not score them while generating."""
    wanted = [
        i for i, r in enumerate(requests) if r.continuation is not None and completions[i].error is None
    ]
    if not wanted:
        return completions
    asks = []
    for i in wanted:
        request = requests[i]
        assert request.continuation is not None
        ids = np.concatenate([request.ids, request.continuation])
        asks.append(score_request(backend, request.sample_id, ids, len(request.ids)))
    done = list(completions)
    for i, scores in zip(wanted, backend.score(asks), strict=True):
        done[i] = with_continuation(done[i], scores)
    return done


def with_continuation(completion: Completion, scores: TokenScores) -> Completion:
    if scores.error is not None:
        return dataclasses.replace(completion, continuation_error=scores.error)
    return dataclasses.replace(completion, continuation_logprobs=tuple(float(x) for x in scores.logprobs))
