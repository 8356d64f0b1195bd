"""Spec -> prompts: tokenizers, haystack corpora, needles, chat templates, and the builder that makes
every prompt exactly its target length in the model's own tokens.

The builder's names are re-exported here: a task imports its prompts from ``fathom.prompts``.
"""

from fathom.prompts.builder import (
    ChatPrompt,
    Insertion,
    Prompt,
    PromptBuilder,
    PromptText,
    TooShort,
    assemble,
    chat_prompt,
    frame,
    length_tolerance,
    too_short,
)

__all__ = [
    "ChatPrompt",
    "Insertion",
    "Prompt",
    "PromptBuilder",
    "PromptText",
    "TooShort",
    "assemble",
    "chat_prompt",
    "frame",
    "length_tolerance",
    "too_short",
]
