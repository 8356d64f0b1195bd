"""What the tasks that hide a counted stream of lines share: state tracking's operations and long
outputs' records. Each cell is named ``TASK:COUNT`` (the count an axis beside the length) and the
cells are swept length-major; the prompt is built over the run's corpus with each line on a line of
its own (``prompts.line_stream``); and a count that cannot fit the shortest length is refused before
any sample is drawn, saying how many fit."""

from __future__ import annotations

import dataclasses
import hashlib
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from fathom.errors import SpecError
from fathom.prompts import PromptBuilder, PromptText
from fathom.prompts.haystack import Corpus, corpus_info, load_corpus, tokenize_corpus
from fathom.prompts.line_stream import line_form
from fathom.prompts.templates import ChatTemplate, resolve_template
from fathom.prompts.tokenizers import Tokenizer
from fathom.records import Cell
from fathom.spec import RunSpec


def answer_budget(tokens: int, margin: int) -> int:
    """An output budget for an answer of ``tokens`` tokens: a quarter more and ``margin`` besides, so
    that a model that says the whole answer and a few words more is not cut short."""
    return math.ceil(1.25 * tokens) + margin


def cell_task(task: str, count: int) -> str:
    """A cell's task name, ``state`` and 16 -> ``state:16``."""
    return f"{task}:{count}"


def cell_count(task: str) -> int:
    """The count of a cell's task name, ``state:16`` -> 16."""
    return int(task.partition(":")[2])


@dataclass(frozen=True)
class CountAxis:
    """The family's name in its cells' names, the count's option, and how a refusal names what is
    counted (``operations``, ``each with its decoy line``)."""

    task: str
    flag: str
    units: str
    each: str


class OverCorpus:
    """What a task that builds its prompts over the run's corpus holds (state, babi, listing, mrcr):
    set up by ``_build_over``; its corpora and its identity's shared fields."""

    spec: RunSpec
    name: str
    tokenizer: Tokenizer
    corpus: Corpus
    template: ChatTemplate
    builder: PromptBuilder
    form: str

    def _build_over(self, spec: RunSpec, tokenizer: Tokenizer, text: PromptText) -> None:
        self.spec, self.name, self.tokenizer = spec, spec.task, tokenizer
        self.corpus = load_corpus(spec.corpus or "prose")
        self.template = resolve_template(spec.template, tokenizer)
        self.builder = PromptBuilder(tokenizer, self.template, text, tokenize_corpus(self.corpus, tokenizer))
        self.form = line_form(self.corpus)

    def corpora(self) -> list[dict[str, Any]]:
        return [dataclasses.asdict(corpus_info(self.corpus, self.builder.corpus))]

    def _identity(self, version: int, wording: object) -> dict[str, Any]:
        """The identity: the task, its ``version``, the corpus and template with their hashes, and a
        hash of ``wording`` (what of the prompt's words and the draws the code fixes)."""
        return {
            "task": self.name,
            "version": version,
            "corpus": self.corpus.name,
            "corpus_sha256": self.corpus.sha256,
            "template": self.template.name,
            "template_sha256": self.template.sha256,
            "prompt_text_sha256": hashlib.sha256(repr(wording).encode()).hexdigest(),
        }


class CountedLines(OverCorpus):
    """A task's shared half: set up by ``_build``; a subclass gives ``line_tokens`` (the most tokens
    one line and its partner take, halved) and ``overhead`` (the template, instruction and question)."""

    axis: CountAxis
    counts: tuple[int, ...]
    # Whether each sample's answer budget is its own (sized by its answer, as listing's and mrcr's
    # are), so that a plan that estimates prompts (``fathom.plan.prompts``) reads each sample's.
    budget_per_sample = False

    def _build(self, spec: RunSpec, tokenizer: Tokenizer, text: PromptText, counts: tuple[int, ...]) -> None:
        self.counts = counts
        self._build_over(spec, tokenizer, text)
        self._check_fit()

    @property
    def line_tokens(self) -> int:
        raise NotImplementedError

    @property
    def overhead(self) -> int:
        raise NotImplementedError

    def _check_fit(self) -> None:
        shortest, most = min(self.spec.lengths), max(self.counts)
        fit = self.fitting(shortest)
        if most > fit:
            axis = self.axis
            raise SpecError(
                f"{axis.flag} {most} does not fit a length of {shortest} tokens: at most {max(fit, 0)} "
                f"{axis.units} fit it ({axis.each}, up to {2 * self.line_tokens} tokens a pair, beside "
                f"{self.overhead} tokens of instruction and question); use fewer {axis.flag} or longer "
                "--lengths"
            )

    def fitting(self, length: int) -> int:
        """How many counted lines (each with its partner) fit a prompt of ``length`` tokens."""
        return (length - self.overhead) // (2 * self.line_tokens)

    def cells(self) -> Iterator[Cell]:
        # Length-major, as RULER's: a backend loads each length's KV budget once.
        return (
            Cell(cell_task(self.axis.task, count), length, None, index)
            for length in self.spec.lengths
            for count in self.counts
            for index in range(self.spec.samples)
        )
