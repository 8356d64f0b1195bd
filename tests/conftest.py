from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(autouse=True, scope="session")
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Tokenised corpora go to a per-session folder, never to the user's cache."""
    old = os.environ.get("FATHOM_CACHE_DIR")
    os.environ["FATHOM_CACHE_DIR"] = str(tmp_path_factory.mktemp("fathom-cache"))
    yield
    if old is None:
        os.environ.pop("FATHOM_CACHE_DIR", None)
    else:
        os.environ["FATHOM_CACHE_DIR"] = old


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    return tmp_path / "runs"
