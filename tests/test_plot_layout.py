"""The heatmap's legend stays clear of the x-axis' label and the colour bar for any number of depths
(issue #33, "Looks": on a run of few depths it was drawn over the label)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

import fathom.report.plots
from fathom.analysis.niah import CellStats
from fathom.analysis.ruler import TaskCell
from fathom.report.plots import plot_heatmap, plot_task_grid

if TYPE_CHECKING:
    from matplotlib.figure import Figure
    from matplotlib.transforms import Bbox

LENGTHS = (1024, 2048, 4096)


def layout(fig: Figure) -> dict[str, Bbox]:
    """Where the saved figure's parts landed, in its pixels, as the renderer drew them."""
    from matplotlib.transforms import Bbox

    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    ax, colorbar = fig.axes
    legend, bar = ax.get_legend(), colorbar.get_tightbbox(renderer)  # the bar with its ticks and label
    assert legend is not None and bar is not None
    return {
        "x-axis label": ax.xaxis.label.get_window_extent(renderer),
        "x tick labels": Bbox.union([t.get_window_extent(renderer) for t in ax.get_xticklabels()]),
        "legend": legend.get_window_extent(renderer),
        "colour bar": bar,
        "note": fig.texts[0].get_window_extent(renderer),
    }


@pytest.fixture
def drawn(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Bbox]]:
    """The layout of each figure the plots save, measured once it is saved and before it is closed."""
    layouts: list[dict[str, Bbox]] = []
    save = fathom.report.plots.save_figure

    def keep(fig: Figure, path: Path, note: str) -> None:
        save(fig, path, note)
        layouts.append(layout(fig))

    monkeypatch.setattr(fathom.report.plots, "save_figure", keep)
    return layouts


def assert_apart(boxes: dict[str, Bbox]) -> None:
    names = list(boxes)
    overlaps = [(a, b) for i, a in enumerate(names) for b in names[i + 1 :] if boxes[a].overlaps(boxes[b])]
    # The label lies just below its tick labels; nothing else may touch anything.
    assert overlaps == [] or overlaps == [("x-axis label", "x tick labels")], overlaps
    assert boxes["legend"].y1 < boxes["x-axis label"].y0  # the legend below the label, not beside it


@pytest.mark.parametrize("depths", [1, 2, 11])
def test_the_heatmaps_legend_clears_the_axis_label_at_any_number_of_depths(
    tmp_path: Path, drawn: list[dict[str, Bbox]], depths: int
) -> None:
    cells = [
        CellStats(length, depth / max(1, depths - 1), 3, 0, 0.5, 0.1, 0.9, length == LENGTHS[-1])
        for length in LENGTHS
        for depth in range(depths)
    ]
    plot_heatmap(cells, tmp_path / "heatmap.png", "model · niah · k=3")
    (boxes,) = drawn
    assert_apart(boxes)


def test_the_task_grids_legend_clears_the_axis_label_with_one_task(
    tmp_path: Path, drawn: list[dict[str, Bbox]]
) -> None:
    grid = [TaskCell("vt", length, 3, 0, 0.5, 0.1, 0.9, length == LENGTHS[-1]) for length in LENGTHS]
    plot_task_grid(grid, tmp_path / "grid.png", "model · ruler · k=3")
    (boxes,) = drawn
    assert_apart(boxes)


@pytest.mark.parametrize("average", [True, False])
def test_the_task_grid_has_its_average_row_only_where_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, average: bool
) -> None:
    rows: list[list[str]] = []
    save = fathom.report.plots.save_figure

    def keep(fig: Figure, path: Path, note: str) -> None:
        save(fig, path, note)
        rows.append([label.get_text() for label in fig.axes[0].get_yticklabels()])

    monkeypatch.setattr(fathom.report.plots, "save_figure", keep)
    grid = [TaskCell(task, 1024, 3, 0, 0.5, 0.1, 0.9, False) for task in ("state:2", "niah")]
    plot_task_grid(grid, tmp_path / "grid.png", "model · families · k=3", average=average)
    assert rows == [["niah", "state:2", "average"] if average else ["niah", "state:2"]]
