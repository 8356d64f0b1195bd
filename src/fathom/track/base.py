"""What a tracker is (``Tracker``), and what its implementations share: their library imported when
named, and addresses shown without credentials."""

from __future__ import annotations

import importlib
import re
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Protocol

from fathom.errors import MissingExtraError

Param = str | int | float | bool  # a parameter's value, as a tracker keeps it
_CREDENTIALS = re.compile(r"(?<=://)[^/@\s]+@")  # the user:password@ of an address


class Tracker(Protocol):
    """A tracking service, for one tracked run: ``start`` it, log metrics, images and folders to it,
    ``finish`` it. Each implementation reads its library's own configuration (environment, login),
    and what ``--log NAME=WHERE`` gave it."""

    @property
    def name(self) -> str:
        """As ``--log`` names it: "mlflow", "wandb"."""
        ...

    @property
    def where(self) -> str:
        """Where the tracked run went, once started (a run's id and store, a URL, a folder), without
        credentials: printed after logging."""
        ...

    def start(self, name: str, params: Mapping[str, Param], tags: Mapping[str, str]) -> None: ...

    def log_metrics(self, metrics: Mapping[str, float], step: int | None) -> None:
        """``metrics`` at ``step`` (None: the run has no step; logged at step 0)."""
        ...

    def log_image(self, path: Path, step: int | None) -> None:
        """A PNG file, named by its stem (``heatmap``)."""
        ...

    def log_folder(self, path: Path, name: str) -> None:
        """A copy of the folder's files, as an artifact called ``name``; the folder is only read."""
        ...

    def finish(self, failed: bool = False) -> None: ...


def import_library(module: str, extra: str) -> ModuleType:
    """A tracker's library, imported when the tracker is named; missing, the extra that installs it."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise MissingExtraError(module, extra) from None


def redacted(text: str) -> str:
    """``text`` with the credentials of any address in it (``https://user:key@host``) replaced by
    ``***``: fathom prints where it logged, and a tracker's error, but never a key."""
    return _CREDENTIALS.sub("***@", text)
