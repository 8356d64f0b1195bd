"""Golden samples: a fixed seed builds byte-identical prompts from release to release.

A change here means every earlier run's prompts changed: bump NIAH_VERSION, then regenerate with
FATHOM_UPDATE_GOLDEN=1 pytest tests/test_golden.py and say why in the commit.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from fathom.records import Cell
from fathom.spec import RunSpec
from fathom.tasks.niah import NIAH_VERSION, NiahTask
from fathom.tokenizers import load_tokenizer

GOLDEN = Path(__file__).parent / "golden" / "niah.json"
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


def test_prompts_match_the_golden_samples() -> None:
    now = current()
    if os.environ.get("FATHOM_UPDATE_GOLDEN"):
        GOLDEN.write_text(json.dumps(now, indent=1) + "\n")
    golden = json.loads(GOLDEN.read_text())
    assert now["niah_version"] == golden["niah_version"]
    for got, want in zip(now["samples"], golden["samples"], strict=True):
        assert got == want
