"""What independent haystacks cost: the same NIAH sweep with every sample reading the corpus from its
start (``--haystack-offset start``) and with each sample's own offset (``random``).

Prints, for each: the share of prompt tokens that the previous prompt in fathom's order already holds
(what a prefix cache such as llama.cpp's can skip; computed from the prompts, no model needed), and,
with ``--model``, the measured wall time of the run on that backend (fresh run folders, controls
included, as ``fathom run`` does).

    python benchmarks/bench_offsets.py --model "llamacpp:smollm2?threads=2" --lengths 1k,2k,4k \\
        --depths 3 --samples 3
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from fathom.prompts.tokenizers import Tokenizer, load_tokenizer
from fathom.records import SampleRecord
from fathom.registry import create_backend, create_task
from fathom.run.runner import run
from fathom.run.store import RunFolder
from fathom.spec import RunSpec, parse_depths, parse_lengths
from fathom.tasks.base import Sample


def shared_prefix_share(spec: RunSpec, tokenizer: Tokenizer) -> dict[str, int | float]:
    """Of all prompt tokens in the run's order, those equal to the previous prompt's, position by
    position from the start (the prefix a cache of the last prompt serves)."""
    task = create_task(spec, tokenizer)
    previous = np.zeros(0, dtype=np.int32)
    total = shared = 0
    for cell in task.cells():
        sample = task.prepare(cell)
        if not isinstance(sample, Sample):
            continue
        ids = sample.prompt.ids
        n = min(len(ids), len(previous))
        differ = np.flatnonzero(ids[:n] != previous[:n])
        shared += int(differ[0]) if len(differ) else n
        total += len(ids)
        previous = ids
    return {"prompt_tokens": total, "shared_with_previous": shared, "share": round(shared / total, 4)}


def measure(spec: RunSpec, root: Path) -> dict[str, Any]:
    """One timed run in a fresh folder: its wall and model seconds, and (where the backend reports
    them) the prefill and decode seconds summed over its samples and controls."""
    with tempfile.TemporaryDirectory(dir=root) as folder:
        result = run(spec, Path(folder) / spec.haystack_offset, show_progress=False)
        records = [
            r for r in RunFolder(Path(folder) / spec.haystack_offset).latest() if isinstance(r, SampleRecord)
        ]
    return {
        "seconds": round(result.seconds, 1),
        "backend_seconds": round(result.backend_seconds, 1),
        "samples": result.written,
        "prefill_seconds": round(sum(r.prefill_s or 0.0 for r in records), 1),
        "decode_seconds": round(sum(r.decode_s or 0.0 for r in records), 1),
        "answer_characters": sum(len(r.output) for r in records),
    }


def timed(specs: dict[str, RunSpec], repeats: int, root: Path) -> dict[str, list[dict[str, Any]]]:
    """Each offset's run, ``repeats`` times, the two alternating (and the first of each pair
    alternating too), so both see the same load on a shared machine."""
    times: dict[str, list[dict[str, Any]]] = {offset: [] for offset in specs}
    for repeat in range(repeats):
        order = list(specs) if repeat % 2 == 0 else list(reversed(specs))
        for offset in order:
            times[offset].append(measure(specs[offset], root))
            print(offset, json.dumps(times[offset][-1]))
    return times


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default=None, help="a backend to time (e.g. llamacpp:smollm2?threads=2)")
    parser.add_argument("--tokenizer", default="cl100k_base", help="for the prefix share without a model")
    parser.add_argument("--lengths", default="1k,2k,4k")
    parser.add_argument("--depths", default="3")
    parser.add_argument("--samples", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=1, help="timed runs of each offset, alternating")
    parser.add_argument("--output", type=Path, default=Path(__file__).parent / "results" / "offsets.json")
    args = parser.parse_args()
    model = args.model or "sim:perfect"
    tokenizer = (
        load_tokenizer(args.tokenizer) if args.model is None else create_backend(model, "auto").tokenizer
    )
    base = RunSpec(
        "niah", model, "auto", parse_lengths(args.lengths), parse_depths(args.depths), args.samples
    )
    results: dict[str, Any] = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {"cpu": platform.processor() or platform.machine(), "python": platform.python_version()},
        "spec": base.to_json(),
    }
    specs = {offset: dataclasses.replace(base, haystack_offset=offset) for offset in ("start", "random")}
    for offset, spec in specs.items():
        results[offset] = {"prefix": shared_prefix_share(spec, tokenizer)}
        print(offset, json.dumps(results[offset]))
    if args.model is not None:
        with tempfile.TemporaryDirectory() as scratch:
            times = timed(specs, args.repeats, Path(scratch))
        for offset, runs in times.items():
            results[offset]["runs"] = runs
        # Each repeat's pair ran back to back, so its ratio is taken under one load.
        results["random_over_start"] = [
            round(r["seconds"] / s["seconds"], 2)
            for r, s in zip(times["random"], times["start"], strict=True)
        ]
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
