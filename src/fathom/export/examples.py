"""Training examples from evaluation's own generators, drawn from the training space.

An example is one NIAH sample as ``fathom run`` would build it (the same task, prompt words,
haystack, template budget and needle-set generators), with its needles drawn from ``spaces.TRAIN``
instead of ``spaces.EVAL``, written as a chat conversation that ends in the answer. A ``babi``
example is one of ``fathom run babi``'s samples, its story drawn from ``babi_draw.TRAIN_POOLS``
(training names, places and objects) instead of evaluation's; a ``state`` example's program acts
on ``state.TRAIN_LISTS`` (other list names, three-digit values) instead of ``EVAL_LISTS``.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fathom import registry
from fathom.errors import FathomError, SpecError
from fathom.prompts import chat_prompt
from fathom.prompts.haystack import load_corpus
from fathom.prompts.hygiene import haystack_check
from fathom.prompts.latent import LATENT_VERSION, items_in
from fathom.prompts.needle_sets import LATENT_KINDS, SPLIT_KINDS
from fathom.prompts.needles import NEEDLE_KINDS, needle_rng
from fathom.prompts.spaces import TRAIN
from fathom.prompts.tokenizers import Tokenizer, load_tokenizer
from fathom.records import Cell
from fathom.safe_files import replacing
from fathom.spec import MAX_PLANNED, RunSpec
from fathom.tasks import babi, state
from fathom.tasks.babi_draw import TASKS as BABI_TASKS
from fathom.tasks.babi_draw import TRAIN_POOLS
from fathom.tasks.base import Sample
from fathom.tasks.niah import NEEDLE_SETS_VERSION, NIAH_VERSION, NiahTask

# Bump when what an exported line holds, or how examples are drawn, changes.
EXPORT_VERSION = 1
EXPORTABLE = ("niah", babi.TASK, *(babi.cell_task(task) for task in BABI_TASKS), state.TASK)
# The needle kinds an export draws: all but sf, one published sentence that every evaluation asks.
EXPORT_KINDS = tuple(kind for kind in (*NEEDLE_KINDS, *SPLIT_KINDS, *LATENT_KINDS) if kind != "sf")


class ExportError(FathomError):
    """An export that cannot be written, or a file that is no export."""


@dataclass(frozen=True)
class Exported:
    """What an export wrote."""

    path: Path
    count: int
    cells: int  # the (corpus, length, depth) cells the examples were spread over


def check_request(spec: RunSpec, count: int) -> None:
    """Refuse, before any work, a task or needle kind that has no training part, or a count that
    is no count."""
    if spec.task not in EXPORTABLE:
        if spec.task in registry.TASK.names():
            raise SpecError(
                f"'{spec.task}' cannot be exported: export takes {', '.join(EXPORTABLE)} (the others draw "
                "their keys and words from whole vocabularies that evaluation uses, so no training part "
                "can be split off them without changing evaluation prompts)"
            )
        raise SpecError(f"unknown task '{spec.task}': export takes {', '.join(EXPORTABLE)}")
    if not 1 <= count <= MAX_PLANNED:
        raise SpecError(f"--count must lie in 1..{MAX_PLANNED:,}, not {count}")
    if spec.task != "niah":  # a story task: no needle kinds
        registry.check_spec(spec)
        return
    kind = spec.needle or "number"
    if kind == "sf":
        raise SpecError(
            "the sf needle is one fixed sentence, the same in every evaluation, so it cannot be exported "
            f"without leaking it: use one of {', '.join(EXPORT_KINDS)}"
        )
    if kind not in EXPORT_KINDS:
        raise SpecError(f"unknown needle kind '{kind}': export takes {', '.join(EXPORT_KINDS)}")
    registry.check_spec(spec)


def examples(spec: RunSpec, count: int, tokenizer: Tokenizer | None = None) -> Iterator[dict[str, Any]]:
    """``count`` examples of ``spec``'s prompts, spread evenly over its corpora, lengths and depths.

    The cells are taken in an order shuffled by the seed, round after round, so any prefix of the
    examples covers the grid as evenly as its size allows; each example is its own sample (its index),
    so no two draw the same needles. The same spec and count give the same lines."""
    check_request(spec, count)
    tokenizer = tokenizer or load_tokenizer(spec.tokenizer)
    if spec.task != "niah":
        yield from _stories(spec, count, tokenizer)
        return
    # The training space, its streams also told apart by kind and hardness: exports of one seed that
    # differ in those draw other keys and names, so concatenating them repeats none.
    kind = spec.needle or "number"
    stream = (*TRAIN.stream, kind, f"distractors={spec.distractors}", f"needles={spec.needles}")
    space = dataclasses.replace(TRAIN, stream=stream, withheld=_named_items(spec))
    task = NiahTask(spec, tokenizer, space)
    # The asked kind only: a low-overlap kind's literal twin would repeat its needles in other words.
    tasks = [name for name, variant in task.variants.items() if variant.needle_kind == task.needle_kind]
    cells = [(name, length, depth) for name in tasks for length in spec.lengths for depth in spec.depths]
    needle_rng(spec.seed, *TRAIN.stream, "export-order").shuffle(cells)
    for index in range(count):
        name, length, depth = cells[index % len(cells)]
        sample = task.prepare(Cell(name, length, depth, index))
        assert isinstance(sample, Sample)  # a niah cell that is no perplexity cell
        versions = {"niah": NIAH_VERSION, "needle_sets": NEEDLE_SETS_VERSION, "latent": LATENT_VERSION}
        yield _example(sample, task.template.name, task.variants[name].corpus.name, spec, tokenizer, versions)


def _stories(spec: RunSpec, count: int, tokenizer: Tokenizer) -> Iterator[dict[str, Any]]:
    """``count`` examples of a task of lines (babi, state): its cells (task, length), shuffled by the
    seed as niah's, round after round; each example its own sample, drawn from training's words."""
    task: babi.BabiTask | state.StateTask
    if spec.task == state.TASK:
        task, versions = (
            state.StateTask(spec, tokenizer, state.TRAIN_LISTS),
            {state.TASK: state.STATE_VERSION},
        )
    else:
        task, versions = babi.BabiTask(spec, tokenizer, TRAIN_POOLS), {babi.TASK: babi.BABI_VERSION}
    cells = [(cell.task, cell.length) for cell in task.cells()]  # one sample each: the spec's
    needle_rng(spec.seed, *TRAIN.stream, "export-order").shuffle(cells)
    for index in range(count):
        name, length = cells[index % len(cells)]
        sample = task.prepare(Cell(name, length, None, index))
        yield _example(sample, task.template.name, task.corpus.name, spec, tokenizer, versions)


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


def _example(
    sample: Sample, template: str, corpus: str, spec: RunSpec, tokenizer: Tokenizer, versions: dict[str, int]
) -> dict[str, Any]:
    chat = chat_prompt(tokenizer, sample.text, sample.prompt, sample.question)
    messages = [{"role": "system", "content": chat.system}] if chat.system else []
    messages += [
        {"role": "user", "content": chat.user},
        {"role": "assistant", "content": answer_sentence(chat.prefill, sample.answers)},
    ]
    cell = sample.cell
    placements = sample.needles.placements if sample.needles else ()
    meta = {
        "task": cell.task,
        "needle": sample.kind,
        "length": len(sample.prompt.ids),
        "depth": cell.depth,
        "needle_depths": [round(n.depth, 4) for n in sample.prompt.needles],
        "needle_roles": [p.role for p in placements],
        "answers": list(sample.answers),
        "corpus": corpus,
        "tokenizer": tokenizer.name,
        "template": template,
        "seed": spec.seed,
        "index": cell.sample,
        "split": TRAIN.split,
        "version": EXPORT_VERSION,
        "generators": versions,
    }
    return {"messages": messages, "meta": meta}


def answer_sentence(prefix: str, answers: tuple[str, ...]) -> str:
    """The assistant's turn: the answer prefix evaluation opens it with, then every reference."""
    joined = answers[0] if len(answers) == 1 else ", ".join(answers[:-1]) + " and " + answers[-1]
    return f"{prefix} {joined}." if prefix else f"{joined}."


