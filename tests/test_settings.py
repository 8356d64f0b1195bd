"""The shared reader of backend settings: typed values, ranges, and one form of message."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fathom.backends.settings import (
    MOST_TOKENS,
    choice,
    count,
    flag,
    number,
    or_auto,
    parse_settings,
    refusal,
    text,
    unless_auto,
    whole,
)
from fathom.errors import SpecError

TABLE = {
    "window": count(8192, least=1025),
    "threads": whole(4, least=1, most=64, unit="threads"),
    "seed": whole(0),
    "accuracy": number(0.98, least=0.0, most=1.0),
    "slope": number(2.0, least=0.0, most=64.0, above=True),
    "nll": number(2.5, least=0.0, unit="nats"),
    "eager": flag(False),
    "dtype": choice("auto", "float32", "bfloat16"),
    "key_env": text("API_KEY", r"[A-Za-z_][A-Za-z0-9_]*", "an environment variable's name"),
    "batch": or_auto(whole(None, least=1)),
}


def refused(given: dict[str, str]) -> str:
    with pytest.raises(SpecError) as raised:
        parse_settings("demo", TABLE, given)
    return str(raised.value)


def test_settings_not_given_take_their_defaults_and_given_ones_are_typed() -> None:
    assert parse_settings("demo", TABLE, {}) == {
        "window": 8192,
        "threads": 4,
        "seed": 0,
        "accuracy": 0.98,
        "slope": 2.0,
        "nll": 2.5,
        "eager": False,
        "dtype": "auto",
        "key_env": "API_KEY",
        "batch": "auto",
    }
    given = {
        "window": "16k",
        "threads": "2",
        "accuracy": "1",
        "eager": "1",
        "dtype": "bfloat16",
        "batch": "8",
    }
    values = parse_settings("demo", TABLE, given)
    assert [values[key] for key in given] == [16384, 2, 1.0, True, "bfloat16", 8]
    assert type(values["window"]) is int and type(values["accuracy"]) is float


WINDOW = "a whole number of tokens from 1025 to 1024M (e.g. 8k)"
THREADS = "a whole number of threads from 1 to 64"


@pytest.mark.parametrize(
    ("key", "value", "needs"),
    [
        ("window", "1k", WINDOW),
        ("window", "8.5", WINDOW),
        ("window", "2048M", WINDOW),
        ("window", "9" * 400, WINDOW),  # past a float's range
        ("threads", "0", THREADS),
        ("threads", "+2", THREADS),
        ("threads", "1_0", THREADS),
        ("threads", " 2", THREADS),
        ("seed", "-1", "a whole number of at least 0"),
        ("seed", "9" * 5000, "a whole number of at least 0"),  # past int()'s digit limit
        ("accuracy", "nan", "a number from 0 to 1"),
        ("accuracy", "1.5", "a number from 0 to 1"),
        ("slope", "0", "a number above 0 and at most 64"),
        ("slope", "1e308", "a number above 0 and at most 64"),
        ("nll", "inf", "a number of nats of at least 0"),
        ("nll", "-inf", "a number of nats of at least 0"),
        ("eager", "yes", "1 (on) or 0 (off)"),
        ("dtype", "float8", "one of auto, float32, bfloat16"),
        ("key_env", "MY KEY", "an environment variable's name"),
        ("batch", "0", "auto or a whole number of at least 1"),
    ],
)
def test_bad_values_are_refused_in_one_form(key: str, value: str, needs: str) -> None:
    assert refused({key: value}) == f"demo setting '{key}' must be {needs}, not '{value}'"


def test_an_unknown_setting_names_the_close_one_and_lists_them_all() -> None:
    listing = "window=, threads=, seed=, accuracy=, slope=, nll=, eager=, dtype=, key_env=, batch="
    assert refused({"windw": "8k"}) == (
        f"demo has no setting 'windw=8k' (did you mean 'window'?): its settings are {listing}"
    )
    assert refused({"colour": "red"}) == f"demo has no setting 'colour=red': its settings are {listing}"


def test_a_value_or_key_with_a_line_break_still_gives_one_line() -> None:
    assert refused({"dtype": "a\nb"}).endswith("not 'a\\nb'")
    assert refused({"a\nb": "1"}).startswith("demo has no setting 'a\\nb=1': its settings are")


def test_the_first_bad_setting_is_the_one_named() -> None:
    assert "'threads'" in refused({"seed": "1", "threads": "0", "accuracy": "2"})


def test_refusal_is_the_same_form_for_checks_that_span_settings() -> None:
    error = refusal("openai", "prefill", "continue", "none unless endpoint=chat")
    assert str(error) == "openai setting 'prefill' must be none unless endpoint=chat, not 'continue'"


def test_unless_auto_resolves_what_was_left_to_the_backend() -> None:
    values = parse_settings("demo", TABLE, {})
    assert unless_auto(values["batch"], 8) == 8
    assert unless_auto(parse_settings("demo", TABLE, {"batch": "3"})["batch"], 8) == 3


# The range each numeric setting of TABLE states; every value read must lie in it.
RANGES = {
    "window": (1025, MOST_TOKENS),
    "threads": (1, 64),
    "seed": (0, math.inf),
    "accuracy": (0, 1),
    "slope": (0, 64),
    "nll": (0, math.inf),
    "batch": (1, math.inf),
}


# Strings near what people type: numbers with units, signs, exponents, and anything at all.
VALUES = st.one_of(
    st.text(),
    st.from_regex(r"-?[0-9]{0,12}(\.[0-9]{0,4})?(e[-+]?[0-9]{1,3})?[kKmM]?", fullmatch=True),
    st.sampled_from(["nan", "inf", "-inf", "1e308", "0", "1", "auto", "1k", "0.5k", "1M", "4294967296"]),
)


@given(key=st.sampled_from(sorted(TABLE)), value=VALUES)
def test_any_string_gives_a_typed_value_or_a_one_line_spec_error(key: str, value: str) -> None:
    try:
        read = parse_settings("demo", TABLE, {key: value})[key]
    except SpecError as exc:
        assert "\n" not in str(exc)
        assert str(exc).startswith(f"demo setting '{key}' must be ")
        return
    if key in RANGES and read != "auto":
        low, high = RANGES[key]
        assert type(read) in (int, float) and low <= read <= high
    if key == "slope":
        assert read > 0


def test_token_counts_are_capped_where_a_float_still_holds_them() -> None:
    assert parse_settings("demo", {"n": count(None)}, {"n": "1024M"})["n"] == MOST_TOKENS
