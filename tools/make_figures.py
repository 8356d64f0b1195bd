#!/usr/bin/env python3
"""Re-make every figure committed under docs/, from the commands the docs show.

    python tools/make_figures.py [--only NAME] [--check]

Simulated figures: each runs the very command the docs show above it, in a scratch folder, and
copies the figure its run folder holds; beside it goes a JSON of the numbers the figure plots (each
cell's accuracy, k and 95% interval, from the run's summary.json). A simulated run is the same bit
for bit on every machine, so these numbers are too, and ``tests/test_figures.py`` checks them:

- heatmap-sim-cliff  docs/heatmap-sim-cliff.png (+ .json): the NIAH heatmap of the README's simulated sweep
                     ``fathom run niah --model sim:cliff ... --run-dir runs/cliff``
- ruler-sim-cliff    docs/ruler-sim-cliff.png (+ .json): RULER's task grid of docs/ruler.md's
                     ``fathom run ruler --model sim:cliff ...`` (needs the ``ruler`` extra's data)
- gallery            docs/gallery/: ``fathom gallery`` (every simulated archetype, and the runs that
                     expose the readers plain needles cannot tell apart), its gallery.html and each
                     run's report.html; gallery.json holds every run's cells

Real-model figures: the runs themselves are not re-made here (they took hours of llama.cpp on the
2-core development machine); each figure is re-drawn, with today's plotting code, from the numbers
committed beside it, which ``fathom trap`` drew it from:

- trap-smollm2       docs/trap-smollm2.png from docs/trap-smollm2.json: SmolLM2-135M-Instruct, made on
                     the 2-core AMD EPYC development machine by ``fathom run niah --model
                     'llamacpp:smollm2?n_ctx=16k&threads=2' --lengths 1k,2k,4k,8k,16k --depths 0.5,1
                     --samples 3 --perplexity --answer-logprob``, its 16k retrieval again with
                     ``n_ctx=17k``, then ``fathom trap RUN RUN_16K``
- trap-gemma3        docs/trap-gemma3.png from docs/trap-gemma3.json: Gemma 3 270M, made on the same
                     machine by the two ``fathom run niah --model 'llamacpp:gemma3-270m?...'`` commands
                     docs/perplexity.md shows (1k-30k, then 40k), then ``fathom trap RUN RUN_40K``
- families-smollm2   docs/families-smollm2.png from docs/families-real.json: SmolLM2's score per task
                     family and length, beside plain NIAH, from the runs docs/families.md lists
                     (``python tools/family_evidence.py collect`` read their summaries)
- families-gemma3    docs/families-gemma3.png, the same for Gemma 3 270M base

``--check`` makes everything into a scratch folder instead and compares numbers, not pixels: each
simulated figure's JSON against the committed one (exit status 1 where any differs). The
real-model figures are only drawn (their numbers are the committed JSON). The simulated runs go in
parallel, one per core; on the 2-core machine the gallery's seventeen runs take most of the time.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fathom.analysis.ruler import TaskCell
from fathom.backends.sim import ARCHETYPES
from fathom.report.gallery import EXPOSURES, GALLERY
from fathom.report.plots import plot_task_grid
from fathom.report.trap_plot import plot_trap

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
SIMULATED = "any: a simulated run is the same bit for bit on every machine"
# What a figure's cells are drawn from: which cell, its score, k and 95% interval. Other fields a
# summary's rows hold (and the schema adds over time) are not drawn, so they stay out of the sidecar.
PLOTTED = ("task", "length", "depth", "mean", "n", "ci_low", "ci_high", "errors", "beyond_window")


@dataclass(frozen=True)
class Made:
    """What making one figure wrote under the output folder: its files, and the JSON of numbers a
    check compares (None for a figure drawn from committed numbers)."""

    files: tuple[str, ...]
    numbers: str | None


@dataclass(frozen=True)
class RunFigure:
    """A simulated run's figure: ``command`` as the docs show it, run in a scratch folder; ``png``, the
    figure in its run folder, copied to ``<name>.png``; ``rows``, the summary.json lists it plots,
    written to ``<name>.json``."""

    name: str
    command: str
    png: str
    rows: tuple[str, ...]

    def outputs(self) -> tuple[str, ...]:
        return f"{self.name}.png", f"{self.name}.json"

    def make(self, scratch: Path, out: Path) -> Made:
        run_fathom(self.command, scratch)
        folder = run_folder(scratch)
        summary = json.loads((folder / "summary.json").read_text())
        shutil.copyfile(folder / self.png, out / f"{self.name}.png")
        numbers = {"run": summary["run"], **{key: plotted(summary[key]) for key in self.rows}}
        write_numbers(out / f"{self.name}.json", self.name, self.command, numbers)
        return Made(self.outputs(), f"{self.name}.json")


@dataclass(frozen=True)
class GalleryFigure:
    """``fathom gallery``, run in a scratch folder: gallery.html and each run's report.html copied
    (the runs' records are not: the pages are self-contained), and every run's cells in
    gallery.json."""

    name: str = "gallery"
    command: str = "fathom gallery --out gallery"

    @staticmethod
    def folders() -> tuple[str, ...]:
        return (*ARCHETYPES, *(exposure.folder for exposure in EXPOSURES.values()))

    def outputs(self) -> tuple[str, ...]:
        pages = (f"gallery/{folder}/report.html" for folder in self.folders())
        return f"gallery/{GALLERY}", "gallery/gallery.json", *pages

    def make(self, scratch: Path, out: Path) -> Made:
        run_fathom(self.command, scratch)
        made, gallery = scratch / "gallery", out / "gallery"
        if gallery.exists():
            shutil.rmtree(gallery)  # a run the gallery no longer makes leaves no page behind
        gallery.mkdir(parents=True)
        shutil.copyfile(made / GALLERY, gallery / GALLERY)
        runs = {}
        for folder in self.folders():
            (gallery / folder).mkdir()
            shutil.copyfile(made / folder / "report.html", gallery / folder / "report.html")
            summary = json.loads((made / folder / "summary.json").read_text())
            runs[folder] = {"run": summary["run"], "cells": plotted(summary["cells"])}
        write_numbers(gallery / "gallery.json", self.name, self.command, {"runs": runs})
        return Made(self.outputs(), "gallery/gallery.json")


@dataclass(frozen=True)
class TrapFigure:
    """A real model's perplexity trap, re-drawn from the numbers committed in ``<name>.json``: its
    first run's summary, and in the entry ``second`` the second run's (whole, under "summary", or
    just its rows), as ``fathom trap RUN RUN_2`` drew the pair."""

    name: str
    second: str

    def outputs(self) -> tuple[str, ...]:
        return (f"{self.name}.png",)

    def make(self, scratch: Path, out: Path) -> Made:
        first = json.loads((DOCS / f"{self.name}.json").read_text())
        second = first[self.second].get("summary", first[self.second])
        parts = (first, second)
        perplexity = {
            part: by_length([row for s in parts for row in s.get("perplexity", {}).get(part, [])])
            for part in ("lengths", "buckets")
        }
        retrieval = by_length([row for s in parts for row in s["lengths"]])
        answer = by_length([row for s in parts for row in s.get("answer_likelihood", [])])
        scored = [row["length"] for row in retrieval if row["mean"] is not None]
        if len(scored) != len(set(scored)):
            raise SystemExit(f"{self.name}.json: both runs score retrieval at one length; which to draw?")
        run = first["run"]
        k = "/".join(sorted({str(row["n"]) for row in retrieval if row["mean"] is not None}))
        documents = "/".join(sorted({str(row["documents"]) for row in perplexity["lengths"]}))
        title = (
            f"{run['model']} · perplexity trap · {run['tokenizer']}\n"
            f"k={k} samples and {documents} documents per length · {first['machine'].split(';')[0]}"
        )
        plot_trap(perplexity, retrieval, answer, out / f"{self.name}.png", title, first["trained_window"])
        return Made(self.outputs(), None)

    @property
    def source(self) -> str:
        return f"{self.name}.json"


@dataclass(frozen=True)
class FamilyGridFigure:
    """A real model's score per task family and length (plain NIAH beside state tracking, bAbI-style
    reasoning, long outputs...), drawn as a task grid from the numbers ``tools/family_evidence.py``
    collected from its runs into ``source``."""

    name: str
    model: str
    source: str = "families-real.json"

    def outputs(self) -> tuple[str, ...]:
        return (f"{self.name}.png",)

    def make(self, scratch: Path, out: Path) -> Made:
        numbers = json.loads((DOCS / self.source).read_text())
        (model,) = (m for m in numbers["models"] if m["model"] == self.model)
        grid = [
            TaskCell(**row, beyond_window=False) for family in model["families"] for row in family["rows"]
        ]
        title = (
            f"{self.model.split('?')[0]} · each family beside plain NIAH\n{numbers['machine'].split(',')[0]}"
        )
        plot_task_grid(grid, out / f"{self.name}.png", title, average=False)
        return Made(self.outputs(), None)


Drawn = TrapFigure | FamilyGridFigure
Figure = RunFigure | GalleryFigure | Drawn
FIGURES: tuple[Figure, ...] = (
    RunFigure(
        "heatmap-sim-cliff",
        "fathom run niah --model sim:cliff --tokenizer cl100k_base --lengths 1k,2k,4k,8k,16k,32k "
        "--depths 3 --samples 10 --run-dir runs/cliff",
        "heatmap.png",
        ("cells",),
    ),
    RunFigure(
        "ruler-sim-cliff",
        "fathom run ruler --model sim:cliff --tokenizer cl100k_base --lengths 4k,8k,16k,32k,64k,128k "
        "--samples 3",
        "grid.png",
        ("grid", "lengths"),
    ),
    GalleryFigure(),
    TrapFigure("trap-smollm2", "retrieval_16k_second_run"),
    TrapFigure("trap-gemma3", "second_run"),
    FamilyGridFigure("families-smollm2", "llamacpp:smollm2?threads=2"),
    FamilyGridFigure("families-gemma3", "llamacpp:gemma3-270m?threads=2"),
)
NAMES = {figure.name: figure for figure in FIGURES}


def run_fathom(command: str, cwd: Path) -> None:
    """``command`` (``fathom ...`` as the docs write it) run by this interpreter's fathom in ``cwd``;
    its output kept unless it fails."""
    words = shlex.split(command)
    assert words[0] == "fathom", command
    launch = [sys.executable, "-c", "import sys; from fathom.cli import main; sys.exit(main())"]
    done = subprocess.run([*launch, *words[1:]], cwd=cwd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"'{command}' failed (exit status {done.returncode}):\n{done.stderr[-3000:]}")


def run_folder(scratch: Path) -> Path:
    """The one run folder a command made under ``scratch`` (wherever its --run-dir put it)."""
    folders = [manifest.parent for manifest in scratch.rglob("manifest.json")]
    if len(folders) != 1:
        raise SystemExit(f"expected one run folder under {scratch}, found {len(folders)}")
    return folders[0]


def plotted(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [{key: row[key] for key in PLOTTED if key in row} for row in rows]


def by_length(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(rows, key=lambda row: row["length"])


def write_numbers(path: Path, name: str, command: str, numbers: Mapping[str, object]) -> None:
    """A simulated figure's numbers, with the command that made them and how to make them again."""
    facts = {
        "command": command,
        "machine": SIMULATED,
        "made_by": f"python tools/make_figures.py --only {name}",
    }
    path.write_text(json.dumps({**facts, **numbers}, indent=2, sort_keys=True) + "\n")


