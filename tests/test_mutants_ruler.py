"""RULER generators' details that their behaviour tests and the golden prompts leave open, each
pinned by a value worked out by hand or reconstructed independently of the generator."""

from __future__ import annotations

import dataclasses
import itertools
import random
import re
import string
from types import SimpleNamespace
from typing import cast

import numpy as np
import pytest

from fathom.errors import PromptError, SpecError
from fathom.prompts.builder import Prompt, PromptText, TooShort
from fathom.prompts.haystack import load_corpus
from fathom.prompts.haystack.index import TokenizedCorpus
from fathom.prompts.templates import resolve_template
from fathom.prompts.tokenizers import Tokenizer, load_tokenizer
from fathom.records import Cell
from fathom.tasks.ruler.base import (
    Draft,
    Lines,
    Setting,
    Steps,
    fill,
    line_slots,
    lines_close_the_context,
)
from fathom.tasks.ruler.catalogue import ALL_VARIANTS, Variant
from fathom.tasks.ruler.niah import EssayWords, NeedleFamily
from fathom.tasks.ruler.qa import QuestionAnswering
from fathom.tasks.ruler.sizing import RulerFill
from fathom.tasks.ruler.vt import VariableTracking, chain
from fathom.tasks.ruler.words import SINGLES_POOL, CommonWords, FrequentWords, _fill_gap, zipf_counts

CHAR = load_tokenizer("char")
CL100K = load_tokenizer("cl100k_base")
STATEMENT = re.compile(r"VAR ([A-Z]+) = (?:VAR ([A-Z]+)|(\d+))")


def setting(tokenizer: Tokenizer = CL100K) -> Setting:
    return Setting(tokenizer, resolve_template("none", tokenizer), None, None)


def test_a_three_letter_name_drawn_as_VAR_is_drawn_again() -> None:
    # Random(16766)'s first three capitals spell VAR: the keyword itself, never a name.
    draws = random.Random(16766)
    first, second, third = ("".join(draws.choices(string.ascii_uppercase, k=3)) for _ in range(3))
    assert first == "VAR"
    names, _, statements = chain(random.Random(16766), 1, letters=3)
    assert names == [second, third]
    assert statements[1] == f"VAR {third} = VAR {second}"


def test_the_value_is_five_digits_below_99999_as_rulers_randint_draws_it() -> None:
    # Random(94546) reaches the value's draw where a range that let 99999 in would give it.
    names, value, statements = chain(random.Random(94546), 1, letters=3)
    assert (names, value) == (["NMN", "PNL"], "65620")
    assert statements == ["VAR NMN = 65620", "VAR PNL = VAR NMN"]


def test_vt_builds_one_chain_and_says_so_for_more() -> None:
    with pytest.raises(SpecError) as refused:
        VariableTracking(Variant("vt_2", "vt", {"chains": 2, "hops": 4}), setting())
    assert str(refused.value) == "'vt_2' builds one chain, as RULER's suite does, not 2"


def test_the_solved_example_has_at_most_ten_hops() -> None:
    family = VariableTracking(Variant("vt_12", "vt", {"chains": 1, "hops": 12}), setting())
    draft = family.draft(8192 - 30, random.Random(0))
    prompt = draft.prompt
    head = CL100K.decode(prompt.ids[: prompt.head_tokens].tolist())
    context = CL100K.decode(
        prompt.ids[prompt.head_tokens : prompt.head_tokens + prompt.context_tokens].tolist()
    )
    example = STATEMENT.findall(head)
    assert len(example) == 11 and all(len(name) == 3 for name, _, _ in example)
    assert len(STATEMENT.findall(context)) == 13 == len(draft.answers)


@pytest.mark.parametrize(
    ("variant", "corpus"),
    [
        (Variant("vt", "vt", {"chains": 1, "hops": 4}), "noise"),
        (Variant("n1", "niah", {"haystack": "noise", "key": "words", "value": "numbers", "keys": 1,
                                "values": 1, "queries": 1}), "noise"),
    ],
)  # fmt: skip
def test_a_family_names_its_corpus_and_its_hash_in_the_identity(variant: Variant, corpus: str) -> None:
    family = (
        VariableTracking(variant, setting()) if variant.family == "vt" else NeedleFamily(variant, setting())
    )
    assert family.identity() == {"corpus": corpus, "corpus_sha256": load_corpus(corpus).sha256}


def test_a_needle_haystack_has_no_corpus_to_name() -> None:
    params = {"haystack": "needle", "key": "words", "value": "numbers", "keys": 1, "values": 1, "queries": 1}
    assert NeedleFamily(Variant("n2", "niah", params), setting()).identity() == {}


