"""The plots of a run, drawn so their uncertainty and the trained window are visible: NIAH's depth x
length heatmap, RULER's task x length grid and its needle-depth profile; and the difference heatmap
of two runs compared.

matplotlib is imported inside the plotting functions: it is slow to import and most commands never draw.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from fathom.analysis.niah import CellStats
from fathom.analysis.paired import CellComparison
from fathom.analysis.ruler import POOLED, DepthBin, TaskCell, length_scores, task_order
from fathom.safe_files import replacing
from fathom.units import format_count

if TYPE_CHECKING:
    from matplotlib.artist import Artist
    from matplotlib.axes import Axes
    from matplotlib.colors import Colormap
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.transforms import Transform

NA_GREY = "#c8c8c8"
HATCH = "////"
DPI = 150
LEGEND_GAP = 0.05  # inches between the x-axis' label and a legend below it


def format_length(n: int) -> str:
    """A context length as people write it, with k = 1024: 131072 -> "128k", 1500 -> "1500"."""
    return format_count(n)


def _grid(cells: Sequence[CellStats]) -> tuple[list[int], list[float], dict[tuple[int, float], CellStats]]:
    """Column lengths, row depths (shallowest first, so 0% is the top row) and cells by position."""
    lengths = sorted({c.length for c in cells})
    depths = sorted({c.depth for c in cells})
    return lengths, depths, {(c.length, c.depth): c for c in cells}


def text_colour(cmap: Colormap, value: float) -> str:
    """White on the dark ends of the scale, black elsewhere, so every label stays legible."""
    red, green, blue, _ = cmap(value)
    luminance = 0.299 * red + 0.587 * green + 0.114 * blue
    return "white" if luminance < 0.5 else "black"


def _draw_cell(
    ax: Axes,
    at: tuple[int, int],
    stats: tuple[float | None, float, float],
    style: tuple[Colormap, float],
    label: Callable[[float], str],
) -> None:
    """Fill and label one grid position (column, row) from (mean, ci_low, ci_high); hatch it when its
    interval is wider than the style's limit. A position without a mean is grey n/a."""
    from matplotlib.patches import Rectangle

    (col, row), (mean, low, high), (cmap, wide_interval) = at, stats, style
    corner = (col - 0.5, row - 0.5)
    if mean is None:
        # No scored sample: grey, never a colour that could be read as an accuracy.
        ax.add_patch(Rectangle(corner, 1, 1, facecolor=NA_GREY, edgecolor="white"))
        ax.text(col, row, "n/a", ha="center", va="center", fontsize=8, color="black")
        return
    ax.add_patch(Rectangle(corner, 1, 1, facecolor=cmap(mean), edgecolor="white"))
    colour = text_colour(cmap, mean)
    if high - low > wide_interval:
        # Hatch in the label's contrasting colour so it shows on the dark ends of the scale too.
        ax.add_patch(Rectangle(corner, 1, 1, fill=False, hatch=HATCH, edgecolor=colour, lw=0, alpha=0.6))
    ax.text(col, row, label(mean), ha="center", va="center", fontsize=8, color=colour)


def _draw_cells(ax: Axes, cells: Sequence[CellStats], cmap: Colormap, wide_interval: float) -> None:
    """Fill, label and (where the interval is wide) hatch every grid position."""
    lengths, depths, by_pos = _grid(cells)
    for col, length in enumerate(lengths):
        for row, depth in enumerate(depths):
            cell = by_pos.get((length, depth))
            stats = (None, 0.0, 1.0) if cell is None else (cell.mean, cell.ci_low, cell.ci_high)
            _draw_cell(ax, (col, row), stats, (cmap, wide_interval), lambda m: f"{m:.0%}")


class _AtLength(Protocol):
    @property
    def length(self) -> int: ...

    @property
    def beyond_window(self) -> bool: ...


def _mark_window(ax: Axes, cells: Sequence[_AtLength]) -> Line2D | None:
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


def pyplot_agg() -> None:
    import matplotlib

    # Agg draws without a display; set before pyplot is imported so a headless run never looks for one.
    matplotlib.use("Agg")


def _finish(fig: Figure, ax: Axes, window: Line2D | None, colorbar: tuple[Colormap, float, str]) -> None:
    """The legend (wide-interval hatching, and the trained window if marked) and the colour bar."""
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import Normalize
    from matplotlib.patches import Patch

    cmap, top, label = colorbar
    handles: list[Artist] = [Patch(facecolor="white", edgecolor="0.25", hatch=HATCH, label="wide interval")]
    if window is not None:
        handles.append(window)
    below = _below_axis(fig, ax)
    ax.legend(
        handles=handles, loc="upper left", bbox_to_anchor=(0, 0), bbox_transform=below, ncol=2, fontsize=8
    )
    fig.colorbar(ScalarMappable(Normalize(0.0, top), cmap), ax=ax, label=label)


