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
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from fathom.prompts.haystack.index import Ids

# A follower waits for its leader when they share this many tokens. Below it, the prefill saved is
# a few hundred tokens, worth less than what the wait may cost at the end of a run (slots idle
# behind one leader); a wait costs nothing while the window has other requests to send.
SHARED_TOKENS = 512


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
        self.size, self.left = size, len(plan.order)
        self._rank = [0] * len(plan.order)
        for rank, index in enumerate(plan.order):
            self._rank[index] = rank
        self._ready = [(self._rank[i], i) for i, leader in enumerate(plan.after) if leader is None]
        heapq.heapify(self._ready)
        self._followers: dict[int, list[int]] = {}
        for index, leader in enumerate(plan.after):
            if leader is not None:
                self._followers.setdefault(leader, []).append(index)

    def take(self, in_flight: int) -> list[int]:
        """The requests to send now, ``in_flight`` being in flight already."""
        taken: list[int] = []
        while self._ready and in_flight + len(taken) < self.size:
            taken.append(heapq.heappop(self._ready)[1])
        return taken

    def answered(self, index: int) -> None:
        """Request ``index`` is done: its followers may go."""
        self.left -= 1
        for follower in self._followers.pop(index, ()):
            heapq.heappush(self._ready, (self._rank[follower], follower))


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