def test_cwe_names_its_word_lists_by_count_and_hash() -> None:
    # The nouns, adjectives and verbs RULER draws from, deduplicated and sorted, one per line: their
    # hash is part of every cwe run's identity, so it must not move while the lists do not.
    family = CommonWords(Variant("cwe", "cwe", {"freq_cw": 30, "freq_ucw": 3, "num_cw": 10}), setting(CHAR))
    assert family.identity() == {
        "words": 8166,
        "words_sha256": "393572555cfe9c15fd065aa9df0e9e91368cff81418b4d78025e9a4f57fe2ac4",
    }


def test_a_needle_haystack_just_long_enough_holds_the_needle_alone() -> None:
    family = NeedleFamily(ALL_VARIANTS["niah_multikey_2"], setting(CHAR))
    with pytest.raises(TooShort) as short:
        family.draft(10, random.Random(0))
    overhead = short.value.overhead
    assert (short.value.length, short.value.what) == (10, "template, question and needles")
    assert str(short.value) == (
        f"length 10 is below this prompt's fixed overhead of {overhead} tokens (template, question and "
        f"needles); use lengths of at least {overhead}"
    )
    # The same draw at exactly that length: the needle and no distractor; one token less is refused.
    prompt = family.draft(overhead, random.Random(0)).prompt
    assert len(prompt.ids) == overhead
    (needle,) = prompt.needles
    assert needle.tokens == prompt.context_tokens
    with pytest.raises(TooShort) as short:
        family.draft(overhead - 1, random.Random(0))
    assert (short.value.length, short.value.overhead) == (overhead - 1, overhead)


def test_needles_among_needles_take_distinct_gaps_between_the_distractors() -> None:
    # Four needles drawn into the gaps before a few distractor lines, as RULER inserts them: never two
    # in one gap (no distractor between them), never after the last line (RULER's insertion indexes
    # stop before it), and over twenty draws some take the first gap.
    params = {"haystack": "needle", "key": "words", "value": "numbers", "keys": 4, "values": 1, "queries": 4}
    family = NeedleFamily(Variant("niah_needles_4", "niah", params), setting(CHAR))
    first = 0
    for seed in range(20):
        prompt = family.draft(1000, random.Random(seed)).prompt
        needles = prompt.needles
        assert len(needles) == 4
        assert all(a.token_offset + a.tokens < b.token_offset for a, b in itertools.pairwise(needles))
        assert needles[-1].token_offset + needles[-1].tokens < prompt.head_tokens + prompt.context_tokens
        first += needles[0].token_offset == prompt.head_tokens
    assert 0 < first < 20


@pytest.mark.parametrize(("target", "words"), [(200, 5), (219, 5), (250, 6), (300, 7)])
def test_fwe_draws_a_50th_of_the_length_in_words_and_at_least_five(target: int, words: int) -> None:
    # RULER's rule on the length with the tokens to generate (50): (200 + 50) // 50 = 5, 300 // 50 = 6,
    # 350 // 50 = 7; never below five.
    family = FrequentWords(ALL_VARIANTS["fwe"], setting())
    prompt = family.draft(target, random.Random(0)).prompt
    assert len(prompt.ids) == target
    end = prompt.head_tokens + prompt.context_tokens
    context = CL100K.decode(prompt.ids[prompt.head_tokens : end].tolist())
    assert len(set(context.split())) == words  # the noise "..." and the coded words


@pytest.mark.parametrize(
    ("gap", "unit", "items", "spare", "filled"),
    [
        (5, 3, [10], 0, (1, [])),  # too big to take: one unit, two tokens left
        (5, 3, [5], 0, (0, [0])),  # exactly the gap
        (4, 3, [7], 1, (-1, [0])),  # past the gap by one unit, which is given back
        (4, 3, [8], 1, (1, [])),  # past the gap by more than the units that can be given back
        (2, 5, [2, 2], 0, (0, [0])),  # of two alike, the first
        (2, 5, [1, 1, 2], 0, (0, [2])),  # one item rather than two
        (7, 5, [1, 1], 0, (1, [0, 1])),  # a unit, and the two that close the rest exactly
    ],
)
def test_a_gap_is_filled_by_units_and_the_fewest_items_that_close_it(
    gap: int, unit: int, items: list[int], spare: int, filled: tuple[int, list[int]]
) -> None:
    assert _fill_gap(gap, unit, items, spare) == filled


def _statements_start_sentences(text: str) -> int:
    """How many of the chain's statements ``text`` holds, having checked that each starts a line of
    the noise, as RULER inserts them before its noise lines (after the line before and the joining
    space, or first in the haystack without one) and that noise lies between each two: a statement
    sits at a distinct line start."""
    found = list(re.finditer(r"(?<!\S)VAR [A-Z]+ = (?:VAR [A-Z]+|\d+)", text))
    for match in found:
        before = text[: match.start()]
        assert before == "" or before.endswith(("\n", "\n ")), before[-40:]
    for before, after in itertools.pairwise(found):
        assert "." in text[before.end() : after.start()]
    return len(found)


