"""The spec's details that its behaviour tests leave open, each pinned by a value worked out by
hand: the bounds of a depth count, the rounding of evenly spaced depths, and the refusal's words."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from fathom.errors import SpecError
from fathom.spec import (
    MAX_DEPTHS,
    MAX_LENGTH,
    MAX_PLANNED,
    MAX_SAMPLES,
    RunSpec,
    parse_corpora,
    parse_depths,
    parse_items,
    parse_lengths,
    parse_ops,
    parse_repeats,
    parse_split_distance,
    parse_templates,
    prompt_options,
)
from fathom.units import parse_count


def test_a_depth_count_up_to_the_maximum_is_taken_and_one_past_it_is_refused() -> None:
    assert MAX_DEPTHS == 1001
    depths = parse_depths("1001")
    assert len(depths) == 1001 and depths[:3] == (0.0, 0.001, 0.002) and depths[-1] == 1.0
    for text in ("1002", "0"):
        with pytest.raises(SpecError) as refused:
            parse_depths(text)
        assert str(refused.value) == f"--depths takes a count of 1..1001 depths, not {text}"


def test_evenly_spaced_depths_are_rounded_to_six_places() -> None:
    assert parse_depths("7") == (0.0, 0.166667, 0.333333, 0.5, 0.666667, 0.833333, 1.0)
    assert parse_depths(" 4 ") == (0.0, 0.333333, 0.666667, 1.0)


@pytest.mark.parametrize("text", ["zero", "0.5,half", ",", "nan"])
def test_unreadable_depths_are_refused_with_what_to_write(text: str) -> None:
    with pytest.raises(SpecError) as refused:
        parse_depths(text)
    assert str(refused.value) == f"cannot read depths '{text}': write a count (11) or fractions (0,0.5,1)"


def test_a_count_too_large_for_a_float_is_refused_quoting_its_first_24_characters() -> None:
    with pytest.raises(SpecError) as refused:
        parse_count("9" * 400 + "k")
    assert str(refused.value) == (
        "token count '999999999999999999999999...' is far too large: write e.g. 4096, 4k or 1M"
    )


def _spec(**changes: object) -> RunSpec:
    values: dict[str, object] = {
        "task": "niah",
        "model": "sim:perfect",
        "tokenizer": "char",
        "lengths": (1024,),
        "depths": (0.5,),
        "samples": 3,
    }
    return RunSpec(**{**values, **changes})  # type: ignore[arg-type]


def test_lengths_must_be_given_and_positive_and_one_token_is_a_length() -> None:
    assert _spec(lengths=(1,)).lengths == (1,)
    for lengths, message in [
        ((), "no lengths given: pass e.g. --lengths 1k,2k,4k"),
        ((1024, 0), "lengths must be positive token counts, got [1024, 0]"),
    ]:
        with pytest.raises(SpecError) as refused:
            _spec(lengths=lengths)
        assert str(refused.value) == message


def test_a_spec_with_domains_reads_back_from_its_json() -> None:
    spec = _spec(domains=("code", "prose"))
    written = json.loads(json.dumps(spec.to_json()))
    assert written["domains"] == ["code", "prose"]
    assert RunSpec.from_json(written) == spec


def test_each_limit_is_allowed_and_one_past_it_is_refused() -> None:
    assert (MAX_LENGTH, MAX_SAMPLES, MAX_PLANNED) == (33_554_432, 100_000, 1_000_000)
    assert _spec(lengths=(33_554_432,)).lengths == (33_554_432,)
    assert _spec(samples=100_000, depths=()).samples == 100_000
    assert len(_spec(depths=tuple(i / 1000 for i in range(1001)), samples=1).depths) == 1001
    # No depths (RULER's tasks) count as one: 10 lengths x 100,000 samples is the most one run plans.
    assert _spec(lengths=tuple(range(1, 11)), depths=(), samples=100_000).samples == 100_000
    refusals = [
        (
            {"lengths": (33_554_433,)},
            "a length of 3.36e+07 tokens is beyond fathom's limit of 32M tokens: check --lengths "
            "(k = 1024, M = 1024k)",
        ),
        (
            {"samples": 100_001, "depths": ()},
            "samples per cell must lie in 1..100000 (3 or more for intervals), got 100001",
        ),
        ({"depths": tuple(i / 1001 for i in range(1002)), "samples": 1}, "at most 1001 depths, got 1002"),
        (
            {"lengths": (1024, 2048, 4096, 8192), "depths": (0.0, 0.5, 1.0), "samples": 83_334},
            "this spec plans 1e+06 samples per task (4 lengths x 3 depths x 83334 samples), more than "
            "fathom runs in one run (1,000,000): split the sweep into several runs",
        ),
    ]
    for changes, message in refusals:
        with pytest.raises(SpecError) as refused:
            _spec(**changes)
        assert str(refused.value) == message


@pytest.mark.parametrize(
    ("values", "parsed"),
    [
        (None, (None, ())),
        ([",, "], (None, ())),
        (["prose"], ("prose", ())),
        (["prose, code", " essays "], (None, ("prose", "code", "essays"))),
        (["mix:code=0.3,prose=0.7"], ("mix:code=0.3,prose=0.7", ())),  # a mixture's commas are its own
        (["mix:code=0.5,prose=0.5", "noise"], (None, ("mix:code=0.5,prose=0.5", "noise"))),
    ],
)
def test_corpus_options_give_one_corpus_or_several_to_sweep(
    values: list[str] | None, parsed: tuple[str | None, tuple[str, ...]]
) -> None:
    assert parse_corpora(values) == parsed


def test_a_split_distance_is_a_share_or_random() -> None:
    assert parse_split_distance("0.25") == 0.25
    assert parse_split_distance("random") is None
    with pytest.raises(SpecError) as refused:
        parse_split_distance("far")
    assert str(refused.value) == "--split-distance takes a share of the haystack (0.25) or random, not 'far'"


def test_the_prompt_options_are_read_from_the_shared_arguments() -> None:
    args = SimpleNamespace(
        corpus=["prose,code"],
        needle="fact",
        distractors=2,
        needles=3,
        split_distance="random",
        haystack_offset="random",
        needle_style="prose",
        template="chatml",
        system_prompt="Be brief.",
        literal_distractor=True,
        relations="home, work",
        needle_orders="all",
        question_templates="3,1",
    )
    assert prompt_options(args) == {
        "corpus": None,
        "domains": ("prose", "code"),
        "needle": "fact",
        "distractors": 2,
        "needles": 3,
        "split_distance": None,
        "haystack_offset": "random",
        "needle_style": "prose",
        "template": "chatml",
        "system_prompt": "Be brief.",
        "literal_distractor": True,
        "relations": ("home", "work"),
        "needle_orders": ("name-first", "place-first"),
        "question_templates": (3, 1),
    }
    # No --distractors given: low-overlap needles take 3 other characters, every other kind none.
    assert prompt_options(SimpleNamespace(**{**vars(args), "distractors": None}))["distractors"] == 0
    latent = SimpleNamespace(**{**vars(args), "distractors": None, "needle": "latent-1"})
    assert prompt_options(latent)["distractors"] == 3


def test_a_sweep_without_depths_counts_one_depth_in_its_refusal() -> None:
    # RULER's tasks draw depths per sample: 11 lengths x 1 x 100,000 samples = 1,100,000 planned.
    with pytest.raises(SpecError) as refused:
        _spec(lengths=tuple(range(1, 12)), depths=(), samples=100_000)
    assert str(refused.value) == (
        "this spec plans 1.1e+06 samples per task (11 lengths x 1 depths x 100000 samples), more than "
        "fathom runs in one run (1,000,000): split the sweep into several runs"
    )


def test_one_new_token_is_allowed_and_none_is_refused() -> None:
    assert _spec(max_new_tokens=1).max_new_tokens == 1
    assert _spec(max_new_tokens=None).max_new_tokens is None
    with pytest.raises(SpecError) as refused:
        _spec(max_new_tokens=0)
    assert str(refused.value) == "max new tokens must be at least 1, got 0"


def test_the_later_fields_take_their_edges_and_refuse_one_past_each_in_full() -> None:
    allowed: list[dict[str, object]] = [
        {"max_new_tokens": 33_554_432},
        {"thinking_budget": 1},
        {"thinking_budget": 33_554_432},
        {"ops": (1,), "items": (1,), "repeats": (1,)},
        {"fill": "ruler"},
        {"needle_style": "prose"},
        {
            "relations": ("work", "visit", "home"),
            "needle_orders": ("place-first",),
            "question_templates": (3, 2),
        },
    ]
    for changes in allowed:
        spec = _spec(**changes)
        assert {name: getattr(spec, name) for name in changes} == changes
    forms = "use one or more of visit, home, work, or all"
    refusals: list[tuple[dict[str, object], str]] = [
        (
            {"max_new_tokens": 33_554_433},
            "--max-new-tokens of 33,554,433 is beyond fathom's longest context, 32M tokens: give at most "
            "that (niah's default is 32)",
        ),
        ({"thinking_budget": 0}, "--thinking-budget takes a count of tokens in 1..32M, got 0"),
        (
            {"thinking_budget": 33_554_433},
            "--thinking-budget takes a count of tokens in 1..32M, got 33,554,433",
        ),
        ({"ops": (4, 0)}, "--ops takes counts of operations of at least 1, got [4, 0]"),
        ({"items": (0,)}, "--items takes counts of records of at least 1, got [0]"),
        ({"repeats": (2, 0)}, "--repeats takes counts of asks of at least 1, got [2, 0]"),
        ({"fill": "full"}, "unknown fill 'full': use one of exact, ruler"),
        (
            {"needle_style": "plain"},
            "unknown needle style 'plain': use native (the haystack's own form) or prose",
        ),
        ({"relations": ()}, f"--relations names none: {forms}"),
        ({"relations": ("visit", "school")}, f"--relations: unknown value 'school': {forms}"),
        ({"relations": ("home", "home")}, "--relations names a value twice (home, home): name each once"),
        (
            {"needle_orders": ("last",)},
            "--needle-orders: unknown value 'last': use one or more of name-first, place-first, or all",
        ),
        (
            {"question_templates": (1, 4)},
            "--question-templates: unknown value '4': use one or more of 1, 2, 3, or all",
        ),
        ({"question_templates": (2, 2)}, "--question-templates names a value twice (2, 2): name each once"),
    ]
    for changes, message in refusals:
        with pytest.raises(SpecError) as refused:
            _spec(**changes)
        assert str(refused.value) == message


def test_a_spec_of_every_later_axis_and_form_reads_back_from_its_json_text() -> None:
    spec = _spec(
        ops=(4, 16),
        items=(8,),
        repeats=(2, 4),
        relations=("home", "work"),
        needle_orders=("place-first", "name-first"),
        question_templates=(2,),
    )
    written = json.loads(json.dumps(spec.to_json()))
    assert [written[name] for name in ("ops", "items", "repeats")] == [[4, 16], [8], [2, 4]]
    assert written["relations"] == ["home", "work"] and written["question_templates"] == [2]
    back = RunSpec.from_json(written)
    assert back == spec and (back.ops, back.needle_orders) == ((4, 16), ("place-first", "name-first"))


def test_question_templates_are_read_as_numbers_of_up_to_three_digits_or_all() -> None:
    assert parse_templates("all") == (1, 2, 3)
    assert parse_templates("3, 001") == (3, 1)
    for text, part in [("x", "x"), ("1,0001", "0001"), ("2,-1", "-1")]:
        with pytest.raises(SpecError) as refused:
            parse_templates(text)
        assert str(refused.value) == (
            f"--question-templates: unknown value '{part}': use one or more of 1, 2, 3, or all"
        )


def test_an_empty_length_is_refused_saying_how_to_separate_them() -> None:
    with pytest.raises(SpecError) as refused:
        parse_lengths("1k,,2k")
    assert str(refused.value) == (
        "--lengths '1k,,2k' has an empty entry: separate lengths by single commas, e.g. 1k,2k,4k"
    )


def test_each_count_axis_names_its_flag_and_example_when_refused() -> None:
    assert (parse_ops("64, 4,4"), parse_items("8"), parse_repeats(" 2,8 ")) == ((4, 64), (8,), (2, 8))
    for parse, flag, example in [
        (parse_ops, "--ops", "4,16,64"),
        (parse_items, "--items", "8,32,128"),
        (parse_repeats, "--repeats", "2,4,8"),
    ]:
        with pytest.raises(SpecError) as refused:
            parse("4,x")
        assert (
            str(refused.value) == f"{flag} takes whole counts separated by commas, e.g. {example}, not '4,x'"
        )


def test_a_count_has_up_to_six_ascii_digits() -> None:
    assert parse_ops("999999,1") == (1, 999_999)
    for text in ("1000000", "\u0663", "-4", "4.0"):  # seven digits, an Arabic-Indic 3, a sign, a point
        with pytest.raises(SpecError) as refused:
            parse_ops(text)
        assert (
            str(refused.value) == f"--ops takes whole counts separated by commas, e.g. 4,16,64, not '{text}'"
        )


def test_every_relation_and_question_template_is_read_from_all() -> None:
    args = SimpleNamespace(
        corpus=None,
        needle="latent-1",
        distractors=None,
        needles=1,
        split_distance="0.25",
        haystack_offset="start",
        needle_style="native",
        template="auto",
        system_prompt=None,
        literal_distractor=False,
        relations="all",
        needle_orders="name-first",
        question_templates="all",
    )
    options = prompt_options(args)
    assert (options["relations"], options["needle_orders"], options["question_templates"]) == (
        ("visit", "home", "work"),
        ("name-first",),
        (1, 2, 3),
    )
