"""``fathom index`` at the scale of a long training run: 1,000 run folders of 500 records each.

Run from the repository root, in fathom's virtualenv (with the index extra):

    python benchmarks/bench_index.py --runs 1000 --folder /tmp/fathom-index-bench

A few simulated checkpoints are run for real (``sim:cliff`` at several windows: niah, 5 lengths from
1k to 16k x 10 depths x 10 samples = 500 records, char tokenizer, no controls), then copied into
``--runs`` run folders, each with an identity of its own (its records stamped with it), labels
``step`` and a creation time: real run folders, which ``RunFolder`` and ``fathom runs`` read, whose
lines differ from every other folder's (as checkpoints' do, which differ in more). Then timed:

- the first index of all of them, into a new file;
- the same again, with nothing changed (every folder skipped);
- again after 10 folders each gained one record (a resumed sample's newer one);
- a series-like query: every run's mean score by length, in SQL, from a fresh connection;
- ``read_runs`` of 20 runs, back as fathom's objects (what ``fathom series --index`` loads);
- the Parquet export of the tables.

Timings are printed and written to benchmarks/results/index.json, not asserted.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from fathom.index import index_runs, read_runs, write_parquet
from fathom.index.database import duckdb
from fathom.manifest import Manifest
from fathom.records import SampleRecord
from fathom.report.runs import list_runs
from fathom.run.runner import run
from fathom.run.store import MANIFEST, SAMPLES, RunFolder
from fathom.spec import RunSpec

T = TypeVar("T")
SERIES = """
    SELECT r.labels['step']::INTEGER AS step, s.length, avg(s.score) AS score, count(*) AS n
    FROM latest_samples s JOIN runs r USING (run_id)
    WHERE NOT s.control GROUP BY ALL ORDER BY step, s.length
"""


def make_sources(folder: Path, count: int) -> list[Path]:
    """``count`` simulated checkpoints, run for real: 500 records each."""
    sources = []
    for i in range(count):
        window = 1024 * 2 ** (i % 5)  # 1k .. 16k: later checkpoints reach further
        spec = RunSpec(
            task="niah",
            model=f"sim:cliff?window={window}&seed={i}",
            tokenizer="char",
            lengths=(1024, 2048, 4096, 8192, 16384),
            depths=tuple(d / 9 for d in range(10)),
            samples=10,
            control=False,
        )
        path = folder / f"source-{i}"
        if not (path / SAMPLES).exists():
            run(spec, path, show_progress=False)
        sources.append(path)
    return sources


def copy_runs(sources: list[Path], folder: Path, count: int) -> None:
    """``count`` run folders, each a source's records under an identity of its own: a checkpoint
    number in the backend's settings gives it another fingerprint, which its records then carry."""
    manifests = [RunFolder(source).read_manifest().to_json() for source in sources]
    samples = [(source / SAMPLES).read_bytes() for source in sources]
    for i in range(count):
        which = i % len(sources)
        data = json.loads(json.dumps(manifests[which]))
        data["identity"]["backend"]["settings"]["checkpoint"] = i + 1
        data["environment"]["created"] = (
            f"2026-11-{1 + i // 100:02d}T{(i // 4) % 24:02d}:{i % 60:02d}:00+00:00"
        )
        data["labels"] = {"step": str(100 * (i + 1))}
        own = Manifest.from_json(data)
        old = RunFolder(sources[which]).identity()
        stamp = f'"run_identity": "{own.identity.fingerprint}"'.encode()
        target = folder / f"ckpt-{i + 1:04d}"
        target.mkdir(parents=True)
        (target / MANIFEST).write_text(json.dumps(own.to_json(), indent=2, sort_keys=True) + "\n")
        (target / SAMPLES).write_bytes(samples[which].replace(f'"run_identity": "{old}"'.encode(), stamp))


def resume(folder: Path) -> None:
    """One newer record of the folder's first sample, appended as a resumed run appends it."""
    first = RunFolder(folder).records()[0]
    assert isinstance(first, SampleRecord)
    newer = dataclasses.replace(first, score=0.0, output="a newer answer")
    with (folder / SAMPLES).open("a") as handle:
        handle.write(json.dumps(newer.to_json(), sort_keys=True) + "\n")


def timed(label: str, results: dict[str, float], action: Callable[[], T]) -> T:
    started = time.perf_counter()
    value = action()
    results[label] = round(time.perf_counter() - started, 3)
    print(f"{label}: {results[label]:.2f} s")
    return value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--sources", type=int, default=10, help="checkpoints run for real, then copied")
    parser.add_argument("--folder", type=Path, default=Path("/tmp/fathom-index-bench"))
    parser.add_argument("--output", type=Path, default=Path("benchmarks/results/index.json"))
    args = parser.parse_args()

    runs, index, parquet = args.folder / "runs", args.folder / "results.duckdb", args.folder / "parquet"
    for path in (runs, parquet):
        shutil.rmtree(path, ignore_errors=True)
    index.unlink(missing_ok=True)
    load_before = os.getloadavg()  # the machine may be shared: its load says how much
    started = time.perf_counter()
    sources = make_sources(args.folder / "sources", args.sources)
    copy_runs(sources, runs, args.runs)
    print(f"made {args.runs} run folders in {time.perf_counter() - started:.1f} s")
    assert len(RunFolder(runs / "ckpt-0001").records()) == 500

    seconds: dict[str, float] = {}
    outcomes = timed("index, first", seconds, lambda: index_runs([runs], index))
    assert all(o.state == "indexed" for o in outcomes)
    outcomes = timed("index, nothing changed", seconds, lambda: index_runs([runs], index))
    assert all(o.state == "unchanged" for o in outcomes)
    for i in range(1, args.runs + 1, args.runs // 10):
        resume(runs / f"ckpt-{i:04d}")
    outcomes = timed("index, 10 changed", seconds, lambda: index_runs([runs], index))
    assert sum(o.state == "indexed" for o in outcomes) == 10

    def series() -> list[tuple[object, ...]]:
        with duckdb().connect(str(index), read_only=True) as connection:
            rows: list[tuple[object, ...]] = connection.execute(SERIES).fetchall()
        return rows

    rows = timed("series query (every run's score by length)", seconds, series)
    assert len(rows) == 5 * args.runs
    twenty = [runs / f"ckpt-{i:04d}" for i in range(1, 21)]
    loaded = timed("read_runs, 20 runs", seconds, lambda: read_runs(index, twenty))
    assert [r.records for r in loaded] == [RunFolder(path).records() for path in twenty]
    timed("list_runs from the folders, 20 runs", seconds, lambda: [list_runs(path) for path in twenty])
    timed("parquet export", seconds, lambda: write_parquet(index, parquet))

    with duckdb().connect(str(index), read_only=True) as connection:
        records = connection.execute("SELECT count(*) FROM samples").fetchone()
    sizes = {
        "run folders (manifest.json + samples.jsonl)": sum(p.stat().st_size for p in runs.rglob("*.json*")),
        "index": index.stat().st_size,
        "parquet": sum(p.stat().st_size for p in parquet.iterdir()),
    }
    result = {
        "runs": args.runs,
        "records": records[0] if records else None,
        "seconds": seconds,
        "bytes": sizes,
        "machine": {
            "platform": platform.platform(),
            "python": platform.python_version(),
            "cores": os.cpu_count(),
            "load_average": {"before": load_before, "after": os.getloadavg()},
            "duckdb": duckdb().__version__,
            "date": time.strftime("%Y-%m-%d"),
        },
    }
    print(json.dumps(result["bytes"]))
    args.output.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
