"""The gallery: every simulated archetype run on one NIAH grid, their heatmaps side by side.

The first thing to look at: what an extrapolation cliff, a lost middle or a smooth decay looks like
on fathom's heatmap, each linked to its full report.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fathom.analysis.summary import NiahGrid
from fathom.backends.sim import ARCHETYPES
from fathom.errors import RunFolderError
from fathom.report.derive import run_spec
from fathom.report.files import REPORT, read_summary
from fathom.report.html.page import esc, legend, niah_heatmap, page
from fathom.safe_files import write_file
from fathom.spec import RunSpec
from fathom.units import length_or_none

GALLERY = "gallery.html"
# What each simulated archetype stands for (sim.py holds their profiles).
ARCHETYPE_NOTES = {
    "perfect": "the reference: finds every needle at every length and depth",
    "cliff": "an extrapolation cliff: near-perfect inside its 8k trained window, near zero beyond it",
    "lost-in-the-middle": "finds needles at the edges; the middle fades as the context grows",
    "pi-decay": "position interpolation: a smooth decline with length, half right at 32k",
    "yarn": "YaRN-style extension: flat to a 64k window, then a gentle slope per doubling",
    "noisy": (
        "a coin per answer, right 95% of the time everywhere: the same model under another seed is a "
        "checkpoint that did not change (drop=0.2&at=8k plants a loss at one length)"
    ),
    "pattern-matcher": (
        "matches the needle's template instead of reading it: perfect on plain needles, fooled by "
        "look-alike distractors (--distractors)"
    ),
    "literal": (
        "finds the sentence that repeats the question's words: perfect on plain needles, lost on "
        "needles whose question shares no word with them (--needle latent-1)"
    ),
    "odd-name": (
        "answers a name the haystack holds only once, reading no question: lost on plain needles, near "
        "perfect on low-overlap needles whose character is the only one (--distractors 0), at chance "
        "among the characters of the default"
    ),
    "one-fact": (
        "finds any fact but answers from one alone: perfect on one needle, a quarter right when four "
        "are asked at once (--needles 4), lost on state tracking and split needles"
    ),
    "recent": (
        "reads only the prompt's last 4k tokens, like a sliding-window or state-space model: a needle "
        "near the end is found at every length, one earlier only while the prompt fits"
    ),
    "thinker": (
        "reads perfectly, but thinks 64 to 256 tokens first: with no thinking budget its 32-token answer "
        "budget is spent thinking (no answer anywhere); with one, it answers unless it thinks past it"
    ),
}


@dataclass(frozen=True)
class Exposure:
    """The needles that tell an archetype apart from sim:perfect, where plain needles cannot: the
    gallery runs it a second time with them, into ``folder``, and shows that heatmap beside its plain
    one under ``caption``."""

    folder: str
    changes: Mapping[str, Any]  # RunSpec fields, as the command line's options set them
    caption: str


EXPOSURES = {
    "pattern-matcher": Exposure(
        "pattern-matcher+distractors", {"distractors": 4}, "with 4 look-alike distractors (--distractors 4)"
    ),
    "literal": Exposure(
        "literal+latent-1",
        {"needle": "latent-1"},
        "on low-overlap needles (--needle latent-1), their literal twins left out",
    ),
    "odd-name": Exposure(
        "odd-name+latent-1",
        {"needle": "latent-1", "distractors": 0},
        "on low-overlap needles with no other character (--needle latent-1 --distractors 0), their "
        "literal twins left out",
    ),
    "one-fact": Exposure("one-fact+needles-4", {"needles": 4}, "with 4 needles asked at once (--needles 4)"),
    "thinker": Exposure(
        "thinker+budget-192",
        {"thinking_budget": 192},
        "with 192 tokens to think, then 32 to answer (--thinking-budget 192)",
    ),
}
PLAIN = "plain needles"


@dataclass(frozen=True)
class GalleryGrid:
    """The one NIAH grid every archetype of the gallery runs on: by default 1k to 128k doubling, 11
    depths, k=3 (minutes on 2 shared cores for every archetype and the exposing runs: docs/gallery.md)."""

    lengths: tuple[int, ...] = tuple(1024 * 2**i for i in range(8))
    depths: tuple[float, ...] = tuple(round(i / 10, 6) for i in range(11))
    samples: int = 3
    tokenizer: str = "cl100k_base"
    seed: int = 0


def gallery(out: Path, grid: GalleryGrid = GalleryGrid(), show_progress: bool = False) -> Path:
    """Run every simulated archetype on ``grid`` into ``out/<archetype>/`` (resuming what is there),
    and those in ``EXPOSURES`` again into ``out/<exposure folder>/`` with the needles that expose
    them; then write ``out/gallery.html``: their heatmaps side by side, each linked to its report."""
    sweeps, exposed = {}, {}
    for name in ARCHETYPES:
        spec = RunSpec(
            "niah", f"sim:{name}", grid.tokenizer, grid.lengths, grid.depths, grid.samples, seed=grid.seed
        )
        run_spec(spec, out / name, show_progress=show_progress)
        sweeps[name] = _niah_grid(out / name)
        if name in EXPOSURES:
            exposure = EXPOSURES[name]
            # No control: it asks without the context, where these needles change nothing, and the
            # gallery does not show it; leaving it out halves the run.
            hard = dataclasses.replace(spec, control=False, **exposure.changes)
            run_spec(hard, out / exposure.folder, show_progress=show_progress)
            exposed[name] = _niah_grid(out / exposure.folder)
    return write_gallery(out, sweeps, grid, exposed)


def _niah_grid(run: Path) -> NiahGrid:
    summary = read_summary(run)
    if summary is None or not isinstance(summary.sweep, NiahGrid):
        raise RunFolderError(f"'{run}' holds no NIAH summary: 'fathom report {run}' makes one")
    return summary.sweep


def _numbers(sweep: NiahGrid) -> str:
    effective, lim = sweep.effective_length, sweep.lost_in_the_middle_index
    return (
        f"effective length {length_or_none(effective['mean'])} (95% lower bound "
        f"{length_or_none(effective['lower_bound'])}) · lost-in-the-middle index "
        f"{'n/a' if lim is None else f'{lim:+.3f}'}"
    )


def _needles(folder: str, sweep: NiahGrid, caption: str | None) -> str:
    """One heatmap of an archetype, under the needles it ran on where it has two (``caption``); a
    click opens that run's report at the cell."""
    report = f"{folder}/{REPORT}"
    said = "" if caption is None else f'<p class="muted">{esc(caption)}</p>'
    return (
        f'<div class="needles" data-folder="{esc(folder)}">{said}'
        f"{niah_heatmap(sweep, with_samples=False, size='compact', report=report)}</div>"
    )