def _below_axis(fig: Figure, ax: Axes) -> Transform:
    """The axes' coordinates moved down past the x-axis' label (below its tick labels), so a legend
    anchored at (0, 0) starts under it. Measured once drawn, in inches: the label keeps its distance
    from the axes whatever their height, so the legend clears it for any number of rows (an anchor in
    axes' fractions lands on the label when the axes are short: a run of few depths)."""
    from matplotlib.transforms import ScaledTranslation

    fig.draw_without_rendering()
    drop = (ax.get_window_extent().y0 - ax.xaxis.label.get_window_extent().y0) / fig.dpi
    return ax.transAxes + ScaledTranslation(0, -drop - LEGEND_GAP, fig.dpi_scale_trans)


def save_figure(fig: Figure, path: Path, note: str) -> None:
    fig.text(0.01, 0.01, note, fontsize=8, color="0.3")
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    with replacing(path) as handle:  # never through a link planted at the figure's name
        fig.savefig(handle, format="png", dpi=DPI)


def plot_heatmap(
    cells: Sequence[CellStats], path: Path, title: str, wide_interval: float = WIDE_INTERVAL
) -> None:
    """Save a PNG heatmap of mean accuracy by context length (columns) and needle depth (rows)."""
    pyplot_agg()
    import matplotlib.pyplot as plt

    if not cells:
        raise ValueError("no cells to plot")
    lengths, depths, _ = _grid(cells)
    cmap = plt.get_cmap("RdYlGn")
    fig, ax = plt.subplots(figsize=(max(6.0, 0.9 * len(lengths) + 3), max(4.0, 0.45 * len(depths) + 2.5)))
    try:
        _draw_cells(ax, cells, cmap, wide_interval)
        _label_axes(ax, cells)
        _finish(fig, ax, _mark_window(ax, cells), (cmap, 1.0, "mean accuracy"))
        ax.set_title(title, fontsize=10)
        note = f"k = samples per cell; hatched: 95% Wilson interval wider than {wide_interval:g}"
        save_figure(fig, path, note)
    finally:
        plt.close(fig)


AVERAGE = "average"


def _draw_task_grid(
    ax: Axes, grid: Sequence[TaskCell], cmap: Colormap, wide_interval: float, average: bool
) -> None:
    """Task rows in suite order, then (where ``average``) the per-length average over tasks as the
    bottom row."""
    lengths = sorted({c.length for c in grid})
    tasks = task_order(c.task for c in grid)
    by_pos = {(c.task, c.length): c for c in grid}
    style, label = (cmap, wide_interval), (lambda m: f"{100 * m:.1f}")
    for row, task in enumerate(tasks):
        for col, length in enumerate(lengths):
            cell = by_pos.get((task, length))
            stats = (None, 0.0, 1.0) if cell is None else (cell.mean, cell.ci_low, cell.ci_high)
            _draw_cell(ax, (col, row), stats, style, label)
    rows = [*tasks, AVERAGE] if average else tasks
    for score in length_scores(grid) if average else ():
        bounds = (score.ci_low or 0.0, 1.0 if score.ci_high is None else score.ci_high)
        _draw_cell(ax, (lengths.index(score.length), len(tasks)), (score.mean, *bounds), style, label)
    if average:
        ax.axhline(len(tasks) - 0.5, color="black", linewidth=2)
    ax.set_xlim(-0.5, len(lengths) - 0.5)
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_xticks(range(len(lengths)), [format_length(n) for n in lengths])
    ax.set_yticks(range(len(rows)), rows)
    ax.set_xlabel("context length (tokens, with the tokens to generate)")


def plot_task_grid(
    grid: Sequence[TaskCell],
    path: Path,
    title: str,
    wide_interval: float = WIDE_INTERVAL,
    average: bool = True,
) -> None:
    """Save a PNG of score (percent) by task (rows) and context length (columns), with the per-length
    average over tasks (each task weighing the same) as the bottom row where ``average`` (not for rows
    of unlike families, whose mean means nothing)."""
    pyplot_agg()
    import matplotlib.pyplot as plt

    if not grid:
        raise ValueError("no cells to plot")
    lengths, rows = len({c.length for c in grid}), len({c.task for c in grid}) + 1
    cmap = plt.get_cmap("RdYlGn")
    fig, ax = plt.subplots(figsize=(max(6.0, 0.9 * lengths + 4), max(4.0, 0.4 * rows + 2.5)))
    try:
        _draw_task_grid(ax, grid, cmap, wide_interval, average)
        _finish(fig, ax, _mark_window(ax, grid), (cmap, 100.0, "score (%)"))
        ax.set_title(title, fontsize=10)
        note = f"score in percent; hatched: 95% interval wider than {100 * wide_interval:g} points"
        save_figure(fig, path, note)
    finally:
        plt.close(fig)


DIFFERENCE_MARKS = {"regressed": "▼", "improved": "▲"}


def _difference_label(mark: str) -> Callable[[float], str]:
    # _draw_cell colours and labels a value in [0, 1]: the difference, -1..+1, arrives mapped onto it.
    return lambda shade: f"{2 * shade - 1:+.0%}{mark}"


CellRow = tuple[str | None, float | None]  # a compared cell's row: (task, depth), either may be None


