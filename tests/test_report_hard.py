"""The report layer of hard needles and variants: report.html's "Hard needles" and "Variants"
sections, the per-variant heatmap PNGs, fathom compare's failure counts, and the gallery's exposing
runs. Each from a small simulated run whose numbers can be checked by hand.

sim:pattern-matcher takes the look-alike sentence nearest the end of the context for the answer, so
with distractors it is right only where the gold needle is the last of them (depth 100%): 1 of 3
depths. sim:literal finds the sentence that repeats the question's words: every literal twin, no
low-overlap needle.
"""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path

import pytest
from test_html_report import PAYLOADS, assert_inert, data_block

import fathom.report.derive
from fathom.analysis.niah import CellStats
from fathom.analysis.select import is_literal_twin
from fathom.analysis.stats import wilson_interval
from fathom.analysis.summary import NiahGrid
from fathom.backends.sim import ARCHETYPES
from fathom.cli import main
from fathom.records import SampleRecord
from fathom.registry import check_spec
from fathom.report.compare import compare_runs
from fathom.report.compare_text import comparison_text
from fathom.report.derive import derive
from fathom.report.files import HEATMAP, REPORT, read_summary, variant_heatmap
from fathom.report.gallery import EXPOSURES, GalleryGrid, gallery, write_gallery
from fathom.report.html.page import cell_key, esc
from fathom.run.store import RunFolder
from fathom.spec import RunSpec

GRID = ["--tokenizer", "char", "--lengths", "2k,4k", "--depths", "3", "--samples", "3", "--no-progress"]
K, DEPTHS, LENGTHS = 3, (0.0, 0.5, 1.0), (2048, 4096)
CORPORA = ("noise", "prose")


def cli(*args: str | Path) -> int:
    status: int = main([str(a) for a in args])
    return status


def run(folder: Path, model: str, *options: str) -> Path:
    assert cli("run", "niah", "--model", model, *GRID, *options, "--run-dir", folder) == 0
    return folder


def samples(folder: Path) -> list[SampleRecord]:
    lines = (folder / "samples.jsonl").read_text().splitlines()
    return [r for r in map(SampleRecord.from_json, map(json.loads, lines)) if not r.control]


class Tables(HTMLParser):
    """A page's tables by section id and the heading (h3) above each: their rows as cell texts; and
    each section's paragraphs."""

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tables: dict[tuple[str, str], list[tuple[str, ...]]] = {}
        self.paragraphs: dict[str, list[str]] = {}
        self.section = self.heading = ""
        self.text: list[str] | None = None
        self.row: list[str] = []
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "section":
            self.section, self.heading = dict(attrs).get("id") or "", ""
        elif tag in ("h3", "p", "td", "th"):
            self.text = []
        elif tag == "tr":
            self.row = []

    def handle_data(self, data: str) -> None:
        if self.text is not None:
            self.text.append(data)

    def handle_endtag(self, tag: str) -> None:
        text = "".join(self.text or ())
        if tag == "h3":
            self.heading = text
        elif tag == "p":
            self.paragraphs.setdefault(self.section, []).append(text)
        elif tag in ("td", "th"):
            self.row.append(text)
        elif tag == "tr":
            self.tables.setdefault((self.section, self.heading), []).append(tuple(self.row))
        if tag in ("h3", "p", "td", "th"):
            self.text = None


def body(tables: Tables, section: str, heading: str) -> list[tuple[str, ...]]:
    """A table's rows below its header row."""
    return tables.tables[section, heading][1:]


def share(count: int, n: int) -> tuple[str, str]:
    """How the page writes a count of n and its Wilson interval."""
    low, high = wilson_interval(count, n)
    return f"{count} of {n} ({count / n:.1%})", f"{low:.1%} to {high:.1%}"


# Runs shared by the module's tests.