def differences(committed: object, made: object, at: str = "") -> list[str]:
    """Where two JSON values differ, as paths (``cells[3].mean``) with both values; exact for floats."""
    if isinstance(committed, dict) and isinstance(made, dict):
        keys = sorted(committed.keys() | made.keys())
        return [d for key in keys for d in differences(committed.get(key), made.get(key), f"{at}.{key}")]
    if isinstance(committed, list) and isinstance(made, list) and len(committed) == len(made):
        return [
            d
            for i, pair in enumerate(zip(committed, made, strict=True))
            for d in differences(*pair, f"{at}[{i}]")
        ]
    if committed != made or type(committed) is not type(made):
        return [f"{at.lstrip('.') or 'the whole file'}: committed {committed!r}, made {made!r}"]
    return []


def make(figures: Sequence[Figure], out: Path, report: Callable[[str], None]) -> dict[str, Made]:
    """Every figure of ``figures`` made into ``out`` (a docs folder): the real-model ones drawn here,
    the simulated ones run in parallel, one per core, each in its own scratch folder."""
    made: dict[str, Made] = {}
    with tempfile.TemporaryDirectory(prefix="fathom-figures-") as scratch:

        def one(figure: Figure) -> Made:
            start = time.monotonic()
            own = Path(scratch) / figure.name
            own.mkdir()
            result = figure.make(own, out)
            report(
                f"{figure.name}: {', '.join(result.files[:3])}{' ...' * (len(result.files) > 3)} "
                f"({time.monotonic() - start:.0f} s)"
            )
            return result

        drawn = [f for f in figures if isinstance(f, Drawn)]
        for figure in drawn:  # matplotlib in this process: one figure at a time, before any thread
            made[figure.name] = one(figure)
        runs = [f for f in figures if not isinstance(f, Drawn)]
        with ThreadPoolExecutor(max_workers=max(1, min(len(runs), os.cpu_count() or 1))) as pool:
            made.update(zip((f.name for f in runs), pool.map(one, runs), strict=True))
    return made


