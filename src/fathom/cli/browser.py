"""``fathom report --open``: report.html opened in a browser where there is one, and otherwise its
path and a word saying so (``webbrowser`` alone says nothing when it finds no browser)."""

from __future__ import annotations

import os
import sys
import webbrowser
from pathlib import Path


def open_page(page: Path) -> str:
    """Open ``page`` in a browser; the line to print, saying where it opened or that it could not."""
    where = page.resolve()
    if _headless():
        return f"no browser found (no desktop: DISPLAY and WAYLAND_DISPLAY are unset); open {where} in one"
    try:
        opened = webbrowser.open(where.as_uri())
    except webbrowser.Error:  # a BROWSER that names nothing runnable
        opened = False
    return f"opened {where} in a browser" if opened else f"no browser found; open {where} in one"


def _headless() -> bool:
    """A Linux machine without a desktop: ``webbrowser`` would find only a text browser (taking over
    the terminal) or nothing. A BROWSER the user set is theirs to try."""
    if not sys.platform.startswith("linux") or os.environ.get("BROWSER"):
        return False
    return not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))
