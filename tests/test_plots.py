"""Tests for fathom.plots: length labels and the heatmap file."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from fathom.analysis import CellStats, wilson_interval
from fathom.plots import format_length, plot_heatmap

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

    assert path.stat().st_size > 0
    return np.asarray(matplotlib.image.imread(path))


def test_heatmap_writes_a_sane_png(tmp_path: Path) -> None:
    path = tmp_path / "heatmap.png"
    plot_heatmap(table(1.0), path, "model · niah · cl100k · k=10")
    pixels = read_png(path)
    height, width = pixels.shape[:2]
    assert 300 <= height <= 4000 and 300 <= width <= 4000
    assert pixels.std() > 0.05  # not a blank canvas


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


def test_heatmap_handles_gaps_wide_intervals_and_window(tmp_path: Path) -> None:
    cells = table(0.5, k=2, beyond_from=4096)  # k=2: every interval is wide, so all cells hatched
    cells[0] = CellStats(1024, 0.0, 0, 2, None, 0.0, 1.0, False)  # only errors: grey n/a
    del cells[-1]  # a position never run at all
    path = tmp_path / "mixed.png"
    plot_heatmap(cells, path, "mixed")
    assert read_png(path).shape[0] > 0


def test_heatmap_marks_differ_from_plain(tmp_path: Path) -> None:
    plain, marked = tmp_path / "plain.png", tmp_path / "marked.png"
    plot_heatmap(table(0.5, k=10), plain, "t", wide_interval=1.0)
    plot_heatmap(table(0.5, k=10), marked, "t", wide_interval=0.1)
    assert not np.array_equal(read_png(plain), read_png(marked))


def test_heatmap_rejects_an_empty_table(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        plot_heatmap([], tmp_path / "none.png", "empty")
