"""The order in which an HTTP backend sends a run of requests, for a server with a prefix cache (vLLM,
SGLang, llama.cpp's server).

A server caches a prefix only once it has computed it: prompts that share one, sent together, each
compute it again. So prompts that share a long prefix go out as a group: one of them (its leader)
first, and the others once the leader's answer is back, when the shared prefix is in the cache.

The groups come from the order the runner hands requests in, which puts prompts that share a prefix
side by side (``Task.cells``): the prefix that two neighbours share (their common leading token ids)
defines a tree, each node a prefix shared by a run of neighbours. Where that prefix is at least
``SHARED_TOKENS`` long, the node is a group: its leader is the leader of its largest branch, whose
answer then serves the most prompts at once (in a NIAH length, the prompt with the deepest needle,
which holds the prefix every other depth shares with it), and the leaders of its other branches wait
for it. A branch whose prompts share at least ``SHARED_TOKENS`` more among themselves keeps a leader
of its own, released by the group's; the others wait for the group's leader alone. Where neighbours
share less (the depths' needles near the start, the lengths' haystacks), nothing waits, and the
branches go longest first: the long prompts' chains of work start early, and short prompts fill the
end of the run, where slots would otherwise idle. A group goes leader first, then the prompts that
share the most with it: no other prompt touches the far end of the leader's prefix, so in a
least-recently-used cache it is the first part to go.

``Window`` then sends, while fewer than ``concurrency`` requests are in flight, the first of this
order whose leader has answered.

A run's requests come lazily (``Intake``): read from an iterator on a thread of their own, at most
``LOOKAHEAD`` ahead of those sent, and planned a chunk at a time, when the window has room and nothing
ready to send. A chunk ends at the last place where neighbours share under ``SHARED_TOKENS`` (no group
spans it): the prompts after it may yet be joined by the next ones to come. A chunk takes all
that came only when it must: nothing is in flight (the server would wait), the lookahead is full, or
the iterator is done. A group longer than the lookahead is planned in pieces, each led by its own.
"""

from __future__ import annotations

import functools
import heapq
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

import numpy as np

from fathom.prompts.haystack.index import Ids

# A follower waits for its leader when they share this many tokens. Below it, the prefill saved is
# a few hundred tokens, worth less than what the wait may cost at the end of a run (slots idle
# behind one leader); a wait costs nothing while the window has other requests to send.
SHARED_TOKENS = 512
# The requests an Intake reads ahead of those it has sent: enough for a NIAH length's group whole
# (11 depths x 3 samples is 33; RULER's 20 depths x 10 samples, 200), few enough that an iterator
# that builds each prompt as it is read is never asked far ahead (the runner bounds what it holds too).
LOOKAHEAD = 256
Item = TypeVar("Item")


@dataclass(frozen=True)
class Plan:
    """``order`` lists every index once, in the order to send them in while the window has room;
    ``after[i]`` is the index whose answer request ``i`` waits for (None: none)."""

    order: tuple[int, ...]
    after: tuple[int | None, ...]


def in_order(count: int) -> Plan:
    """No groups and no waits: the requests in their own order."""
    return Plan(tuple(range(count)), (None,) * count)


class Window:
    """The requests that may go now: those whose leader has answered, in the plan's order, while
    fewer than ``size`` are in flight. ``left`` counts the requests not yet answered."""

    def __init__(self, plan: Plan, size: int) -> None:
        self.size, self.left, self._ranked = size, 0, 0
        self._rank: dict[int, int] = {}  # of the requests not yet answered: a long run keeps no more
        self._ready: list[tuple[int, int]] = []
        self._followers: dict[int, list[int]] = {}
        self.add(plan, 0)

    def add(self, plan: Plan, first: int) -> None:
        """More requests, numbered from ``first`` on (the plan's index 0 is request ``first``), sent
        after all those added before them."""
        for rank, index in enumerate(plan.order, start=self._ranked):
            self._rank[first + index] = rank
        self._ranked += len(plan.order)
        for index, leader in enumerate(plan.after):
            if leader is None:
                heapq.heappush(self._ready, (self._rank[first + index], first + index))
            else:
                self._followers.setdefault(first + leader, []).append(first + index)
        self.left += len(plan.order)

    def take(self, in_flight: int) -> list[int]:
        """The requests to send now, ``in_flight`` being in flight already."""
        taken: list[int] = []
        while self._ready and in_flight + len(taken) < self.size:
            taken.append(heapq.heappop(self._ready)[1])
        return taken

    def answered(self, index: int) -> None:
        """Request ``index`` is done: its followers may go."""
        self.left -= 1
        del self._rank[index]
        for follower in self._followers.pop(index, ()):
            heapq.heappush(self._ready, (self._rank[follower], follower))


