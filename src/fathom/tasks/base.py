"""The task protocol: which cells a run has, and how one cell becomes a prompt with references."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

from fathom.prompts import ChatPrompt, Prompt, PromptText
from fathom.prompts.haystack.index import Ids
from fathom.prompts.needle_sets import NeedleSet
from fathom.prompts.tokenizers import Tokenizer
from fathom.records import Cell
from fathom.scoring import Grader
from fathom.spec import RunSpec


@dataclass(frozen=True)
class SourceFacts:
    """A real suite's sample: the item it asks about, the splits it belongs to ("length:0-4k",
    "difficulty:hard"), and what the suite's length protocol did to its prompt: the prompt's tokens
    before the middle was cut to the run's length, and whether it was."""

    item_id: str
    groups: tuple[str, ...]
    original_tokens: int
    truncated: bool


@dataclass(frozen=True, eq=False)
class Sample:
    """A cell made concrete: its prompt, its question and the references that grade the answer."""

    cell: Cell
    prompt: Prompt
    text: PromptText  # the words around the context, for chat backends
    question: str
    answers: tuple[str, ...]
    kind: str  # what is asked for: the needle kind (number, uuid, ...) or the task's own
    # Phrases that mark the evidence in the context; simulated models look for them, real ones ignore them.
    query_keys: tuple[str, ...]
    scoring: str
    max_new_tokens: int
    # The wording that look-alike sentences share with the evidence: a simulated pattern-matcher
    # takes any sentence holding it for the answer.
    patterns: tuple[str, ...] = ()
    # NIAH's needles: each placement's role and value, in the order of ``prompt.needles``.
    needles: NeedleSet | None = None
    # Why the needles were redrawn before this sample (its corpus already held one of them).
    redraws: tuple[str, ...] = ()
    # The corpus token the haystack starts at, where samples draw their own (--haystack-offset random).
    haystack_offset: int | None = None
    # How alike the needles and their corpus are: the highest content-word Jaccard index between a
    # gold needle (or part) and one sentence of the corpus (prompts/hygiene.py).
    similarity: float | None = None
    # A task's own grader, for metrics that read more than the references (LongBench's classification
    # reads its task's classes); None grades with the scoring method named ``scoring``.
    grader: Grader | None = None
    source: SourceFacts | None = None  # a real suite's item and truncation
    # The values of keys the question does not ask about (RULER's multi-key tasks): an answer that
    # names one too is flagged in its record's ``lured``, its score left as the metric gives it
    # (unlike NIAH's distractors, in ``needles``, whose values make the score 0).
    look_alikes: tuple[str, ...] = ()
    # The low-overlap items its gold needles are of (``fathom.tasks.probe``), in the order of ``answers``.
    latent_items: tuple[str, ...] = ()
    # A low-overlap sample's odd-name answer (``fathom.prompts.odd_names``: what a knowledge-free reader
    # answers from its context; "" where it finds no name), graded beside the model's; None otherwise.
    odd_name: str | None = None
    # The near neighbours of its items' places that its window names: accidental literal distractors
    # ("Washington" beside a question about Washington, D.C.; tasks/latent_hygiene.py).
    literal_neighbours: tuple[str, ...] = ()
    # The prompt as messages where the task builds them itself (a multi-turn conversation, mrcr's),
    # made when a chat backend asks for them; None: they are made from ``text`` around the context.
    chat: Callable[[], ChatPrompt] | None = None

    @classmethod
    def of_needles(
        cls,
        cell: Cell,
        prompt: Prompt,
        text: PromptText,
        needles: NeedleSet,
        scoring: str,
        max_new_tokens: int,
        redraws: tuple[str, ...] = (),
        haystack_offset: int | None = None,
        similarity: float | None = None,
    ) -> Sample:
        return cls(
            cell,
            prompt,
            text,
            needles.question,
            needles.answers,
            needles.kind,
            needles.keys,
            scoring,
            max_new_tokens,
            patterns=needles.patterns,
            needles=needles,
            redraws=redraws,
            haystack_offset=haystack_offset,
            similarity=similarity,
        )


@dataclass(frozen=True, eq=False)
class Document:
    """A perplexity cell made concrete: a stretch of the corpus whose every token after the first is
    scored given all before it."""

    cell: Cell
    ids: Ids  # the BOS where the model has one, then the corpus tokens
    corpus: str
    corpus_offset: int  # the first corpus token's index in the tokenised corpus


@runtime_checkable
class DescribesCorpora(Protocol):
    """A task that says which corpora its haystacks come from, for the manifest: each one's name,
    source, licence, units, size in the run's tokens and sha256."""

    def corpora(self) -> list[dict[str, Any]]: ...


@runtime_checkable
class GradedBy(Protocol):
    """A task whose samples one scoring method grades, chosen by the task where the spec names none
    (niah: contains, ordered for split needles, all for several): the manifest records that method's
    version (``fathom.scoring.SCORING_VERSIONS``), so a run graded the old way does not resume under
    the new."""

    @property
    def scoring(self) -> str: ...


class Task(Protocol):
    """A task: the cells of a run, and how each becomes a Sample (a prompt of its exact length with
    the references that grade it) or a Document (perplexity). Nothing needs to inherit from it."""

    name: str

    def cells(self) -> Iterator[Cell]:
        """Every cell of the run, in the order that lets a prefix cache reuse most tokens; made as
        they are asked for, so a large sweep holds no list of them all."""
        ...

    def prepare(self, cell: Cell) -> Sample | Document: ...

    def identity(self) -> dict[str, Any]:
        """What, beside the spec and tokenizer, decides the prompts (versions, corpus and template
        hashes): two runs with equal identities build byte-identical prompts."""
        ...


class TaskFactory(Protocol):
    """What makes a task from a spec and the tokenizer that counts its prompts (the backend's). A
    task class whose constructor takes these is one."""

    def __call__(self, spec: RunSpec, tokenizer: Tokenizer, /) -> Task: ...


# How a task places its needles: at the depths the spec sweeps (niah: --depths is required), at depths
# it draws per sample (RULER's tasks), or nowhere (perplexity). Only "swept" takes --depths.
Depths = Literal["swept", "drawn", "none"]


@dataclass(frozen=True)
class TaskEntry:
    """Everything fathom knows of a task before making one: what the help and the listings say of
    it, and the options of the spec it takes, which the registry checks before any work.

    ``knobs`` names the RunSpec fields it reads beyond those every task reads (``--needle`` is
    ``"needle"``, ``--max-new-tokens`` is ``"max_new_tokens"``): any other one set is refused.
    ``needs_scores`` says that its runs read log-probabilities, so that its backend must be a Scorer.
    """

    factory: TaskFactory
    summary: str
    depths: Depths = "none"
    knobs: tuple[str, ...] = ()
    needs_scores: bool = False
