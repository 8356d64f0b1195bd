"""The prompt builder's details that its behaviour tests leave open, each pinned by a value worked
out by hand or an independent reconstruction."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from test_prompts import CHAR, CHAR_BUILDERS

from fathom.prompts import PromptBuilder, TooShort, assemble, chat_prompt
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