# Seeds 0, 1, 3, 5 and 7 put a statement first in the example's noise, with no joining space.
@pytest.mark.parametrize("seed", [*range(8), 11, 42])
def test_vt_statements_take_distinct_sentence_starts_in_the_example_and_the_context(seed: int) -> None:
    family = VariableTracking(Variant("vt", "vt", {"chains": 1, "hops": 4}), setting())
    prompt = family.draft(2048 - 30, random.Random(seed)).prompt
    end = prompt.head_tokens + prompt.context_tokens
    head = CL100K.decode(prompt.ids[: prompt.head_tokens].tolist())
    example = head.split("Question:")[0]
    assert _statements_start_sentences(example) == 5
    assert _statements_start_sentences(CL100K.decode(prompt.ids[prompt.head_tokens : end].tolist())) == 5


def test_an_example_too_long_for_its_tokens_grows_to_hold_its_chain_without_noise() -> None:
    # One character per token: ten hops of three-letter names leave the example no room for noise.
    family = VariableTracking(Variant("vt_12", "vt", {"chains": 1, "hops": 12}), setting(CHAR))
    prompt = family.draft(8192 - 30, random.Random(0)).prompt
    assert len(prompt.ids) == 8192 - 30
    example = CHAR.decode(prompt.ids[: prompt.head_tokens].tolist()).split("Question:")[0]
    assert len(STATEMENT.findall(example)) == 11
    assert "The grass is green." not in example


@pytest.mark.parametrize(
    ("variant", "family_type", "short", "what"),
    [
        ("fwe", FrequentWords, 150, "template and a text whose top three words stand out"),
        ("cwe", CommonWords, 10, "template, example and the 10 common words"),
        ("niah_single_1", NeedleFamily, 20, "template, question and needles"),
        ("vt", VariableTracking, 100, "template, example and chain"),
    ],
)
def test_a_task_just_long_enough_is_built_and_one_token_less_is_refused(
    variant: str,
    family_type: type[FrequentWords] | type[CommonWords] | type[NeedleFamily] | type[VariableTracking],
    short: int,
    what: str,
) -> None:
    """At the least length the needles (vt's chain, the word list) fill the context to the token."""
    family = family_type(ALL_VARIANTS[variant], setting())
    with pytest.raises(TooShort) as refused:
        family.draft(short, random.Random(0))
    overhead = refused.value.overhead
    assert str(refused.value) == (
        f"length {short} is below this prompt's fixed overhead of {overhead} tokens ({what}); "
        f"use lengths of at least {overhead}"
    )
    assert len(family.draft(overhead, random.Random(0)).prompt.ids) == overhead
    with pytest.raises(TooShort) as refused:
        family.draft(overhead - 1, random.Random(0))
    assert (refused.value.length, refused.value.overhead) == (overhead - 1, overhead)


def test_cwe_past_its_word_lists_falls_short_by_half_the_tolerance_at_most() -> None:
    # One character per token: seed 0's list holds 359,382 tokens at most, and 363,180 leaves the list
    # 360,290, so it falls 908 short: half the tolerance (ceil(0.5% of 363,180) = 1,816). One more is
    # an error that says how far the words reach.
    family = CommonWords(ALL_VARIANTS["cwe"], setting(CHAR))
    assert len(family.draft(363_180, random.Random(0)).prompt.ids) == 363_180 - 908
    with pytest.raises(PromptError) as refused:
        family.draft(363_181, random.Random(0))
    assert str(refused.value) == (
        "RULER's 8166 words fill only 359382 of the 360291 tokens this length leaves the cwe list; use "
        "shorter lengths"
    )


@pytest.mark.parametrize("tokenizer", [CL100K, CHAR], ids=["cl100k_base", "char"])
def test_cwe_closes_the_gap_exactly_from_a_few_tokens_past_its_overhead(tokenizer: Tokenizer) -> None:
    # Just past the overhead no uncommon entry fits: words that appear once close the gap, exactly
    # as soon as one entry (its number and its word) fits, eight tokens on with either tokenizer.
    family = CommonWords(ALL_VARIANTS["cwe"], setting(tokenizer))
    with pytest.raises(TooShort) as short:
        family.draft(10, random.Random(0))
    overhead = short.value.overhead
    for extra in range(48):
        built = len(family.draft(overhead + extra, random.Random(0)).prompt.ids)
        assert built == overhead + extra if extra >= 8 else overhead <= built <= overhead + extra


class _Draws(random.Random):
    """A generator whose raw bits are given: the edge draws a seed would hit once in millions."""

    def __init__(self, *bits: int) -> None:
        super().__init__(0)
        self.bits = list(bits)

    def getrandbits(self, k: int) -> int:
        return self.bits.pop(0)


def test_a_needles_number_has_seven_digits_as_rulers_randint_draws_them() -> None:
    # randint(1_000_000, 9_999_999) draws 24 bits below 9,000,000: 9,000,000 itself is drawn again.
    family = NeedleFamily(ALL_VARIANTS["niah_single_1"], setting())
    assert family._random("numbers", _Draws(9_000_000, 5)) == "1000005"
    assert family._random("numbers", _Draws(8_999_999)) == "9999999"


