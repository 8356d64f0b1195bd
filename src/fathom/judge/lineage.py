"""Whose judge is it? A judge must not be the model under test, and should not be of its family.

A model's family is read from its name (the spec as typed, and the file or model name its backend
resolved): the vendor lineage that trained it (SmolLM, Gemma, Llama, Qwen...), not the architecture
it runs on, since SmolLM2 runs on Llama's architecture but was trained apart from it. An unknown
family warns nothing: fathom cannot tell, and says so in the manifest (None).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

# Searched in this order, so that the more specific name wins (codellama is Llama; mixtral Mistral).
# Each is the start of one word of a name, which is split at every character but a letter or digit:
# Cohere's command-r is read as "command" and "r".
FAMILIES = (
    ("smollm", "smollm"),
    ("gemma", "gemma"),
    ("codellama", "llama"),
    ("llama", "llama"),
    ("qwen", "qwen"),
    ("qwq", "qwen"),
    ("mixtral", "mistral"),
    ("mistral", "mistral"),
    ("ministral", "mistral"),
    ("phi", "phi"),
    ("deepseek", "deepseek"),
    ("olmo", "olmo"),
    ("falcon", "falcon"),
    ("internlm", "internlm"),
    ("glm", "glm"),
    ("command", "cohere"),
    ("gpt", "openai"),
    ("claude", "anthropic"),
)
# Where backends keep the model's name among their settings.
_NAMED_BY = ("model", "model_path")


def family(spec: str, settings: Mapping[str, Any]) -> str | None:
    """The family the model belongs to, or None when its names say nothing fathom knows."""
    # An openai spec is MODEL@URL: the server's address names no family.
    named = (spec.partition(":")[2] or spec).split("@", 1)[0]
    names = [named, *(str(settings[key]) for key in _NAMED_BY if key in settings)]
    for name in names:
        words = re.split(r"[^a-z0-9]+", name.lower().rsplit("/", 1)[-1])
        for word in words:
            for prefix, found in FAMILIES:
                if word.startswith(prefix):
                    return found
    return None


def same_model(
    spec_a: str, settings_a: Mapping[str, Any], spec_b: str, settings_b: Mapping[str, Any]
) -> bool:
    """Two backends serve one model: the same spec, or the same weights (file hash, path or served
    model name and server)."""
    if spec_a == spec_b:
        return True
    for key in ("model_sha256", "model_path"):
        if settings_a.get(key) and settings_a.get(key) == settings_b.get(key):
            return True
    # A model folder (hf, vllm) or a served model's name on one server (openai).
    served = (settings_a.get("model"), settings_a.get("base_url"))
    return bool(served[0]) and served == (settings_b.get("model"), settings_b.get("base_url"))
