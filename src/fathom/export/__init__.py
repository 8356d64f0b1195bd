"""Training data that teaches the eval without leaking it: ``fathom export`` and its check.

``fathom export`` writes long-context training examples (chat-format JSONL) from the same generators
that build evaluation prompts: NIAH's needle kinds, distractors, several needles, split and chained
needles and low-overlap needles, in the same prompt words, haystacks and lengths. Their keys, values,
made-up names and low-overlap items come from a training space (``fathom.prompts.spaces.TRAIN``) that
evaluation never draws from: disjoint word lists, 8-digit numbers where evaluation draws 7, names
that begin with letters no evaluation name begins with, the training part of the low-overlap items,
and UUIDs from random streams of their own. So no exported example shares a needle, key, value, name
or item with any evaluation run, and evaluation's prompts are what they always were. The other
families (babi, state, RULER's vt, cwe, fwe, qa_1 and qa_2, listing) draw from training parts of
their own (``families.py`` names each); of them, only qa_1 and qa_2's evaluation draws changed, for
the samples that drew an item now training's (``tasks/ruler/splits.py``).

``fathom export-check`` verifies that for a given export and run folders, by reading both.
"""

from fathom.export.check import CheckResult, Overlap, check_export, check_text
from fathom.export.examples import (
    EXPORT_VERSION,
    Exported,
    ExportError,
    examples,
    write_examples,
)
from fathom.export.families import EXPORT_KINDS, EXPORTABLE

__all__ = [
    "EXPORTABLE",
    "EXPORT_KINDS",
    "EXPORT_VERSION",
    "CheckResult",
    "ExportError",
    "Exported",
    "Overlap",
    "check_export",
    "check_text",
    "examples",
    "write_examples",
]
