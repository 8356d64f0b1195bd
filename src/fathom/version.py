"""fathom's version: recorded in every manifest, and ``fathom.__version__``."""

__version__ = "0.1.0"
