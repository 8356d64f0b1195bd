"""Backend settings (``backend:model?key=value&...``), read and checked in one place.

Each backend declares a table: every setting's kind, range and default. ``parse_settings`` turns the
strings of a model name into typed values, or refuses the first bad one with a message of one form
for every backend: ``vllm setting 'tp' must be a whole number of GPUs of at least 1, not '0'``.
Checking ranges here keeps degenerate values (a zero window, a NaN accuracy) from surfacing later
as a traceback deep in a backend, or from running silently with a meaningless model.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from fathom.errors import SpecError
from fathom.spec import MAX_LENGTH
from fathom.units import format_count, parse_count

# No context comes near a billion tokens; a cap keeps window arithmetic within float range.
MOST_TOKENS = 1 << 30
# The most each kind of setting may be, for every backend: past these a value is a mistake, not a
# bigger machine, and refusing it before any work beats finding out later (100,000,000 requests in
# flight took 4 GB and sent nothing in 150 s).
MOST_CONTEXT = 2 * MAX_LENGTH  # tokens of context: room for fathom's longest prompt and its answer
MOST_BATCH_TOKENS = 1 << 20  # tokens evaluated in one call (llama.cpp's batch)
MOST_BATCH = 4096  # samples in one call
MOST_IN_FLIGHT = 4096  # requests at a time: as many as the runner hands an HTTP backend at once
MOST_RETRIES = 100
MOST_SECONDS = 86400.0  # a day, for any timeout or wait
MOST_GPUS = 1024
_WHOLE = re.compile(r"[0-9]+")
N = TypeVar("N", int, float)
T = TypeVar("T")


@dataclass(frozen=True)
class Setting:
    """What a setting's values must be (the end of a sentence: "must be ..."), how to read one, and
    the value it takes when not given. ``read`` raises ValueError for a string it refuses."""

    needs: str
    read: Callable[[str], Any]
    default: Any


def parse_settings(backend: str, table: Mapping[str, Setting], given: Mapping[str, str]) -> dict[str, Any]:
    """Every setting of ``table``: its value read from ``given``, else its default.

    ``backend`` names the backend in messages (``sim:cliff``, ``vllm``). An unknown key is refused
    with the closest setting's name, if one is close, and the list of all of them.
    """
    values = {key: setting.default for key, setting in table.items()}
    for key, value in given.items():
        if key not in table:
            close = difflib.get_close_matches(key, table, n=1, cutoff=0.7)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            listing = ", ".join(f"{name}=" for name in table)
            unknown = repr(f"{key}={value}")  # quoted as refusal() quotes a value
            raise SpecError(f"{backend} has no setting {unknown}{hint}: its settings are {listing}")
        try:
            values[key] = table[key].read(value)
        except ValueError:
            raise refusal(backend, key, value, table[key].needs) from None
    return values


def refusal(backend: str, key: str, value: str, needs: str) -> SpecError:
    """The one form of a refused value, also for checks that span settings. The value is quoted
    by repr, so that one holding a line break or a control character still gives one line."""
    return SpecError(f"{backend} setting '{key}' must be {needs}, not {value!r}")


def count(default: int | None, least: int = 1, most: int = MOST_TOKENS, example: str = "8k") -> Setting:
    """A number of tokens as people write them: 8192, 8k or 1M."""

    def read(given: str) -> int:
        try:
            return _within(parse_count(given), least, most)
        except (SpecError, OverflowError):  # OverflowError: more digits than a float holds
            raise ValueError(given) from None

    needs = _needs("a whole number", "tokens", _range(least, most, format_count), f"(e.g. {example})")
    return Setting(needs, read, default)


def whole(default: int | None, least: int = 0, most: int | None = None, unit: str = "") -> Setting:
    """A whole number written in digits, of ``unit`` (GPUs, threads) where that helps."""

    def read(given: str) -> int:
        # int() alone would also take " 1", "+1" and "1_000".
        if not _WHOLE.fullmatch(given):
            raise ValueError(given)
        return _within(int(given), least, most)  # int() refuses past 4300 digits: a ValueError

    return Setting(_needs("a whole number", unit, _range(least, most, str)), read, default)


def number(
    default: float,
    least: float | None = None,
    most: float | None = None,
    above: bool = False,
    unit: str = "",
) -> Setting:
    """A finite number from ``least`` to ``most``; ``above``: greater than ``least``."""

    def read(given: str) -> float:
        value = float(given)  # a ValueError for what is not a number
        if not math.isfinite(value) or (above and least is not None and value <= least):
            raise ValueError(given)
        return _within(value, least, most)

    return Setting(_needs("a number", unit, _range(least, most, _decimal, above)), read, default)


def flag(default: bool) -> Setting:
    def read(given: str) -> bool:
        if given not in ("0", "1"):
            raise ValueError(given)
        return given == "1"

    return Setting("1 (on) or 0 (off)", read, default)


def choice(*choices: str) -> Setting:
    """One of ``choices``; the first is the default."""

    def read(given: str) -> str:
        if given not in choices:
            raise ValueError(given)
        return given

    return Setting(f"one of {', '.join(choices)}", read, choices[0])


def text(default: str, pattern: str, needs: str) -> Setting:
    """Text that matches ``pattern`` in full; ``needs`` says what that is, in words."""
    compiled = re.compile(pattern)

    def read(given: str) -> str:
        if not compiled.fullmatch(given):
            raise ValueError(given)
        return given

    return Setting(needs, read, default)


def or_auto(setting: Setting) -> Setting:
    """``setting``, or ``auto`` (the default) for a value the backend picks itself."""

    def read(given: str) -> Any:
        return "auto" if given == "auto" else setting.read(given)

    return Setting(f"auto or {setting.needs}", read, "auto")


def unless_auto(value: Any, auto: T) -> T:
    """The value read, or ``auto`` where the setting was left to the backend (``auto``)."""
    return auto if value == "auto" else cast(T, value)


def _within(value: N, least: N | None, most: N | None) -> N:
    if (least is not None and value < least) or (most is not None and value > most):
        raise ValueError(value)
    return value


def _needs(noun: str, unit: str, limits: str, example: str = "") -> str:
    """What a value must be, from its parts (a whole number, of tokens, of at least 1, (e.g. 8k)),
    leaving out the empty ones."""
    return " ".join(part for part in (noun, f"of {unit}" if unit else "", limits, example) if part)


def _range(least: N | None, most: N | None, show: Callable[[N], str], above: bool = False) -> str:
    """The range in words: "of at least 1", "from 0 to 1", "above 0 and at most 64"."""
    if least is None:
        return "" if most is None else f"of at most {show(most)}"
    low = f"above {show(least)}" if above else f"at least {show(least)}"
    if most is None:
        return low if above else f"of {low}"
    return f"{low} and at most {show(most)}" if above else f"from {show(least)} to {show(most)}"


def _decimal(value: float) -> str:
    return f"{value:g}"
