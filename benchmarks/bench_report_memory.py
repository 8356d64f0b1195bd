"""Peak memory of ``fathom report``, a resume's read and ``fathom index``, beside the size of samples.jsonl
(issue #30).

Run from the repository root, in fathom's virtualenv:

    python benchmarks/bench_report_memory.py --sizes 50M,200M,1G --folder /tmp/fathom-memory

For each shape and size a valid run folder is written (its manifest from a fixture, its spec widened to
take the records), then measured, each in a fresh process, by its peak resident memory (VmHWM of
/proc/self/status, the kernel's own high-water mark):

- ``report``: ``fathom report FOLDER`` (summary.json, the plots and report.html);
- ``resume``: the run folder opened as a resumed run's writer opens it (``RunFolder.start``, which
  reads samples.jsonl to move damage aside, then ``finished_ids``, what the runner keeps);
- ``index``: ``fathom index FOLDER --out FOLDER.duckdb`` into a new index (deleted after), with
  ``--measures index``;
- ``imports``: a process that imports what ``report`` imports and reads nothing, the floor under both.

The shapes:

- ``niah``: the records-v11 fixture's samples and controls (low-overlap needles, 1.3 KB a line) at
  new sample indices, as ``tests/test_streaming_readers.big_run`` writes them, but each sample's needle
  value (a character's name, in its answers, output, needle values and context) made its own, as a real
  run's are: a reader gets no string for free from an earlier line;
- ``perplexity``: documents of 128k tokens (a log-probability each, rounded to 5 places as the runner
  writes them: about 1.1 MB a line), the way a samples.jsonl reaches a gigabyte.

Figures are printed and written to benchmarks/results/report_memory.json with the machine and its
load; ``--python`` runs the measured processes with another interpreter or ``PYTHONPATH`` (an older
fathom: ``--pythonpath /tmp/old/src``), for a before-and-after on the same machine.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "fixtures" / "records-v11"
DOCUMENT_TOKENS = 128 * 1024
UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def size_of(text: str) -> int:
    """``50M`` -> 52,428,800 bytes."""
    text = text.strip().upper()
    return int(float(text[:-1]) * UNITS[text[-1]]) if text[-1] in UNITS else int(text)


def _manifest(folder: Path, lengths: list[int] | None = None) -> None:
    """The fixture's manifest, its spec taking any sample index (and ``lengths``): records without an
    identity predate it and count as the run's own, so the records written here are the run's."""
    manifest = json.loads((FIXTURE / "manifest.json").read_text())
    manifest["identity"]["spec"]["samples"] = 100_000  # the most a spec takes
    if lengths is not None:
        manifest["identity"]["spec"]["lengths"] = lengths
    folder.mkdir(parents=True)
    (folder / "manifest.json").write_text(json.dumps(manifest))


def _sample_id(task: str, length: int, depth: float | None, index: int, control: bool) -> str:
    from fathom.records import Cell

    return Cell(task, length, depth, index, control).id


def write_niah(folder: Path, size: int) -> int:
    """The fixture's samples and controls at new indices, each sample's needle value its own, until
    samples.jsonl holds ``size`` bytes; how many records."""
    _manifest(folder)
    cells = [json.loads(line) for line in (FIXTURE / "samples.jsonl").read_text().splitlines()]
    cells = [{k: v for k, v in c.items() if k != "run_identity"} for c in cells if "probe" not in c]
    written = count = index = 0
    with (folder / "samples.jsonl").open("w") as out:
        while written < size:
            for cell in cells:
                name = cell["answers"][0]
                text = json.dumps(cell).replace(name, f"{name} {index}")  # the sample's own character
                record = json.loads(text) | {"sample": index, "latency_s": random.random()}
                at = (record["task"], record["length"], record["depth"], index, record.get("control", False))
                record["sample_id"] = _sample_id(*at)
                record["prompt_sha256"] = hashlib.sha256(record["sample_id"].encode()).hexdigest()
                written += out.write(json.dumps(record, sort_keys=True) + "\n")
                count += 1
            index += 1
    return count


def write_perplexity(folder: Path, size: int) -> int:
    """Documents of DOCUMENT_TOKENS tokens until samples.jsonl holds ``size`` bytes; how many."""
    _manifest(folder, [DOCUMENT_TOKENS])
    rng = random.Random(0)
    written = count = 0
    with (folder / "samples.jsonl").open("w") as out:
        while written < size:
            # A model's log-probabilities: most tokens near certain, a long tail of surprises.
            logprobs = [round(-rng.expovariate(0.4), 5) for _ in range(DOCUMENT_TOKENS - 1)]
            record = {
                "sample_id": _sample_id("perplexity", DOCUMENT_TOKENS, None, count, False),
                "task": "perplexity", "length": DOCUMENT_TOKENS, "sample": count, "seed": 0,
                "corpus": "prose", "corpus_offset": count * DOCUMENT_TOKENS,
                "ids_sha256": hashlib.sha256(str(count).encode()).hexdigest(),
                "target_tokens": DOCUMENT_TOKENS, "actual_tokens": DOCUMENT_TOKENS, "first_position": 1,
                "logprobs": logprobs, "latency_s": rng.random() * 100, "beyond_window": False,
                "error": None, "run_identity": None, "record": "perplexity", "schema": 12,
            }  # fmt: skip
            written += out.write(json.dumps(record, sort_keys=True) + "\n")
            count += 1
    return count


SHAPES = {"niah": write_niah, "perplexity": write_perplexity}


def peak_rss() -> int:
    """This process's peak resident memory in bytes (VmHWM)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc/self/status: Linux only")