def check(figures: Sequence[Figure], report: Callable[[str], None]) -> int:
    """Make ``figures`` into a scratch folder and compare each one's numbers with the committed ones:
    0 where all are equal, 1 where any differs."""
    status = 0
    with tempfile.TemporaryDirectory(prefix="fathom-figures-check-") as out:
        for name, made in make(figures, Path(out), report).items():
            if made.numbers is None:
                report(f"{name}: drawn from the numbers committed beside it: nothing to compare")
                continue
            committed = DOCS / made.numbers
            if not committed.is_file():
                report(
                    f"{name}: docs/{made.numbers} is missing: run python tools/make_figures.py --only {name}"
                )
                status = 1
                continue
            found = differences(
                json.loads(committed.read_text()), json.loads((Path(out) / made.numbers).read_text())
            )
            if found:
                status = 1
                report(
                    f"{name}: stale, numbers differ from docs/{made.numbers} in {len(found)} places; first:"
                )
                for line in found[:5]:
                    report(f"  {line}")
            else:
                report(f"{name}: numbers equal docs/{made.numbers}")
    return status


def parser() -> argparse.ArgumentParser:
    made = argparse.ArgumentParser(
        prog="python tools/make_figures.py",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    made.add_argument("--only", choices=list(NAMES), action="append", help="this figure only (repeatable)")
    made.add_argument(
        "--check",
        action="store_true",
        help="make into a scratch folder and compare numbers with the committed ones (exit status 1 on a "
        "difference)",
    )
    return made


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    figures = [NAMES[name] for name in args.only] if args.only else list(FIGURES)
    if args.check:
        return check(figures, print)
    make(figures, DOCS, print)
    return 0


if __name__ == "__main__":
    sys.exit(main())
