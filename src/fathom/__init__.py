"""fathom: measure how much of a long context a language model can actually use."""

from fathom.version import __version__

__all__ = ["__version__"]