@pytest.fixture(scope="module")
def lure_pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """sim:perfect and sim:pattern-matcher on 3 distractors, two haystack domains (variants)."""
    root = tmp_path_factory.mktemp("lures")
    options = ("--distractors", "3", "--corpus", ",".join(CORPORA), "--no-control")
    return run(root / "base", "sim:perfect", *options), run(root / "new", "sim:pattern-matcher", *options)


@pytest.fixture(scope="module")
def latent_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """sim:literal on low-overlap needles in two domains: four variants, two of them literal twins."""
    folder = tmp_path_factory.mktemp("latent") / "run"
    return run(folder, "sim:literal", "--needle", "latent-1", "--corpus", ",".join(CORPORA), "--no-control")


@pytest.fixture(scope="module")
def several_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("several") / "run"
    return run(folder, "sim:lost-in-the-middle?window=4k", "--needles", "3", "--no-control")


@pytest.fixture(scope="module")
def split_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("split") / "run"
    return run(folder, "sim:perfect", "--needle", "split", "--split-distance", "random", "--no-control")


# report.html


def test_distractors_taken_and_hedged_per_length(lure_pair: tuple[Path, Path]) -> None:
    _, new = lure_pair
    page = Tables((new / REPORT).read_text())
    # Per length: 2 domains x 3 depths x k=3 = 18 samples with distractors; the matcher is right at
    # depth 100% only, so it answers a distractor in the other 12 and never hedges.
    assert body(page, "hard", "Distractors") == [
        (length, "18", *share(12, 18), *share(0, 18)) for length in ("2k", "4k")
    ]
    lured = Counter(r.length for r in samples(new) if r.lured and r.depth != 1.0)
    assert lured == dict.fromkeys(LENGTHS, 12)
    # The failures section counts them too, as "distractor".
    failures = dict((row[0], row[2]) for row in body(page, "failures", ""))
    assert failures["distractor"] == "24" and failures["hedged"] == "0"


