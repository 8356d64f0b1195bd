"""fathom.plan.prompts pinned whole, written against the survivors of mutation testing
(docs/mutation.md, sixth round): a task of toy prompts whose every token is known, so that each
prompt's length, the prefix it shares with the one before and its new tokens are counted by hand, built
and estimated, in the run's order and shuffled, with controls, a thinking budget and RULER's fill."""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable, Iterable, Sequence
from types import SimpleNamespace

import numpy as np
import pytest

from fathom.plan import prompts
from fathom.plan.prompts import PromptCost, run_order, sweep_prompts
from fathom.prompts.builder import Prompt
from fathom.records import CONTROL, Cell
from fathom.spec import RunSpec
from fathom.tasks.base import Document, Sample

HEAD, TAIL, NEW = [1, 2, 3], [7, 8], 4


def toy_ids(cell: Cell, head: Sequence[int], tail: Sequence[int], tokens: int) -> list[int]:
    """A prompt of ``tokens``: the head, a haystack 100, 101, ... with the needle 9 at ``depth`` of it
    (its last token at depth 1), and the tail. The sample index changes nothing."""
    context = tokens - len(head) - len(tail)
    hay = [100 + i for i in range(context)]
    if hay:
        hay[min(int((cell.depth or 0.0) * context), context - 1)] = 9
    return list(head) + hay + list(tail)


class Toy:
    """A task of toy prompts over ``cells``, each sample asking NEW tokens (a perplexity cell: its
    document, the haystack alone), with the head 1 2 3 and the tail 7 8 unless others are given, each
    prompt ``unused`` tokens short of its cell's length (none unless said)."""

    name = "niah"

    def __init__(
        self,
        cells: Sequence[Cell],
        tail: Sequence[int] = TAIL,
        head: Sequence[int] = HEAD,
        unused: Callable[[int], int] = lambda length: 0,
    ) -> None:
        self.made, self.tail, self.head, self.unused = list(cells), tail, head, unused

    def cells(self) -> Iterable[Cell]:
        return iter(self.made)

    def prepare(self, cell: Cell) -> Sample | Document:
        tokens = cell.length - self.unused(cell.length)
        ids = np.array(toy_ids(cell, self.head, self.tail, tokens), dtype=np.int32)
        if cell.task == "perplexity":
            return Document(cell, ids[len(self.head) : len(ids) - len(self.tail)], "toy", 0)
        prompt = Prompt(ids, cell.length, len(self.head), tokens - len(self.head) - len(self.tail), ())
        return Sample(cell, prompt, None, "q", ("a",), "number", (), "contains", NEW)  # type: ignore[arg-type]

    def identity(self) -> dict[str, str]:
        return {}


CELLS = (
    Cell("niah", 10, 0.5, 0),
    Cell("niah", 10, 0.5, 1),
    Cell("niah", 10, 1.0, 0),
    Cell("niah", 20, 0.5, 0),
    Cell("niah", 20, 1.0, 0),
)


def spec(**changes: object) -> RunSpec:
    return dataclasses.replace(RunSpec("niah", "", "auto", (10, 20), (0.5, 1.0), 2, control=False), **changes)


def costs(found: Sequence[PromptCost]) -> list[tuple[str, int, int, int]]:
    return [(p.cell.id, p.tokens, p.cached, p.new_tokens) for p in found]


