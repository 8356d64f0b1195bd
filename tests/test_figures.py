"""The committed figures are what their commands make today. A simulated run is the same bit for bit
on every machine, so each simulated figure's numbers, re-made here by the command the docs show, must
equal the JSON committed beside it: a figure left stale fails. And every figure under docs/ is one
that tools/make_figures.py makes, so none is left behind when the code changes."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any

import pytest
from repo_tools import load_tool

from fathom.cli import main

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
# What a plotted cell must say: its score, k and 95% interval.
DRAWN = {"mean", "n", "ci_low", "ci_high"}


TOOL = load_tool("make_figures")


def committed(name: str) -> dict[str, Any]:
    numbers: dict[str, Any] = json.loads((DOCS / name).read_text())
    return numbers


def run(command: str, folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``command`` as the docs write it (``fathom ...``), run in ``folder``."""
    words = shlex.split(command)
    assert words[0] == "fathom"
    monkeypatch.chdir(folder)
    assert main(words[1:]) in (0, None)


def summary_of(command: str, folder: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The summary.json of the one run folder ``command`` makes in ``folder``."""
    run(command, folder, monkeypatch)
    (made,) = folder.rglob("summary.json")
    summary: dict[str, Any] = json.loads(made.read_text())
    return summary


def as_committed(made: list[dict[str, Any]], kept: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows a run made, each cut to the fields its committed row holds (the ones the figure
    draws), so a field a later summary adds is no difference but a changed number is."""
    assert kept and all(row.keys() >= DRAWN for row in kept)
    return [{key: new[key] for key in old} for new, old in zip(made, kept, strict=True)]


def test_the_simulated_heatmap_holds_the_numbers_its_command_makes_today(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    figure = committed("heatmap-sim-cliff.json")
    summary = summary_of(figure["command"], tmp_path, monkeypatch)
    assert len(figure["cells"]) == 6 * 3  # the command's 6 lengths x 3 depths
    assert figure["run"] == summary["run"]
    assert figure["cells"] == as_committed(summary["cells"], figure["cells"])


@pytest.mark.slow
@pytest.mark.essays
@pytest.mark.ruler_data
def test_the_simulated_ruler_grid_holds_the_numbers_its_command_makes_today(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    figure = committed("ruler-sim-cliff.json")
    summary = summary_of(figure["command"], tmp_path, monkeypatch)
    assert len(figure["grid"]) == 13 * 6 and len(figure["lengths"]) == 6  # RULER's 13 tasks x 6 lengths
    assert figure["run"] == summary["run"]
    assert figure["grid"] == as_committed(summary["grid"], figure["grid"])
    assert figure["lengths"] == [
        {key: new[key] for key in old} for new, old in zip(summary["lengths"], figure["lengths"], strict=True)
    ]


@pytest.mark.slow
def test_the_gallery_holds_the_numbers_fathom_gallery_makes_today(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gallery = committed("gallery/gallery.json")
    run(gallery["command"], tmp_path, monkeypatch)
    runs = gallery["runs"]
    # The gallery shows the readers a plain grid cannot tell apart a second time, on the needles
    # that expose them.
    assert {"pattern-matcher", "pattern-matcher+distractors", "literal", "literal+latent-1"} <= runs.keys()
    assert sorted(runs) == sorted(p.parent.name for p in (tmp_path / "gallery").glob("*/summary.json"))
    for folder, numbers in runs.items():
        summary = json.loads((tmp_path / "gallery" / folder / "summary.json").read_text())
        assert len(numbers["cells"]) == 8 * 11, folder  # 1k-128k doubling x 11 depths
        assert numbers["run"] == summary["run"], folder
        assert numbers["cells"] == as_committed(summary["cells"], numbers["cells"]), folder


def test_the_committed_gallery_page_links_a_committed_report_for_every_run() -> None:
    page = (DOCS / "gallery" / "gallery.html").read_text()
    linked = set(re.findall(r'data-folder="([^"]+)"', page))
    assert linked == set(committed("gallery/gallery.json")["runs"])
    assert all((DOCS / "gallery" / folder / "report.html").is_file() for folder in linked)


def test_each_simulated_figure_is_made_by_the_command_the_docs_show() -> None:
    pages = " ".join(" ".join(path.read_text().split()) for path in [ROOT / "README.md", *DOCS.rglob("*.md")])
    simulated = [figure for figure in TOOL.FIGURES if isinstance(figure, TOOL.RunFigure)]
    assert {figure.name for figure in simulated} == {"heatmap-sim-cliff", "ruler-sim-cliff"}
    for figure in simulated:
        assert figure.command in pages, figure.name
        assert committed(f"{figure.name}.json")["command"] == figure.command
        assert f"{figure.name}.png" in pages, figure.name  # the page shows the figure


def test_every_figure_under_docs_is_made_by_the_script() -> None:
    made = {output for figure in TOOL.FIGURES for output in figure.outputs()}
    sources = {figure.source for figure in TOOL.FIGURES if isinstance(figure, TOOL.Drawn)}
    found = {
        path.relative_to(DOCS).as_posix()
        for path in DOCS.rglob("*")
        if path.suffix in {".png", ".svg", ".html", ".json"}
    }
    assert {"heatmap-sim-cliff.png", "trap-gemma3.png", "gallery/gallery.html"} <= found
    assert found - made - sources == set()  # a figure no script re-makes
    assert made - found == set()  # a figure the script makes but nobody committed


def test_a_check_names_each_number_that_differs_and_only_those() -> None:
    figure = committed("heatmap-sim-cliff.json")
    stale = json.loads(json.dumps(figure))
    stale["cells"][4]["mean"] = 0.5
    stale["cells"][7]["n"] = 10.0  # the same value, as another type, is still a change
    was = figure["cells"][4]["mean"]
    assert TOOL.differences(figure, figure) == []
    assert TOOL.differences(figure, stale) == [
        f"cells[4].mean: committed {was!r}, made 0.5",
        "cells[7].n: committed 10, made 10.0",
    ]
    assert TOOL.differences(figure, {**figure, "cells": figure["cells"][:-1]}) != []


def test_a_real_models_trap_figure_is_drawn_again_from_its_committed_numbers(tmp_path: Path) -> None:
    made = TOOL.NAMES["trap-gemma3"].make(tmp_path, tmp_path)
    assert made.files == ("trap-gemma3.png",) and made.numbers is None
    assert (tmp_path / "trap-gemma3.png").read_bytes().startswith(b"\x89PNG\r\n\x1a\n")


def test_a_real_models_family_grid_is_drawn_from_the_rows_its_numbers_hold(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    figure = TOOL.NAMES["families-smollm2"]
    drawn: list[tuple[list[tuple[str, int, float | None]], bool]] = []
    monkeypatch.setattr(
        TOOL,
        "plot_task_grid",
        lambda grid, path, title, average: drawn.append(
            ([(c.task, c.length, c.mean) for c in grid], average)
        ),
    )
    assert figure.make(tmp_path, tmp_path).files == ("families-smollm2.png",)
    (model,) = (m for m in committed(figure.source)["models"] if m["model"] == figure.model)
    rows = [(r["task"], r["length"], r["mean"]) for f in model["families"] for r in f["rows"]]
    assert drawn == [(rows, False)]  # every row, no average over unlike families
