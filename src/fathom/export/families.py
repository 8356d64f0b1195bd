"""The families ``fathom export`` writes, one entry each: the task names it takes, and how it makes
that task on the training space (``Made``: its cells, its samples, what they are named by).

Every family's task is evaluation's own, handed training's words instead of evaluation's:

- niah: ``spaces.TRAIN`` (keys, values, names, low-overlap items) on every needle kind but sf;
- babi (and babi:qa1 ... alone): ``babi_draw.TRAIN_POOLS``; state: ``state.TRAIN_LISTS``;
- RULER's vt, cwe, fwe, qa_1 and qa_2: ``RulerTask`` on training's split
  (``tasks/ruler/splits.py``);
- listing: ``log_records.TRAIN_LOGS`` (other users and actions, six-digit ids);
- mrcr: ``spaces.TRAIN``'s made-up places as the conversation's topics (C, J or Y first).

A family is added with one ``Family`` in ``FAMILIES``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field

from fathom.errors import SpecError
from fathom.prompts import log_records as logs
from fathom.prompts.haystack import load_corpus
from fathom.prompts.hygiene import haystack_check
from fathom.prompts.latent import LATENT_VERSION, items_in
from fathom.prompts.needle_sets import LATENT_KINDS, SPLIT_KINDS
from fathom.prompts.needles import NEEDLE_KINDS
from fathom.prompts.spaces import TRAIN
from fathom.prompts.templates import ChatTemplate
from fathom.prompts.tokenizers import Tokenizer
from fathom.records import Cell
from fathom.spec import RunSpec
from fathom.tasks import babi, listing, mrcr, state
from fathom.tasks.babi_draw import TASKS as BABI_TASKS
from fathom.tasks.babi_draw import TRAIN_POOLS
from fathom.tasks.base import Sample
from fathom.tasks.niah import NEEDLE_SETS_VERSION, NIAH_VERSION, NiahTask
from fathom.tasks.ruler.catalogue import RULER_VERSION
from fathom.tasks.ruler.splits import QA_SPLIT_VERSION
from fathom.tasks.ruler.suite import RulerTask

# The needle kinds an export draws: all but sf, one published sentence that every evaluation asks.
EXPORT_KINDS = tuple(kind for kind in (*NEEDLE_KINDS, *SPLIT_KINDS, *LATENT_KINDS) if kind != "sf")
# What each RULER task's examples read besides the task's own words: meta's "corpus".
RULER_SOURCES = {
    "vt": "noise",
    "cwe": "prose words",
    "fwe": "coded words",
    "qa_1": "squad",
    "qa_2": "hotpotqa",
}


def answer_sentence(prefix: str, sample: Sample) -> str:
    """The assistant's turn: the answer prefix evaluation opens it with (RULER's open with a space,
    vt's ends with one), then every reference; the first alone where any one of them is right (RULER's
    qa: a question's accepted answers are one answer in other words)."""
    answers = sample.answers[:1] if sample.scoring == "any" else sample.answers
    joined = answers[0] if len(answers) == 1 else ", ".join(answers[:-1]) + " and " + answers[-1]
    return f"{prefix.strip()} {joined}." if prefix.strip() else f"{joined}."


def listed_answer(prefix: str, sample: Sample) -> str:
    """listing's: the ids one a line, as its question asks, after the prefix's line."""
    return f"{prefix.strip()}\n{logs.listed(list(sample.answers))}"


@dataclass(frozen=True)
class Made:
    """A family's task on the training space: its cells (task, length, depth: each example is one of
    them, with its own sample index), how it builds one, the chat template it counts, the haystack
    each cell's task reads, and the generators' versions."""

    cells: tuple[tuple[str, int, float | None], ...]
    prepare: Callable[[Cell], Sample]
    template: ChatTemplate
    corpus: Callable[[str], str]
    versions: dict[str, int]
    answer: Callable[[str, Sample], str] = answer_sentence  # the assistant's turn, after the prefill


def _no_check(spec: RunSpec) -> None:
    """A family with nothing to refuse beyond what its task's registry entry refuses."""


@dataclass(frozen=True)
class Family:
    names: tuple[str, ...]  # the task names export takes for it
    make: Callable[[RunSpec, Tokenizer], Made]
    check: Callable[[RunSpec], None] = field(default=_no_check)  # refusals before any work


def _check_needle(spec: RunSpec) -> None:
    kind = spec.needle or "number"
    if kind == "sf":
        raise SpecError(
            "the sf needle is one fixed sentence, the same in every evaluation, so it cannot be exported "
            f"without leaking it: use one of {', '.join(EXPORT_KINDS)}"
        )
    if kind not in EXPORT_KINDS:
        raise SpecError(f"unknown needle kind '{kind}': export takes {', '.join(EXPORT_KINDS)}")


