"""fathom.backends.schedule's parts called directly, written against the survivors of mutation
testing (docs/mutation.md): a window fed two plans, an intake's chunking rule at each of its edges
(the window full or one short of it, the lookahead reached or one short), its reader stopping when
closed and handing on what its source raised, and where PrefixChunks cuts a chunk, each plan worked
out by hand. The end-to-end tests (test_scheduler.py, test_streaming_run.py) reach these through
a server, where a wrong chunk or a late reader costs time, not a result."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator, Sequence

import numpy as np
import pytest
from test_streaming_run import WAIT, _intake

from fathom.backends.schedule import Intake, Plan, PrefixChunks, Window, in_order, prefix_plan


def test_a_window_fed_a_second_plan_numbers_and_ranks_it_after_the_first() -> None:
    window = Window(Plan((1, 0), (None, None)), size=3)
    window.add(Plan((1, 0), (1, None)), 2)  # requests 2 and 3: 3 first, and 2 waits for it
    assert window.left == 4
    assert window.take(0) == [1, 0, 3]  # the first plan's order, then the second's
    assert window.take(0) == []  # 2 waits for 3
    window.answered(1)
    assert window.left == 3 and window.take(2) == []
    window.add(in_order(1), 4)  # a third plan: request 4, ranked after every request before it
    window.answered(3)
    assert window.left == 3 and window.take(1) == [2, 4]


def test_a_window_sends_until_exactly_its_size_is_in_flight() -> None:
    window = Window(in_order(4), size=3)
    assert window.take(2) == [0]  # one seat left
    assert window.take(3) == []  # none
    assert window.take(1) == [1, 2]
    assert window.left == 4
    assert in_order(3) == Plan((0, 1, 2), (None, None, None))


class Chunks:
    """A chunker that logs what it was asked (how many came, whether all must go) and plans all of
    them, in order, only when all must go."""

    def __init__(self) -> None:
        self.asked: list[tuple[int, bool]] = []

    def __call__(self, pending: Sequence[object], whole: bool) -> Plan:
        self.asked.append((len(pending), whole))
        return in_order(len(pending) if whole else 0)


def _fed(
    source: Iterator[str], size: int, lookahead: int
) -> tuple[Intake[str], Chunks, Callable[[int], None]]:
    """An intake with a logging chunker, and a function that hands it the next ``count`` things its
    reader posted, on the test's thread as the event loop would."""
    posted: queue.Queue[Callable[[], None]] = queue.Queue()
    chunks = Chunks()
    intake = Intake(source, size, chunks, lookahead)
    intake.start(posted.put)

    def arrive(count: int) -> None:
        for _ in range(count):
            posted.get(timeout=WAIT)()

    return intake, chunks, arrive


def test_an_intake_takes_all_that_came_only_when_idle_at_the_lookahead_or_at_the_end() -> None:
    intake, chunks, arrive = _fed(iter("abcdef"), size=4, lookahead=3)
    try:
        arrive(2)
        assert intake.take(1) == [] and chunks.asked == [(2, False)]  # one in flight: wait for more
        assert intake.take(4) == [] and chunks.asked == [(2, False)]  # the window full: not asked
        assert intake.take(3) == [] and chunks.asked[-1] == (2, False)  # one seat: asked
        assert intake.take(0) == [0, 1] and chunks.asked[-1] == (2, True)  # none in flight
        assert (intake.item(0), intake.item(1)) == ("a", "b")
        arrive(2)  # c, read before, and d, read once two were sent
        assert intake.take(3) == [] and chunks.asked[-1] == (2, False)  # 2 unsent, lookahead 3
        arrive(1)
        assert intake.take(3) == [2] and chunks.asked[-1] == (3, True)  # 3 unsent: the lookahead
        assert intake.item(2) == "c"
        arrive(1)  # f, read once c was sent
        # The window's own requests fill it: f is not asked for. Numbered on from the first chunk.
        assert intake.take(2) == [3, 4] and chunks.asked[-1] == (3, True)
        assert (intake.item(3), intake.item(4)) == ("d", "e")
        assert not intake.finished and not intake.stuck
        arrive(1)  # the end
        assert intake.take(3) == [5] and chunks.asked[-1] == (1, True)  # all read: all go
        for index in range(6):
            intake.answered(index)
        assert intake.finished and not intake.stuck and intake.window.left == 0
    finally:
        intake.close()


def test_an_intake_without_a_chunker_sends_every_request_that_came_in_its_order() -> None:
    posted: queue.Queue[Callable[[], None]] = queue.Queue()
    intake = Intake(iter("abc"), 4)
    intake.start(posted.put)
    try:
        for _ in range(2):
            posted.get(timeout=WAIT)()
        assert intake.take(3) == [0]  # one seat: a goes, b is planned and waits for a seat
        posted.get(timeout=WAIT)()
        # b, then c: planned though two are in flight and more may come, and none waits for another.
        assert intake.take(1) == [1, 2]
        assert [intake.item(index) for index in range(3)] == ["a", "b", "c"]
    finally:
        intake.close()


