"""What fathom reads whole from a run folder that may be someone else's (its manifest, its summary,
the plots a series page embeds or a tracker is sent): never through a planted link, which would carry
what it points at (a key) into a page or a tracker, and never more bytes than fathom writes there."""

from __future__ import annotations

import base64
import json
import os
import shutil
import threading
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from test_links import cli, plant, run_args

import fathom.plan.readers as readers
import fathom.prompts.haystack.files as haystack_files
import fathom.prompts.judging as judging
import fathom.prompts.latent as latent
import fathom.prompts.templates as templates
import fathom.report.files as files_module
import fathom.run.store as store_module
import fathom.tasks.ruler.qa_data as qa_data
from fathom.errors import RunFolderError
from fathom.prompts.haystack.files import read_files
from fathom.prompts.judging import read_shipped
from fathom.prompts.templates import resolve_template
from fathom.prompts.tokenizers import load_tokenizer
from fathom.report.files import read_summary
from fathom.report.html.page import image
from fathom.safe_files import LinkedFileError, OversizedFileError, read_bounded
from fathom.track.logged import run_logged

SECRET = b"-----BEGIN OPENSSH PRIVATE KEY-----\nthe victim's own bytes\n"


def make_run(folder: Path, step: int) -> Path:
    assert cli(*run_args(folder, "sim:perfect", "--label", f"step={step}")) == 0
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


def test_read_bounded_reads_up_to_its_bound_and_refuses_a_byte_more(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"0123456789")
    assert read_bounded(path, 10, "a plot") == b"0123456789"
    with pytest.raises(OversizedFileError) as refused:
        read_bounded(path, 9, "a plot")
    assert str(refused.value) == (
        f"'{path}' holds more than 9 bytes, more than a plot ever holds: "
        "it is not fathom's own; move it aside"
    )


def test_read_bounded_refuses_a_link_and_a_fifo_without_waiting_for_a_writer(
    tmp_path: Path, secret: Path
) -> None:
    link = plant(tmp_path / "heatmap.png", secret)
    fifo = tmp_path / "grid.png"
    os.mkfifo(fifo)
    for path in (link, fifo):
        with pytest.raises(LinkedFileError) as refused:
            read_bounded(path, 1 << 20, "a plot")
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
    assert f"holds more than {size - 1:,} bytes, more than a manifest ever holds" in err
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


# Files the user names (a template, a config, a corpus, QA data, items, a rubric): a link or a pipe of
# theirs is read, but never more than such a file can hold.


def test_a_file_the_user_names_may_be_a_link_or_a_pipe_and_is_still_bounded(tmp_path: Path) -> None:
    target = tmp_path / "template.jinja"
    target.write_bytes(b"0123456789")
    link = plant(tmp_path / "link.jinja", target)
    assert read_bounded(link, 10, "a chat template", user_file=True) == b"0123456789"
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    writer = threading.Thread(target=lambda: fifo.write_bytes(b"x" * 11))
    writer.start()
    with pytest.raises(OversizedFileError) as refused:
        read_bounded(fifo, 10, "a chat template", user_file=True)
    writer.join()
    assert str(refused.value) == (
        f"'{fifo}' holds more than 10 bytes, more than a chat template ever holds: name the right file"
    )


def _template(path: Path) -> object:
    return resolve_template(str(path), load_tokenizer("char"))


def _rubric(path: Path) -> object:
    return read_shipped(tmp_folder(path), ".toml", str(path), "rubric")


def tmp_folder(path: Path) -> Path:
    return path.parent / "shipped"  # no shipped files there: the name is read as a path


USER_FILES: list[tuple[Any, str, bytes, Callable[[Path], object], str]] = [
    (templates, "TEMPLATE_MOST", b"{{ messages[0]['content'] }}", _template, "a chat template"),
    (
        readers,
        "CONFIG_MOST",
        json.dumps(dict.fromkeys(readers._REQUIRED, 8)).encode(),
        readers.read_config,
        "a config.json",
    ),
    (
        haystack_files,
        "FILE_MOST",
        b"One sentence. Another one.",
        lambda p: read_files([p], "sentence"),
        "a corpus file",
    ),
    (qa_data, "QA_DATA_MOST", b'{"data": []}', qa_data._read_json, "a QA data file"),
    (judging, "SHIPPED_MOST", b'name = "r"\n', _rubric, "a rubric file"),
]


@pytest.mark.parametrize(
    ("module", "bound", "content", "read", "what"), USER_FILES, ids=lambda v: getattr(v, "__name__", "")
)
def test_each_file_the_user_names_is_read_at_its_bound_and_refused_a_byte_past_it(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    module: Any,
    bound: str,
    content: bytes,
    read: Callable[[Path], object],
    what: str,
) -> None:
    path = tmp_path / "file.txt"
    path.write_bytes(content)
    monkeypatch.setattr(module, bound, len(content))
    assert read(path) is not None
    monkeypatch.setattr(module, bound, len(content) - 1)
    with pytest.raises(OversizedFileError) as refused:
        read(path)
    assert str(refused.value) == (
        f"'{path}' holds more than {len(content) - 1:,} bytes, more than {what} ever holds: "
        "name the right file"
    )


def test_a_file_of_items_is_read_at_its_bound_and_refused_a_byte_past_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shipped = resources.files("fathom.prompts") / "data" / "latent_items.json"
    path = tmp_path / "items.json"
    path.write_bytes(shipped.read_bytes())
    size = path.stat().st_size
    monkeypatch.setattr(latent, "ITEMS_MOST", size)
    latent._load.cache_clear()
    assert len(latent.load_items(path)) > 0
    monkeypatch.setattr(latent, "ITEMS_MOST", size - 1)
    latent._load.cache_clear()
    with pytest.raises(OversizedFileError):
        latent.load_items(path)
    latent._load.cache_clear()


def test_an_lm_eval_folder_marker_past_its_bound_is_no_marker(tmp_path: Path) -> None:
    from fathom.integrations.lm_eval_export import MARKER, _marker_in

    marker = b'{"fathom": 1}'
    (tmp_path / MARKER).write_bytes(marker + b" " * ((1 << 20) - len(marker)))  # 1 MiB: read
    assert _marker_in(tmp_path) == {"fathom": 1}
    (tmp_path / MARKER).write_bytes(marker + b" " * ((1 << 20) - len(marker) + 1))
    assert _marker_in(tmp_path) is None


def test_a_bounded_read_sets_aside_what_the_file_holds_not_its_bound(tmp_path: Path) -> None:
    import tracemalloc

    path = tmp_path / "manifest.json"
    path.write_bytes(b"{}" * 500)
    for user_file in (False, True):
        tracemalloc.start()
        try:
            assert read_bounded(path, 1 << 30, "a manifest", user_file=user_file) == b"{}" * 500
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        # A read of the bound at once would set aside 1 GiB (a manifest's 16 MiB held every resume's
        # memory to 16 MiB); a piece at a time, a piece.
        assert peak < 1 << 18, peak
