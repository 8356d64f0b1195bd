"""``fathom plan``: what a sweep costs before it runs, from the model's architecture and a GPU's
datasheet, with no model loaded: prompt tokens, prefill FLOPs, KV cache, memory, the
tensor-parallel degree that holds the longest prompt, prefill and decode time, GPU-hours and cost,
for every cell and in total (docs/plan.md derives the formulas and states the assumptions).

``arch.py`` (the shape and its arithmetic), ``presets.py`` and ``readers.py`` (where a shape comes
from), ``gpus.py`` (the datasheets), ``costs.py`` (memory and time on a GPU), ``activations.py`` (a
prefill's peak activations over the backend's chunk), ``prompts.py`` (the
sweep's prompts, built or estimated), ``sweep.py`` (the plan), ``text.py`` (terminal and JSON),
``check.py`` (the check ``fathom run`` makes of a real backend), ``arguments.py`` (the options).
"""

from __future__ import annotations

import json
from pathlib import Path

from fathom.errors import SpecError
from fathom.plan.arch import Architecture
from fathom.plan.costs import Setup
from fathom.plan.prompts import sweep_prompts
from fathom.plan.sweep import Plan, plan_prompts
from fathom.plan.text import plan_json
from fathom.prompts.tokenizers import load_tokenizer
from fathom.registry import check_spec, create_task
from fathom.safe_files import write_file
from fathom.spec import RunSpec

__all__ = ["Architecture", "Plan", "Setup", "plan_sweep", "write_plan"]

# fathom.run.runner.ORDERS, which the plan (below the run) cannot import.
ORDERS = ("prefix", "shuffled")
# Prompts are built to their exact target lengths whatever the tokenizer; it decides only the
# short parts around the context (and so the controls' lengths). Without one named, this one.
DEFAULT_TOKENIZER = "cl100k_base"


def plan_sweep(spec: RunSpec, arch: Architecture, setup: Setup, order: str = "prefix") -> Plan:
    if order not in ORDERS:
        raise SpecError(f"unknown order '{order}': use one of {', '.join(ORDERS)}")
    check_spec(spec)
    tokenizer = load_tokenizer(DEFAULT_TOKENIZER if spec.tokenizer == "auto" else spec.tokenizer)
    task = create_task(spec, tokenizer)
    return plan_prompts(spec, sweep_prompts(spec, task, order), arch, setup, order)


def write_plan(plan: Plan, path: Path) -> None:
    write_file(path, json.dumps(plan_json(plan), indent=1) + "\n")
