"""Golden samples: a fixed seed builds byte-identical prompts from release to release.

A change here means every earlier run's prompts changed: bump NIAH_VERSION (or RULER_VERSION; or,
where one family's draws changed, that family's identity, as qa's ``split``), then regenerate with
FATHOM_UPDATE_GOLDEN=1 pytest tests/test_golden.py and say why in the commit.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from fathom.prompts.tokenizers import load_tokenizer
from fathom.records import Cell
from fathom.spec import RunSpec
from fathom.tasks.niah import NIAH_VERSION, NiahTask
from fathom.tasks.ruler.catalogue import ALL_VARIANTS, RULER_VERSION
from fathom.tasks.ruler.suite import RulerTask

GOLDEN = Path(__file__).parent / "golden" / "niah.json"
RULER_GOLDEN = Path(__file__).parent / "golden" / "ruler.json"
CASES = [
    ("char", "noise", "number", "none"),
    ("cl100k_base", "prose", "words", "chatml"),
    ("o200k_base", "prose", "uuid", "plain"),
    ("cl100k_base", "noise", "fact", "llama3"),
]
CELLS = [(1024, 0.0, 0), (2048, 0.5, 1), (4096, 1.0, 2), (10000, 0.3, 0)]


def current() -> dict[str, Any]:
    samples = []
    for tokenizer_name, corpus, needle, template in CASES:
        tokenizer = load_tokenizer(tokenizer_name)
        spec = RunSpec("niah", "sim:perfect", tokenizer_name, (1024,), (0.0,), 3, seed=0, corpus=corpus,
                       needle=needle, template=template)  # fmt: skip
        task = NiahTask(spec, tokenizer)
        for length, depth, index in CELLS:
            sample = task.prepare(Cell("niah", length, depth, index))
            (placed,) = sample.prompt.needles
            needle_ids = sample.prompt.ids[placed.token_offset : placed.token_offset + placed.tokens]
            samples.append({
                "case": [tokenizer_name, corpus, needle, template], "cell": sample.cell.id,
                "needle": tokenizer.decode(needle_ids.tolist()), "answers": list(sample.answers),
                "prompt_sha256": sample.prompt.sha256, "tokens": len(sample.prompt.ids),
                "needle_token_offset": placed.token_offset,
                "needle_depth": round(placed.depth, 6),
            })  # fmt: skip
    return {"niah_version": NIAH_VERSION, "samples": samples}


# Every RULER task, with a tokenizer whose ids are characters and a real one under a chat template.
RULER_CASES = [
    ("char", "none", 8192, 0),
    ("cl100k_base", "chatml", 4096, 1),
    ("o200k_base", "plain", 16384, 2),
]


def current_ruler() -> dict[str, Any]:
    samples = []
    for tokenizer_name, template, length, index in RULER_CASES:
        tokenizer = load_tokenizer(tokenizer_name)
        for name in ALL_VARIANTS:
            spec = RunSpec(name, "sim:perfect", tokenizer_name, (length,), (), 3, seed=0, template=template)
            sample = RulerTask(spec, tokenizer).prepare(Cell(name, length, None, index))
            samples.append({
                "case": [tokenizer_name, template], "cell": sample.cell.id, "question": sample.question,
                "answers": list(sample.answers), "prompt_sha256": sample.prompt.sha256,
                "tokens": len(sample.prompt.ids), "max_new_tokens": sample.max_new_tokens,
                "needle_token_offsets": [n.token_offset for n in sample.prompt.needles],
                "needle_depths": [round(n.depth, 6) for n in sample.prompt.needles],
            })  # fmt: skip
    return {"ruler_version": RULER_VERSION, "samples": samples}


# RULER's layouts (issue #21) under RULER's own `base` template at its first two lengths: each sample
# keeps, beside its hash, the text where the layout shows (how the context opens, and the seam
# between its end and the question), so a change reads in the golden file's diff.
LAYOUT_GOLDEN = Path(__file__).parent / "golden" / "ruler_layout.json"
LAYOUT_TASKS = ("niah_single_1", "niah_single_2", "niah_multikey_2", "niah_multikey_3", "vt")


def current_layout() -> dict[str, Any]:
    tokenizer = load_tokenizer("cl100k_base")
    samples = []
    for name in LAYOUT_TASKS:
        for length in (4096, 8192):
            spec = RunSpec(name, "sim:perfect", "cl100k_base", (length,), (), 1, seed=0, template="base")
            sample = RulerTask(spec, tokenizer).prepare(Cell(name, length, None, 0))
            prompt = sample.prompt
            end = prompt.head_tokens + prompt.context_tokens
            context = tokenizer.decode(prompt.ids[prompt.head_tokens : end].tolist())
            tail = tokenizer.decode(prompt.ids[end:].tolist())
            samples.append({
                "cell": sample.cell.id, "prompt_sha256": prompt.sha256, "tokens": len(prompt.ids),
                "target": prompt.target_tokens, "context_lines": context.count("\n"),
                "opens": context[:120], "seam": context[-120:] + tail[:40],
                "needle_token_offsets": [n.token_offset for n in prompt.needles],
            })  # fmt: skip
    return {"ruler_version": RULER_VERSION, "samples": samples}


def check(now: dict[str, Any], path: Path, version: str) -> None:
    if os.environ.get("FATHOM_UPDATE_GOLDEN"):
        path.write_text(json.dumps(now, indent=1) + "\n")
    golden = json.loads(path.read_text())
    assert now[version] == golden[version]
    for got, want in zip(now["samples"], golden["samples"], strict=True):
        assert got == want


def test_prompts_match_the_golden_samples() -> None:
    check(current(), GOLDEN, "niah_version")


@pytest.mark.essays
@pytest.mark.ruler_data
def test_ruler_prompts_match_the_golden_samples() -> None:
    check(current_ruler(), RULER_GOLDEN, "ruler_version")


@pytest.mark.essays
def test_ruler_layouts_match_the_golden_samples() -> None:
    check(current_layout(), LAYOUT_GOLDEN, "ruler_version")
