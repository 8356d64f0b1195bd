import json

import pytest

from fathom.errors import SpecError
from fathom.spec import RunSpec, parse_depths, parse_lengths
from fathom.units import format_count, parse_count


def test_counts_use_binary_k_like_ruler() -> None:
    assert parse_count("4k") == 4096
    assert parse_count("128K") == 131072
    assert parse_count("1M") == 1048576
    assert parse_count("1500") == 1500
    assert parse_count("0.5k") == 512
    assert format_count(131072) == "128k"
    assert format_count(1048576) == "1M"
    assert format_count(1500) == "1500"


@pytest.mark.parametrize("text", ["", "abc", "4g", "0.3k", "-1k"])
def test_unreadable_counts_are_refused(text: str) -> None:
    with pytest.raises(SpecError, match="token count"):
        parse_count(text)


def test_lengths_are_sorted_and_deduplicated() -> None:
    assert parse_lengths("4k,1k,4096,2k") == (1024, 2048, 4096)


def test_depth_count_spreads_evenly_from_top_to_bottom() -> None:
    assert parse_depths("11") == tuple(i / 10 for i in range(11))
    assert parse_depths("1") == (0.5,)
    assert parse_depths("0.5, 0,1") == (0.0, 0.5, 1.0)
    with pytest.raises(SpecError, match="depths"):
        parse_depths("zero")


def _spec(**changes: object) -> RunSpec:
    values: dict[str, object] = dict(
        task="niah", model="sim:perfect", tokenizer="char", lengths=(1024,), depths=(0.5,), samples=3
    )
    values.update(changes)
    return RunSpec(**values)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"lengths": (0,)}, "positive"),
        ({"lengths": ()}, "no lengths"),
        ({"depths": (1.5,)}, r"\[0, 1\]"),
        ({"depths": (-0.1,)}, r"\[0, 1\]"),
        ({"samples": 0}, r"must lie in 1\.\.100000"),
        ({"samples": 100_001}, r"must lie in 1\.\.100000"),
        ({"lengths": (32 * 1024 * 1024 + 1,)}, "beyond fathom's limit of 32M tokens"),
        ({"depths": tuple(i / 2000 for i in range(1002))}, "at most 1001 depths"),
        ({"max_new_tokens": 0}, "at least 1"),
    ],
)
def test_bad_specs_are_refused_with_the_reason(changes: dict[str, object], message: str) -> None:
    with pytest.raises(SpecError, match=message):
        _spec(**changes)


def test_spec_round_trips_through_json_and_hash_tracks_content() -> None:
    spec = _spec()
    assert RunSpec.from_json(spec.to_json()) == spec
    assert _spec(seed=1).sha256 != spec.sha256
    # Through JSON text, whose lists come back as the spec's tuples: a real suite's tasks too.
    suite = RunSpec("longbench", "sim:perfect", "char", (1024,), (0.5,), 3, data="d", suite_tasks=("a", "b"))
    for each in (spec, suite):
        assert RunSpec.from_json(json.loads(json.dumps(each.to_json()))) == each