def test_an_intake_left_with_waits_that_never_end_is_stuck() -> None:
    intake = Intake.planned(["a", "b"], Plan((0, 1), (1, 0)), 2)
    assert intake.take(0) == [] and intake.stuck and not intake.finished
    planned = Intake.planned(["a", "b"], Plan((1, 0), (1, None)), 2)
    assert planned.take(0) == [1] and planned.item(1) == "b"
    planned.answered(1)
    assert planned.take(0) == [0] and planned.item(0) == "a"
    planned.answered(0)
    assert planned.finished


def test_a_planned_intake_reads_nothing() -> None:
    posted: list[Callable[[], None]] = []
    intake = Intake.planned(["a"], in_order(1), 1)
    before = set(threading.enumerate())
    intake.start(posted.append)
    assert set(threading.enumerate()) <= before and posted == []


def test_a_closed_intakes_reader_reads_no_more_and_ends() -> None:
    rng = np.random.default_rng(0)
    prompts = [rng.integers(0, 50_000, 100) for _ in range(5)]
    before = set(threading.enumerate())
    intake, reads, arrive = _intake(prompts, size=4, lookahead=2)
    try:
        (reader,) = set(threading.enumerate()) - before
        # A daemon: a run stopped mid-read does not wait for it to exit.
        assert reader.name == "fathom-intake" and reader.daemon
        arrive(2)
        assert reads == [0, 1]
    finally:
        intake.close()
    reader.join(WAIT)
    assert not reader.is_alive() and reads == [0, 1]


def test_what_the_source_raised_is_the_intakes_failure() -> None:
    failure = RuntimeError("the build failed")

    def source() -> Iterator[str]:
        yield "a"
        raise failure

    intake, chunks, arrive = _fed(source(), size=2, lookahead=4)
    try:
        arrive(1)
        assert intake.failure is None
        arrive(1)
        assert intake.failure is failure
        assert intake.take(0) == [0] and chunks.asked == [(1, True)]  # what came still goes
    finally:
        intake.close()


@pytest.mark.parametrize(("fifth", "waits_for"), [([1, 2, 3, 9, 9, 9, 1], 3), ([1, 2, 3, 9, 9, 8, 1], 0)])
def test_a_follower_keeps_its_own_leader_where_they_share_the_threshold_more_than_the_group(
    fifth: list[int], waits_for: int
) -> None:
    # At shared=3: a group of all five (3 tokens shared), led by the first of its larger branch
    # (0, 1, 2 share 6); prompt 3 leads the other branch. Prompt 4 shares 6 with prompt 3, the
    # group's 3 plus the threshold: it keeps waiting for 3. Sharing 5, one under, it waits for 0.
    prompts = [np.array([1, 2, 3, 4, 4, 4, end]) for end in (0, 1, 2)]
    prompts += [np.array([1, 2, 3, 9, 9, 9, 0]), np.array(fifth)]
    assert prefix_plan(prompts, 3) == Plan((0, 1, 2, 3, 4), (None, 0, 0, 0, waits_for))


# Prompts of token ids, for PrefixChunks at shared=3: A and B share 3 (a group), C and D share 3,
# and the two pairs share nothing; C and D are longer than A and B.
A, B = np.array([1, 2, 3, 4]), np.array([1, 2, 3, 5])
C, D = np.array([7, 7, 7, 1, 1]), np.array([7, 7, 7, 2, 2])
E = np.array([1, 2, 9])  # shares 2 with A and B: under 3


def _chunk(prompts: list[np.ndarray], whole: bool) -> Plan:
    return PrefixChunks(lambda ids: ids, shared=3)(prompts, whole)


@pytest.mark.parametrize(
    ("prompts", "whole", "plan"),
    [
        # All must go: the longer pair first, each pair led by its first prompt.
        ([A, B, C, D], True, Plan((2, 3, 0, 1), (None, 0, None, 2))),
        # Not all: cut before the last pair, which the next prompts may join.
        ([A, B, C, D], False, Plan((0, 1), (None, 0))),
        ([A, B, C], False, Plan((0, 1), (None, 0))),  # the cut before the last prompt
        ([C, A, B], False, Plan((0,), (None,))),  # the cut after the first
        ([A, B, E], False, Plan((0, 1), (None, 0))),  # B and E share 2, under 3: a cut
        ([A, B], False, Plan((), ())),  # no place to cut: wait for more
        ([A], False, Plan((), ())),
    ],
)
def test_prefix_chunks_cut_at_the_last_place_neighbours_share_under_the_threshold(
    prompts: list[np.ndarray], whole: bool, plan: Plan
) -> None:
    assert _chunk(prompts, whole) == plan


def test_prefix_chunks_ask_the_prompt_of_each_request() -> None:
    named = {"a": A, "b": B, "c": C}
    assert PrefixChunks(named.__getitem__, shared=3)(["a", "b", "c"], False) == Plan((0, 1), (None, 0))
    # At the default threshold (512), A and B share too little to be a group.
    assert PrefixChunks(named.__getitem__)(["a", "b", "c"], True) == Plan((0, 1, 2), (None, None, None))
