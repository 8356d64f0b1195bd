"""A run's labels: ``fathom run ... --label step=1200 --label ckpt=run-7/step-1200``, what says which
checkpoint of a training run made it. The manifest keeps them outside the run's identity
(``fathom.manifest.Manifest.labels``), so two checkpoints' runs still compare and a resume is the same
run; ``fathom series --by step`` orders runs by one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from fathom.errors import SpecError

# A key names a label on the command line (--by step), so it is a short identifier.
KEY = re.compile(r"[A-Za-z][A-Za-z0-9_.-]{0,31}")
VALUE_LIMIT = 200  # characters: a step, a checkpoint's path or name, not a document
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
EXAMPLE = "--label step=1200"


def parse_labels(texts: Iterable[str]) -> dict[str, str]:
    """Each ``KEY=VALUE`` of ``--label``, checked (``check_labels``); a key given twice is refused."""
    labels: dict[str, str] = {}
    for text in texts:
        key, equals, value = text.partition("=")
        if not equals:
            raise SpecError(f"--label {text!r} has no '=': give KEY=VALUE, e.g. {EXAMPLE}")
        if key in labels:
            raise SpecError(
                f"--label {key} is given twice ({labels[key]!r} and {value!r}): give each label once"
            )
        labels[key] = value
    return check_labels(labels)


def check_labels(labels: Mapping[str, str]) -> dict[str, str]:
    """``labels`` as a plain dict, each key a short identifier (a letter, then letters, digits, '_',
    '.' or '-', 32 at most) and each value non-empty text of at most 200 characters without '=' or
    control characters; anything else is a SpecError naming the label and the rule."""
    for key, value in labels.items():
        if not isinstance(key, str) or not KEY.fullmatch(key):
            raise SpecError(
                f"label key {key!r} is not a short name: use a letter, then letters, digits, '_', '.' or "
                f"'-' (at most 32), e.g. {EXAMPLE}"
            )
        if not isinstance(value, str) or not value.strip():
            raise SpecError(f"label {key} has an empty value: give one, e.g. {EXAMPLE}")
        if "=" in value:
            raise SpecError(
                f"label {key}={value!r} holds a second '=': give one label per --label, "
                f"e.g. {EXAMPLE} --label ckpt=step-1200"
            )
        if _CONTROL.search(value):
            raise SpecError(f"label {key} holds a control character (a newline?): give it as one line")
        if len(value) > VALUE_LIMIT:
            raise SpecError(
                f"label {key} is {len(value)} characters long: at most {VALUE_LIMIT} (name the checkpoint, "
                "do not describe it)"
            )
    return dict(labels)


def labels_text(labels: Mapping[str, str]) -> str:
    """The labels as typed: ``step=1200 ckpt=a``."""
    return " ".join(f"{key}={value}" for key, value in labels.items())
