"""``fathom report`` holds a run's records once (issue #30): report.html, which carries every sample's
answer, is written a part at a time, never held whole as a string (nor as its JSON, its escaped JSON
and its bytes: four copies of the page before), and its samples are made as they are written."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_html_report import data_block, record

from fathom.report.html.page import page, page_parts, script_json
from fathom.report.html.run import page_data
from fathom.run.store import RunFolder

HOSTILE = "</script><!-- & \u2028 \u2029 é"


def test_the_page_in_parts_is_the_page_whole_with_the_data_block_script_json_makes() -> None:
    samples = [{"output": HOSTILE, "n": [1, 2.5, None, True]}, {"output": "x"}]
    data = {"samples": samples, "lists": {"cell 1k": [0, 1]}, "labels": {"a": HOSTILE}}
    whole = page("a title", "<p>body</p>", data)
    assert data_block(whole) == script_json(data)
    assert "".join(page_parts("a title", "<p>body</p>", data)) == whole
    # An iterator of the samples makes the same page as their list.
    assert page("a title", "<p>body</p>", data | {"samples": iter(samples)}) == whole
    assert data_block(page("t", "", {})) == "{}"


def test_the_pages_samples_are_made_as_they_are_written_not_held_as_a_list() -> None:
    samples = [record(output=HOSTILE), dataclasses.replace(record(), sample_id="niah|L1024|D0.5000|S1")]
    data = page_data(samples)
    assert isinstance(data["samples"], Iterator)
    assert data_block(page("t", "", data)).startswith('{"samples":[{"id":"niah|L1024|D0.5000|S0"')


def test_a_derived_file_is_written_from_its_parts_and_left_whole_if_they_fail(tmp_path: Path) -> None:
    folder = RunFolder(tmp_path)
    folder.write_derived("report.html", iter(["<p>", HOSTILE, "</p>"]))
    assert (tmp_path / "report.html").read_text() == f"<p>{HOSTILE}</p>"

    def failing() -> Iterator[str]:
        yield "half a page"
        raise RuntimeError("the analysis failed")

    with pytest.raises(RuntimeError):
        folder.write_derived("report.html", failing())
    assert (tmp_path / "report.html").read_text() == f"<p>{HOSTILE}</p>"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.html"]