def comparison_rows(rows: Iterable[CellRow]) -> list[CellRow]:
    """The rows of a comparison's grid, once each: RULER's tasks in suite order; NIAH's depths,
    shallowest first, within each variant (by name) in a run of several."""
    keys = set(rows)
    rank = {task: i for i, task in enumerate(task_order(t for t, _ in keys if t is not None))}
    return sorted(keys, key=lambda r: (-1 if r[0] is None else rank[r[0]], r[1] or 0.0))


def _row_label(row: CellRow) -> str:
    task, depth = row
    return ", ".join(part for part in (task, None if depth is None else f"{depth:.0%}") if part)


def plot_difference_heatmap(cells: Sequence[CellComparison], path: Path, title: str, alpha: float) -> None:
    """Save a PNG of the new run's mean score minus the base run's by context length (columns) and
    needle depth (NIAH, per variant in a run of several) or task (RULER) (rows), on a diverging
    scale from -1 to +1 that is white at 0. Regressed cells are framed and marked ▼, improved ones
    framed and marked ▲."""
    pyplot_agg()
    import matplotlib.pyplot as plt
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import Normalize
    from matplotlib.patches import Rectangle

    if not cells:
        raise ValueError("no cells to plot")
    lengths = sorted({c.length for c in cells})
    rows = comparison_rows((c.task, c.depth) for c in cells)
    by_pos = {(c.length, (c.task, c.depth)): c for c in cells}
    cmap = plt.get_cmap("RdBu")
    fig, ax = plt.subplots(figsize=(max(6.0, 0.9 * len(lengths) + 3), max(4.0, 0.45 * len(rows) + 2.5)))
    try:
        for col, length in enumerate(lengths):
            for row, key in enumerate(rows):
                cell = by_pos.get((length, key))
                mark = "" if cell is None else DIFFERENCE_MARKS.get(cell.verdict, "")
                shade = None if cell is None else (cell.test.difference + 1) / 2
                _draw_cell(ax, (col, row), (shade, 0.0, 0.0), (cmap, 1.0), _difference_label(mark))
                if mark:
                    frame = Rectangle(
                        (col - 0.46, row - 0.46), 0.92, 0.92, fill=False, edgecolor="black", lw=2.5
                    )
                    ax.add_patch(frame)
        ax.set_xlim(-0.5, len(lengths) - 0.5)
        ax.set_ylim(len(rows) - 0.5, -0.5)  # the shallowest depth (or the suite's first task) on top
        ax.set_xticks(range(len(lengths)), [format_length(n) for n in lengths])
        ax.set_yticks(range(len(rows)), [_row_label(r) for r in rows])
        ax.set_xlabel("context length (tokens)")
        has_task, has_depth = (any(row[i] is not None for row in rows) for i in (0, 1))
        ax.set_ylabel(", ".join(n for n, shown in (("task", has_task), ("needle depth", has_depth)) if shown))
        fig.colorbar(ScalarMappable(Normalize(-1.0, 1.0), cmap), ax=ax, label="mean score, new minus base")
        ax.set_title(title, fontsize=10)
        save_figure(fig, path, f"framed: Holm-adjusted exact McNemar p < {alpha:g} (▼ regressed, ▲ improved)")
    finally:
        plt.close(fig)


def plot_depth_profile(profile: Sequence[DepthBin], path: Path, title: str) -> None:
    """Save a PNG of score (percent) by the needles' mean depth, one line per task and a thick pooled
    line with its 95% interval shaded."""
    pyplot_agg()
    import matplotlib.pyplot as plt

    scored = [b for b in profile if b.mean is not None]
    if not scored:
        raise ValueError("no depth bins to plot")
    colours = plt.get_cmap("tab20")
    fig, ax = plt.subplots(figsize=(9.0, 4.8))
    try:
        for i, task in enumerate(task_order(b.task for b in scored if b.task != POOLED)):
            x, y = _depth_line([b for b in scored if b.task == task])
            ax.plot(x, y, marker="o", markersize=3, linewidth=1, alpha=0.8, color=colours(i % 20), label=task)
        pooled = [b for b in scored if b.task == POOLED]
        if pooled:
            x, y = _depth_line(pooled)
            low, high = [100 * b.ci_low for b in pooled], [100 * b.ci_high for b in pooled]
            ax.fill_between(x, low, high, color="black", alpha=0.12, linewidth=0, label="95% interval")
            ax.plot(x, y, marker="o", linewidth=2.5, color="black", label=POOLED)
        ax.set_xlim(0, 100)
        ax.set_ylim(-2, 102)
        ax.set_xticks(range(0, 101, 10))
        ax.set_xlabel("mean depth of the sample's needles (%, 10% bins)")
        ax.set_ylabel("score (%)")
        ax.grid(alpha=0.3)
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7)
        ax.set_title(title, fontsize=10)
        save_figure(fig, path, "each point: the samples whose needles' mean depth lies in that bin")
    finally:
        plt.close(fig)


def _depth_line(bins: Sequence[DepthBin]) -> tuple[list[float], list[float]]:
    """Bin centres and scores, in percent, of the bins with a score."""
    points = [(50 * (b.low + b.high), 100 * b.mean) for b in bins if b.mean is not None]
    return [x for x, _ in points], [y for _, y in points]
