"""The prompt builder's details that its behaviour tests leave open, each pinned by a value worked
out by hand or an independent reconstruction."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from test_prompts import CHAR, CHAR_BUILDERS

from fathom.prompts import PromptBuilder, TooShort, assemble, chat_prompt
from fathom.prompts.builder import Apart, Crowded, fitting, snap
from fathom.prompts.haystack import load_corpus, tokenize_corpus
from fathom.prompts.needles import make_needle, needle_rng
from fathom.prompts.templates import CONTEXT_MARKER, resolve_template
from fathom.prompts.tokenizers import load_tokenizer
from fathom.tasks.niah import NIAH_TEXT


def test_the_chat_form_carries_the_system_prompt() -> None:
    tokenizer = load_tokenizer("cl100k_base")
    text = dataclasses.replace(NIAH_TEXT, system="You answer in one word.")
    corpus = tokenize_corpus(load_corpus("prose"), tokenizer)
    build = PromptBuilder(tokenizer, resolve_template("chatml", tokenizer), text, corpus)
    needle = make_needle("number", needle_rng(3))
    prompt = build.build(2048, 0.5, needle)
    chat = chat_prompt(tokenizer, build.text, prompt, needle.question)
    assert chat.system == "You answer in one word."
    # The messages wrap back into the very prompt that was built, system message first.
    head, tail = build.template.wrap(tokenizer, chat.system, chat.user + CONTEXT_MARKER)
    assert head.startswith("<|im_start|>system\nYou answer in one word.<|im_end|>\n")
    assert head + tail + chat.prefill == tokenizer.decode(prompt.ids.tolist())


PROSE = CHAR_BUILDERS["prose"]  # one character a token, so offsets read straight off the text


def test_needles_given_deepest_first_are_placed_by_depth_and_reported_in_the_order_given() -> None:
    build = PROSE
    needles = [(0.9, " The code is AAAA."), (0.1, " The code is BBBB."), (0.5, " The code is CCCC.")]
    prompt = build.place(3000, "What is the code?", needles)
    text = CHAR.decode(prompt.ids.tolist())
    assert len(prompt.ids) == 3000
    for (depth, needle), placed in zip(needles, prompt.needles, strict=True):
        assert text[placed.token_offset : placed.token_offset + placed.tokens] == needle
        assert abs(placed.depth - depth) < 0.05
    assert text.index("BBBB") < text.index("CCCC") < text.index("AAAA")


def test_a_haystack_opened_later_starts_at_the_first_sentence_at_or_after_its_start() -> None:
    build = PROSE
    head, _ = build.frame("What is the code?")
    corpus = CHAR.decode(build.corpus.ids.tolist())
    first = build.place(2000, "What is the code?", [(0.5, " The code is AAAA.")])
    later = build.place(2000, "What is the code?", [(0.5, " The code is AAAA.")], start=1000)
    opening = CHAR.decode(later.ids[len(head) : len(head) + 40].tolist())
    at = corpus.index(opening)
    assert at >= 1000 and corpus[at - 2 : at].strip(" ").endswith((".", "?", "!", "\n"))
    assert CHAR.decode(first.ids[len(head) : len(head) + 40].tolist()) == corpus[:40]


def test_a_length_below_the_needles_and_frame_is_refused_naming_them() -> None:
    build = PROSE
    with pytest.raises(TooShort) as short:
        build.place(50, "What is the code?", [(0.5, " The code is AAAA.")])
    overhead = short.value.overhead
    assert str(short.value) == (
        f"length 50 is below this prompt's fixed overhead of {overhead} tokens (template, instruction, "
        f"question and needles); use lengths of at least {overhead}"
    )


def test_needles_with_no_haystack_between_them_are_at_depth_0() -> None:
    ids = np.arange(3, dtype=np.int32)
    prompt = assemble(ids[:1], [(ids[1:2], True), (ids[2:], True)], ids[:1], 4)
    assert [(n.token_offset, n.tokens, n.depth) for n in prompt.needles] == [(1, 1, 0.0), (2, 1, 0.0)]


def test_a_prompt_of_no_parts_is_its_head_and_tail() -> None:
    # A probe's closed-book question (tasks/probe.py): no context, no needle.
    ids = np.arange(5, dtype=np.int32)
    prompt = assemble(ids[:2], [], ids[2:], 5)
    assert prompt.ids.tolist() == [0, 1, 2, 3, 4]
    assert (prompt.target_tokens, prompt.head_tokens, prompt.context_tokens, prompt.needles) == (5, 2, 0, ())


def test_a_crowded_haystack_is_refused_saying_how_many_needles_its_boundaries_hold() -> None:
    # Boundaries 0, 10, 20, 30: the gold (0.5 of 30 tokens) snaps to 10, the lower of two as close,
    # and none lies 0.9 x 30 = 27 tokens from it. 0 and 30 are the only two that far apart.
    with pytest.raises(Crowded) as crowded:
        snap(np.array([10, 20]), 30, [0.5, 0.5], Apart(0.9, frozenset({0})))
    assert str(crowded.value) == (
        "no boundary of a haystack of 30 tokens (4, its ends included) lies 0.9 of it from every "
        "needle; its boundaries hold 2 needles that far apart"
    )


def test_a_prompts_frame_and_needle_ids_are_shared_read_only() -> None:
    # The builder hands the same arrays to every prompt that asks the question or holds the needle.
    head, tail = PROSE.frame("What is the code?")
    (needle,) = PROSE.layout(2000, "What is the code?", [(0.5, " The code is AAAA.")]).needle_ids
    for ids in (head, tail, needle):
        with pytest.raises(ValueError, match="read-only"):
            ids[0] = 0


class Neighbours:
    """A fitted needle (``builder.Fitted``) that writes the two tokens either side of its boundary,
    and records the text it was shown."""

    def __init__(self) -> None:
        self.shown: list[tuple[str, str]] = []

    def fit(self, before: str, after: str) -> str:
        self.shown.append((before, after))
        return f"<{before[-2:]}|{after[:2]}>"


QUESTION = "What is the code?"
HEAD, TAIL = 156, 105  # PROSE's frame of QUESTION, in tokens (characters)


def test_a_fitted_needle_is_laid_out_bare_then_written_for_the_96_tokens_either_side_of_its_cut() -> None:
    corpus = CHAR.decode(PROSE.corpus.ids.tolist())
    needle = Neighbours()
    laid = PROSE.layout(3000, QUESTION, [(0.5, needle), (0.2, " The code is BBBB.")])
    cut = laid.cuts[0]
    before, after = corpus[cut - 96 : cut], corpus[cut : cut + 96]
    assert needle.shown == [("", ""), (before, after)]
    assert [CHAR.decode(ids.tolist()) for ids in laid.needle_ids] == [
        f"<{before[-2:]}|{after[:2]}>",
        " The code is BBBB.",
    ]
    # The haystack is the corpus from its start, what the fitted 7 tokens and the other 18 leave.
    assert CHAR.decode(laid.haystack.tolist()) == corpus[: 3000 - HEAD - TAIL - 7 - 18]
    assert corpus[cut - 1] == "." and 1000 < cut < 1500 and laid.cuts[1] < cut  # a sentence, mid-way


def test_a_fitted_needle_at_the_end_stays_at_the_end_of_the_haystack_its_text_leaves() -> None:
    corpus = CHAR.decode(PROSE.corpus.ids.tolist())
    needle = Neighbours()
    laid = PROSE.layout(3000, QUESTION, [(1.0, needle)], start=1000)
    # The haystack opens at the first sentence at or after token 1000 (1096), both times.
    bare = 3000 - HEAD - TAIL - 3  # laid out as "<|>"
    assert needle.shown == [("", ""), (corpus[1096 + bare - 96 : 1096 + bare], "")]
    # "<xy|>": 2 tokens more than the bare needle, so the haystack, and the cut at its end, 2 fewer.
    assert CHAR.decode(laid.haystack.tolist()) == corpus[1096 : 1096 + bare - 2]
    assert laid.cuts == [bare - 2]


class Counting:
    """CHAR's tokenizer, recording each text it is asked to encode."""

    def __init__(self) -> None:
        self.encoded: list[str] = []

    def __getattr__(self, name: str) -> object:
        return getattr(CHAR, name)

    def encode(self, text: str) -> list[int]:
        self.encoded.append(text)
        return CHAR.encode(text)

    def encode_with_specials(self, text: str) -> list[int]:
        self.encoded.append(text)
        return CHAR.encode_with_specials(text)


