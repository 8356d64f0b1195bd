"""The run's manifest made: the resolved spec, what decides its prompts and answers, and where it ran
(its typed form, and how it reads back, is ``fathom.manifest``)."""

from __future__ import annotations

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

from fathom.backends.base import Backend, Built, Tuned
from fathom.manifest import Manifest
from fathom.prompts.tokenizers import Tokenizer
from fathom.registry import answering_spec
from fathom.schemas import MANIFEST_SCHEMA
from fathom.scoring import SCORING_VERSIONS
from fathom.spec import RunSpec
from fathom.tasks.base import DescribesCorpora, GradedBy, Task
from fathom.version import __version__

PACKAGE = Path(__file__).parents[1]  # fathom's own files, whose git state a run records


def manifest(
    spec: RunSpec,
    tokenizer: Tokenizer,
    task: Task,
    backend: Backend,
    planned: int,
    labels: Mapping[str, str] | None = None,
) -> Manifest:
    """The resolved run: ``identity`` decides the prompts and answers and must match to resume;
    ``labels`` (``fathom.run.labels``, checked) say which checkpoint made it, outside the identity."""
    method = spec.scoring or (task.scoring if isinstance(task, GradedBy) else None)
    data = {
        "schema": MANIFEST_SCHEMA,
        "identity": {
            "spec": answering_spec(spec).to_json(),
            "tokenizer": {"name": tokenizer.name, "sha256": tokenizer.identity},
            "task": task.identity(),
            "backend": {"name": backend.name, "settings": backend.settings()},
            **(
                {"scoring": {method: SCORING_VERSIONS[method]}}
                if method is not None and method in SCORING_VERSIONS
                else {}
            ),
        },
        "planned": planned,
        **({"labels": dict(labels)} if labels else {}),
        **({"corpora": task.corpora()} if isinstance(task, DescribesCorpora) else {}),
        "backend": {
            "input": backend.input,
            "exact_lengths": backend.exact_lengths,
            "trained_window": backend.trained_window,
            "max_prompt_tokens": backend.max_prompt_tokens,
            "transport": backend.transport_settings() if isinstance(backend, Tuned) else {},
        },
        "environment": {
            "fathom_version": __version__,
            **source_revision(PACKAGE),
            "python": sys.version.split()[0],
            "platform": platform.platform(),
            "host": socket.gethostname(),
            "created": datetime.now(UTC).isoformat(timespec="seconds"),
            "cpu": cpu(),
            "backend_build": backend.build() if isinstance(backend, Built) else None,
        },
    }
    return Manifest.from_json(data)


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