def write_gallery(
    out: Path,
    sweeps: Mapping[str, NiahGrid],
    grid: GalleryGrid,
    exposed: Mapping[str, NiahGrid] | None = None,
) -> Path:
    """gallery.html in ``out`` from the NIAH sweeps of runs in ``out/<name>/``, named by archetype,
    all run on ``grid``; ``exposed``: by archetype, its run in ``out/<EXPOSURES[name].folder>/``,
    shown beside its plain one."""
    figures = []
    exposed = exposed or {}
    for name, sweep in sweeps.items():
        maps = [_needles(name, sweep, PLAIN if name in exposed else None)]
        numbers = [_numbers(sweep)]
        if name in exposed:
            exposure = EXPOSURES[name]
            maps.append(_needles(exposure.folder, exposed[name], exposure.caption))
            numbers.append(f"{exposure.caption}: {_numbers(exposed[name])}")
        figures.append(
            f'<figure class="archetype" data-archetype="{esc(name)}"><figcaption><h2>'
            f'<a href="{esc(name)}/{REPORT}">sim:{esc(name)}</a></h2><p>{esc(ARCHETYPE_NOTES[name])}</p>'
            f"{''.join(f'<p>{esc(n)}</p>' for n in numbers)}</figcaption>"
            f'<div class="pair">{"".join(maps)}</div></figure>'
        )
    intro = (
        "<header><h1>fathom gallery: the simulated archetypes</h1><p>The simulated models, each a way "
        "a model can use (or fail to use) a long context, sim:perfect the reference; all run on one "
        "needle-in-a-haystack grid "
        f"({esc(grid.tokenizer)}, k={esc(grid.samples)}, seed {esc(grid.seed)}): x = context "
        "length, y = needle depth, colour = accuracy. The archetypes that plain needles cannot tell from "
        "sim:perfect are shown a second time beside it, on the needles that expose them. Hover a cell for "
        "its numbers; click it to open that run's report at the cell.</p></header>"
    )
    body = f'{intro}<div class="gallery">{"".join(figures)}</div>{legend("accuracy")}'
    return write_file(out / GALLERY, page("fathom gallery", body, {}))
