"""Training examples from evaluation's own generators, drawn from the training space.

An example is one sample as ``fathom run`` would build it (the same task, prompt words, haystack,
template budget and generators), its keys, values, names, words and items drawn from training's
part instead of evaluation's (``families.py`` says where each family's come from), written as a
chat conversation that ends in the answer.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fathom import registry
from fathom.errors import FathomError, SpecError
from fathom.export.families import EXPORTABLE, Made, family_of
from fathom.prompts import chat_prompt
from fathom.prompts.needles import needle_rng
from fathom.prompts.spaces import TRAIN
from fathom.prompts.tokenizers import Tokenizer, load_tokenizer
from fathom.records import Cell
from fathom.safe_files import replacing
from fathom.spec import MAX_PLANNED, RunSpec
from fathom.tasks.base import Sample

# Bump when what an exported line holds, or how examples are drawn, changes.
EXPORT_VERSION = 1


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
    family = family_of(spec.task)
    if family is None:
        if spec.task in registry.TASK.names():
            raise SpecError(
                f"'{spec.task}' cannot be exported: export takes {', '.join(EXPORTABLE)} (the others draw "
                "their keys and words from whole vocabularies that evaluation uses, so no training part "
                "can be split off them without changing evaluation prompts)"
            )
        raise SpecError(f"unknown task '{spec.task}': export takes {', '.join(EXPORTABLE)}")
    if not 1 <= count <= MAX_PLANNED:
        raise SpecError(f"--count must lie in 1..{MAX_PLANNED:,}, not {count}")
    family.check(spec)
    registry.check_spec(spec)


def made(spec: RunSpec, tokenizer: Tokenizer) -> Made:
    """``spec``'s task on the training space (a task export takes: ``check_request`` said so)."""
    family = family_of(spec.task)
    assert family is not None
    return family.make(spec, tokenizer)


def examples(spec: RunSpec, count: int, tokenizer: Tokenizer | None = None) -> Iterator[dict[str, Any]]:
    """``count`` examples of ``spec``'s prompts, spread evenly over its cells (corpora, lengths and
    depths; tasks and counts).

    The cells are taken in an order shuffled by the seed, round after round, so any prefix of the
    examples covers the grid as evenly as its size allows; each example is its own sample (its index),
    so no two draw the same needles. The same spec and count give the same lines."""
    check_request(spec, count)
    tokenizer = tokenizer or load_tokenizer(spec.tokenizer)
    yield from _drawn(made(spec, tokenizer), spec, count, tokenizer)


def _drawn(task: Made, spec: RunSpec, count: int, tokenizer: Tokenizer) -> Iterator[dict[str, Any]]:
    cells = list(task.cells)
    needle_rng(spec.seed, *TRAIN.stream, "export-order").shuffle(cells)
    for index in range(count):
        name, length, depth = cells[index % len(cells)]
        sample = task.prepare(Cell(name, length, depth, index))
        yield _example(sample, task, spec, tokenizer)


def _example(sample: Sample, task: Made, spec: RunSpec, tokenizer: Tokenizer) -> dict[str, Any]:
    chat = (
        sample.chat() if sample.chat else chat_prompt(tokenizer, sample.text, sample.prompt, sample.question)
    )
    messages = [{"role": "system", "content": chat.system}] if chat.system else []
    messages += [{"role": role, "content": content} for role, content in chat.turns]  # mrcr's rounds
    messages += [
        {"role": "user", "content": chat.user},
        {"role": "assistant", "content": task.answer(chat.prefill, sample)},
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
        "corpus": task.corpus(cell.task),
        "tokenizer": tokenizer.name,
        "template": task.template.name,
        "seed": spec.seed,
        "index": cell.sample,
        "split": TRAIN.split,
        "version": EXPORT_VERSION,
        "generators": task.versions,
    }
    return {"messages": messages, "meta": meta}


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
    tokenizer = load_tokenizer(spec.tokenizer)
    task = made(spec, tokenizer)
    with replacing(out) as stream:  # whole or not at all, and never through a link at ``out``
        for example in _drawn(task, spec, count, tokenizer):
            stream.write((json.dumps(example, ensure_ascii=False) + "\n").encode("utf-8"))
    return Exported(out, count, len(task.cells))
