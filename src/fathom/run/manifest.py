"""The run's manifest: the resolved spec, what decides its prompts and answers, and where it ran."""

from __future__ import annotations

import json
import os
import platform
import re
import socket
import subprocess
import sys
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import fathom
from fathom.backends.base import Backend, Built
from fathom.prompts.tokenizers import Tokenizer
from fathom.spec import RunSpec
from fathom.tasks.base import Task

MANIFEST_SCHEMA = 1


def manifest(
    spec: RunSpec, tokenizer: Tokenizer, task: Task, backend: Backend, planned: int
) -> dict[str, Any]:
    """The resolved run: ``identity`` decides the prompts and answers and must match to resume."""
    return {
        "schema": MANIFEST_SCHEMA,
        "identity": {
            "spec": spec.to_json(),
            "tokenizer": {"name": tokenizer.name, "sha256": tokenizer.identity},
            "task": task.identity(),
            "backend": {"name": backend.name, "settings": backend.settings()},
        },
        # Outside the identity, which decides whether a run resumes: how many samples make the run
        # complete, so 'fathom runs' can tell a partial run without rebuilding its task.
        "planned": planned,
        "backend": {
            "input": backend.input,
            "exact_lengths": backend.exact_lengths,
            "trained_window": backend.trained_window,
            "max_prompt_tokens": backend.max_prompt_tokens,
        },
        "environment": {
            "fathom_version": fathom.__version__,
            **source_revision(Path(fathom.__file__).parent),
            "python": sys.version.split()[0],
            "platform": platform.platform(),
            "host": socket.gethostname(),
            "created": datetime.now(UTC).isoformat(timespec="seconds"),
            # Real models' greedy answers depend on the arithmetic: the CPU's vector instructions
            # and the backend's build decide near-ties, so these say where a run can be repeated.
            "cpu": cpu(),
            "backend_build": backend.build() if isinstance(backend, Built) else None,
        },
    }


# Vector-instruction flags that change how a CPU backend sums floats (x86 and Arm names in cpuinfo).
SIMD = re.compile(r"^(sse4_2|avx|avx2|fma|f16c|avx512\w*|amx\w*|asimd\w*|sve\w*|neon)$")


def cpu() -> dict[str, Any]:
    """The CPU's model name, its vector-instruction flags and its core count (Linux's cpuinfo; the
    platform's processor name elsewhere)."""
    model, flags = platform.processor() or platform.machine(), list[str]()
    try:
        info = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        info = ""
    for line in info.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "model name" and value.strip():
            model = value.strip()
        elif key.strip() in ("flags", "Features") and not flags:
            flags = sorted(flag for flag in value.split() if SIMD.match(flag))
    return {"model": model, "simd": flags, "cores": os.cpu_count()}


def machine_differences(base: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """What differs between two manifests' machines and backend builds: where it does, a real model's
    greedy answers may differ for that reason alone, so a paired comparison should say so."""
    found = []
    for key, what in (("cpu", "CPU"), ("backend_build", "backend build")):
        a, b = (_environment(m).get(key) for m in (base, new))
        if a is not None and b is not None and a != b:
            found.append(f"{what} ({_short(a)} vs {_short(b)})")
    return found


def _environment(manifest: Mapping[str, Any]) -> dict[str, Any]:
    environment = manifest.get("environment")
    return environment if isinstance(environment, dict) else {}


def _short(value: Any) -> str:
    if isinstance(value, dict) and "model" in value:
        return f"{value['model']}, {len(value.get('simd') or ())} SIMD flags"
    return json.dumps(value, sort_keys=True)[:80]


def source_revision(folder: Path) -> dict[str, Any]:
    """The commit that ``folder`` (fathom's package) is checked out from, and whether the files under
    it differ from that commit (edited, added or deleted): a run made from uncommitted code must not
    pass for one made from the commit it names. Both None outside a git checkout."""
    sha = _git(folder, "rev-parse", "HEAD")
    if not sha:
        return {"git_sha": None, "git_dirty": None}
    changes = _git(folder, "status", "--porcelain", "--", ".")  # only this folder, not the whole repo
    return {"git_sha": sha, "git_dirty": None if changes is None else bool(changes)}


def _git(folder: Path, *args: str) -> str | None:
    try:
        out = subprocess.run(
            ["git", *args],
            cwd=folder,
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip()
