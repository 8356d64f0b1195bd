"""What fathom reads whole from a run folder that may be someone else's (its manifest, its summary,
the plots a series page embeds or a tracker is sent): never through a planted link, which would carry
what it points at (a key) into a page or a tracker, and never more bytes than fathom writes there."""

from __future__ import annotations

import base64
import os
import shutil
from pathlib import Path

import pytest

import fathom.report.files as files_module
import fathom.run.store as store_module
from fathom.cli import main
from fathom.errors import RunFolderError
from fathom.report.files import read_summary
from fathom.report.html.page import image
from fathom.safe_files import LinkedFileError, OversizedFileError, read_regular
from fathom.track.logged import run_logged

SECRET = b"-----BEGIN OPENSSH PRIVATE KEY-----\nthe victim's own bytes\n"


def cli(*args: str | Path) -> int:
    status: int = main([str(a) for a in args])
    return status


def make_run(folder: Path, step: int) -> Path:
    grid = ["--lengths", "1k", "--depths", "2", "--samples", "1", "--no-control", "--no-progress"]
    assert (
        cli("run", "niah", *grid, "--model", "sim:perfect", "--label", f"step={step}", "--run-dir", folder)
        == 0
    )
    return folder


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_run(tmp_path_factory.mktemp("finished") / "run", 1)


@pytest.fixture
def run(finished: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(finished, tmp_path / "run", symlinks=True))


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    path = tmp_path / "outside" / "id_ed25519"
    path.parent.mkdir()
    path.write_bytes(SECRET)
    return path


def plant(link: Path, target: Path) -> Path:
    link.unlink(missing_ok=True)
    link.symlink_to(target)
    return link


def test_read_regular_reads_up_to_its_bound_and_refuses_a_byte_more(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"0123456789")
    assert read_regular(path, 10, "a plot") == b"0123456789"
    with pytest.raises(OversizedFileError) as refused:
        read_regular(path, 9, "a plot")
    assert str(refused.value) == (
        f"'{path}' holds more than 9 bytes, more than fathom writes in a plot: it is not fathom's own; "
        "move it aside"
    )


def test_read_regular_refuses_a_link_and_a_fifo_without_waiting_for_a_writer(
    tmp_path: Path, secret: Path
) -> None:
    link = plant(tmp_path / "heatmap.png", secret)
    fifo = tmp_path / "grid.png"
    os.mkfifo(fifo)
    for path in (link, fifo):
        with pytest.raises(LinkedFileError) as refused:
            read_regular(path, 1 << 20, "a plot")
        assert f"'{path}' is a link or no regular file" in str(refused.value)


def test_a_series_embeds_no_heatmap_through_a_link_and_says_so(
    run: Path, tmp_path: Path, secret: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    later = make_run(tmp_path / "later", 2)
    link = plant(later / "heatmap.png", secret)
    out = tmp_path / "series"
    capsys.readouterr()
    assert cli("series", run, later, "--by", "step", "--out", out) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("fathom: error:")]
    assert len(errors) == 1 and f"'{link}' is a link or no regular file" in errors[0]
    written = list(out.glob("*")) if out.exists() else []
    assert all(base64.b64encode(SECRET).decode() not in p.read_text(errors="replace") for p in written)


def test_a_series_of_the_same_runs_without_the_link_embeds_both_heatmaps(run: Path, tmp_path: Path) -> None:
    later = make_run(tmp_path / "later", 2)
    out = tmp_path / "series"
    assert cli("series", run, later, "--by", "step", "--out", out) in (0, 1)
    page = (out / "series.html").read_text()
    for folder in (run, later):
        assert base64.b64encode((folder / "heatmap.png").read_bytes()).decode() in page


def test_a_tracker_is_sent_no_plot_through_a_link(run: Path, secret: Path) -> None:
    assert set(run_logged(run).images) == {p.name for p in run.glob("*.png")} != set()
    plant(run / "heatmap.png", secret)
    with pytest.raises(LinkedFileError):
        run_logged(run)


def test_a_report_page_embeds_no_plot_through_a_link(tmp_path: Path, secret: Path) -> None:
    plot = tmp_path / "depth.png"
    plot.write_bytes(b"\x89PNG plot")
    assert base64.b64encode(b"\x89PNG plot").decode() in image(plot, "depth")
    plant(plot, secret)
    with pytest.raises(LinkedFileError):
        image(plot, "depth")


def test_a_manifest_larger_than_any_fathom_writes_is_refused_unread(
    run: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    size = (run / "manifest.json").stat().st_size
    monkeypatch.setattr(store_module, "MANIFEST_MOST", size)
    assert cli("report", run) == 0  # at the bound: read
    monkeypatch.setattr(store_module, "MANIFEST_MOST", size - 1)
    capsys.readouterr()
    assert cli("report", run) == 2
    err = capsys.readouterr().err
    assert f"holds more than {size - 1:,} bytes, more than fathom writes in a manifest" in err
    assert err.count("\n") == 1


def test_a_summary_larger_than_any_fathom_writes_is_refused_as_damaged(
    run: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    size = (run / "summary.json").stat().st_size
    monkeypatch.setattr(files_module, "SUMMARY_MOST", size)
    assert read_summary(run) is not None
    monkeypatch.setattr(files_module, "SUMMARY_MOST", size - 1)
    with pytest.raises(RunFolderError) as refused:
        read_summary(run)
    assert (
        str(refused.value)
        == f"{run / 'summary.json'} is damaged or unreadable: 'fathom report {run}' makes it anew"
    )
