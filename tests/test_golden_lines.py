"""Golden prompts of the families that place a stream of lines (``prompts/line_stream.py``): state
tracking, the bAbI-style stories and long outputs; and multi-round co-reference's conversations. A
fixed seed builds byte-identical prompts, their placements and (for long outputs and mrcr) their
output budgets from release to release; the digests were taken before the builder and the log
records' formatting were made faster (issue #34), and held after; mrcr's before the corpus window and
its rounds' bounds were (the 1M conversation's window wraps around the corpus), and held after.

A change here means every earlier run's prompts changed: bump the family's version and say why."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from fathom.prompts.tokenizers import load_tokenizer
from fathom.registry import create_task
from fathom.spec import RunSpec
from fathom.tasks.base import Sample

# (task, tokenizer, lengths, options) -> sha256 of every cell's prompt ids, placements and budget.
GOLDEN = [
    ("listing", "cl100k_base", (8192, 32768), {"items": (8, 32, 128)},
     "db518c2a6bcf79df2340c5d67eec31337c9d6b94325cdce8b1fa63bd1333507c"),
    ("listing", "cl100k_base", (131072,), {"items": (128,)},  # the benchmark's prompts
     "d47d75ab11cf6d03ab96c64d47aee32d41b947f0dea8fc4a2afe04a4dd100f38"),
    ("listing", "char", (16384,), {"items": (8, 32)},
     "26ca8ba49b1eeba0c130c9adfb97c6f2de8c53c8b94c6c8f6182669002fadc4f"),
    ("state", "cl100k_base", (32768,), {},
     "1d7ffe04f6d2a5fb218ae9775651edf92ae9144a488923760a822c126f58d063"),
    ("babi", "cl100k_base", (16384,), {},
     "0c98446dda274b212100f7d6673516cf4b10a13f618f8cb638373d07a7c1eb86"),
    ("mrcr", "cl100k_base", (131072,), {"repeats": (8,), "template": "chatml"},  # the benchmark's
     "5441a575d1a4fb5b23867ae6651f958a48a99aeecec8509695430874bcbd262a"),
    ("mrcr", "cl100k_base", (8192, 32768), {"repeats": (2, 4), "template": "plain"},
     "30e510c84877640d75baf328c058753a97e46d099bfeb50b5e66474a06e8e9ee"),
    ("mrcr", "cl100k_base", (1048576,), {"repeats": (2,), "template": "chatml"},
     "2ad06a041e41f2192468656dacd10e782c0be23df2f6ebc0612d1a676b3dd314"),
    ("mrcr", "char", (16384,), {"repeats": (2,), "template": "chatml"},
     "6772071c0dabf343e499c6d7d2a77cff2d5fed2e4e378fa48245958d72273c40"),
]  # fmt: skip


def digest(task: str, tokenizer: str, lengths: tuple[int, ...], options: dict[str, Any]) -> str:
    spec = RunSpec(task, "sim:perfect", tokenizer, lengths, (), 2, seed=0, **options)
    built = create_task(spec, load_tokenizer(tokenizer))
    hashed = hashlib.sha256()
    for cell in built.cells():
        sample = built.prepare(cell)
        assert isinstance(sample, Sample)
        hashed.update(sample.prompt.ids.tobytes())
        hashed.update(repr((cell.id, sample.prompt.needles, sample.max_new_tokens)).encode())
    return hashed.hexdigest()


@pytest.mark.parametrize(("task", "tokenizer", "lengths", "options", "expected"), GOLDEN)
def test_a_fixed_seed_builds_the_same_prompts(
    task: str, tokenizer: str, lengths: tuple[int, ...], options: dict[str, Any], expected: str
) -> None:
    assert digest(task, tokenizer, lengths, options) == expected
