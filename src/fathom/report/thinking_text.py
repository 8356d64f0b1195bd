"""A thinking model's reasoning as the terminal says it: one line over the run (summary.json's
``thinking`` section, ``fathom.analysis.thinking``)."""

from __future__ import annotations

from fathom.analysis.summary import Row


def thinking_line(thinking: Row) -> str:
    """The reasoning's tokens a sample, on the run's answered samples, and those still thinking."""
    mean = thinking["tokens_mean"]
    tokens = "none read" if mean is None else f"{mean:g} tokens a sample (most {thinking['tokens_max']})"
    return (
        f"thinking: {tokens} over {thinking['reasoned']} of {thinking['samples']} samples; still thinking "
        f"when the reply ended (no answer): {thinking['still_thinking']}"
    )
