"""The prompt builder's details that its behaviour tests leave open, each pinned by a value worked
out by hand or an independent reconstruction."""

from __future__ import annotations

import dataclasses

from fathom.prompts import PromptBuilder, chat_prompt
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