def test_built_prompts_count_the_prefix_each_shares_with_the_one_before(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A clock that moves 0.05 s a reading, whatever the machine's load: the start (at 1.0 s, so that
    # the end plus the start, 2.3, is not the 0.3 between them), one reading before each of the five
    # prompts, and the end.
    ticks = iter(range(20, 120))
    monkeypatch.setattr(prompts, "time", SimpleNamespace(perf_counter=lambda: 0.05 * next(ticks)))
    swept = sweep_prompts(spec(), Toy(CELLS), "prefix")
    assert swept.method == "built: all 5 prompts, shared prefixes counted (0.3 s)"
    # (10, 0.5): the needle at 2 of 5 haystack tokens, so at position 5; (10, 1.0) at 7; (20, 0.5) at 7
    # of 15, position 10; (20, 1.0) at 17. Each shares the positions before the first that differs; a
    # prompt equal to the one before shares all but its last token, which an engine computes again.
    assert costs(swept.prompts) == [
        ("niah|L10|D0.5000|S0", 10, 0, NEW),
        ("niah|L10|D0.5000|S1", 10, 9, NEW),
        ("niah|L10|D1.0000|S0", 10, 5, NEW),
        ("niah|L20|D0.5000|S0", 20, 7, NEW),
        ("niah|L20|D1.0000|S0", 20, 10, NEW),
    ]


def test_controls_come_first_without_their_context() -> None:
    swept = sweep_prompts(spec(control=True), Toy(CELLS[:2]), "prefix")
    # A control is the head and tail alone: 5 tokens, the second all but its last the first's; the
    # first sample shares the head with the last control.
    assert costs(swept.prompts) == [
        (f"{CONTROL}|niah|L10|D0.5000|S0", 5, 0, NEW),
        (f"{CONTROL}|niah|L10|D0.5000|S1", 5, 4, NEW),
        ("niah|L10|D0.5000|S0", 10, 3, NEW),
        ("niah|L10|D0.5000|S1", 10, 9, NEW),
    ]
    assert [c.id for c in run_order(spec(control=True), Toy(CELLS[:2]), "prefix")] == [
        p.cell.id for p in swept.prompts
    ]


def test_a_shuffled_order_is_the_runs_seeded_shuffle() -> None:
    cells = list(CELLS)
    random.Random(7).shuffle(cells)
    assert run_order(spec(seed=7), Toy(CELLS), "shuffled") == cells
    assert run_order(spec(seed=7), Toy(CELLS), "prefix") == list(CELLS)
    # The sweep counts its prompts in that order, built or estimated.
    for build in (True, False):
        swept = sweep_prompts(spec(seed=7), Toy(CELLS), "shuffled", build=build)
        assert [p.cell for p in swept.prompts] == cells


def test_a_thinking_budget_adds_to_each_samples_new_tokens_but_not_to_a_documents() -> None:
    toy = Toy((Cell("perplexity", 10, None, 0), *CELLS[:1]))
    swept = sweep_prompts(spec(thinking_budget=100), toy, "prefix")
    # The document is the haystack alone: 5 tokens, scored, no new tokens.
    assert costs(swept.prompts) == [("perplexity|L10|S0", 5, 0, 0), ("niah|L10|D0.5000|S0", 10, 0, NEW + 100)]
    assert swept.method.startswith("built: all 2 prompts")
    assert sweep_prompts(spec(), toy, "prefix").prompts[1].new_tokens == NEW


def test_a_sweep_is_built_up_to_its_token_bound_and_estimated_past_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The 5 prompts' targets: 10 + 10 + 10 + 20 + 20 = 70 tokens.
    monkeypatch.setattr(prompts, "BUILD_TOKENS", 70)
    assert sweep_prompts(spec(), Toy(CELLS), "prefix").method.startswith("built")
    monkeypatch.setattr(prompts, "BUILD_TOKENS", 69)
    estimated = sweep_prompts(spec(), Toy(CELLS), "prefix")
    assert estimated.method == "estimated from the target lengths and the task's structure (70 prompt tokens)"
    # Each prompt its target; consecutive ones share the head (3) and, on one haystack read from its
    # start, the haystack up to the earlier needle: int(depth x (tokens - 5)) = 2, 5, 7 and 15.
    expected = [
        ("niah|L10|D0.5000|S0", 10, 0, NEW),
        ("niah|L10|D0.5000|S1", 10, 5, NEW),
        ("niah|L10|D1.0000|S0", 10, 5, NEW),
        ("niah|L20|D0.5000|S0", 20, 8, NEW),
        ("niah|L20|D1.0000|S0", 20, 10, NEW),
    ]
    assert costs(estimated.prompts) == expected
    # A haystack of its own for each sample: only the head.
    scattered = sweep_prompts(spec(haystack_offset="random"), Toy(CELLS), "prefix")
    assert [p.cached for p in scattered.prompts] == [0, 3, 3, 3, 3]
    unbuilt = sweep_prompts(spec(), Toy(CELLS), "prefix", build=False)
    assert unbuilt.method.endswith("(the run's check reads no prompts)")
    assert costs(unbuilt.prompts) == expected


def test_an_estimate_shares_all_but_its_own_last_token_at_most() -> None:
    # No tail, the needle at the haystack's end (7 of 7): the second sample would share the head and
    # the whole haystack, 10 tokens, all of its own, and shares 9; a longer prompt after it the 10.
    same = (Cell("niah", 10, 1.0, 0), Cell("niah", 10, 1.0, 1), Cell("niah", 30, 1.0, 0))
    found = sweep_prompts(spec(), Toy(same, tail=()), "prefix", build=False).prompts
    assert [p.cached for p in found] == [0, 9, 10]
    short_first = (Cell("niah", 10, 1.0, 0), Cell("niah", 7, 1.0, 0))
    # The shape is the shortest cell's (7: head 3, haystack 2, tail 2); 10 tokens share 3 + 2 = 5 with
    # nothing before; 7 share min(3 + min(5, 2), 10, 6) = 5.
    found = sweep_prompts(spec(lengths=(7, 10)), Toy(short_first), "prefix", build=False).prompts
    assert costs(found) == [("niah|L10|D1.0000|S0", 10, 0, NEW), ("niah|L7|D1.0000|S0", 7, 5, NEW)]


def test_an_estimates_controls_share_the_head_only() -> None:
    found = sweep_prompts(spec(control=True), Toy(CELLS[:2]), "prefix", build=False).prompts
    assert costs(found) == [
        (f"{CONTROL}|niah|L10|D0.5000|S0", 5, 0, NEW),
        (f"{CONTROL}|niah|L10|D0.5000|S1", 5, 3, NEW),
        ("niah|L10|D0.5000|S0", 10, 3, NEW),
        ("niah|L10|D0.5000|S1", 10, 5, NEW),
    ]


def test_rulers_fill_is_estimated_as_filling_each_length_less_the_answer() -> None:
    found = sweep_prompts(spec(fill="ruler"), Toy(CELLS[:3]), "prefix", build=False)
    assert found.method == (
        "estimated from the target lengths and the task's structure (the run's check reads no prompts; "
        "RULER's fill counted as filling each length, an upper bound)"
    )
    # 10 - 4 tokens; the needles int(depth x (6 - 5)): 0 at 0.5, 1 at 1.0, so the head alone is shared.
    assert costs(found.prompts) == [
        ("niah|L10|D0.5000|S0", 6, 0, NEW),
        ("niah|L10|D0.5000|S1", 6, 3, NEW),
        ("niah|L10|D1.0000|S0", 6, 3, NEW),
    ]


def test_a_document_is_estimated_from_what_its_target_leaves_unused() -> None:
    # The document of a 10-token cell holds 5; a 20-token one is estimated at 15, sharing nothing.
    docs = (Cell("perplexity", 10, None, 0), Cell("perplexity", 20, None, 0))
    found = sweep_prompts(spec(control=False), Toy(docs), "prefix", build=False).prompts
    assert costs(found) == [("perplexity|L10|S0", 5, 0, 0), ("perplexity|L20|S0", 15, 0, 0)]


def test_building_past_its_time_is_given_up_for_the_estimate(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(prompts, "BUILD_SECONDS", -1.0)
    late = sweep_prompts(spec(), Toy(CELLS), "prefix")
    assert (
        late.method == "estimated from the target lengths and the task's structure (building took over -1 s)"
    )


def test_the_first_prompt_shares_nothing_even_where_it_opens_with_token_0() -> None:
    swept = sweep_prompts(spec(), Toy(CELLS[:1], head=[0, 2, 3]), "prefix")
    assert costs(swept.prompts) == [("niah|L10|D0.5000|S0", 10, 0, NEW)]


def test_an_estimates_shape_is_its_variants_shortest_cell_wherever_it_comes() -> None:
    # Each prompt a fifth of its length short: 7 leaves 1 unused, 10 leaves 2. The shortest (7, first)
    # gives the shape: each prompt its length less 1.
    toy = Toy((Cell("niah", 7, 0.5, 0), Cell("niah", 10, 0.5, 0)), unused=lambda length: length // 5)
    found = sweep_prompts(spec(lengths=(7, 10)), toy, "prefix", build=False).prompts
    assert [p.tokens for p in found] == [6, 9]


def test_a_ruler_fill_estimate_keeps_at_least_one_token() -> None:
    # A head of 1 and no tail; RULER's fill leaves the answer's 4 tokens: 5 - 4 = 1, and 4 - 4 is
    # held at 1.
    toy = Toy((Cell("niah", 4, 0.5, 0), Cell("niah", 5, 0.5, 0)), head=[1], tail=())
    found = sweep_prompts(spec(fill="ruler", lengths=(4, 5)), toy, "prefix", build=False).prompts
    assert [p.tokens for p in found] == [1, 1]


def test_an_estimate_shares_no_more_than_the_prompt_before_holds() -> None:
    # RULER's fill leaves the answer's 4 tokens: a 5-token cell (head and tail alone) is held at 1
    # token, and the 16 of a 20-token cell after it would share the head's 3: only 1 is there.
    toy = Toy((Cell("niah", 5, 0.0, 0), Cell("niah", 20, 0.0, 0)))
    found = sweep_prompts(spec(fill="ruler", lengths=(5, 20)), toy, "prefix", build=False).prompts
    assert [(p.tokens, p.cached) for p in found] == [(1, 0), (16, 1)]


class Counting(Toy):
    """The toy task, counting the samples it builds."""

    def __init__(self, cells: Sequence[Cell]) -> None:
        super().__init__(cells)
        self.built: list[Cell] = []

    def prepare(self, cell: Cell) -> Sample | Document:
        self.built.append(cell)
        return super().prepare(cell)


def test_an_estimate_builds_no_sample_for_its_budget_unless_the_task_sizes_each_one() -> None:
    # The estimate is what a sweep too long to build gets: the toy's budget is the same for every
    # sample, so it is read once off the shapes' samples, never by building every cell.
    task = Counting(CELLS)
    estimated = sweep_prompts(spec(), task, "prefix", build=False)
    assert [p.new_tokens for p in estimated.prompts] == [NEW] * len(CELLS)
    assert len(task.built) < len(CELLS)
    shapes = len(task.built)
    sized = Counting(CELLS)
    sized.budget_per_sample = True  # type: ignore[attr-defined]
    sweep_prompts(spec(), sized, "prefix", build=False)
    assert len(sized.built) == shapes + len(CELLS)  # then each sample is built, once, for its own