def test_a_builder_remembers_its_last_4096_needle_texts_and_256_questions() -> None:
    spy = Counting()
    build = PromptBuilder(spy, PROSE.template, PROSE.text, PROSE.corpus)  # type: ignore[arg-type]
    for i in range(4097):
        build.layout(400, "Which?", [(0.5, f" Code {i}.")])
    for i in range(257):
        build.frame(f"Which {i}?")
    spy.encoded.clear()
    build.layout(400, "Which 256?", [(0.5, " Code 4096.")])
    assert spy.encoded == []  # both remembered
    build.layout(400, "Which 256?", [(0.5, " Code 0.")])
    build.frame("Which 0?")
    # The oldest of each, one past what is kept, encoded again: the needle, then the frame's head and tail.
    assert spy.encoded[0] == " Code 0." and len(spy.encoded) == 3 and "Question: Which 0?" in spy.encoded[2]


def test_a_fitted_needle_less_than_96_tokens_into_the_haystack_is_shown_all_the_text_before_it() -> None:
    corpus = CHAR.decode(PROSE.corpus.ids.tolist())
    needle = Neighbours()
    # The haystack opens at the sentence at token 1235 of the corpus, whose next sentence starts 79
    # tokens on: the needle asked at 0.03 of about 2,700 tokens snaps there.
    laid = PROSE.layout(3000, QUESTION, [(0.03, needle)], start=1235)
    assert laid.cuts == [79]
    before = " To be prepared for war is one of the most effectual means of preserving peace."
    assert needle.shown[1] == (before, corpus[1314 : 1314 + 96])


