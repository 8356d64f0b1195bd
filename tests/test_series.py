"""fathom series: a training run's checkpoints, each a run of one spec, labelled, ordered, compared with
the baseline and with the best checkpoint before it.

Simulated checkpoints make the truth known. On a 1k-8k grid: step=100 is a cliff at 4k (the baseline),
step=200 finds every needle (the best so far), step=300 is the cliff at 4k again (the baseline's very
answers: unchanged against it, but 8k regressed against step=200), step=1000 a cliff at 2k (4k lost
against both; 1000 sorts after 300 as a number, before it as text).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil
from html.parser import HTMLParser
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

import pytest
from test_store import manifest, record

from fathom.analysis.pairing import RunRecords
from fathom.analysis.series import EFFECTIVE, make_series, order_runs
from fathom.cli import main
from fathom.errors import SpecError
from fathom.report.compare import read_run
from fathom.report.derive import run_spec
from fathom.report.files import REPORT, SERIES_HTML, SERIES_JSON
from fathom.report.series import default_out, read_series
from fathom.spec import RunSpec

if TYPE_CHECKING:
    from playwright.sync_api import Browser

SPEC = RunSpec("niah", "sim:perfect", "char", (1024, 2048, 4096, 8192), (0.0, 0.5, 1.0), 5)
CHECKPOINTS = {  # folder: (model, step)
    "c100": ("sim:cliff?window=4k", "100"),
    "c200": ("sim:perfect", "200"),
    "c300": ("sim:cliff?window=4k", "300"),
    "c1000": ("sim:cliff?window=2k", "1000"),
}
HOSTILE = "<script>alert(1)</script><b>x</b>$x$"  # markup, and matplotlib's mathtext


def cli(*args: str | Path) -> int:
    status: int = main([str(a) for a in args])
    return status


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("series") / "runs"
    for folder, (model, step) in CHECKPOINTS.items():
        labels = {"step": step, "ckpt": f"{folder}{HOSTILE if folder == 'c300' else ''}"}
        run_spec(dataclasses.replace(SPEC, model=model), root / folder, show_progress=False, labels=labels)
    return root


@pytest.fixture(scope="module")
def other_spec(runs: Path) -> Path:
    """A checkpoint run with another grid: not of the series' spec."""
    folder = runs.parent / "other" / "c400"
    run_spec(
        dataclasses.replace(SPEC, lengths=(1024, 2048)), folder, show_progress=False, labels={"step": "400"}
    )
    return folder


@pytest.fixture(scope="module")
def unlabelled(runs: Path) -> Path:
    folder = runs.parent / "other" / "plain"
    run_spec(dataclasses.replace(SPEC, model="sim:cliff?window=8k"), folder, show_progress=False)
    return folder


def folders(runs: Path, *names: str) -> list[Path]:
    return [runs / name for name in names]


