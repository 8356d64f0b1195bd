"""Install hints that work: the pip command for an optional extra, as fathom was installed."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
from pathlib import Path

import pytest

from fathom import packages
from fathom.errors import MissingExtraError


@pytest.mark.parametrize(
    ("origin", "command"),
    [
        (None, "pip install 'fathom-eval[hf]'"),  # from a package index
        ({"url": "file:///src/fathom", "dir_info": {"editable": True}}, "pip install -e '/src/fathom[hf]'"),
        ({"url": "file:///src/fathom", "dir_info": {}}, "pip install '/src/fathom[hf]'"),
        ({"url": "file:///w/fathom_eval-0.1.0-py3-none-any.whl", "archive_info": {}},
         "pip install '/w/fathom_eval-0.1.0-py3-none-any.whl[hf]'"),
        ({"url": "https://example.org/fathom_eval.whl", "archive_info": {}}, "pip install 'fathom-eval[hf]'"),
    ],
)  # fmt: skip
def test_install_hints_fit_how_fathom_was_installed(
    monkeypatch: pytest.MonkeyPatch, origin: dict[str, object] | None, command: str
) -> None:
    class Distribution:
        def read_text(self, name: str) -> str | None:
            assert name == "direct_url.json"
            return None if origin is None else json.dumps(origin)

    monkeypatch.setattr(importlib.metadata, "distribution", lambda name: Distribution())
    assert packages.install_command("hf") == command
    assert str(MissingExtraError("torch", "hf")) == f"torch is not installed; install it with: {command}"


def test_this_checkout_gets_a_hint_that_works_from_it() -> None:
    root = Path(__file__).resolve().parents[1]
    # The suite runs against this checkout, installed from its folder (CI: pip install -e '.[...]').
    assert packages.install_command("hf") in (f"pip install -e '{root}[hf]'", f"pip install '{root}[hf]'")


def test_the_http_transport_finds_what_it_looks_for_on_every_lock() -> None:
    """httpcore asks for sniffio on each lock it takes; missing, each ask searches the whole path
    (a quarter of the client's CPU per request, #31). fathom requires it, so it is there."""
    required = importlib.metadata.requires("fathom-eval") or []
    assert any(r.split(">")[0].split("=")[0].strip() == "sniffio" for r in required if ";" not in r)
    assert importlib.util.find_spec("sniffio") is not None
