"""The perplexity trap as a figure: perplexity beside retrieval by context length, and perplexity by
position in the context, so a model whose perplexity stays healthy while its retrieval falls shows it.

matplotlib is imported inside the plotting functions, as in ``fathom.report.plots``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fathom.report.plots import format_length, pyplot_agg, save_figure

if TYPE_CHECKING:
    from matplotlib.axes import Axes


def plot_trap(
    perplexity: dict[str, Any],
    retrieval: Sequence[dict[str, Any]],
    answer: Sequence[dict[str, Any]],
    path: Path,
    title: str,
    window: int | None = None,
) -> None:
    """Save the perplexity trap: on the left, perplexity by length (overall, and of the far tokens:
    the last position bucket) beside retrieval accuracy (and the gold answer's probability) on a
    second axis; on the right, perplexity by token position, one line per length.

    ``perplexity`` is ``perplexity_table``'s result; ``retrieval`` rows hold length, mean, ci_low and
    ci_high (a run's summary lengths) and may be empty, as may ``answer`` (answer_likelihood's rows).
    """
    pyplot_agg()
    import matplotlib.pyplot as plt

    rows = [r for r in perplexity["lengths"] if r["perplexity"] is not None]
    if not rows:
        raise ValueError("no perplexity to plot")
    fig, (left, right) = plt.subplots(1, 2, figsize=(13.0, 5.0))
    try:
        _trap_lengths(left, rows, perplexity["buckets"], retrieval, answer, window)
        _trap_positions(right, perplexity["buckets"], window)
        fig.suptitle(title, fontsize=10)
        note = "perplexity: exp(mean NLL per token), 95% interval over documents; accuracy: 95% interval"
        save_figure(fig, path, note)
    finally:
        plt.close(fig)


def _log2_lengths(ax: Axes, lengths: Sequence[int]) -> None:
    ax.set_xscale("log", base=2)
    ax.set_xticks(list(lengths), [format_length(n) for n in lengths])
    ax.minorticks_off()


def _trap_lengths(
    ax: Axes,
    rows: Sequence[dict[str, Any]],
    buckets: Sequence[dict[str, Any]],
    retrieval: Sequence[dict[str, Any]],
    answer: Sequence[dict[str, Any]],
    window: int | None,
) -> None:
    _perplexity_by_length(ax, rows, buckets)
    shown = sorted({*(r["length"] for r in rows), *(r["length"] for r in retrieval)})
    _log2_lengths(ax, shown)
    handles, labels = ax.get_legend_handles_labels()
    if retrieval or answer:
        twin = ax.twinx()
        _retrieval_by_length(twin, retrieval, answer)
        more_handles, more_labels = twin.get_legend_handles_labels()
        handles, labels = handles + more_handles, labels + more_labels
    if window is not None:
        handles.append(ax.axvline(window, color="0.3", linestyle="-.", linewidth=1))
        labels.append(f"trained window ({format_length(window)})")
    ax.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=3, fontsize=8)
    ax.set_title("perplexity and retrieval by context length", fontsize=9)
    ax.grid(alpha=0.3)


def _perplexity_by_length(
    ax: Axes, rows: Sequence[dict[str, Any]], buckets: Sequence[dict[str, Any]]
) -> None:
    """Perplexity of all tokens with its interval, and of the far tokens (each length's last bucket)."""
    lengths = [r["length"] for r in rows]
    ppl = [r["perplexity"] for r in rows]
    errors = [
        [p - r["ci_low"] for p, r in zip(ppl, rows, strict=True)],
        [r["ci_high"] - p for p, r in zip(ppl, rows, strict=True)],
    ]
    ax.errorbar(
        lengths, ppl, yerr=errors, marker="o", color="tab:blue", capsize=3, label="perplexity, all tokens"
    )
    last = {b["length"]: b for b in buckets}  # buckets are sorted: the last one per length wins
    far = [(n, last[n]["perplexity"]) for n in lengths if n in last and last[n]["lo"] > 0]
    if far:
        ax.plot(
            *zip(*far, strict=True),
            marker="s",
            linestyle="--",
            color="tab:cyan",
            label="perplexity, last bucket",
        )
    _log_perplexity(ax)
    ax.set_ylabel("perplexity (log scale)", color="tab:blue")
    ax.set_xlabel("context length (tokens)")


def _retrieval_by_length(
    twin: Axes, retrieval: Sequence[dict[str, Any]], answer: Sequence[dict[str, Any]]
) -> None:
    """Retrieval accuracy with its interval band, and the gold answer's mean probability, on 0-1."""
    scored = [r for r in retrieval if r.get("mean") is not None]
    if scored:
        x = [r["length"] for r in scored]
        twin.fill_between(
            x,
            [r["ci_low"] for r in scored],
            [r["ci_high"] for r in scored],
            color="tab:red",
            alpha=0.15,
            linewidth=0,
        )
        twin.plot(x, [r["mean"] for r in scored], marker="o", color="tab:red", label="retrieval accuracy")
    if answer:
        x = [r["length"] for r in answer]
        twin.plot(
            x,
            [r["mean_probability"] for r in answer],
            marker="^",
            linestyle=":",
            color="tab:orange",
            label="p(gold answer)",
        )
    twin.set_ylim(-0.02, 1.02)
    twin.set_ylabel("retrieval", color="tab:red")


def _log_perplexity(ax: Axes) -> None:
    """A log y axis labelled in plain numbers (12, 20, 50), not powers of ten."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    ax.set_yscale("log")
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    ax.yaxis.set_minor_formatter(NullFormatter())


def _trap_positions(ax: Axes, buckets: Sequence[dict[str, Any]], window: int | None) -> None:
    import matplotlib.pyplot as plt

    lengths = sorted({b["length"] for b in buckets})
    colours = plt.get_cmap("viridis")
    for i, length in enumerate(lengths):
        own = [b for b in buckets if b["length"] == length]
        x = [max(1.0, (b["lo"] + b["hi"]) / 2) for b in own]
        colour = colours(i / max(1, len(lengths) - 1))
        ax.plot(
            x,
            [b["perplexity"] for b in own],
            marker="o",
            markersize=3,
            color=colour,
            label=format_length(length),
        )
    if window is not None:
        ax.axvline(window, color="0.3", linestyle="-.", linewidth=1)
    ax.set_xscale("log", base=2)
    ticks: list[int] = []
    for end in sorted({b["hi"] for b in buckets}):
        # Bucket ends a few percent apart (30k and 32k) would print over each other: keep the first.
        if not ticks or end >= 1.25 * ticks[-1]:
            ticks.append(end)
    ax.set_xticks(ticks, [format_length(n) for n in ticks])
    ax.minorticks_off()
    _log_perplexity(ax)
    ax.set_xlabel("token position (points at bucket midpoints: 0-1k, 1k-2k, 2k-4k, ...)")
    ax.set_ylabel("perplexity (log scale)")
    ax.legend(title="document length", fontsize=7, title_fontsize=8, loc="best")
    ax.set_title("perplexity by position in the context", fontsize=9)
    ax.grid(alpha=0.3)
