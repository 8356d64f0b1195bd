"""fathom: measure how much of a long context a language model can actually use."""

__version__ = "0.1.0"