def write_examples(spec: RunSpec, count: int, out: Path, force: bool = False) -> Exported:
    """Write the examples as JSONL to ``out``: whole or not at all (a temporary file, renamed at
    the end; ``fathom.safe_files.replacing``), and never over an existing file unless ``force``."""
    check_request(spec, count)
    if out.exists() and not force:
        raise ExportError(f"'{out}' exists: pass --force to replace it, or choose another --out")
    if out.is_dir():
        raise ExportError(f"'{out}' is a folder: --out names the JSONL file to write")
    if not out.parent.is_dir():
        raise ExportError(f"'{out.parent}' is no folder: create it, or choose another --out")
    with replacing(out) as stream:  # whole or not at all, and never through a link at ``out``
        for example in examples(spec, count):
            stream.write((json.dumps(example, ensure_ascii=False) + "\n").encode("utf-8"))
    if spec.task != "niah":  # a task of lines' cells: its stories' tasks, or its op counts, by the lengths
        kinds = {babi.TASK: len(BABI_TASKS), state.TASK: len(spec.ops or state.DEFAULT_OPS)}.get(spec.task, 1)
        return Exported(out, count, kinds * len(spec.lengths))
    corpora = len(spec.domains) or 1
    return Exported(out, count, corpora * len(spec.lengths) * len(spec.depths))