SINGLE_2 = ALL_VARIANTS["niah_single_2"]


def essay_family(tokenizer: Tokenizer) -> NeedleFamily:
    """niah_single_2 on the bundled prose (RULER's essays need their package), as --corpus prose."""
    return NeedleFamily(SINGLE_2, Setting(tokenizer, resolve_template("none", tokenizer), None, "prose"))


def test_rulers_steps_are_500_essay_words_up_to_the_essay_and_25_lines_or_5_below_4096() -> None:
    family = essay_family(CL100K)
    assert family.steps(4096) == Steps(500, 500, "essay words", family.words.count)
    assert family.words.count > 10_000  # the bundled prose's words, each opening a token with a space
    noise = NeedleFamily(ALL_VARIANTS["niah_single_1"], setting())
    assert noise.steps(4096) == Steps(25, 25, "noise lines")
    assert noise.steps(4095) == Steps(5, 5, "noise lines")


def test_the_answers_ruler_appends_are_joined_by_single_spaces() -> None:
    draft = NeedleFamily(ALL_VARIANTS["niah_multivalue"], setting()).draft(2048, random.Random(0))
    assert len(draft.answers) == 4
    family = essay_family(CL100K)
    assert family.appended(draft) == " ".join(draft.answers) == "{} {} {} {}".format(*draft.answers)


def test_an_essays_word_count_reads_each_word_opening_at_a_spaced_token() -> None:
    """Char tokens: a word opens at each space. The count's end is the corpus's last token."""
    family = essay_family(CHAR)
    words, text = family.words, CHAR.decode(family.tokenized.ids.tolist())  # each sentence after a space
    assert words.count == sum(1 for i, c in enumerate(text) if c.isspace())
    assert words.tokens(words.count) == words.size == len(text)
    assert words.tokens(words.count - 1) == int(words.starts[-1]) < words.size
    assert words.tokens(0) == int(words.starts[0])


def test_an_essay_opening_without_its_space_is_one_char_token_shorter() -> None:
    """Char tokens: the essay's first sentence loses its opening space, one token; cl100k's " The"
    and "The" are one token each, and a corpus read without a tokenizer shifts nothing."""
    assert essay_family(CHAR).opening.shift() == -1
    assert essay_family(CL100K).opening.shift() == 0
    family = essay_family(CHAR)
    assert dataclasses.replace(family.opening, tokenizer=None).shift() == 0


@pytest.mark.parametrize("seed", range(6))
def test_ruler_fill_builds_an_essay_of_exactly_the_words_counted(seed: int) -> None:
    """With char tokens each word costs its characters, and an essay opening without its space one
    fewer: the length asked of the builder counts that token, so the essay holds 500 whole words,
    not 500 and a stray space (nor 501)."""
    family = essay_family(CHAR)
    draft = family.draft(8192, random.Random(seed), 500)
    prompt = draft.prompt
    context_ids = prompt.ids[prompt.head_tokens : prompt.head_tokens + prompt.context_tokens]
    context = CHAR.decode(context_ids.tolist())
    essay = re.sub(r" ?One of the special magic \S+ for .+? is: \S+\.", "", context)
    assert len(essay.split()) == 500
    assert not essay.endswith(" ") and not essay.startswith(" ")


def test_an_essay_with_fewer_than_two_word_starts_is_refused_with_what_to_use() -> None:
    def words_of(text: str) -> EssayWords:
        corpus = SimpleNamespace(ids=np.asarray(CHAR.encode(text), dtype=np.int32))
        return EssayWords(cast(TokenizedCorpus, corpus), CHAR)

    message = (
        f"RULER's fill counts essay words, and no token of {CHAR.name} opens with a space to tell where "
        "one starts: use --fill exact with this tokenizer"
    )
    for text in ("no_spaces_at_all", "one space"):
        with pytest.raises(PromptError) as refused:
            words_of(text)
        assert str(refused.value) == message
    two = words_of("two spaces here")
    assert (two.count, two.tokens(0), two.tokens(1), two.tokens(2)) == (2, 3, 10, 15)


