"""fathom plan warns of the lengths beyond the architecture's trained window (a preset's context,
config.json's max_position_embeddings, a GGUF's context_length), on the terminal and in --json, and
says nothing where every length is within it or the window is unknown (issue #33)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from fathom.cli import main
from fathom.plan import plan_sweep
from fathom.plan.costs import Setup
from fathom.plan.gpus import GPUS
from fathom.plan.presets import PRESETS
from fathom.plan.text import plan_json, plan_text
from fathom.spec import RunSpec


def planned(capsys: pytest.CaptureFixture[str], out: Path, *args: str) -> tuple[list[str], dict[str, object]]:
    """The plan's warning lines and its JSON, for a small sweep at ``args``' lengths."""
    argv = ["plan", "niah", *args, "--depths", "2", "--samples", "1", "--json", str(out)]
    assert main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    return [line for line in lines if line.startswith("warning:")], json.loads(out.read_text())


def test_lengths_beyond_a_preset_s_window_are_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert PRESETS["smollm2-135m"].context == 8192
    warnings, data = planned(capsys, tmp_path / "p.json", "--arch", "smollm2-135m", "--lengths", "4k,16k,32k")
    assert warnings == [
        "warning: lengths beyond smollm2-135m's trained window of 8,192 tokens: 16k, 32k (a run marks their "
        "samples beyond_window: scores there measure extrapolation, not recall within the window)"
    ]
    assert data["beyond_window"] == [16384, 32768]


def test_lengths_within_the_window_warn_of_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # 8k is the window itself: a prompt of exactly 8,192 tokens is within it, as a run marks it.
    warnings, data = planned(capsys, tmp_path / "p.json", "--arch", "smollm2-135m", "--lengths", "4k,8k")
    assert (warnings, data["beyond_window"]) == ([], [])


def test_a_config_json_s_max_position_embeddings_is_the_window(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = {
        "model_type": "llama",
        "num_hidden_layers": 2,
        "hidden_size": 64,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "intermediate_size": 128,
        "vocab_size": 1000,
        "max_position_embeddings": 2048,
    }
    (tmp_path / "config.json").write_text(json.dumps(config))
    warnings, data = planned(capsys, tmp_path / "p.json", "--arch", str(tmp_path), "--lengths", "1k,4k")
    assert len(warnings) == 1 and "trained window of 2,048 tokens: 4k (" in warnings[0]
    assert data["beyond_window"] == [4096]


def test_an_unknown_window_is_null_in_the_json_and_no_warning() -> None:
    arch = dataclasses.replace(PRESETS["smollm2-135m"], context=None)
    plan = plan_sweep(RunSpec("niah", "", "auto", (16384,), (0.5,), 1), arch, Setup(GPUS["h100"]))
    assert plan.beyond_window == ()
    assert plan_json(plan)["beyond_window"] is None
    assert not any(line.startswith("warning:") for line in plan_text(plan))
