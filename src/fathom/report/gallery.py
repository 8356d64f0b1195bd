"""The gallery: every simulated archetype run on one NIAH grid, their heatmaps side by side.

The first thing to look at: what an extrapolation cliff, a lost middle or a smooth decay looks like
on fathom's heatmap, each linked to its full report.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from fathom.analysis.summary import NiahGrid
from fathom.backends.sim import ARCHETYPES
from fathom.errors import RunFolderError
from fathom.report.derive import run_spec
from fathom.report.files import REPORT, read_summary
from fathom.report.html.page import esc, legend, length_or_none, niah_heatmap, page
from fathom.spec import RunSpec

GALLERY = "gallery.html"
# What each simulated archetype stands for (sim.py holds their profiles).
ARCHETYPE_NOTES = {
    "perfect": "the reference: finds every needle at every length and depth",
    "cliff": "an extrapolation cliff: near-perfect inside its 8k trained window, near zero beyond it",
    "lost-in-the-middle": "finds needles at the edges; the middle fades as the context grows",
    "pi-decay": "position interpolation: a smooth decline with length, half right at 32k",
    "yarn": "YaRN-style extension: flat to a 64k window, then a gentle slope per doubling",
    "pattern-matcher": (
        "matches the needle's template instead of reading it: perfect on plain needles, fooled by "
        "look-alike distractors (--distractors)"
    ),
    "literal": (
        "finds the sentence that repeats the question's words: perfect on plain needles, lost on "
        "needles whose question shares no word with them (--needle latent-1)"
    ),
}


@dataclass(frozen=True)
class GalleryGrid:
    """The one NIAH grid every archetype of the gallery runs on: by default 1k to 128k doubling, 11
    depths, k=3 (about 20 s for all five on 2 cores)."""

    lengths: tuple[int, ...] = tuple(1024 * 2**i for i in range(8))
    depths: tuple[float, ...] = tuple(round(i / 10, 6) for i in range(11))
    samples: int = 3
    tokenizer: str = "cl100k_base"
    seed: int = 0


def gallery(out: Path, grid: GalleryGrid = GalleryGrid(), show_progress: bool = False) -> Path:
    """Run every simulated archetype on ``grid`` into ``out/<archetype>/`` (resuming what is there),
    then write ``out/gallery.html``: their heatmaps side by side, each linked to its report."""
    sweeps = {}
    for name in ARCHETYPES:
        spec = RunSpec(
            "niah", f"sim:{name}", grid.tokenizer, grid.lengths, grid.depths, grid.samples, seed=grid.seed
        )
        run_spec(spec, out / name, show_progress=show_progress)
        sweeps[name] = _niah_grid(out / name)
    return write_gallery(out, sweeps, grid)


def _niah_grid(run: Path) -> NiahGrid:
    summary = read_summary(run)
    if summary is None or not isinstance(summary.sweep, NiahGrid):
        raise RunFolderError(f"'{run}' holds no NIAH summary: 'fathom report {run}' makes one")
    return summary.sweep


def write_gallery(out: Path, sweeps: Mapping[str, NiahGrid], grid: GalleryGrid) -> Path:
    """gallery.html in ``out`` from the NIAH sweeps of runs in ``out/<name>/``, named by archetype,
    all run on ``grid``."""
    figures = []
    for name, sweep in sweeps.items():
        effective, lim = sweep.effective_length, sweep.lost_in_the_middle_index
        numbers = (
            f"effective length {length_or_none(effective['mean'])} (95% lower bound "
            f"{length_or_none(effective['lower_bound'])}) · lost-in-the-middle index "
            f"{'n/a' if lim is None else f'{lim:+.3f}'}"
        )
        report = f"{name}/{REPORT}"
        figures.append(
            f'<figure class="archetype" data-archetype="{esc(name)}"><figcaption><h2>'
            f'<a href="{esc(report)}">sim:{esc(name)}</a></h2><p>{esc(ARCHETYPE_NOTES[name])}</p>'
            f"<p>{esc(numbers)}</p></figcaption>"
            f"{niah_heatmap(sweep, with_samples=False, size='compact', report=report)}</figure>"
        )
    intro = (
        "<header><h1>fathom gallery: the simulated archetypes</h1><p>The simulated models, each a way "
        "a model can use (or fail to use) a long context, sim:perfect the reference; all run on one "
        "needle-in-a-haystack grid "
        f"({esc(grid.tokenizer)}, k={esc(grid.samples)}, seed {esc(grid.seed)}): x = context "
        "length, y = needle depth, colour = accuracy. Hover a cell for its numbers; click it to open "
        "that archetype's report at the cell.</p></header>"
    )
    body = f'{intro}<div class="gallery">{"".join(figures)}</div>{legend("accuracy")}'
    path = out / GALLERY
    path.write_text(page("fathom gallery", body, {}), encoding="utf-8")
    return path