def test_each_familys_steps_name_its_unit_and_its_most_and_its_appended_answer() -> None:
    """RULER's sizing steps, as its generators step them: qa documents and vt lines by 10, cwe words
    by 10 up to the word list, fwe from length/6 letters... in 32nds of the length (whole tokens:
    4100 // 32 = 128, not 128.125); and the answers each appends to the prompt it measures."""
    qa = QuestionAnswering(ALL_VARIANTS["qa_synth"], setting())
    assert qa.steps(4096) == Steps(10, 10, "documents", len(qa.data.documents))
    vt = VariableTracking(ALL_VARIANTS["vt"], setting())
    assert vt.steps(4096) == Steps(10, 10, "noise lines")
    cwe = CommonWords(ALL_VARIANTS["cwe"], setting())
    assert cwe.steps(4096) == Steps(10, 10, "words", len(cwe.words)) and len(cwe.words) > 1000
    fwe = FrequentWords(ALL_VARIANTS["fwe"], setting())
    steps = fwe.steps(4100)
    assert steps == Steps(4100 // 6, 128, "coded words") and type(steps.step) is int
    draft = cwe.draft(4096, random.Random(0))
    assert cwe.appended(draft) == " 1. {} 2. {} 3. {} 4. {} 5. {} 6. {} 7. {} 8. {} 9. {} 10. {}".format(
        *draft.answers
    )
    assert fwe.appended(fwe.draft(4096, random.Random(0))) == ""


@pytest.mark.parametrize("tokenizer", [CL100K, CHAR], ids=["cl100k", "char"])
def test_a_noise_haystack_of_counted_lines_opens_with_a_whole_line(tokenizer: Tokenizer) -> None:
    """--fill ruler's niah_single_1: the lines counted and nothing before them (an exact fill may
    open with a line's tail; a counted one never does)."""
    family = NeedleFamily(ALL_VARIANTS["niah_single_1"], setting(tokenizer))
    for seed in range(3):
        prompt = family.draft(8192, random.Random(seed), 40).prompt
        context_ids = prompt.ids[prompt.head_tokens : prompt.head_tokens + prompt.context_tokens]
        context = tokenizer.decode(context_ids.tolist())
        assert context.startswith("The grass is green. The sky is blue.")
        assert context.count("The grass is green.") == 40


# --- RULER's search (--fill ruler), on a family whose sizes are worked out by hand -------------------


class Numbered(random.Random):
    """A sample's generator that says which sample it is for."""

    def __init__(self, sample: int) -> None:
        super().__init__(sample)
        self.sample = sample


class Linear:
    """A family whose sample ``s`` at ``count`` units is ``base + per * count + extra * s`` tokens,
    answered with " 42" (3 char tokens after "Answer:"), or nothing appended where ``appended`` is
    False. It records the targets it is asked for."""

    def __init__(self, steps: Steps, base: int = 100, per: int = 10, extra: int = 0, appended: bool = True):
        self.steps_, self.base, self.per, self.extra, self.answer = steps, base, per, extra, appended
        self.targets: list[int] = []

    def steps(self, length: int) -> Steps:
        return self.steps_

    def appended(self, draft: Draft) -> str:
        return " 42" if self.answer else ""

    def draft(self, target: int, rng: random.Random, count: int | None = None) -> Draft:
        assert count is not None and isinstance(rng, Numbered)
        self.targets.append(target)
        size = self.base + self.per * count + self.extra * rng.sample
        prompt = Prompt(np.zeros(size, dtype=np.int32), target, 0, size, ())
        return Draft(prompt, PromptText("", "", "Answer:"), "q", ("42",), "numbers", ("k",))


def fill_of(family: Linear) -> RulerFill:
    return RulerFill({"t": family}, CHAR)


def searched(family: Linear, length: int, new_tokens: int = 20) -> int:
    return fill_of(family).count(Cell("t", length, None, 0), new_tokens, Numbered)


def test_the_search_keeps_the_most_whole_steps_whose_prompt_answer_and_new_tokens_fit() -> None:
    """Prompt 100 + 10c, answer 3, new tokens 20: c = 80 makes 923 exactly, which fits a length of
    923 (at most, not below) and not one of 922; counts go 10, 20, ... (RULER's steps)."""
    family = Linear(Steps(10, 10, "lines"))
    assert searched(family, 923) == 80 and searched(family, 922) == 70
    assert set(family.targets) == {903, 902}  # each probe is asked for the length less the new tokens
    assert searched(Linear(Steps(10, 10, "lines"), appended=False), 920) == 80  # nothing appended: 0 tokens
    assert searched(Linear(Steps(10, 10, "lines")), 223) == 10  # only the first count fits


def test_the_search_stops_at_every_unit_there_is() -> None:
    assert searched(Linear(Steps(10, 10, "lines", most=35), per=1), 100_000) == 35


def test_a_search_that_starts_past_the_length_steps_back_to_the_count_that_fits() -> None:
    """fwe's start (here 50 in steps of 10, so at least 10): 50 overflows, 40 fits; or 40 overflows
    too and 30 fits; down to 10."""
    family = Linear(Steps(50, 10, "coded words"))
    assert searched(family, 100 + 400 + 23) == 40
    assert searched(family, 100 + 300 + 23) == 30
    with pytest.raises(PromptError) as refused:
        searched(family, 100 + 100 + 22)
    assert str(refused.value) == (
        "length 222 is too short for RULER's fill of 't': its first sample with 10 coded words, the "
        "fewest RULER's search takes, needs 223 tokens (its answer and 20 tokens to generate "
        "included); use a longer length, or --fill exact"
    )
    assert searched(family, 223) == 10


def test_each_length_has_its_own_count() -> None:
    fill = fill_of(Linear(Steps(10, 10, "lines")))
    assert fill.count(Cell("t", 923, None, 0), 20, Numbered) == 80
    assert fill.count(Cell("t", 523, None, 0), 20, Numbered) == 40


def test_a_sample_drops_whole_steps_while_it_overflows_and_keeps_the_length_as_its_target() -> None:
    """Samples grow by 3 tokens each: at length 923 (target 903) sample 1 fills its target exactly
    at the cell's 80, sample 2 needs 70, sample 220 (660 more) only the fewest, 10; sample 300
    overflows even there."""
    family = Linear(Steps(10, 10, "lines"), extra=3)
    fill = fill_of(family)

    def size(sample: int) -> int:
        draft = fill.draft(Cell("t", 923, None, sample), 20, Numbered)
        assert draft.prompt.target_tokens == 903 and draft.prompt.fills_target is False
        return len(draft.prompt.ids)

    assert [size(0), size(1), size(2), size(220)] == [900, 903, 806, 860]
    with pytest.raises(PromptError) as refused:
        size(300)
    assert str(refused.value) == (
        "sample 300 of 't' overflows length 923 (with its 20 tokens to generate) even at 10 lines, the "
        "fewest RULER's fill takes; use a longer length, or --fill exact"
    )


def test_steps_of_one_unit_are_taken_and_steps_of_none_refused() -> None:
    assert fill_of(Linear(Steps(1, 1, "coded words"))).steps(Cell("t", 64, None, 0)) == Steps(
        1, 1, "coded words"
    )
    for steps in (Steps(0, 1, "coded words"), Steps(1, 0, "coded words")):
        with pytest.raises(PromptError) as refused:
            fill_of(Linear(steps)).steps(Cell("t", 64, None, 0))
        assert str(refused.value) == (
            "length 64 is too short for RULER's fill of 't': it counts its coded words in shares of the "
            "length, which round to none here"
        )


def test_fill_takes_whole_units_then_trades_then_cuts_a_passed_over_one() -> None:
    """Units are runs of their own index (so a result names where each came from); the cut is the
    last ``n`` ids (an empty piece for 0, as a cut may give)."""

    def units(*sizes: int) -> list[np.ndarray]:
        return [np.full(size, index, dtype=np.int32) for index, size in enumerate(sizes)]

    def cut(ids: np.ndarray, tokens: int) -> np.ndarray:
        return ids[len(ids) - tokens :]

    def filled(
        sizes: tuple[int, ...], budget: int, lookahead: int | None = None
    ) -> tuple[list[list[int]], list[int], bool]:
        given = units(*sizes)
        chosen, indexes, opened = (
            fill(given, budget, cut) if lookahead is None else fill(given, budget, cut, lookahead)
        )
        return [unit.tolist() for unit in chosen], indexes, opened

    # 3 fits, 2 does not, 1 closes the gap: nothing is cut.
    assert filled((3, 2, 1), 4) == ([[0, 0, 0], [2]], [0, 2], False)
    # A unit passed over opens the list with its last tokens, one of them where one is left.
    assert filled((3, 5, 9), 4) == ([[1], [0, 0, 0]], [1, 0], True)
    # The 10 has no trade for a 3; the 4 after it trades for one and closes the gap.
    assert filled((3, 3, 10, 4), 7) == ([[3, 3, 3, 3], [1, 1, 1]], [3, 1], False)
    # One passed over is as many as a lookahead of 1 looks at: the 1 after it is still taken.
    assert filled((5, 1), 4, lookahead=1) == ([[0, 0, 0], [1]], [0, 1], True)
    # 256 passed over are as many as the default looks at: the 1 after 257 is never reached.
    assert filled((10,) * 257 + (1,), 5) == ([[0] * 5], [0], True)
    assert filled((10,) * 256 + (1,), 5) == ([[0] * 4, [256]], [0, 256], True)


def test_a_line_haystack_sizes_and_lays_out_its_elements_as_its_unit_writes_them() -> None:
    """A unit that shows its flags (an element opening the context starts with "^", else a space;
    one closing it is written twice) over char tokens: each size and layout worked out by hand."""

    def marked(element: str, first: bool, last: bool) -> str:
        return ("^" if first else " ") + (element * 2 if last else element)

    lines, needles = Lines(CHAR, "noise", marked), ["a", "bcd"]
    # " noise" is 6 tokens, the closing " noisenoise" 11; with no lines the last needle closes.
    assert lines.size(0, needles) == len(" a" + " bcdbcd") == 9
    assert lines.size(1, needles) == len(" a" + " bcd") + 11 == 17
    assert lines.size(2, needles) == 6 + 6 + 11 == 23
    assert (lines.size(3, []), lines.size(0, [])) == (6 + 6 + 11, 0)
    assert lines.fit(17, needles) == (1, 0)  # one line exactly
    assert lines.fit(27, needles) == (2, 4)  # a second line, 4 tokens left for a lead
    assert lines.fit(10, needles) == (0, 1)  # no line: the needles alone, the last one closing

    def laid_out(lead: int | None = None) -> str:
        slots = [1, 0]  # "bcd" before the first line, "a" before the second
        parts = lines.parts(2, needles, slots) if lead is None else lines.parts(2, needles, slots, lead)
        return "".join(CHAR.decode(ids.tolist()) for ids, _ in parts)

    assert laid_out() == laid_out(0) == "^bcd noise a noisenoise"
    assert laid_out(1) == "e bcd noise a noisenoise"  # a lead: the line's last token with a letter
    assert laid_out(3) == "ise bcd noise a noisenoise"


def test_cwe_closes_its_gap_with_the_fewest_words_that_fill_it_exactly() -> None:
    """Entries 1.. after none: " 1. w" costs the number's tokens and the word's. Of equal ends, the
    fewest words are kept, and a room no word fits is left as it is."""
    family = CommonWords(ALL_VARIANTS["cwe"], setting())
    pool = sorted(family.words, key=lambda word: (len(family.word_ids[word]), word))[:40]
    numbers = family._number_tokens(40)
    one = int(numbers[1] - numbers[0]) + len(family.word_ids[pool[0]])  # entry 1 with the shortest word
    chosen, left = family._singles(pool, 0, one)
    assert (len(chosen), left) == (1, 0) and len(family.word_ids[chosen[0]]) == len(family.word_ids[pool[0]])
    assert family._singles(pool, 0, 0) == ([], 0)
    assert family._singles(pool, 0, one - 1)[0] == []  # no entry fits: nothing taken, all left


def test_cwe_fills_its_length_to_the_token_with_cl100k() -> None:
    """Where whole entries and words that appear once can close the gap (cl100k's one-token numbers
    and words), an exact fill's list fills it exactly; each entry's number is counted from the list's
    first."""
    family = CommonWords(ALL_VARIANTS["cwe"], setting())
    lengths = [len(family.draft(n, random.Random(s)).prompt.ids) for n in (4096, 8192) for s in range(3)]
    assert lengths == [4096] * 3 + [8192] * 3


def test_an_essay_window_opens_without_the_space_its_first_sentence_was_tokenised_with() -> None:
    """Char tokens: a window from any boundary is the corpus's own text there less its opening
    space, with as many tokens as asked (one more sentence character in the room the space left);
    a window inside its first sentence is that sentence's opening; without a tokenizer to re-read
    the sentence, the corpus's window as it is."""
    family = essay_family(CHAR)
    opening, corpus = family.opening, family.tokenized
    for start in (0, 500, int(corpus.boundaries[-1])):  # the last sentence wraps to the first
        ids, starts = opening.window(300, start)
        plain, plain_starts = corpus.window(301, start)
        assert len(ids) == 300 and CHAR.decode(ids.tolist()) == CHAR.decode(plain.tolist())[1:]
        assert starts.tolist() == [s - 1 for s in plain_starts.tolist()]
    ids, starts = opening.window(3, 500)
    assert (
        CHAR.decode(ids.tolist()) == CHAR.decode(corpus.window(4, 500)[0].tolist())[1:] and len(starts) == 0
    )
    untokenized = dataclasses.replace(opening, tokenizer=None)
    for got, expected in zip(untokenized.window(300, 500), corpus.window(300, 500), strict=True):
        assert got.tolist() == expected.tolist()


def test_a_context_of_lines_ends_its_last_line_with_the_questions_newline() -> None:
    text = PromptText("Read.", "\nWhat is it?", "Answer:")
    assert lines_close_the_context(text) == PromptText("Read.", "What is it?", "Answer:")
    with pytest.raises(PromptError) as refused:
        lines_close_the_context(PromptText("Read.", " What is the special magic number?", "Answer:"))
    assert str(refused.value) == (
        "a context of lines needs a newline before the question, not ' What is the special'"
    )


def test_needles_among_fewer_lines_share_them_and_never_follow_the_last() -> None:
    rng = random.Random(0)
    assert line_slots(1, 6, rng) == [0] * 6 and line_slots(0, 3, rng) == [0] * 3
    slots = line_slots(3, 8, rng)
    assert len(slots) == 8 and set(slots) <= {0, 1, 2} and slots == sorted(slots)


def _context_text(draft: Draft, tokenizer: Tokenizer) -> str:
    prompt = draft.prompt
    return tokenizer.decode(
        prompt.ids[prompt.head_tokens : prompt.head_tokens + prompt.context_tokens].tolist()
    )


NEEDLE_LINE = re.compile(r"One of the special magic numbers? for (.+?) is: (\d+)\.")


def test_two_keys_asked_at_once_are_both_in_the_question() -> None:
    params = {"haystack": "essay", "key": "words", "value": "numbers", "keys": 3, "values": 1, "queries": 2}
    family = NeedleFamily(
        Variant("mq2", "niah", params), Setting(CL100K, resolve_template("none", CL100K), None, "prose")
    )
    draft = family.draft(4096, random.Random(0))
    first, second = draft.query_keys
    assert draft.question == f"{first}, and {second}"
    assert "Some special magic numbers" in draft.text.before + draft.text.after  # two values: plural


def test_the_singular_wording_keeps_the_system_prompt() -> None:
    setting = Setting(CL100K, resolve_template("none", CL100K), "Answer briefly.", "prose")
    draft = NeedleFamily(ALL_VARIANTS["niah_single_2"], setting).draft(2048, random.Random(0))
    assert draft.text.system == "Answer briefly."
    assert "A special magic number" in draft.text.before + draft.text.after


@pytest.mark.parametrize("haystack", ["essay", "needle"])
def test_the_values_of_every_key_not_asked_are_the_look_alikes(haystack: str) -> None:
    """An answer that gives them is flagged (Sample.look_alikes): the other keys' values, and in a
    haystack of needles every distractor line's too; never an asked one."""
    params = {"haystack": haystack, "key": "words", "value": "numbers", "keys": 4, "values": 1, "queries": 1}
    family = NeedleFamily(
        Variant("mk", "niah", params), Setting(CL100K, resolve_template("none", CL100K), None, "prose")
    )
    draft = family.draft(4096, random.Random(1))
    placed = dict(NEEDLE_LINE.findall(_context_text(draft, CL100K)))
    assert len(placed) >= 4 and placed[draft.query_keys[0]] == draft.answers[0]
    assert sorted(draft.look_alikes) == sorted(v for k, v in placed.items() if k != draft.query_keys[0])


def test_rulers_count_of_qa_documents_holds_each_document_once() -> None:
    family = QuestionAnswering(ALL_VARIANTS["qa_synth"], setting())
    for seed in range(3):
        draft = family.draft(8192, random.Random(seed), 20)
        bodies = re.split(r"(?:^|\n\n)Document \d+:\n", _context_text(draft, CL100K))[1:]
        assert len(bodies) == len(set(bodies)) == 20
        assert set(bodies) <= set(family.data.documents)


def test_fwe_takes_the_zipf_counts_of_the_most_whole_words_that_fit() -> None:
    # The noise one token, every coded word two: the most words W whose Zipf counts fit the budget,
    # found here by counting up, give every rank from 2 on; the noise's single tokens then close the
    # gap exactly, alone, so no rarer word takes one more occurrence.
    family = FrequentWords(ALL_VARIANTS["fwe"], setting(CHAR))
    sizes = np.array([1] + [2] * 9, dtype=np.int64)
    for budget in range(90, 600, 7):
        words = 1
        while zipf_counts(words + 1, 10, 2.0) @ sizes <= budget:
            words += 1
        counts = family._counts(sizes, budget, budget + 40)
        assert counts[1:].tolist() == zipf_counts(words, 10, 2.0)[1:].tolist(), budget
        assert counts @ sizes == budget


def test_cwe_takes_uncommon_words_only_while_one_more_entry_fits_after_them() -> None:
    # The docstring's rule, checked on the counts of many budgets: after the uncommon words taken,
    # one more entry (its number and the shortest word set aside for the gap) still fits, so the
    # words that appear once have room to close it.
    family = CommonWords(ALL_VARIANTS["cwe"], setting(CHAR))
    repeats, common = family.repeats, family.common
    order = random.Random(0).sample(family.words, len(family.words))
    pool = order[common : common + SINGLES_POOL]
    shortest = min(len(word) + 1 for word in pool)  # " word", a character a token
    for budget in range(4000, 4600, 3):
        counts = family._counts(order, repeats, budget, budget + 100)
        uncommon = [word for word, count in counts.items() if count == repeats.uncommon]
        entries = common * repeats.common + repeats.uncommon * len(uncommon)
        numbers = sum(len(f" {i}.") for i in range(1, entries + 1)) - 1  # "1." opens the list
        used = numbers + sum(count * (len(word) + 1) for word, count in counts.items() if count > 1)
        assert used + len(f" {entries + 1}.") + shortest <= budget, budget


def test_vt_example_takes_five_more_lines_where_they_fill_its_room_to_the_token(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A frame of 100 + 50 tokens and the answer " ['AB', 'CD']" (13 characters, a token each) leave the
    # example 500 - 30 - 163 = 307 tokens; lines that take count + 287 tokens fill it at 20 lines.
    family = VariableTracking(ALL_VARIANTS["vt"], setting(CHAR))
    ids = np.zeros(1, dtype=np.int64)
    monkeypatch.setattr("fathom.tasks.ruler.vt.frame", lambda *args: (ids.repeat(100), ids.repeat(50)))
    text = PromptText("", "", "", "")
    for extra, count in [(287, 20), (288, 15)]:
        family.lines = cast(Lines, SimpleNamespace(size=lambda lines, _, extra=extra: lines + extra))
        assert family._example_lines(text, "1", [], ["AB", "CD"]) == count
