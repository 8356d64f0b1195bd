"""Checks the task families beyond retrieval (state, babi, listing) share in their tests: a refused
run, and Wilson's lower bound worked from its formula (never from fathom's own code)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from fathom.cli import main


def refused_run(args: list[str], out: Path, capsys: pytest.CaptureFixture[str]) -> str:
    """The one line ``fathom ARGS --out OUT`` is refused with: exit 2 and no run folder made."""
    capsys.readouterr()
    assert main([*args, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("fathom: error: ") and err.count("\n") == 1, err
    assert not out.exists()
    return err


def wilson_low(successes: int, n: int, z: float = 1.959964) -> float:
    p = successes / n
    centre = p + z * z / (2 * n)
    spread = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return (centre - spread) / (1 + z * z / n)
