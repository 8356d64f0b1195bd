"""Weights & Biases as a tracker.

Where: the project given (``--log wandb=PROJECT`` or ``--log wandb=ENTITY/PROJECT``), else W&B's own
configuration (``WANDB_PROJECT``, ``WANDB_ENTITY``, else its defaults); ``WANDB_MODE=offline`` keeps
the run on disk (under ``WANDB_DIR``) for ``wandb sync`` later. The key is W&B's to read (``wandb
login``, ``WANDB_API_KEY``); fathom never sees it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fathom.track.base import Param, import_library

EXTRA = "wandb"
ARTIFACT_TYPE = "fathom"
# An artifact's name: letters, digits, '-', '_' and '.', at most 128 characters.
_ARTIFACT_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_ARTIFACT_LIMIT = 128


class WandbTracker:
    """One W&B run, made apart from any run the process already has open (``reinit="create_new"``):
    fathom called from a training script logs beside that script's run, not into it."""

    name = "wandb"

    def __init__(self, project: str | None) -> None:
        self._wandb = import_library("wandb", EXTRA)
        entity, _, name = (project or "").rpartition("/")
        self._entity, self._project = entity or None, name or None
        self._run: Any = None
        self._where = ""

    @property
    def where(self) -> str:
        return self._where

    def start(self, name: str, params: Mapping[str, Param], tags: Mapping[str, str]) -> None:
        run = self._wandb.init(
            entity=self._entity,
            project=self._project,
            name=name,
            config=dict(params),
            tags=[f"{key}={value}" for key, value in tags.items()],
            reinit="create_new",
        )
        if run.disabled:
            self._where = "disabled by WANDB_MODE=disabled"
        else:
            self._where = run.url or f"offline run in {run.sync_dir} (wandb sync uploads it)"
        self._run = run

    def log_metrics(self, metrics: Mapping[str, float], step: int | None) -> None:
        self._run.log(dict(metrics), step=step or 0)

    def log_image(self, path: Path, step: int | None) -> None:
        self._run.log({f"images/{path.stem}": self._wandb.Image(str(path))}, step=step or 0)

    def log_folder(self, path: Path, name: str) -> None:
        artifact = self._wandb.Artifact(artifact_name(name), type=ARTIFACT_TYPE)
        artifact.add_dir(str(path))
        self._run.log_artifact(artifact)

    def finish(self, failed: bool = False) -> None:
        self._run.finish(exit_code=1 if failed else 0)


def artifact_name(name: str) -> str:
    """``name`` as W&B allows an artifact's: each run of other characters one '-', cut to 128."""
    return _ARTIFACT_UNSAFE.sub("-", name).strip("-")[:_ARTIFACT_LIMIT] or "fathom"