def test_needles_that_are_all_anchors_snap_to_their_nearest_boundaries_however_close() -> None:
    # Boundaries 0, 50, 100: nothing lies 0.6 of the haystack from 50, but no needle has to.
    assert snap(np.array([50]), 100, [0.5, 0.45], Apart(0.6, frozenset({0, 1}))) == [50, 50]


def test_needles_apart_from_no_anchor_snap_as_without_apart() -> None:
    # Boundaries 0, 40, 45, 100 (as in tests/test_realised_gaps.py): 0.43 snaps to 45, 0.32 to 40.
    assert snap(np.array([40, 45]), 100, [0.43, 0.32], Apart(0.1, frozenset())) == [45, 40]


def test_a_boundary_exactly_the_gap_from_an_anchor_is_far_enough_and_one_token_nearer_is_not() -> None:
    # The gold snaps to 50; a gap of 0.25 of 100 tokens is 25. Asked at 0.3, the distractor takes 25,
    # exactly 25 away, where there is one, and falls back to the start where the boundary is at 26.
    assert snap(np.array([25, 50]), 100, [0.5, 0.3], Apart(0.25, frozenset({0}))) == [50, 25]
    assert snap(np.array([26, 50]), 100, [0.5, 0.3], Apart(0.25, frozenset({0}))) == [50, 0]


def test_boundaries_exactly_the_gap_apart_each_hold_a_needle() -> None:
    # A gap of 0.25 of 100 tokens: 0, 25, 50 and 100 are each 25 or more past the one before.
    assert fitting(np.array([0, 25, 50, 100]), 100, 0.25) == 4
    # At 24 and 48, one token nearer: 0, then 48 (48 past it), then 100.
    assert fitting(np.array([0, 24, 48, 100]), 100, 0.25) == 3