def _niah(spec: RunSpec, tokenizer: Tokenizer) -> Made:
    # The training space, its streams also told apart by kind and hardness: exports of one seed that
    # differ in those draw other keys and names, so concatenating them repeats none.
    kind = spec.needle or "number"
    stream = (*TRAIN.stream, kind, f"distractors={spec.distractors}", f"needles={spec.needles}")
    space = dataclasses.replace(TRAIN, stream=stream, withheld=_named_items(spec))
    task = NiahTask(spec, tokenizer, space)
    # The asked kind only: a low-overlap kind's literal twin would repeat its needles in other words.
    tasks = [name for name, variant in task.variants.items() if variant.needle_kind == task.needle_kind]
    cells = tuple((name, length, depth) for name in tasks for length in spec.lengths for depth in spec.depths)

    def prepare(cell: Cell) -> Sample:
        sample = task.prepare(cell)
        assert isinstance(sample, Sample)  # a niah cell that is no perplexity cell
        return sample

    versions = {"niah": NIAH_VERSION, "needle_sets": NEEDLE_SETS_VERSION, "latent": LATENT_VERSION}
    return Made(cells, prepare, task.template, lambda name: task.variants[name].corpus.name, versions)


def _named_items(spec: RunSpec) -> frozenset[str]:
    """The training part's low-overlap items that a corpus of the export names a place of: never
    drawn, where evaluation would draw and redraw (its part is four times the size)."""
    if (spec.needle or "number") not in LATENT_KINDS:
        return frozenset()
    checks = [
        haystack_check(load_corpus(name).whole_text) for name in spec.domains or (spec.corpus or "prose",)
    ]
    return frozenset(
        item.id for item in items_in(TRAIN.split) if any(check.mentions(item.chain) for check in checks)
    )


def _lines(
    task: babi.BabiTask | state.StateTask | listing.ListingTask | mrcr.MrcrTask | RulerTask,
    corpus: Callable[[str], str],
    versions: dict[str, int],
) -> Made:
    """A task swept by (task, length) cells, one sample each (the spec's): a task of lines or RULER's."""
    cells = tuple((cell.task, cell.length, None) for cell in task.cells())
    return Made(cells, task.prepare, task.template, corpus, versions)


def _babi(spec: RunSpec, tokenizer: Tokenizer) -> Made:
    task = babi.BabiTask(spec, tokenizer, TRAIN_POOLS)
    return _lines(task, lambda name: task.corpus.name, {babi.TASK: babi.BABI_VERSION})


def _state(spec: RunSpec, tokenizer: Tokenizer) -> Made:
    task = state.StateTask(spec, tokenizer, state.TRAIN_LISTS)
    return _lines(task, lambda name: task.corpus.name, {state.TASK: state.STATE_VERSION})


def _listing(spec: RunSpec, tokenizer: Tokenizer) -> Made:
    task = listing.ListingTask(spec, tokenizer, logs.TRAIN_LOGS)
    made = _lines(task, lambda name: task.corpus.name, {listing.TASK: listing.LISTING_VERSION})
    return dataclasses.replace(made, answer=listed_answer)


def _mrcr(spec: RunSpec, tokenizer: Tokenizer) -> Made:
    task = mrcr.MrcrTask(spec, tokenizer, TRAIN)
    made = _lines(task, lambda name: task.corpus.name, {mrcr.TASK: mrcr.MRCR_VERSION})
    # The assistant's last turn is the piece asked for again, after its prefix: the reference whole.
    return dataclasses.replace(made, answer=lambda _prefix, sample: sample.answers[0])


def _ruler(spec: RunSpec, tokenizer: Tokenizer) -> Made:
    versions = {
        "ruler": RULER_VERSION,
        **({"qa_split": QA_SPLIT_VERSION} if spec.task.startswith("qa") else {}),
    }
    return _lines(RulerTask(spec, tokenizer, "train"), RULER_SOURCES.__getitem__, versions)


FAMILIES = (
    Family(("niah",), _niah, _check_needle),
    Family((babi.TASK, *(babi.cell_task(task) for task in BABI_TASKS)), _babi),
    Family((state.TASK,), _state),
    Family(tuple(RULER_SOURCES), _ruler),
    Family((listing.TASK,), _listing),
    Family((mrcr.TASK,), _mrcr),
)
EXPORTABLE = tuple(name for family in FAMILIES for name in family.names)


def family_of(task: str) -> Family | None:
    """The family that exports ``task``, or None."""
    return next((family for family in FAMILIES if task in family.names), None)
