"""The depth x length accuracy heatmap, drawn so its uncertainty and its trained window are visible.

matplotlib is imported inside the plotting function: it is slow to import and most commands never draw.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from fathom.analysis import CellStats
from fathom.units import format_count

if TYPE_CHECKING:
    from matplotlib.artist import Artist
    from matplotlib.axes import Axes
    from matplotlib.colors import Colormap
    from matplotlib.lines import Line2D

NA_GREY = "#c8c8c8"
HATCH = "////"
DPI = 150


def format_length(n: int) -> str:
    """A context length as people write it, with k = 1024: 131072 -> "128k", 1500 -> "1500"."""
    return format_count(n)


def _grid(cells: Sequence[CellStats]) -> tuple[list[int], list[float], dict[tuple[int, float], CellStats]]:
    """Column lengths, row depths (shallowest first, so 0% is the top row) and cells by position."""
    lengths = sorted({c.length for c in cells})
    depths = sorted({c.depth for c in cells})
    return lengths, depths, {(c.length, c.depth): c for c in cells}


def _text_colour(cmap: Colormap, value: float) -> str:
    """White on the dark ends of the scale, black elsewhere, so every label stays legible."""
    red, green, blue, _ = cmap(value)
    luminance = 0.299 * red + 0.587 * green + 0.114 * blue
    return "white" if luminance < 0.5 else "black"


def _draw_cells(ax: Axes, cells: Sequence[CellStats], cmap: Colormap, wide_interval: float) -> None:
    """Fill, label and (where the interval is wide) hatch every grid position."""
    from matplotlib.patches import Rectangle

    lengths, depths, by_pos = _grid(cells)
    for col, length in enumerate(lengths):
        for row, depth in enumerate(depths):
            cell = by_pos.get((length, depth))
            corner = (col - 0.5, row - 0.5)
            if cell is None or cell.mean is None:
                # No scored sample: grey, never a colour that could be read as an accuracy.
                ax.add_patch(Rectangle(corner, 1, 1, facecolor=NA_GREY, edgecolor="white"))
                ax.text(col, row, "n/a", ha="center", va="center", fontsize=8, color="black")
                continue
            ax.add_patch(Rectangle(corner, 1, 1, facecolor=cmap(cell.mean), edgecolor="white"))
            colour = _text_colour(cmap, cell.mean)
            if cell.ci_high - cell.ci_low > wide_interval:
                # Hatch in the label's contrasting colour so it shows on the dark ends of the scale too.
                ax.add_patch(
                    Rectangle(corner, 1, 1, fill=False, hatch=HATCH, edgecolor=colour, lw=0, alpha=0.6)
                )
            ax.text(col, row, f"{cell.mean:.0%}", ha="center", va="center", fontsize=8, color=colour)


def _mark_window(ax: Axes, cells: Sequence[CellStats]) -> Line2D | None:
    """A dashed line before the first length beyond the model's trained window, if any is."""
    lengths = sorted({c.length for c in cells})
    beyond = sorted({c.length for c in cells if c.beyond_window})
    if not beyond:
        return None
    x = lengths.index(beyond[0]) - 0.5
    return ax.axvline(x, color="black", linestyle="--", linewidth=1.5, label="end of trained window")


def _label_axes(ax: Axes, cells: Sequence[CellStats]) -> None:
    lengths, depths, _ = _grid(cells)
    ax.set_xlim(-0.5, len(lengths) - 0.5)
    # Inverted y: row 0 (the shallowest depth, the start of the context) is drawn at the top.
    ax.set_ylim(len(depths) - 0.5, -0.5)
    ax.set_xticks(range(len(lengths)), [format_length(n) for n in lengths])
    ax.set_yticks(range(len(depths)), [f"{d:.0%}" for d in depths])
    ax.set_xlabel("context length (tokens)")
    ax.set_ylabel("needle depth")


# At k=3 a unanimous cell (3/3 or 0/3) has a Wilson width of 0.56 and a split one (2/3) of 0.73:
# 0.6 marks the cells whose samples disagree, not every cell of a small-k run.
WIDE_INTERVAL = 0.6


def plot_heatmap(
    cells: Sequence[CellStats], path: Path, title: str, wide_interval: float = WIDE_INTERVAL
) -> None:
    """Save a PNG heatmap of mean accuracy by context length (columns) and needle depth (rows)."""
    import matplotlib

    # Agg draws without a display; set before pyplot is imported so a headless run never looks for one.
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import Normalize
    from matplotlib.patches import Patch

    if not cells:
        raise ValueError("no cells to plot")
    lengths, depths, _ = _grid(cells)
    cmap = plt.get_cmap("RdYlGn")
    fig, ax = plt.subplots(figsize=(max(6.0, 0.9 * len(lengths) + 3), max(4.0, 0.45 * len(depths) + 2.5)))
    try:
        _draw_cells(ax, cells, cmap, wide_interval)
        _label_axes(ax, cells)
        handles: list[Artist] = [
            Patch(facecolor="white", edgecolor="0.25", hatch=HATCH, label="wide interval")
        ]
        window = _mark_window(ax, cells)
        if window is not None:
            handles.append(window)
        ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(0, -0.08), ncol=2, fontsize=8)
        fig.colorbar(ScalarMappable(Normalize(0.0, 1.0), cmap), ax=ax, label="mean accuracy")
        ax.set_title(title, fontsize=10)
        fig.text(
            0.01,
            0.01,
            f"k = samples per cell; hatched: 95% Wilson interval wider than {wide_interval:g}",
            fontsize=8,
            color="0.3",
        )
        fig.tight_layout(rect=(0, 0.03, 1, 1))
        fig.savefig(path, dpi=DPI)
    finally:
        plt.close(fig)