def test_every_needle_found_and_missed_positions_follow_from_the_records(
    several_run: Path, tmp_path: Path
) -> None:
    # The run's answers set by hand: sample 0 of each cell finds its 3 needles, samples 1 and 2 only
    # the first (the one at the cell's depth). So per length 3 of 9 samples find every needle, and a
    # needle is found where it is a sample 0's or a first one.
    folder = tmp_path / "run"
    shutil.copytree(several_run, folder)
    lines = [json.loads(line) for line in (folder / "samples.jsonl").read_text().splitlines()]
    for line in lines:
        line["matched"] = line["answers"] if line["sample"] == 0 else line["answers"][:1]
        line["score"] = len(line["matched"]) / 3
    (folder / "samples.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert cli("report", folder) == 0
    page = Tables((folder / REPORT).read_text())
    # Wilson's interval of 3 of 9 by hand (z = 1.96): centre (1/3 + z²/18) / (1 + z²/9) = 0.3833,
    # half-width z √(2/81 + z²/324) / (1 + z²/9) = 0.2626.
    assert body(page, "hard", "Every needle found") == [
        (length, "9", "33.3%", "12.1% to 64.6%") for length in ("2k", "4k")
    ]
    # Each of the 3 x 18 gold needles counted once, in the tenth of the depth it was placed in.
    bins: dict[int, list[bool]] = {}
    for line in lines:
        for index, depth in enumerate(line["needle_depths"]):
            bins.setdefault(min(9, int(depth * 10)), []).append(line["sample"] == 0 or index == 0)
    assert sum(map(len, bins.values())) == 3 * 18
    assert [row[:3] for row in body(page, "hard", "Which needles were missed")] == [
        (f"{10 * b}% to {10 * b + 10}%", str(len(bins[b])), str(sum(bins[b]))) for b in sorted(bins)
    ]
    assert min(bins) == 0 and max(bins) == 9  # the cells' depths 0% and 100%: both ends' bins


def test_split_needles_by_distance_between_parts(split_run: Path) -> None:
    rows = body(Tables((split_run / REPORT).read_text()), "hard", "Split needles by distance between parts")
    # Each sample in the tenth of the haystack its two parts landed apart (the distance drawn at random).
    tenths = Counter(
        min(9, int(abs(first - second) * 10))
        for first, second in (r.needle_depths for r in samples(split_run))
    )
    assert sum(tenths.values()) == len(LENGTHS) * len(DEPTHS) * K and len(tenths) > 1
    assert [row[:3] for row in rows] == [
        (f"0.{t}-{(t + 1) / 10:.1f}", str(tenths[t]), "100.0%")  # sim:perfect joins every split needle
        for t in sorted(tenths)
    ]


def test_overlap_literal_cost_and_redraws(latent_run: Path) -> None:
    page = Tables((latent_run / REPORT).read_text())
    records = samples(latent_run)
    # 2 domains x 2 lengths x 3 depths x k=3 = 36 samples per kind: the literal reader finds every
    # literal twin (which repeats the question's words) and no low-overlap needle (which shares no
    # content word; ROUGE-1 counts function words too, as "to" in "learned to surf": a little).
    twins = [r for r in records if is_literal_twin(r.task)]
    words = sum(r.overlap_words or 0 for r in twins) / len(twins)
    rouge = sum(r.overlap_rouge1 or 0.0 for r in twins) / len(twins)
    latent = [r for r in records if r.needle_kind == "latent-1" and not is_literal_twin(r.task)]
    latent_rouge = sum(r.overlap_rouge1 or 0.0 for r in latent) / len(latent)
    assert latent_rouge < 0.05
    assert body(page, "hard", "Lexical overlap with the question") == [
        ("latent-1", "36", "0.0", f"{latent_rouge:.2f}", "0.0%", "0.0% to 9.6%"),
        ("latent-1-literal", "36", f"{words:.1f}", f"{rouge:.2f}", "100.0%", "90.4% to 100.0%"),
    ]
    assert words >= 2  # the literal reader's least: it shares enough words to be found
    # Per length, 18 pairs, each literal twin right where its low-overlap sample is wrong: the cost
    # is 100 points, and the sign test's p is 2 / 2^18.
    assert body(page, "hard", "What removing the overlap costs") == [
        (length, "18", "0.0%", "100.0%", "+100.0", "18", "0", f"{2 / 2**18:.3g}") for length in ("2k", "4k")
    ]
    # Hygiene reads each sample's own window of the corpus: at 2k and 4k none of this run's items is
    # named there, so nothing was drawn again and the page says nothing of it (the paragraph of a run
    # with a redraw: test_hostile_variant_names_and_redraw_reasons_are_escaped).
    assert [r for r in records if r.redraws] == []
    assert [p for p in page.paragraphs["hard"] if "drawn again" in p] == []


def test_a_run_of_plain_needles_has_no_variants_and_no_hard_section(
    lure_pair: tuple[Path, Path], tmp_path: Path
) -> None:
    folder = run(tmp_path / "plain", "sim:perfect", "--lengths", "1k", "--depths", "0.5", "--no-control")
    html = (folder / REPORT).read_text()
    assert '<section id="variants">' not in html
    # Its one needle kind's overlap compares nothing: no "Hard needles" on a plain run (#33).
    assert '<section id="hard">' not in html
    assert not {heading for section, heading in Tables(html).tables if section == "hard"}


def test_one_heatmap_per_variant_whose_cells_show_that_variants_samples(latent_run: Path) -> None:
    html = (latent_run / REPORT).read_text()
    tasks = [f"niah:{c}{twin}" for c in CORPORA for twin in ("", "+literal")]
    assert re.findall(r'<figure class="variant" data-variant="([^"]+)"', html) == tasks
    lists = json.loads(data_block(html))["lists"]
    shown = json.loads(data_block(html))["samples"]
    for task in tasks:
        cells = re.findall(rf'data-variant="{re.escape(task)}" data-key="([^"]+)"', html)
        assert len(cells) == len(LENGTHS) * len(DEPTHS)
        for key in cells:
            ids = [shown[i]["id"] for i in lists[f"cell {key}"]]
            assert len(ids) == K and all(i.startswith(f"{task}|") for i in ids)
    # The pooled grid's cell lists the variants asked, not the literal twins: 2 domains x k.
    pooled = [shown[i]["id"] for i in lists["cell " + cell_key(2048, 0.5)]]
    assert len(pooled) == 2 * K and not any(is_literal_twin(i.split("|")[0]) for i in pooled)
    rows = body(Tables(html), "variants", "Accuracy by variant and length")
    twin = "+literal (literal twin: a contrast, not pooled)"
    assert [row[:3] for row in rows] == [
        (name, score, score)
        for c in CORPORA
        for name, score in ((f"niah:{c}", "0.0%"), (f"niah:{c}{twin}", "100.0%"))
    ]


def test_a_cells_tooltip_gives_the_needles_likeness_to_the_corpus(latent_run: Path) -> None:
    summary = read_summary(latent_run)
    assert summary is not None and isinstance(summary.sweep, NiahGrid)
    cell = summary.sweep.cells[0]
    assert cell["similarity"] is not None
    html = (latent_run / REPORT).read_text()
    title = re.search(
        rf'data-key="{re.escape(cell_key(cell["length"], cell["depth"]))}"[^>]*title="([^"]*)"', html
    )
    assert title is not None
    assert title[1].endswith(
        f"needle/haystack likeness up to {cell['similarity']:.2f} (content-word Jaccard)"
    )


def test_hostile_variant_names_and_redraw_reasons_are_escaped(latent_run: Path, tmp_path: Path) -> None:
    """A variant's name holds what --corpus was given (dir:PATH), and a redraw's reason quotes corpus
    text: both reach the page only as escaped text, and the variant's PNG only under a safe name."""
    folder = tmp_path / "hostile"
    folder.mkdir()
    for name in ("manifest.json", "samples.jsonl"):
        (folder / name).write_bytes((latent_run / name).read_bytes())
    renamed = {"niah:noise": f"niah:{PAYLOADS[0]}", "niah:prose": f"niah:{PAYLOADS[2]}/../x"}
    lines = []
    for line in (folder / "samples.jsonl").read_text().splitlines():
        record = json.loads(line)
        task = record["task"]
        record["task"] = renamed.get(task, task)
        record["sample_id"] = record["sample_id"].replace(f"{task}|", f"{record['task']}|", 1)  # its cell's
        if not lines:  # the first sample's needles drawn again, for a reason that quotes markup
            record["redraws"] = [PAYLOADS[1], *record.get("redraws", [])]
        lines.append(json.dumps(record) + "\n")
    (folder / "samples.jsonl").write_text("".join(lines))
    assert cli("report", folder) == 0
    html = (folder / REPORT).read_text()
    assert_inert(html, PAYLOADS)
    # Shown, as text: each variant's name (its heading, its table row, its cells) and the reason.
    for task in renamed.values():
        assert f'<figure class="variant" data-variant="{esc(task)}">' in html
        assert f"<td>{esc(task)}</td>" in html
    [again] = [p for p in Tables(html).paragraphs["hard"] if "drawn again" in p]
    assert again.startswith("1 samples had their needles drawn again")  # the first sample's, set above
    assert f"The first reason: {esc(PAYLOADS[1])}." in html
    pngs = sorted(p.name for p in folder.glob("*.png"))
    assert len(pngs) == 5 and all(re.fullmatch(r"heatmap(-[A-Za-z0-9._+-]+)?\.png", name) for name in pngs)
    assert not [p for p in folder.iterdir() if p.is_dir()]  # nothing climbed into a folder of its own


# The PNGs


def test_heatmap_png_plots_the_variants_asked_and_each_variant_has_its_own(
    latent_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plotted: dict[str, list[CellStats]] = {}

    def keep(cells: list[CellStats], path: Path, title: str) -> None:
        plotted[path.name] = list(cells)

    monkeypatch.setattr(fathom.report.derive, "plot_heatmap", keep)
    summary = derive(RunFolder(latent_run))
    pooled = plotted.pop(HEATMAP)
    # The two domains asked, k=3 each, pooled; their literal twins (each found) are not in it.
    assert [(c.length, c.depth, c.n, c.mean) for c in pooled] == [
        (n, d, 2 * K, 0.0) for n in LENGTHS for d in DEPTHS
    ]
    assert isinstance(summary.sweep, NiahGrid)
    assert [dataclasses.asdict(c) for c in pooled] == list(summary.sweep.cells)
    assert sorted(plotted) == sorted(f"heatmap-{c}{t}.png" for c in CORPORA for t in ("", "+literal"))
    for task, grid in summary.sweep.variants.items():
        cells = plotted[variant_heatmap(task)]
        assert {(c.n, c.mean) for c in cells} == {(K, 1.0 if is_literal_twin(task) else 0.0)}
        assert [dataclasses.asdict(c) for c in cells] == grid["cells"]


def test_the_real_pngs_are_written(latent_run: Path) -> None:
    names = {p.name for p in latent_run.glob("heatmap*.png")}
    assert names == {HEATMAP} | {variant_heatmap(f"niah:{c}{t}") for c in CORPORA for t in ("", "+literal")}


@pytest.mark.parametrize(
    ("task", "name"),
    [
        ("niah:prose", "heatmap-prose.png"),
        ("niah:code+literal", "heatmap-code+literal.png"),
        ("niah:literal", "heatmap-literal.png"),
    ],
)
def test_a_variants_heatmap_is_named_by_its_variant(task: str, name: str) -> None:
    assert variant_heatmap(task) == name


@pytest.mark.parametrize(
    "task",
    ["niah:dir:/srv/docs/../etc", "niah:mix:code=0.3,prose=0.7", "niah:..", "niah:a b", "niah:" + "x" * 300],
)
def test_a_variant_name_that_is_no_safe_file_name_is_made_one(task: str) -> None:
    name = variant_heatmap(task)
    assert re.fullmatch(r"heatmap-[A-Za-z0-9._+-]{1,80}\.png", name) and "/" not in name
    assert not name.startswith("heatmap-.")
    # Another variant that differs only in the characters left out keeps another file.
    assert variant_heatmap(task + "?") != name


# fathom compare


def test_compare_counts_each_runs_failures_by_kind(lure_pair: tuple[Path, Path]) -> None:
    comparison = compare_runs(*lure_pair)
    counts = {f.kind: (f.base, f.new) for f in comparison.failures if f.base or f.new}
    # 2 lengths x 12 samples whose gold was not the last look-alike: the matcher took a distractor.
    assert counts == {"distractor": (0, 24)}
    assert comparison.to_json()["failures"]["hedged"] == {"base": 0, "new": 0}
    assert "failures by kind, base → new, over the 36 samples both runs hold: distractor 0 → 24" in (
        comparison_text(comparison)
    )


def test_compare_keys_the_cells_of_several_variants_by_task(
    lure_pair: tuple[Path, Path], tmp_path: Path
) -> None:
    comparison = compare_runs(*lure_pair)
    keys = [(c.task, c.length, c.depth) for c in comparison.cells]
    assert keys == [(f"niah:{c}", n, d) for c in CORPORA for n in LENGTHS for d in DEPTHS]
    assert all(c.test.pairs == K for c in comparison.cells)
    lines = comparison_text(comparison)
    # 3 pairs per cell: no cell can reach a verdict, but the pooled levels see the distractors taken.
    assert all(c.verdict == "unchanged" for c in comparison.cells)
    assert comparison.gate is not None and comparison.gate.fired()[0] == "overall"
    assert "warning: no cell test can reach significance at alpha 0.04 with 3 pairs" in "\n".join(lines)
    assert cli("compare", *lure_pair, "--out", tmp_path / "out") == 1
    html = (tmp_path / "out" / "compare.html").read_text()
    rows = re.findall(r'<div class="head row">([^<]+)</div>', html.split('<section id="comparison">')[1])
    assert rows[:6] == [f"niah:{c} · {d}" for c in CORPORA for d in ("0%", "50%", "100%")]
    page = Tables(html)
    assert body(page, "comparison", "Failures by kind") == [
        ("distractor", "answered a distractor: a look-alike's value, not the answer", "0", "24", "+24")
    ]


# The gallery


def test_every_exposure_is_of_an_archetype_and_a_spec_the_task_takes() -> None:
    assert set(EXPOSURES) <= set(ARCHETYPES)
    for name, exposure in EXPOSURES.items():
        spec = RunSpec("niah", f"sim:{name}", "char", (2048,), (0.5,), 1)
        check_spec(dataclasses.replace(spec, control=False, **exposure.changes))


def test_the_gallery_shows_the_exposed_archetypes_twice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only the archetypes shown twice, on a grid of one length: the three that plain needles cannot tell
    apart from sim:perfect look perfect on their plain run and fail on the needles that expose them
    (the one-fact reader finds one of four needles asked at once);
    the odd-name reader finds no character among plain needles and every one on low-overlap needles
    with no other character in the haystack (its shortcut)."""
    monkeypatch.setattr("fathom.report.gallery.ARCHETYPES", {n: ARCHETYPES[n] for n in EXPOSURES})
    grid = GalleryGrid(lengths=(2048,), depths=(0.5, 1.0), samples=1, tokenizer="char")
    html = gallery(tmp_path, grid).read_text()
    for name, exposure in EXPOSURES.items():
        figure = html.split(f'data-archetype="{name}"')[1].split("</figure>")[0]
        assert re.findall(r'data-folder="([^"]+)"', figure) == [name, exposure.folder]
        assert re.findall(r'<p class="muted">([^<]+)</p>', figure) == ["plain needles", exposure.caption]
        assert re.findall(r'data-report="([^"]+)"', figure) == [
            f"{name}/{REPORT}",
            f"{exposure.folder}/{REPORT}",
        ]
        plain, exposed = (read_summary(tmp_path / folder) for folder in (name, exposure.folder))
        assert plain is not None and exposed is not None
        # The matcher is right where the gold is the last look-alike (depth 100%), the literal reader
        # nowhere; the odd-name reader on the one character it can find, wherever it landed whole.
        # The thinker, counting in characters, runs out in both: with no budget at the answer's 32
        # characters (25 of reasoning, its tags apart), with 192 more at 217 of them.
        expected = {"pattern-matcher": (1.0, 0.5), "literal": (1.0, 0.0), "odd-name": (0.0, None),
                    "one-fact": (1.0, 0.25), "thinker": (0.0, 0.0)}[name]  # fmt: skip
        if name == "thinker":
            thought = [s.thinking for s in (plain, exposed)]
            assert [(t["tokens_max"], t["still_thinking"]) for t in thought if t] == [(25, 2), (217, 2)]
        assert [r["mean"] for r in plain.lengths] == [expected[0]]
        if expected[1] is None:
            assert exposed.lengths[0]["mean"] > 0.0
        else:
            assert [r["mean"] for r in exposed.lengths] == [expected[1]]


def test_an_archetype_without_an_exposure_has_one_heatmap_and_no_caption(
    tmp_path: Path, latent_run: Path
) -> None:
    summary = read_summary(latent_run)
    assert summary is not None and isinstance(summary.sweep, NiahGrid)
    html = write_gallery(tmp_path, {"cliff": summary.sweep}, GalleryGrid()).read_text()
    assert html.count('class="needles"') == 1 and '<p class="muted">' not in html