def measure(what: str, folder: Path) -> dict[str, Any]:
    """In this (fresh) process: ``what`` done on ``folder``, its peak memory and seconds."""
    import contextlib
    import io

    from fathom.cli import main
    from fathom.run.store import RunFolder

    started = time.perf_counter()
    if what == "report":
        with contextlib.redirect_stdout(io.StringIO()):
            code = main(["report", str(folder)])
        if code:
            raise RuntimeError(f"fathom report exited {code}")
    elif what == "resume":
        run = RunFolder(folder)
        run.start(run.read_manifest())
        run.finished_ids()
        run.close()
    elif what == "index":
        index = folder.with_suffix(".duckdb")
        index.unlink(missing_ok=True)
        with contextlib.redirect_stdout(io.StringIO()):
            code = main(["index", str(folder), "--out", str(index)])
        index.unlink()
        if code:
            raise RuntimeError(f"fathom index exited {code}")
    elif what != "imports":
        raise ValueError(what)
    return {"peak_rss": peak_rss(), "seconds": time.perf_counter() - started}


def in_fresh_process(what: str, folder: Path, python: str, pythonpath: str | None) -> dict[str, Any]:
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    command = [python, __file__, "--measure", what, str(folder)]
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    if done.returncode:
        raise RuntimeError(f"{what} on {folder} failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return result


def machine() -> dict[str, Any]:
    cpu = next(
        (line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
         if line.startswith("model name")),
        platform.processor(),
    )  # fmt: skip
    memory = next(
        line.split()[1]
        for line in Path("/proc/meminfo").read_text().splitlines()
        if line.startswith("MemTotal")
    )
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory_gb": round(int(memory) / 2**20, 1),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }


def measure_folder(shape: str, size: int, args: argparse.Namespace) -> dict[str, Any]:
    """A run folder of ``shape`` whose samples.jsonl holds ``size`` bytes, written (or kept, with
    --keep), then measured: each of ``args.measures`` (report, resume, index) in a fresh process."""
    folder = args.folder / f"{shape}-{size >> 20}M"
    if not (args.keep and folder.exists()):
        shutil.rmtree(folder, ignore_errors=True)
        SHAPES[shape](folder, size)
    samples = folder / "samples.jsonl"
    with samples.open("rb") as lines:
        records = sum(1 for _ in lines)
    load = os.getloadavg()[0]
    measured = {what: in_fresh_process(what, folder, args.python, args.pythonpath) for what in args.measures}
    row = {"shape": shape, "file_bytes": samples.stat().st_size, "records": records, "load_average": load}
    print(
        f"{shape:<11}{row['file_bytes'] / 2**20:>9.0f}{records:>10}"
        + "".join(f"{m['peak_rss'] / 2**20:>11.0f}" for m in measured.values())
        + f"{sum(m['seconds'] for m in measured.values()):>9.0f}",
        flush=True,
    )
    if not args.keep:
        shutil.rmtree(folder)
    return row | measured


def per_record(small: dict[str, Any], large: dict[str, Any]) -> dict[str, Any]:
    """What each record more costs, from ``small`` to ``large`` (of one shape): the constant under the
    memory, the imports and plots apart; beside the file's bytes per record."""
    records = large["records"] - small["records"]
    measured = [what for what in ("report", "resume", "index") if what in large]
    return {
        "shape": large["shape"],
        **{what: (large[what]["peak_rss"] - small[what]["peak_rss"]) / records for what in measured},
        "file": (large["file_bytes"] - small["file_bytes"]) / records,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="50M,200M,1G", help="samples.jsonl sizes (K, M, G)")
    parser.add_argument("--shapes", default="niah,perplexity", help=f"of {', '.join(SHAPES)}")
    parser.add_argument("--folder", type=Path, default=Path("/tmp/fathom-report-memory"))
    parser.add_argument("--measures", default="report,resume", help="of report, resume, index")
    parser.add_argument("--keep", action="store_true", help="keep the run folders (reused if present)")
    parser.add_argument("--python", default=sys.executable, help="the interpreter measured")
    parser.add_argument("--pythonpath", help="PYTHONPATH of the measured processes (an older fathom's src)")
    parser.add_argument("--output", type=Path, default=ROOT / "benchmarks" / "results" / "report_memory.json")
    parser.add_argument("--measure", nargs=2, metavar=("WHAT", "FOLDER"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(args.measure[0], Path(args.measure[1]))))
        return
    floor = in_fresh_process("imports", args.folder, args.python, args.pythonpath)["peak_rss"]
    print(f"imports alone: {floor / 2**20:.0f} MB peak; load average {os.getloadavg()[0]:.1f}")
    args.measures = args.measures.split(",")
    columns = "".join(f"{what + ' MB':>11}" for what in args.measures)
    print(f"{'shape':<11}{'file MB':>9}{'records':>10}{columns}{'seconds':>9}")
    rows, growth = [], []
    for shape in args.shapes.split(","):
        measured = [measure_folder(shape, size, args) for size in map(size_of, args.sizes.split(","))]
        rows += measured
        if len(measured) > 1:
            growth.append(per_record(measured[0], measured[-1]))
            print(
                f"  {shape}, from the smallest to the largest: "
                + ", ".join(f"{k} {v:.0f}" for k, v in growth[-1].items() if k != "shape")
                + " bytes per record"
            )
    args.output.parent.mkdir(parents=True, exist_ok=True)
    results = {"machine": machine(), "imports_peak_rss": floor, "rows": rows, "growth": growth}
    args.output.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
