"""How close a provider's counts of the prompts came to their target lengths (issue #35 item 2): the
summary's ``provider_counts`` by hand, its line, and which runs have it (the manifest says whose
lengths are a provider's). The anthropic backend's runs through the CLI are in test_anthropic."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from test_store import identity

from fathom.analysis.provider_counts import provider_counts
from fathom.analysis.summary import Summary, run_summary
from fathom.cli import main
from fathom.manifest import Manifest
from fathom.records import SampleRecord
from fathom.report.provider_text import provider_counts_line
from fathom.spec import RunSpec

COUNTED_BY = "provider: count_tokens (prompts built with cl100k_base)"


def record(length: int, actual: int, **fields: Any) -> SampleRecord:
    values: dict[str, Any] = dict(
        sample_id=f"niah|L{length}|S{actual}", task="niah", length=length, depth=0.5, sample=0, seed=0,
        prompt_sha256="0" * 64, target_tokens=length, actual_tokens=actual, needle_kind="number",
        needle_token_offsets=(), needle_depths=(), question="q", answers=("7",), output="7",
        finish_reason="stop", score=1.0, matched=("7",), scoring="contains", latency_s=0.0,
        beyond_window=False,
    )  # fmt: skip
    values.update(fields)
    return SampleRecord(**values)


RECORDS = [
    record(1024, 1100),  # 1100 / 1024 = 1.07421875
    record(1024, 950),  # 950 / 1024 = 0.927734375
    record(2048, 2048),  # 1.0
    record(2048, 3000, error="backend_error: HTTP 500 (1 attempt)"),  # the stand-in's count: left out
    record(1024, 40, sample_id="control|niah|L1024|S0", control=True),  # no context: left out
]


def test_each_length_has_its_least_largest_and_mean_ratio_of_count_to_target() -> None:
    assert provider_counts(RECORDS, COUNTED_BY) == {
        "counted_by": COUNTED_BY,
        "prompts": 3,
        "ratio_min": 0.9277,
        "ratio_max": 1.0742,
        "ratio_mean": 1.0007,  # (1.07421875 + 0.927734375 + 1) / 3 = 1.00065...
        "lengths": [
            # (1100 + 950) / 2048 = 1.0009765625
            {"length": 1024, "prompts": 2, "ratio_min": 0.9277, "ratio_max": 1.0742, "ratio_mean": 1.001},
            {"length": 2048, "prompts": 1, "ratio_min": 1.0, "ratio_max": 1.0, "ratio_mean": 1.0},
        ],
    }


def test_the_line_says_whose_counts_and_how_close_by_length() -> None:
    assert provider_counts_line(provider_counts(RECORDS, COUNTED_BY)) == (
        "lengths are the provider's counts, by count_tokens (prompts built with cl100k_base): 3 prompts "
        "came to 92.8%..107.4% of their target length (mean 100.1%; by length: 1k 92.8%..107.4%, 2k "
        "100.0%..100.0%)"
    )


def test_a_run_with_no_answer_says_none_was_counted() -> None:
    section = provider_counts(RECORDS[3:], COUNTED_BY)
    assert section == {
        "counted_by": COUNTED_BY,
        "prompts": 0,
        "ratio_min": None,
        "ratio_max": None,
        "ratio_mean": None,
        "lengths": [],
    }
    assert provider_counts_line(section) == (
        "lengths are the provider's counts, by count_tokens (prompts built with cl100k_base): no prompt "
        "was answered, so none was counted"
    )


def test_the_summary_has_the_section_only_where_the_provider_counted_and_reads_it_back() -> None:
    assert run_summary(RECORDS).provider_counts is None
    summary = run_summary(RECORDS, counted_by=COUNTED_BY)
    assert summary.provider_counts == provider_counts(RECORDS, COUNTED_BY)
    written = summary.to_json()
    assert written["schema"] == 9 and written["provider_counts"]["prompts"] == 3
    assert Summary.from_json(json.loads(json.dumps(written))) == summary
    assert "provider_counts" not in run_summary(RECORDS).to_json()


def test_the_manifest_says_whose_lengths_are_a_providers() -> None:
    spec = RunSpec("niah", "anthropic:claude-test", "cl100k_base", (1024,), (0.5,), 1).to_json()

    def counted(settings: dict[str, Any]) -> str | None:
        data = identity(spec)
        data["backend"]["settings"] = settings
        return Manifest.from_json({"identity": data}).provider_counted

    assert counted({"counted_by": COUNTED_BY}) == COUNTED_BY
    assert counted({"counted_by": "approximate: o200k_base"}) is None  # openai's stand-in: its own count
    assert counted({"counted_by": "provider"}) is None
    assert counted({}) is None


def test_a_run_whose_tokenizer_counted_has_no_section_nor_line(tmp_path: Path, capsys: Any) -> None:
    folder = tmp_path / "run"
    grid = ["--lengths", "1k", "--depths", "0.5", "--samples", "1", "--no-progress", "--no-control"]
    assert (
        main(
            ["run", "niah", "--model", "sim:perfect", "--tokenizer", "char", *grid, "--run-dir", str(folder)]
        )
        == 0
    )
    assert "provider_counts" not in json.loads((folder / "summary.json").read_text())
    assert "provider's counts" not in capsys.readouterr().out
    assert 'class="lengths"' not in (folder / "report.html").read_text()
