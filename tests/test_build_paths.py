"""The faster paths of a prompt's building give what the slower ones gave (issue #34's speed): the
corpus window copied a slice at a time against an index per token, a builder's remembered frames
against a fresh one, mrcr's answer bounds without ``np.unique``."""

from __future__ import annotations

import numpy as np
import pytest

from fathom.prompts import PromptText
from fathom.prompts.builder import PromptBuilder, frame
from fathom.prompts.haystack import load_corpus, tokenize_corpus
from fathom.prompts.templates import resolve_template
from fathom.prompts.tokenizers import load_tokenizer
from fathom.tasks.mrcr import LONGEST_ANSWER, _capped, _once

CHAR = load_tokenizer("char")


def test_a_window_is_the_slow_paths_ids_and_boundaries_and_a_copy_on_both_sides_of_the_corpus_end() -> None:
    corpus = tokenize_corpus(load_corpus("noise"), CHAR)
    unit, boundaries = len(corpus.ids), corpus.boundaries
    for first in boundaries[-3:].tolist():
        left = unit - first  # the longest window from here that does not wrap
        for n in (left - 1, left, left + 1, left + unit + 1):
            ids, starts = corpus.window(n, first)
            # The index per token the window was built with before, and every boundary's shift.
            slow = corpus.ids[np.arange(first, first + n) % unit]
            shifted = np.concatenate([boundaries + k * unit for k in range(n // unit + 2)]) - first
            assert ids.tolist() == slow.tolist(), (first, n)
            assert starts.tolist() == shifted[(shifted > 0) & (shifted < n)].tolist(), (first, n)
            assert starts.dtype == np.int64 and ids.dtype == np.int32
            assert not np.shares_memory(ids, corpus.ids)  # a prompt's ids never write into the corpus


def test_a_builders_remembered_frame_is_the_frame_and_read_only() -> None:
    tokenizer = load_tokenizer("cl100k_base")
    template = resolve_template("chatml", tokenizer)
    text = PromptText("Read this.\n", "\nQuestion: {question}", "Answer:")
    builder = PromptBuilder(tokenizer, template, text, tokenize_corpus(load_corpus("noise"), tokenizer))
    for question in ("Where is Mary?", "Where is John?", "Where is Mary?"):
        head, tail = builder.frame(question)
        fresh_head, fresh_tail = frame(tokenizer, template, text, question)
        assert head.tolist() == fresh_head.tolist() and tail.tolist() == fresh_tail.tolist()
        assert tokenizer.decode(tail.tolist()).startswith(f"\nQuestion: {question}")
        with pytest.raises(ValueError, match="read-only"):
            head[0] = 0
    assert builder.frame("Where is Mary?")[1] is builder.frame("Where is Mary?")[1]


def test_mrcr_bounds_once_each_and_capped_as_np_unique_gave_them() -> None:
    assert _once(np.array([0, 3, 3, 7, 7, 7, 9])).tolist() == [0, 3, 7, 9]
    assert _once(np.array([5])).tolist() == [5] and _once(np.array([], dtype=np.int64)).tolist() == []
    assert LONGEST_ANSWER == 192  # the cuts below are counted by hand for it
    # An answer of 192 tokens stays whole; one of 193 is cut once; one of 400 twice.
    assert _capped(np.array([0, 192, 385])).tolist() == [0, 192, 384, 385]
    assert _capped(np.array([0, 100, 500])).tolist() == [0, 100, 292, 484, 500]
    bounds = np.array([0, 10, 600, 601, 1000])
    assert _capped(bounds).tolist() == [0, 10, 202, 394, 586, 600, 601, 793, 985, 1000]
