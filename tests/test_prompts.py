"""Exact prompt lengths, needles placed once near their depth, and splice stability."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fathom.errors import PromptError
from fathom.prompts import PromptBuilder, chat_prompt, length_tolerance
from fathom.prompts.haystack import load_corpus, tokenize_corpus
from fathom.prompts.needles import make_needle, needle_rng
from fathom.prompts.templates import CONTEXT_MARKER, resolve_template
from fathom.prompts.tokenizers import Tokenizer, load_tokenizer
from fathom.tasks.niah import NIAH_TEXT


def builder(tokenizer: Tokenizer, corpus: str = "noise", template: str = "none") -> PromptBuilder:
    indexed = tokenize_corpus(load_corpus(corpus), tokenizer)
    return PromptBuilder(tokenizer, resolve_template(template, tokenizer), NIAH_TEXT, indexed)


CHAR = load_tokenizer("char")
CHAR_BUILDERS = {name: builder(CHAR, name) for name in ("noise", "repeat", "prose")}


@settings(max_examples=150, deadline=None)
@given(
    corpus=st.sampled_from(sorted(CHAR_BUILDERS)),
    extra=st.integers(min_value=0, max_value=40_000),
    depth=st.floats(min_value=0.0, max_value=1.0),
    kind=st.sampled_from(["number", "words", "uuid", "fact", "sf"]),
    seed=st.integers(min_value=0, max_value=10**6),
)
def test_every_prompt_hits_its_length_holds_its_needle_once_near_its_depth(
    corpus: str, extra: int, depth: float, kind: str, seed: int
) -> None:
    build = CHAR_BUILDERS[corpus]
    needle = make_needle(kind, needle_rng(seed))
    length = build.overhead(needle) + extra
    prompt = build.build(length, depth, needle)
    text = CHAR.decode(prompt.ids.tolist())

    assert len(prompt.ids) == length == prompt.target_tokens
    assert text.count(needle.text) == 1
    (placed,) = prompt.needles
    assert text.index(needle.text) == placed.token_offset  # one char is one token here
    # Within one sentence of the asked depth: no boundary lies between the target and the cut.
    starts = np.append(build.corpus.boundaries, len(build.corpus.ids))
    longest_sentence = int(np.diff(starts).max())
    haystack_tokens = prompt.context_tokens - placed.tokens
    assert abs(placed.depth - depth) * haystack_tokens <= longest_sentence
    head, _ = build.frame(needle.question)
    assert text.startswith(CHAR.decode(head.tolist()))
    assert text.endswith(
        needle.question + "\nAnswer in one short sentence, using only the document.\n\nAnswer:"
    )


def test_depth_zero_and_one_put_the_needle_at_the_edges_of_the_haystack() -> None:
    build = CHAR_BUILDERS["prose"]
    needle = make_needle("number", needle_rng(3))
    first = build.build(5000, 0.0, needle)
    last = build.build(5000, 1.0, needle)
    assert first.needles[0].depth == 0.0 and last.needles[0].depth == 1.0
    head, _ = build.frame(needle.question)
    assert first.needles[0].token_offset == len(head)


def test_needle_lands_at_a_sentence_boundary() -> None:
    build = CHAR_BUILDERS["prose"]
    needle = make_needle("fact", needle_rng(11))
    prompt = build.build(20_000, 0.37, needle)
    text = CHAR.decode(prompt.ids.tolist())
    before = text[: prompt.needles[0].token_offset]
    assert before.rstrip().endswith((".", "!", "?", '."', '?"', '!"', ".'", ".)", "\u201d", "\u2019"))


def test_length_below_the_overhead_names_the_minimum() -> None:
    build = CHAR_BUILDERS["noise"]
    needle = make_needle("number", needle_rng(0))
    overhead = build.overhead(needle)
    prompt = build.build(overhead, 0.5, needle)
    assert prompt.context_tokens == prompt.needles[0].tokens
    with pytest.raises(PromptError, match=f"at least {overhead}"):
        build.build(overhead - 1, 0.5, needle)


def test_lengths_beyond_the_corpus_repeat_it() -> None:
    build = CHAR_BUILDERS["repeat"]
    unit = CHAR.decode(build.corpus.ids.tolist())  # the whole corpus: one sentence of 79 characters
    needle = make_needle("number", needle_rng(0))
    prompt = build.build(50_000, 0.5, needle)
    assert len(prompt.ids) == 50_000
    text = CHAR.decode(prompt.ids.tolist())
    context = text[prompt.head_tokens : prompt.head_tokens + prompt.context_tokens]
    (placed,) = prompt.needles
    at = placed.token_offset - prompt.head_tokens
    assert context[at : at + placed.tokens] == needle.text
    # Without the needle: the corpus from its start, over and over, cut where the length runs out
    # (not padded, not ended early, and not restarted at the needle).
    haystack = context[:at] + context[at + placed.tokens :]
    copies = -(-len(haystack) // len(unit))
    assert copies > 600 and haystack == (unit * copies)[: len(haystack)]


def test_tolerance_is_half_a_percent_or_eight_tokens() -> None:
    assert length_tolerance(1000) == 8
    assert length_tolerance(128 * 1024) == 656


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
@pytest.mark.parametrize("template", ["none", "chatml", "plain"])
@pytest.mark.parametrize("corpus", ["prose", "noise"])
def test_spliced_ids_equal_the_encoding_of_the_final_text(name: str, template: str, corpus: str) -> None:
    """Splicing at sentence boundaries and template seams is stable: re-encoding the text gives
    back the very ids that were built, so text backends see exactly the counted prompt."""
    tokenizer = load_tokenizer(name)
    build = builder(tokenizer, corpus, template)
    for index, (length, depth) in enumerate([(1024, 0.0), (3000, 0.33), (8192, 0.5), (16384, 1.0)]):
        needle = make_needle(["number", "words", "uuid", "fact"][index], needle_rng(index))
        prompt = build.build(length, depth, needle)
        text = tokenizer.decode(prompt.ids.tolist())
        assert tokenizer.encode_with_specials(text) == prompt.ids.tolist()
        assert text.count(needle.text) == 1


def test_hf_tokenizer_with_its_own_chat_template_splices_stably(hf_model_dir: Path) -> None:
    tokenizer = load_tokenizer(f"hf:{hf_model_dir}")
    build = builder(tokenizer, "prose", "auto")
    assert build.template.name.startswith("tokenizer:")
    for index, (length, depth) in enumerate([(1024, 0.0), (4096, 0.5), (9000, 1.0)]):
        needle = make_needle("fact", needle_rng(index))
        prompt = build.build(length, depth, needle)
        text = tokenizer.decode(prompt.ids.tolist())
        assert text.startswith("<|im_start|>user\nBelow is a long document.")
        assert text.endswith("<|im_end|>\n<|im_start|>assistant\nAnswer:")
        assert tokenizer.encode_with_specials(text) == prompt.ids.tolist()


def test_the_chat_form_is_the_same_prompt_as_messages() -> None:
    tokenizer = load_tokenizer("cl100k_base")
    build = builder(tokenizer, "prose", "chatml")
    needle = make_needle("words", needle_rng(5))
    prompt = build.build(4096, 0.4, needle)
    chat = chat_prompt(tokenizer, build.text, prompt, needle.question)
    assert chat.prefill == "Answer:" and chat.user.count(needle.text) == 1
    head, tail = build.template.wrap(tokenizer, chat.system, chat.user + CONTEXT_MARKER)
    assert head + tail + chat.prefill == tokenizer.decode(prompt.ids.tolist())


def test_a_tokenizer_that_adds_bos_gets_it_once_at_the_start(tmp_path: Path, hf_model_dir: Path) -> None:
    import json
    import shutil

    shutil.copy(hf_model_dir / "tokenizer.json", tmp_path / "tokenizer.json")
    config = {"bos_token": "<|endoftext|>", "add_bos_token": True}
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(config))
    tokenizer = load_tokenizer(f"hf:{tmp_path}")
    assert tokenizer.bos_id is not None
    prompt = builder(tokenizer, "noise", "none").build(2000, 0.5, make_needle("number", needle_rng(0)))
    assert len(prompt.ids) == 2000
    assert prompt.ids[0] == tokenizer.bos_id and list(prompt.ids).count(tokenizer.bos_id) == 1
    # A template that writes BOS itself does not get a second one.
    (tmp_path / "t.jinja").write_text("{{ bos_token }}{% for m in messages %}{{ m['content'] }}{% endfor %}")
    templated = builder(tokenizer, "noise", str(tmp_path / "t.jinja"))
    prompt = templated.build(2000, 0.5, make_needle("number", needle_rng(0)))
    assert list(prompt.ids).count(tokenizer.bos_id) == 1