# How a chunk is planned: given the requests that came and are not yet planned, and whether all must
# be taken now, the plan of the first ones to take (none: wait for more).
Chunker = Callable[[Sequence[Item], bool], Plan]


def all_in_order(pending: Sequence[object], whole: bool) -> Plan:
    """Every request that came, in its order, none waiting."""
    return in_order(len(pending))


class Intake(Generic[Item]):
    """A stream's requests as a window of ``size`` sends them: read from ``source`` by ``start``'s
    thread, at most ``lookahead`` ahead of those sent, and planned by ``chunk`` (as the module says).
    Requests are numbered in the order they are read. All but ``start`` and ``close`` are called on
    one thread (the event loop's), to which ``start``'s thread hands each request it reads."""

    def __init__(
        self,
        source: Iterable[Item],
        size: int,
        chunk: Chunker[Item] = all_in_order,
        lookahead: int = LOOKAHEAD,
    ) -> None:
        self.window, self.lookahead = Window(in_order(0), size), lookahead
        self.failure: BaseException | None = None  # what reading the source raised
        self._source, self._chunk = iter(source), chunk
        self._came: list[Item] = []  # read, not yet planned
        self._items: dict[int, Item] = {}  # planned, not yet sent
        self._numbered = self._unsent = 0
        self._read_all = self._closed = False
        self._room = threading.Semaphore(lookahead)

    @classmethod
    def planned(cls, items: Sequence[Item], plan: Plan, size: int) -> Intake[Item]:
        """``items``, all known, sent as ``plan`` says."""
        intake = cls((), size)
        intake._items, intake._numbered, intake._read_all = dict(enumerate(items)), len(items), True
        intake.window.add(plan, 0)
        return intake

    @property
    def finished(self) -> bool:
        return self._read_all and not self._came and self.window.left == 0

    @property
    def stuck(self) -> bool:
        """Every request is read and planned, none in flight can release the ones left (a caller with
        none in flight asks): they would wait for good."""
        return self._read_all and not self._came and self.window.left > 0

    def start(self, post: Callable[[Callable[[], None]], None]) -> None:
        """Read the source on a thread of its own, each request handed over by ``post`` (a function
        that runs what it is given on the window's thread, then sends what may go; it never raises,
        and once the window is gone it drops what it is given)."""
        if not self._read_all:
            threading.Thread(target=self._read, args=(post,), name="fathom-intake", daemon=True).start()

    def close(self) -> None:
        """Stop reading (a reader blocked in the source stops once the source returns)."""
        self._closed = True
        self._room.release()

    def take(self, in_flight: int) -> list[int]:
        """The requests to send now, ``in_flight`` being in flight already: the window's, and where it
        has room and none ready, those of the next chunk."""
        window = self.window
        taken = window.take(in_flight)
        busy = in_flight + len(taken)
        if busy < window.size and self._came:
            whole = self._read_all or busy == 0 or self._unsent >= self.lookahead
            plan = self._chunk(self._came, whole)
            count = len(plan.order)
            for number, item in enumerate(self._came[:count], start=self._numbered):
                self._items[number] = item
            del self._came[:count]
            window.add(plan, self._numbered)
            self._numbered += count
            taken += window.take(busy)
        self._unsent -= len(taken)
        for _ in taken:
            self._room.release()
        return taken

    def item(self, index: int) -> Item:
        """Request ``index``, as it is sent: the intake keeps it no longer."""
        return self._items.pop(index)

    def answered(self, index: int) -> None:
        self.window.answered(index)

    def _read(self, post: Callable[[Callable[[], None]], None]) -> None:
        try:
            while self._room.acquire() and not self._closed:
                try:
                    item = next(self._source)
                except StopIteration:
                    post(self._end)
                    return
                post(functools.partial(self._came_in, item))
        except BaseException as exc:  # the caller raises it, whatever it is
            post(functools.partial(self._failed, exc))

    def _came_in(self, item: Item) -> None:
        self._came.append(item)
        self._unsent += 1

    def _end(self) -> None:
        self._read_all = True

    def _failed(self, exc: BaseException) -> None:
        self.failure = exc


