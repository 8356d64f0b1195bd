"""tools/family_evidence.py: the real models' scores per family, as README.md and docs/families.md
show them, read from run folders and rendered from the committed numbers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from repo_tools import ROOT, load_tool

evidence = load_tool("family_evidence")


def row(task: str, length: int, mean: float | None, n: int, low: float, high: float) -> dict[str, Any]:
    return {
        "task": task,
        "length": length,
        "mean": mean,
        "n": n,
        "ci_low": low,
        "ci_high": high,
        "errors": 0,
        "beyond_window": False,
    }


def folder(tmp: Path, name: str, task: str, model: str, summary: dict[str, Any]) -> Path:
    run = tmp / name
    run.mkdir()
    control = {"mean": 1 / 12, "n": 12, "ci_high": 0.35, "ci_low": 0.01, "answered": 1}
    run_facts = {"model": model, "task": task, "tokenizer": "auto", "samples": 6, "seed": 0}
    (run / "summary.json").write_text(json.dumps({"run": run_facts, "control": control, **summary}))
    return run


def test_niah_is_pooled_over_depths_and_other_families_keep_their_grid_rows(tmp_path: Path) -> None:
    model = "llamacpp:smollm2?threads=2"
    niah = folder(
        tmp_path, "niah", "niah", model, {"lengths": [row("-", 1024, 17 / 18, 18, 0.74, 0.99)], "grid": []}
    )
    grid = [row("state:2", 1024, 5 / 6, 6, 0.44, 0.97), row("state:8", 2048, None, 0, 0.0, 1.0)]
    state = folder(tmp_path, "state", "state", model, {"grid": grid, "lengths": []})
    numbers = evidence.collect([niah, state], "a test machine", ["fathom run ..."])

    assert numbers["machine"] == "a test machine" and numbers["commands"] == ["fathom run ..."]
    (only,) = numbers["models"]
    assert [(f["family"], f["run"]) for f in only["families"]] == [("niah", "niah"), ("state", "state")]
    assert only["families"][0]["rows"][0]["task"] == "niah"  # the family's name, not the depth row's
    assert only["families"][1]["control"] == {"mean": 1 / 12, "n": 12, "ci_high": 0.35}

    lines = evidence.table(numbers, intervals=True).splitlines()
    assert lines[0] == "| family: row (score, k) | smollm2 1k | smollm2 2k |"
    assert lines[2] == "| niah (found, k=18) | 94% [74-99] | — |"
    assert lines[3] == "| state:2 (exact, k=6) | 83% [44-97] | — |"
    # A row run at a length but with nothing scored there is a dash, as one never run; its k is 0.
    assert lines[4] == "| state:8 (exact, k=0) | — | — |"
    assert lines[-1] == (
        "No-context control (each sample asked without its context): "
        "smollm2 niah 8% of 12; smollm2 state 8% of 12."
    )
    assert evidence.table(numbers, intervals=False).splitlines()[3] == "| state:2 (exact, k=6) | 83% | — |"


def test_each_model_gets_its_own_columns_in_the_order_first_met(tmp_path: Path) -> None:
    first = folder(
        tmp_path, "a", "listing", "llamacpp:gemma3-270m", {"grid": [row("listing:4", 1024, 0.5, 6, 0.2, 0.8)]}
    )
    second = folder(
        tmp_path, "b", "listing", "llamacpp:smollm2", {"grid": [row("listing:4", 1024, 0.25, 6, 0.1, 0.6)]}
    )
    lines = evidence.table(evidence.collect([first, second], "m", []), intervals=False).splitlines()
    assert lines[0] == "| family: row (score, k) | gemma3-270m 1k | smollm2 1k |"
    assert lines[2] == "| listing:4 (F1, k=6) | 50% | 25% |"


def test_the_table_goes_between_its_markers_and_nowhere_without_them() -> None:
    page = f"before\n{evidence.BEGIN}\nold table\n{evidence.END}\nafter\n"
    assert (
        evidence.replace_table(page, "NEW", Path("p.md"))
        == f"before\n{evidence.BEGIN}\nNEW\n{evidence.END}\nafter\n"
    )
    with pytest.raises(SystemExit, match=r"no .* markers"):
        evidence.replace_table("no markers here", "NEW", Path("p.md"))
    with pytest.raises(SystemExit, match=r"no .* markers"):  # the end before the beginning
        evidence.replace_table(f"{evidence.END}\n{evidence.BEGIN}\n", "NEW", Path("p.md"))


@pytest.mark.parametrize("page", sorted(evidence.PAGES, key=str), ids=lambda page: page.name)
def test_the_pages_hold_the_table_the_committed_numbers_render(page: Path) -> None:
    numbers = json.loads(evidence.NUMBERS.read_text())
    text = page.read_text()
    start = text.index(evidence.BEGIN) + len(evidence.BEGIN)
    shown = text[start : text.index(evidence.END)].strip("\n")
    assert shown == evidence.table(numbers, evidence.PAGES[page]), (
        f"{page.relative_to(ROOT)} is stale: run python tools/family_evidence.py table --write"
    )
