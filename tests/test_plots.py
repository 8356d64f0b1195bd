"""Tests for fathom.report.plots: length labels, the heatmap file and the comparison's rows."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pytest

import fathom.report.plots
from fathom.analysis.niah import CellStats
from fathom.analysis.paired import CellComparison, PairedTest
from fathom.analysis.stats import wilson_interval
from fathom.report.plots import (
    DPI,
    HATCH,
    NA_GREY,
    comparison_rows,
    format_length,
    plot_difference_heatmap,
    plot_heatmap,
)

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

LENGTHS = (1024, 2048, 4096, 8192)
DEPTHS = (0.0, 0.25, 0.5, 0.75, 1.0)


@pytest.mark.parametrize(
    ("n", "text"),
    [(1024, "1k"), (4096, "4k"), (131072, "128k"), (1048576, "1M"), (1500, "1500"), (1536, "1536"), (0, "0")],
)
def test_format_length(n: int, text: str) -> None:
    assert format_length(n) == text


def table(score: float, k: int = 10, beyond_from: int | None = None) -> list[CellStats]:
    """A full grid where every cell scored ``score`` on each of its ``k`` samples."""
    low, high = wilson_interval(score * k, k)
    return [
        CellStats(length, depth, k, 0, score, low, high, beyond_from is not None and length >= beyond_from)
        for length in LENGTHS
        for depth in DEPTHS
    ]


def read_png(path: Path) -> np.ndarray:
    import matplotlib.image

    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    return np.asarray(matplotlib.image.imread(path))


@pytest.fixture
def drawn(monkeypatch: pytest.MonkeyPatch) -> list[Figure]:
    """The figures the plots save, kept for a look at what they hold; still written to their files."""
    figures: list[Figure] = []
    save = fathom.report.plots.save_figure

    def keep(fig: Figure, path: Path, note: str) -> None:
        figures.append(fig)
        save(fig, path, note)

    monkeypatch.setattr(fathom.report.plots, "save_figure", keep)
    return figures


def squares(ax: Axes) -> dict[tuple[int, int], tuple[str, str]]:
    """Each filled grid square by (column, row): its colour and the label written on it."""
    from matplotlib.colors import to_hex
    from matplotlib.patches import Rectangle

    fills = {
        (round(p.get_x() + 0.5), round(p.get_y() + 0.5)): to_hex(p.get_facecolor())
        for p in ax.patches
        if isinstance(p, Rectangle) and p.get_fill()
    }
    labels = {(round(t.get_position()[0]), round(t.get_position()[1])): t.get_text() for t in ax.texts}
    assert fills.keys() == labels.keys()
    return {at: (fills[at], labels[at]) for at in fills}


def hatched(ax: Axes) -> set[tuple[int, int]]:
    return {(round(p.get_x() + 0.5), round(p.get_y() + 0.5)) for p in ax.patches if p.get_hatch() == HATCH}


def test_heatmap_draws_every_cell_in_its_accuracy_colour_into_the_png(
    tmp_path: Path, drawn: list[Figure]
) -> None:
    import matplotlib

    path = tmp_path / "heatmap.png"
    plot_heatmap(table(1.0), path, "model · niah · cl100k · k=10")
    (fig,) = drawn
    ax = fig.axes[0]
    green = matplotlib.colors.to_hex(matplotlib.colormaps["RdYlGn"](1.0))
    # Four lengths across, five depths down, the shallowest on top; every cell 100%, none hatched
    # (10 of 10 has a Wilson interval 0.28 wide).
    assert squares(ax) == {(col, row): (green, "100%") for col in range(4) for row in range(5)}
    assert not hatched(ax)
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1k", "2k", "4k", "8k"]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["0%", "25%", "50%", "75%", "100%"]
    assert ax.get_ylim() == (4.5, -0.5)
    assert ax.get_title() == "model · niah · cl100k · k=10" and not ax.get_lines()  # no window to mark
    # The PNG is that figure, at the plots' resolution.
    width, height = fig.get_size_inches() * DPI
    assert read_png(path).shape == (round(height), round(width), 4)


def test_heatmap_colour_follows_accuracy(tmp_path: Path) -> None:
    right, wrong = tmp_path / "right.png", tmp_path / "wrong.png"
    plot_heatmap(table(1.0), right, "t")
    plot_heatmap(table(0.0), wrong, "t")
    a, b = read_png(right), read_png(wrong)
    assert a.shape == b.shape
    assert np.abs(a - b).mean() > 0.01
    # Green dominates the all-correct map, red the all-wrong one.
    assert a[..., 1].mean() > b[..., 1].mean()
    assert b[..., 0].mean() > a[..., 0].mean()


def test_heatmap_handles_gaps_wide_intervals_and_window(tmp_path: Path, drawn: list[Figure]) -> None:
    import matplotlib

    cells = table(0.5, k=2, beyond_from=4096)  # k=2: 1 of 2 has a Wilson interval 0.82 wide
    cells[0] = CellStats(1024, 0.0, 0, 2, None, 0.0, 1.0, False)  # only errors: grey n/a
    del cells[-1]  # a position never run at all: grey n/a too
    plot_heatmap(cells, tmp_path / "mixed.png", "mixed")
    ax = drawn[0].axes[0]
    yellow = matplotlib.colors.to_hex(matplotlib.colormaps["RdYlGn"](0.5))
    scored = {(col, row) for col in range(4) for row in range(5)} - {(0, 0), (3, 4)}
    assert squares(ax) == {
        (0, 0): (NA_GREY, "n/a"),
        (3, 4): (NA_GREY, "n/a"),
        **{at: (yellow, "50%") for at in scored},
    }
    assert hatched(ax) == scored  # every scored cell, and no grey one
    # The window ends between 2k and 4k, the columns 1 and 2: one dashed line there, in the legend.
    (line,) = ax.get_lines()
    assert list(line.get_xdata()) == [1.5, 1.5] and line.get_linestyle() == "--"
    legend = ax.get_legend()
    assert legend is not None
    assert [t.get_text() for t in legend.get_texts()] == ["wide interval", "end of trained window"]


def test_heatmap_marks_differ_from_plain(tmp_path: Path, drawn: list[Figure]) -> None:
    # 5 of 10 has a Wilson interval 0.53 wide: hatched when the limit is 0.1, not when it is 1.
    plain, marked = tmp_path / "plain.png", tmp_path / "marked.png"
    plot_heatmap(table(0.5, k=10), plain, "t", wide_interval=1.0)
    plot_heatmap(table(0.5, k=10), marked, "t", wide_interval=0.1)
    assert not hatched(drawn[0].axes[0])
    assert hatched(drawn[1].axes[0]) == {(col, row) for col in range(4) for row in range(5)}
    assert not np.array_equal(read_png(plain), read_png(marked))


def test_heatmap_rejects_an_empty_table(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no cells to plot"):
        plot_heatmap([], tmp_path / "none.png", "empty")


def test_a_comparisons_rows_are_depths_tasks_or_each_variants_depths() -> None:
    assert comparison_rows([(None, 1.0), (None, 0.0), (None, 0.5), (None, 0.0)]) == [
        (None, 0.0), (None, 0.5), (None, 1.0),
    ]  # fmt: skip
    # RULER's tasks in its suite's order (niah_single_1 before vt), not by name.
    assert comparison_rows([("vt", None), ("niah_single_1", None)]) == [("niah_single_1", None), ("vt", None)]
    # A NIAH run of several variants: each variant's depths, shallowest first, variants by name.
    rows = [(task, depth) for depth in (1.0, 0.0) for task in ("niah:prose", "niah:code")]
    assert comparison_rows(rows) == [
        ("niah:code", 0.0), ("niah:code", 1.0), ("niah:prose", 0.0), ("niah:prose", 1.0),
    ]  # fmt: skip


def test_the_difference_heatmap_has_a_row_per_variant_and_depth(tmp_path: Path, drawn: list[Figure]) -> None:
    test = PairedTest(pairs=3, base_mean=1.0, new_mean=0.0, worse=3, better=0, p_value=0.25)
    cells = [
        CellComparison(1024, depth, task, test, 1.0, "unchanged")
        for task in ("niah:prose", "niah:code")
        for depth in (0.0, 0.5)
    ]
    plot_difference_heatmap(cells, tmp_path / "compare.png", "t", 0.05)
    ax = drawn[0].axes[0]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels == ["niah:code, 0%", "niah:code, 50%", "niah:prose, 0%", "niah:prose, 50%"]
    assert ax.get_ylabel() == "task, needle depth"
    assert {label for _, label in squares(ax).values()} == {"-100%"}
    assert len(squares(ax)) == 4  # one square each: no two variants drawn over each other
