"""fathom export-check reads a key as its needle writes it (issue #33, item 5): a key's two words
apart in an export's prose ("a little window") are no overlap, and the key itself is still found."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fathom.cli import main
from fathom.export import check_export
from fathom.records import SampleRecord
from fathom.run.runner import run
from fathom.run.store import RunFolder
from fathom.spec import RunSpec


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run of keyed number needles: its questions name adjective-noun keys ("brave-signal")."""
    folder = tmp_path_factory.mktemp("keys") / "run"
    spec = RunSpec("niah", "sim:perfect", "char", (2048,), (0.5,), 2, needle="number")
    assert run(spec, folder, show_progress=False).errors == 0
    return folder


def key_of(folder: Path) -> str:
    """A key the run's first graded sample asks about, read from its question."""
    sample = next(r for r in RunFolder(folder).records() if isinstance(r, SampleRecord) and not r.control)
    return next(word for word in sample.question.rstrip("?").split() if word.count("-") == 1)


def export_of(path: Path, *contents: str) -> Path:
    """An export of one example per content, the content as the assistant's answer."""
    lines = [
        json.dumps(
            {"messages": [{"role": "user", "content": "Which number?"}, {"role": "assistant", "content": c}]}
        )
        for c in contents
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_a_keys_words_apart_in_prose_are_no_overlap(
    evaluated: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first, second = key_of(evaluated).split("-")
    prose = export_of(
        tmp_path / "prose.jsonl",
        f"Through a {first} {second} the light came in.",
        f"{first.capitalize()} {second}s stood in a row, and a {first}, {second}-shaped door.",
    )
    assert check_export(prose, [evaluated]).overlaps == ()
    capsys.readouterr()
    assert main(["export-check", str(prose), str(evaluated)]) == 0
    assert capsys.readouterr().out.startswith("no overlap: 2 examples")


def test_the_key_as_its_needle_writes_it_is_found(evaluated: Path, tmp_path: Path) -> None:
    key = key_of(evaluated)
    leaky = export_of(
        tmp_path / "leaky.jsonl", f"The {key.replace('-', ' ')} again.", f"The number for {key} is 7."
    )
    found = {(o.drawn.kind, o.drawn.text): o.lines for o in check_export(leaky, [evaluated]).overlaps}
    assert found == {("key", key): ((2, "assistant"),)}