def fingerprint(*roots: Path) -> dict[str, str]:
    """Every file under the folders, by path, hashed: what a series must leave as it found it."""
    return {
        str(path): hashlib.sha256(path.read_bytes()).hexdigest()
        for root in roots
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


def records(runs: Path, *names: str) -> list[RunRecords]:
    return [read_run(path) for path in folders(runs, *names)]


# --- the numbers -----------------------------------------------------------------------------------


def test_first_regressions_against_the_baseline_and_the_best_before(runs: Path) -> None:
    series = make_series(records(runs, "c1000", "c300", "c100", "c200"), by="step")
    assert [s.numbers.labels["step"] for s in series.steps] == ["100", "200", "300", "1000"]
    assert series.baseline_index == 0 and series.baseline.path == runs / "c100"
    baseline, perfect, again, shorter = series.steps
    assert baseline.baseline is None and baseline.best is None  # the first: nothing to compare with
    assert perfect.best_index == 0 and perfect.best is perfect.baseline  # made once
    assert again.best_index == 1 and shorter.best_index == 1  # step=200 is the best before them
    assert not perfect.regressed and perfect.baseline is not None and perfect.baseline.gate is not None
    assert [t.name for t in perfect.baseline.gate.tests if t.verdict == "improved"][:2] == ["overall", "8k"]

    firsts = {(f.against, f.level, f.name): f.step for f in series.first_regressions}
    assert firsts == {
        # Against the baseline: step=300 answers as it did; step=1000 loses 4k. Its effective length
        # (4k → 2k) is no flag: the baseline's own hangs on 1k's 13 of 15 against a threshold of 0.85,
        # which a third of the bootstrap's resamples miss.
        ("baseline", "overall", "overall"): 3,
        ("baseline", "length", "4k"): 3,
        # Against the best before: step=300 loses 8k (which step=200 found), step=1000 4k as well.
        ("best", "overall", "overall"): 2,
        ("best", "length", "8k"): 2,
        ("best", EFFECTIVE, EFFECTIVE): 2,
        ("best", "length", "4k"): 3,
    }
    assert not again.baseline or not again.baseline.gate or not again.baseline.gate.regressed
    assert again.regressed and shorter.regressed and series.regressed


def test_each_checkpoint_has_its_own_numbers_with_intervals(runs: Path) -> None:
    series = make_series(records(runs, "c100", "c200", "c300", "c1000"), by="step")
    perfect, shorter = series.steps[1].numbers, series.steps[3].numbers
    assert perfect.overall.mean == 1.0 and perfect.overall.n == 60
    assert perfect.overall.ci_low is not None and 0.9 < perfect.overall.ci_low < 1.0  # Wilson's, k=60
    # The cliffs refuse a few short prompts: 13 of 15 at 1k.
    means = [(a.length, a.score.mean) for a in shorter.lengths]
    assert means == [(1024, pytest.approx(13 / 15)), (2048, 1.0), (4096, 0.0), (8192, 0.0)]
    assert all(a.score.n == 15 for a in shorter.lengths)
    assert perfect.effective_length is not None and perfect.effective_length.mean == 8192
    assert shorter.effective_length is not None and shorter.effective_length.mean == 2048
    assert perfect.tasks == ()  # NIAH of one variant: no task level
    # The paired bootstrap's 95% intervals (at 1k, 13 of 15 is near the threshold: the low end is none).
    assert series.steps[1].effective_interval == (8192, 8192)
    assert series.steps[3].effective_interval == (None, 2048)
    # The baseline is the first step, its interval pinned (not only the same object read twice).
    assert series.baseline_interval == series.steps[0].effective_interval == (None, 4096)


def test_the_order_is_numeric_when_every_value_is_a_number(runs: Path) -> None:
    given = records(runs, "c300", "c1000", "c100", "c200")
    assert [r.path.name for r in order_runs(given, "step")] == ["c100", "c200", "c300", "c1000"]
    # As text, "1000" < "200": ckpt values are names, ordered as text.
    assert [r.path.name for r in order_runs(given, "ckpt")] == ["c100", "c1000", "c200", "c300"]
    assert order_runs(given, None) == given


def test_a_baseline_in_the_middle_or_outside_the_series(runs: Path, unlabelled: Path) -> None:
    middle = read_series(folders(runs, "c100", "c200", "c300"), "step", runs / "c200")
    assert middle.baseline_index == 1 and middle.steps[1].baseline is None
    assert middle.steps[0].baseline is not None and middle.steps[0].baseline.base.path == runs / "c200"
    firsts = {(f.against, f.name): f.step for f in middle.first_regressions}
    assert firsts[("baseline", "8k")] == 0 and firsts[("best", "8k")] == 2

    outside = read_series(folders(runs, "c200", "c300"), "step", unlabelled)  # the baseline has no step
    assert outside.baseline_index is None and outside.baseline.path == unlabelled
    assert all(step.baseline is not None for step in outside.steps)


def made_run(name: str, scores: dict[tuple[str, int], list[float]], suite: bool = False) -> RunRecords:
    """A run of RULER-style records (no depth), or a real suite's (with its items' tokens), each
    task and length scored as ``scores`` says, sample by sample."""
    rows = [
        dataclasses.replace(
            record(i), sample_id=f"{task}|L{length}|S{i}", task=task, length=length, depth=None, sample=i,
            score=score, item_id=f"{task}-{i}" if suite else None, original_tokens=length if suite else None,
        )
        for (task, length), values in scores.items()
        for i, score in enumerate(values)
    ]  # fmt: skip
    return RunRecords(Path(name), manifest(), rows)


def test_ruler_runs_have_their_tasks_and_a_first_regression_per_task() -> None:
    good = {(task, n): [1.0] * 12 for task in ("niah_single_1", "vt") for n in (1024, 4096)}
    runs = [
        made_run("a", good),
        made_run("b", good | {("vt", 4096): [0.5] * 12}),
        made_run("c", good | {("vt", 4096): [0.0] * 12, ("vt", 1024): [0.0] * 12}),
    ]
    series = make_series(runs)
    first = series.steps[0].numbers
    assert [t.task for t in first.tasks] == ["niah_single_1", "vt"]  # RULER's suite order
    last = series.steps[2].numbers
    vt = last.tasks[1]
    assert vt.score.mean == 0.0 and [(a.length, a.score.mean) for a in vt.lengths] == [
        (1024, 0.0),
        (4096, 0.0),
    ]
    # A RULER length is the mean over its tasks, each weighing the same.
    assert [(a.length, a.score.mean) for a in last.lengths] == [(1024, 0.5), (4096, 0.5)]
    assert last.effective_length is not None and last.effective_length.mean is None  # 50% < 85.6%
    firsts = {(f.against, f.level, f.name): f.step for f in series.first_regressions}
    assert firsts[("baseline", "task", "vt")] == 1 and firsts[("baseline", "length", "4k")] == 1
    assert firsts[("baseline", "length", "1k")] == 2 and ("baseline", "task", "niah_single_1") not in firsts


def test_a_suites_series_scores_its_tasks_over_their_items() -> None:
    good = {(task, n): [1.0] * 12 for task in ("hotpotqa", "qasper") for n in (1024, 4096)}
    runs = [made_run("a", good, suite=True), made_run("b", good | {("qasper", 4096): [0.0] * 12}, suite=True)]
    series = make_series(runs)
    numbers = series.steps[1].numbers
    assert numbers.effective_length is None and series.steps[1].effective_interval is None
    assert numbers.overall.mean == pytest.approx(0.75) and numbers.overall.n == 48  # the mean over tasks
    qasper = numbers.tasks[1]
    assert qasper.task == "qasper" and qasper.score.mean == 0.5 and qasper.score.n == 12  # 12 items
    firsts = {(f.against, f.level, f.name) for f in series.first_regressions}
    assert ("baseline", "task", "qasper") in firsts and ("baseline", "task", "hotpotqa") not in firsts


# --- the command ------------------------------------------------------------------------------------


def test_fathom_series_writes_its_files_and_exits_1_on_a_regressed_last_checkpoint(
    runs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = fingerprint(runs)
    out = tmp_path / "out"
    assert cli("series", *folders(runs, "c1000", "c200", "c100", "c300"), "--by", "step", "--out", out) == 1
    text = capsys.readouterr().out
    assert "first regressions against the baseline:\n  overall: step=1000" in text
    assert "  length 8k: step=300 (100.0% → 0.0%" in text and "against step=200)" in text
    assert "last checkpoint step=1000: regressed" in text
    assert f"wrote {out / SERIES_JSON} and {out / SERIES_HTML}" in text
    assert sorted(p.name for p in out.iterdir()) == [SERIES_HTML, SERIES_JSON]
    assert fingerprint(runs) == before  # nothing a series does changes a run folder

    data = json.loads((out / SERIES_JSON).read_text())
    assert data["by"] == "step" and data["regressed"] is True and data["baseline"]["index"] == 0
    assert [c["labels"]["step"] for c in data["checkpoints"]] == ["100", "200", "300", "1000"]
    third = data["checkpoints"][2]
    assert third["best_before"] == 1 and third["against_best"]["regressed"] is True
    assert third["against_baseline"]["regressed"] is False
    assert "length 8k" in third["against_best"]["gate"]["fired"]
    assert {(f["against"], f["name"], f["step"]) for f in data["first_regressions"]} >= {
        ("best", "8k", 2),
        ("baseline", "4k", 3),
    }
    assert data["checkpoints"][1]["lengths"][0] == {
        "length": 1024,
        "mean": 1.0,
        "ci_low": pytest.approx(0.796, abs=1e-3),
        "ci_high": 1.0,
        "n": 15,
    }


def test_exit_0_when_the_last_checkpoint_did_not_regress(runs: Path, tmp_path: Path) -> None:
    assert cli("series", *folders(runs, "c100", "c200"), "--by", "step", "--out", tmp_path / "out") == 0


def test_the_default_out_is_beside_the_first_run_and_never_in_one(runs: Path) -> None:
    assert default_out(runs / "c100").resolve() == runs / "series"
    assert default_out(Path(".")).resolve() == Path.cwd().parent / "series"


class _Page(HTMLParser):
    """What a page holds: its links, images and text."""

    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []
        self.images: list[str] = []
        self.text: list[str] = []
        self.tags: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        found = dict(attrs)
        if tag == "a":
            self.links.append(found["href"] or "")
        if tag == "img":
            self.images.append(found["src"] or "")

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def test_the_page_is_self_contained_escaped_and_links_each_report(runs: Path, tmp_path: Path) -> None:
    out = tmp_path / "deep" / "out"
    assert cli("series", *folders(runs, "c100", "c200", "c300", "c1000"), "--by", "ckpt", "--out", out) == 1
    html = (out / SERIES_HTML).read_text()
    parsed = _Page()
    parsed.feed(html)
    assert parsed.tags.count("img") == 2 + 4  # the two figures, four heatmaps
    assert all(src.startswith("data:image/png;base64,") for src in parsed.images)
    # The labels are text: the hostile one shows as written, and made no element.
    assert any(HOSTILE in chunk for chunk in parsed.text)
    assert "<script>alert(1)" not in html and "<b>x</b>" not in html
    assert parsed.tags.count("script") == 2 and parsed.tags.count("b") == 5  # the page's own, no more
    # Each checkpoint's name and heatmap link to its report, by a path relative to the page.
    reports = {(out / unquote(link)).resolve() for link in parsed.links}
    assert reports == {(runs / name / REPORT).resolve() for name in CHECKPOINTS}
    assert all(not link.startswith(("/", "file:", "http")) for link in parsed.links)
    text = " ".join(parsed.text)
    assert "First regressions" in text and "the best checkpoint before it" in text
    assert "Content-Security-Policy" in html and "default-src 'none'" in html


def test_a_run_without_its_report_or_heatmap_is_shown_without_them(runs: Path, tmp_path: Path) -> None:
    bare = shutil.copytree(runs / "c200", tmp_path / "bare")
    (bare / REPORT).unlink()
    (bare / "heatmap.png").unlink()
    out = tmp_path / "out"
    assert cli("series", runs / "c100", bare, "--out", out) == 0
    parsed = _Page()
    parsed.feed((out / SERIES_HTML).read_text())
    assert {(out / unquote(link)).resolve() for link in parsed.links} == {(runs / "c100" / REPORT).resolve()}
    assert parsed.tags.count("img") == 2 + 1 and "no heatmap (fathom report RUN draws it)" in parsed.text


# --- bad input: one line, exit 2, nothing written ----------------------------------------------------


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["c100"], "a series needs at least two runs, got 1"),
        (["c100", "c200", "c100"], "is named twice"),
        (["c100", "c200", "--by", "epoch"], "has no label 'epoch' to order by (its labels: ckpt, step)"),
        (["c100", "c200", "--alpha", "1.5"], "alpha must lie strictly between 0 and 1"),
        (["c100", "absent"], "does not exist"),
        (["c100", "c200", "--out", "c200/series"], "is inside run folder"),
        (["c100", "c200", "--out", "c100"], "is inside run folder"),
    ],
)
def test_bad_input_is_one_line_and_exit_2_with_nothing_written(
    arguments: list[str], message: str, runs: Path, capsys: pytest.CaptureFixture[str], monkeypatch: Any
) -> None:
    monkeypatch.chdir(runs)
    before = fingerprint(runs)
    given = [*arguments] if "--out" in arguments else [*arguments, "--out", "../nowhere"]
    assert cli("series", *given) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and err.startswith("fathom: error: ") and message in err
    assert not (runs.parent / "nowhere").exists() and not (runs / "series").exists()
    assert fingerprint(runs) == before


