"""The distractor gap holds on the boundaries a prompt actually uses, not only on the depths asked.

Snapping each needle to its nearest sentence boundary moved needles by up to half a sentence, so a
distractor drawn the gap away from a gold needle could land beside it, or at the very same boundary.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, reject, settings
from hypothesis import strategies as st

from fathom.errors import SpecError
from fathom.prompts.builder import Apart, Crowded, snap
from fathom.prompts.needle_sets import GOLD, PART
from fathom.prompts.tokenizers import load_tokenizer
from fathom.records import DISTRACTOR_ROLES, Cell
from fathom.spec import RunSpec
from fathom.tasks import niah
from fathom.tasks.base import Sample
from fathom.tasks.niah import NiahTask

CHAR = load_tokenizer("char")
GAP = 0.05  # Hardness's default, which every run uses
# The records keep depths to 6 places; a gap met exactly may read a rounding below it.
ROUNDING = 1e-6


@pytest.fixture(scope="module", autouse=True)
def corpus_read_once() -> Iterator[None]:
    """Each example builds its own task; reading the prose corpus once keeps a hundred of them fast."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(niah, "load_corpus", functools.cache(niah.load_corpus))
        yield


def test_snapping_alone_can_put_a_distractor_beside_its_gold_and_apart_moves_it() -> None:
    # Boundaries at 40 and 45 of 100 tokens: the gold (asked at 0.43) snaps to 45, and a distractor
    # asked at 0.32, 0.11 away, would snap to 40, only 0.05 away.
    starts = np.array([40, 45])
    assert snap(starts, 100, [0.43, 0.32]) == [45, 40]
    # Kept 0.1 from the gold on the boundaries used, it takes the nearest that is: the start.
    assert snap(starts, 100, [0.43, 0.32], Apart(0.1, frozenset({0}))) == [45, 0]
    # Distractors need no gap between themselves, and a distractor already far enough stays.
    assert snap(starts, 100, [0.43, 0.32, 0.9], Apart(0.1, frozenset({0}))) == [45, 0, 100]


def test_a_haystack_with_no_boundary_the_gap_from_every_gold_is_crowded() -> None:
    with pytest.raises(Crowded) as crowded:
        snap(np.array([50]), 100, [0.0, 1.0, 0.4], Apart(0.6, frozenset({0, 1})))
    # Its three boundaries (the ends included) hold two needles 0.6 of the haystack apart.
    assert (crowded.value.boundaries, crowded.value.fit) == (3, 2)


def test_a_length_too_short_for_the_gap_is_refused_before_any_sample(tmp_path: Path) -> None:
    # One sentence longer than the haystack: its only boundaries are its ends, where the split
    # needle's two parts go (depth 0, 1.0 apart), so no distractor can be the gap from both.
    (tmp_path / "one.txt").write_text("Long " + "and winding " * 400 + "road. " + "Short one. " * 40)
    spec = RunSpec("niah", "sim:perfect", "char", (3000,), (0.0,), 2, corpus=f"dir:{tmp_path}")
    task = dataclasses.replace(spec, needle="split", split_distance=1.0, distractors=1)
    with pytest.raises(SpecError, match=r"^at length 3000, no sentence boundary .* hold 2 needles"):
        NiahTask(task, CHAR)
    # Without distractors the rule has nothing to keep apart, and the spec stands.
    NiahTask(dataclasses.replace(task, distractors=0), CHAR)


# The needle kinds and how many gold needles each may have: plain (keyed or a fact), several, split.
KINDS = {"number": 3, "words": 2, "uuid": 1, "fact": 3, "split": 1, "chain": 1}


@st.composite
def hard_specs(draw: st.DrawFn) -> RunSpec:
    kind = draw(st.sampled_from(sorted(KINDS)))
    base = RunSpec(
        "niah",
        "sim:perfect",
        "char",
        (draw(st.integers(1200, 6000)),),
        (draw(st.floats(0.0, 1.0)),),
        1,
        seed=draw(st.integers(0, 2**31)),
    )
    return dataclasses.replace(
        base,
        needle=kind,
        needles=draw(st.integers(1, KINDS[kind])),
        distractors=draw(st.integers(1, 4)),
        split_distance=draw(st.sampled_from((None, 0.1, 0.25, 0.5))),
        haystack_offset=draw(st.sampled_from(("start", "random"))),
    )


def _haystack_before(sample: Sample) -> list[int]:
    """Each needle's haystack tokens before it, from the token offsets alone (one character a
    token): its offset in the context less the needles that come before it."""
    prompt = sample.prompt
    placed = prompt.needles
    return [
        n.token_offset - prompt.head_tokens - sum(o.tokens for o in placed if o.token_offset < n.token_offset)
        for n in placed
    ]


@settings(max_examples=500, deadline=None)
@given(spec=hard_specs())
def test_every_distractor_keeps_its_gap_from_every_gold_where_it_landed(spec: RunSpec) -> None:
    (length,), (depth,) = spec.lengths, spec.depths
    try:
        task = NiahTask(spec, CHAR)
    except SpecError as refused:
        # Refused before any sample: a haystack too short for its golds and a distractor the gap
        # apart (several needles in a short haystack), or split parts that cannot be that far apart.
        crowded = str(refused).startswith(f"at length {length}, no sentence boundary")
        assert crowded or "cannot have its parts" in str(refused), refused
        reject()
    sample = task.prepare(Cell("niah", length, depth, 0))
    assert isinstance(sample, Sample) and sample.needles is not None
    roles = [p.role for p in sample.needles.placements]
    assert sum(role in DISTRACTOR_ROLES for role in roles) == spec.distractors
    haystack = sample.prompt.context_tokens - sum(n.tokens for n in sample.prompt.needles)
    before = _haystack_before(sample)
    recorded = [round(n.depth, 6) for n in sample.prompt.needles]  # as records keep needle_depths
    golds = [i for i, role in enumerate(roles) if role in (GOLD, PART)]
    for i, role in enumerate(roles):
        if role in DISTRACTOR_ROLES:
            for g in golds:
                assert abs(before[i] - before[g]) >= GAP * haystack, (roles, before)
                assert abs(recorded[i] - recorded[g]) >= GAP - ROUNDING, (roles, recorded)