class PrefixChunks(Generic[Item]):
    """Chunks cut where neighbours share under ``shared`` tokens, each planned by ``prefix_plan``;
    ``ids`` is a request's prompt."""

    def __init__(self, ids: Callable[[Item], Ids], shared: int = SHARED_TOKENS) -> None:
        self._ids, self._shared = ids, shared

    def __call__(self, pending: Sequence[Item], whole: bool) -> Plan:
        prompts = [self._ids(item) for item in pending]
        cut = len(prompts)
        if not whole:
            # Back from the end, to the last place a group cannot span: the prompts after it may be
            # the start of a group whose rest has not come.
            cut = next(
                (
                    at
                    for at in range(len(prompts) - 1, 0, -1)
                    if _common(prompts[at - 1], prompts[at]) < self._shared
                ),
                0,
            )
        return prefix_plan(prompts[:cut], self._shared)


@dataclass
class _Branch:
    """A subtree: its leader, its requests in the order to send them in, its prompt tokens in all,
    the tokens all its prompts share, and those that wait for its leader, each with the tokens it
    shares with the leader."""

    leader: int
    order: list[int]
    tokens: int
    shared: int
    waiting: list[tuple[int, int]] = field(default_factory=list)


@dataclass
class _Node:
    shared: int  # the tokens that every prompt below it shares
    branches: list[_Branch]


def prefix_plan(prompts: Sequence[Ids], shared: int = SHARED_TOKENS) -> Plan:
    """The groups and the order for ``prompts`` (each prompt's token ids), as the module says."""
    if not prompts:
        return in_order(0)
    after: list[int | None] = [None] * len(prompts)

    def close(node: _Node) -> _Branch:
        branches = node.branches
        if node.shared >= shared:
            # Of equal branches, the one whose prompts share the most: its leader holds the longest
            # prefix (NIAH's deepest needle); max keeps the first of equals, in the runner's order.
            first = max(branches, key=lambda b: (len(b.order), b.shared))
            rest = [b for b in branches if b is not first]
            for branch in rest:
                # Its leader waits for this node's; so does each request that would have waited for
                # its leader to share under ``shared`` tokens more (the samples of one depth, whose
                # needles open alike): a second wait would cost a whole prefill and save little.
                moved = [branch.leader, *(i for i, has in branch.waiting if has < node.shared + shared)]
                for index in moved:
                    after[index] = first.leader
                first.waiting += [(index, node.shared) for index in moved]
        else:
            # No ancestor is a group either (shares grow down the tree): no leader is waited for.
            first, *rest = sorted(branches, key=lambda b: -b.tokens)  # stable: ties keep their order
        for branch in rest:
            first.order.extend(branch.order)
        return _Branch(first.leader, first.order, sum(b.tokens for b in branches), node.shared, first.waiting)

    # The tree is built left to right with a stack of open nodes, shares growing up the stack: a
    # share smaller than the top's closes the top (a Cartesian tree of the neighbours' shares).
    stack: list[_Node] = []
    branch = _Branch(0, [0], len(prompts[0]), len(prompts[0]))
    for index in range(1, len(prompts)):
        common = _common(prompts[index - 1], prompts[index])
        while stack and stack[-1].shared > common:
            node = stack.pop()
            node.branches.append(branch)
            branch = close(node)
        if stack and stack[-1].shared == common:
            stack[-1].branches.append(branch)
        else:
            stack.append(_Node(common, [branch]))
        branch = _Branch(index, [index], len(prompts[index]), len(prompts[index]))
    while stack:
        node = stack.pop()
        node.branches.append(branch)
        branch = close(node)
    return Plan(tuple(branch.order), tuple(after))


def _common(a: Ids, b: Ids) -> int:
    """How many leading token ids ``a`` and ``b`` share."""
    length = min(len(a), len(b))
    differ = np.flatnonzero(a[:length] != b[:length])
    return int(differ[0]) if len(differ) else length