def test_runs_of_different_specs_are_refused_naming_what_differs(
    runs: Path, other_spec: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = fingerprint(runs, other_spec)
    assert cli("series", runs / "c100", runs / "c200", other_spec, "--out", tmp_path / "out") == 2
    err = capsys.readouterr().err
    assert f"'{other_spec}' is not a run of the spec of '{runs / 'c100'}'" in err
    assert "spec.lengths (base [1024, 2048, 4096, 8192], new [1024, 2048])" in err
    assert not (tmp_path / "out").exists() and fingerprint(runs, other_spec) == before


def test_a_run_without_the_by_label_is_named(
    runs: Path, unlabelled: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli("series", runs / "c100", unlabelled, "--by", "step", "--out", tmp_path / "out") == 2
    err = capsys.readouterr().err
    assert f"run '{unlabelled}' has no label 'step' to order by (its labels: none)" in err
    assert not (tmp_path / "out").exists()
    # Without --by, an unlabelled run is a checkpoint like any other, named by its folder.
    assert cli("series", runs / "c100", unlabelled, "--out", tmp_path / "out") == 0
    assert "  plain " in capsys.readouterr().out


def test_two_runs_with_one_value_of_the_by_label_are_refused(runs: Path, tmp_path: Path) -> None:
    copy = shutil.copytree(runs / "c100", tmp_path / "again")
    with pytest.raises(SpecError, match=r"have one step \(100\): a series orders its checkpoints by step"):
        order_runs([read_run(runs / "c100"), read_run(copy)], "step")


def test_a_label_that_does_not_parse_is_refused_by_fathom_run(tmp_path: Path) -> None:
    flags = ["--tokenizer", "char", "--lengths", "1k", "--depths", "0.5", "--samples", "1"]
    for label in ("step=", "=1", "step=1=2"):
        assert cli("run", "niah", "--model", "sim:perfect", *flags, "--out", tmp_path, "--label", label) == 2
    assert list(tmp_path.iterdir()) == []


# --- in the browser ----------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_click_on_a_heatmap_opens_that_checkpoints_report(
    runs: Path, tmp_path: Path, browser: Browser
) -> None:
    out = tmp_path / "out"
    assert cli("series", *folders(runs, "c300", "c200"), "--by", "ckpt", "--out", out) == 1
    tab = browser.new_page()
    problems: list[str] = []
    tab.on("console", lambda m: None if m.type != "error" else problems.append(m.text))
    tab.on("pageerror", lambda e: problems.append(str(e)))
    tab.on("request", lambda r: None if r.url.startswith(("file:", "data:")) else problems.append(r.url))
    tab.goto((out / SERIES_HTML).as_uri())
    assert tab.locator("#heatmaps img").count() == 2
    assert HOSTILE in tab.locator("#checkpoints").inner_text()
    assert tab.evaluate("document.querySelectorAll('#checkpoints img').length") == 0
    tab.locator("#heatmaps a img").nth(1).click()
    tab.wait_for_load_state()
    assert tab.url == (runs / "c300" / REPORT).resolve().as_uri()
    assert problems == []
    tab.close()


def test_a_series_read_from_an_index_is_the_series_read_from_the_folders(
    runs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """fathom series --index reads the checkpoints from fathom index's file: named one by one, as the
    folder that holds them, or not at all (every run the index holds); the series is the same."""
    pytest.importorskip("duckdb")
    index = tmp_path / "results.duckdb"
    assert cli("index", runs, "--out", index) == 0
    before = fingerprint(runs)
    from_folders = read_series(folders(runs, *CHECKPOINTS), "step")
    named = read_series(folders(runs, *CHECKPOINTS), "step", index=index)
    whole = read_series([], "step", index=index)
    held = read_series([runs], "step", index=index)

    def numbers(series: Any) -> Any:
        data = series.to_json()
        for checkpoint in (data["baseline"], *data["checkpoints"]):
            checkpoint.pop("path")
        for checkpoint in data["checkpoints"]:
            for against in ("against_baseline", "against_best"):
                if checkpoint[against] is not None:
                    checkpoint[against].pop("base")
        return data

    assert numbers(named) == numbers(whole) == numbers(held) == numbers(from_folders)
    capsys.readouterr()
    out = tmp_path / "out"
    assert cli("series", "--index", index, "--by", "step", "--out", out) == 1
    assert "last checkpoint step=1000: regressed" in capsys.readouterr().out
    assert fingerprint(runs) == before
    assert cli("series", "--by", "step", "--out", out) == 2  # no runs and no index
    assert "name the checkpoints' run folders" in capsys.readouterr().err
