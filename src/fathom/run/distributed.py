"""A sweep on a Ray cluster: one actor per model replica, one process writing the run folder.

Each replica (``fathom.run.replica.Replica``, a Ray actor) builds its backend and task once, with the
local runner's own ``prepare``, and answers the cells handed to it as one stream, with the runner's own
``answer_cells``, as a local run answers its cells; it hands each record back as it is written: its
records are the ones a local run writes, prompt for prompt and answer for answer. This process (the
driver) loads no model; it joins or starts the cluster (``fathom.run.ray_cluster``), takes the
manifest from the replicas, holds the run folder's lock, skips the finished samples as ``run`` does,
and appends each record as it arrives; so the folder, its resume and its records are a local run's,
and either executor resumes the other's folder.

Cells go out in shards of consecutive cells in the runner's prefix order, whole prefix groups where they
fit (``shards``): one to each replica, and the next to each that holds no more than a shard unanswered
(``_Slot.wants``), so that it is there before its backend runs out of requests; a replica holds about
two shards at a time, and reads a haystack many times over while its cache holds it. A replica that dies
has its unanswered cells queued again for the next free replica; Ray restarts it once (``RESTARTS``),
and the run stops only when every replica is gone for good, with what was answered saved for a resume.
"""

from __future__ import annotations

import importlib
import itertools
import logging
import math
import os
import random
import sys
import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from fathom.errors import FathomError, MissingExtraError, SpecError
from fathom.manifest import Manifest
from fathom.records import AnyRecord, Cell
from fathom.registry import check_spec
from fathom.run.labels import check_labels
from fathom.run.progress import RunProgress
from fathom.run.ray_cluster import check_room, connect, replica_cpus, replica_resources
from fathom.run.replica import Replica
from fathom.run.runner import BATCH_SIZE, Write
from fathom.run.store import RunFolder
from fathom.run.writer import RecordWriter, RunResult
from fathom.spec import RunSpec

log = logging.getLogger(__name__)

# Times Ray brings a dead replica back (loading its model again) before the run goes on without it:
# once covers a node lost or a process killed, and a cell that kills every replica it meets still
# ends the run, after 1 + RESTARTS deaths per replica.
RESTARTS = 1
# Shards per replica the sweep is cut into: a replica that finishes early finds more work, so the
# last ones end within about a quarter of a replica's share of each other.
SHARDS_PER_REPLICA = 4


def run_distributed(
    spec: RunSpec,
    run_dir: Path,
    replicas: int,
    address: str | None = None,
    show_progress: bool = True,
    order: str = "prefix",
    keep_too_long: bool = False,
    labels: Mapping[str, str] | None = None,
) -> RunResult:
    """Run (or resume) ``spec`` into ``run_dir`` on ``replicas`` Ray actors, on the cluster at
    ``address`` (``HOST:PORT``, ``auto``, ``ray://...``; ``RAY_ADDRESS`` when None) or on a local one
    started for the run. What ``run`` does, with the same folder and records; the result's
    ``backend_seconds`` is a replica's on average. Everything that can be checked is, before the run
    folder is touched: the replica count, the address, the cluster's room, every replica's backend."""
    started = time.perf_counter()
    if replicas < 1:
        raise SpecError(f"--replicas {replicas}: a Ray run needs at least one replica")
    check_spec(spec)
    checked = check_labels(labels or {})
    folder = RunFolder(run_dir)
    folder.claim()  # a second writer is refused now, before a cluster is joined or a replica built
    with folder:
        ray = _ray()
        address = address if address is not None else os.environ.get("RAY_ADDRESS")
        connected = connect(ray, address, replicas * replica_cpus(spec.model))
        try:
            cluster = ray.cluster_resources()
            need = replica_resources(spec.model, cluster.get("GPU", 0.0))
            check_room(cluster, replicas, need)
            actor = ray.remote(Replica).options(
                **need, max_restarts=RESTARTS, max_task_retries=0, max_concurrency=2
            )
            slots = [_Slot(index, actor.remote(spec, order, keep_too_long)) for index in range(replicas)]
            try:
                return _sweep(ray, spec, folder, slots, order, show_progress, started, checked)
            finally:
                for slot in slots:
                    ray.kill(slot.actor)  # a replica's model goes with it, on an interrupt too
        finally:
            if connected:
                ray.shutdown()


def _ray() -> ModuleType:
    try:
        return importlib.import_module("ray")
    except ImportError:
        raise MissingExtraError("ray", "ray") from None


def shards(cells: Sequence[Cell], replicas: int) -> list[list[Cell]]:
    """``cells`` cut, in order, into shards of at most a batch or a ``SHARDS_PER_REPLICA``-th of a
    replica's share, whichever is more. Each prefix group (consecutive cells of one length, which
    share a haystack up to the earlier needle) is cut into as few near-even pieces as that allows,
    and pieces share a shard while it has room: a replica reads a group whole where it can."""
    most = max(BATCH_SIZE, math.ceil(len(cells) / (replicas * SHARDS_PER_REPLICA)))
    out: list[list[Cell]] = []
    for _, run in itertools.groupby(cells, key=lambda cell: (cell.length, cell.control)):
        group = list(run)
        step = math.ceil(len(group) / math.ceil(len(group) / most))
        for start in range(0, len(group), step):
            piece = group[start : start + step]
            if out and len(out[-1]) + len(piece) <= most:
                out[-1].extend(piece)
            else:
                out.append(piece)
    return out


@dataclass
class _Slot:
    """A replica as the driver sees it: its actor, its deaths, its stream of records (None when it
    has none), and the cells handed to it since its stream began, answered or not."""

    index: int
    actor: Any
    deaths: int = 0
    shard: list[Cell] = field(default_factory=list)
    answered: set[str] = field(default_factory=set)
    stream: Any = None  # its records as they come (a Ray ObjectRefGenerator)
    left: int = 0  # the cells handed to it and not yet answered
    last: int = 0  # the size of the last shard handed to it
    open: bool = False  # its stream takes more cells: it has not been told there are no more

    def give(self, shard: list[Cell]) -> None:
        """Hand ``shard`` to the replica, after the cells it holds (a stream started if it has none)."""
        if self.stream is None:
            self.start()
        self.shard.extend(shard)
        self.left, self.last = self.left + len(shard), len(shard)
        self.actor.more.remote(shard)

    def start(self) -> None:
        """Start a stream, which reads the cells handed over and not yet read."""
        if not self.left:
            self.shard, self.answered = [], set()
        self.stream = self.actor.run.options(num_returns="streaming").remote()
        self.open = True

    def wants(self) -> bool:
        """Whether to hand its stream the next shard: it holds no more than one shard unanswered, so the
        next is there before its backend runs out of requests, and before a batch waiting to be filled
        (or for the cell after it) waits on the driver."""
        return self.stream is not None and self.open and self.left <= self.last

    def end(self) -> None:
        """Tell its stream there are no more cells: it ends once those it holds are answered."""
        if self.stream is not None and self.open:
            self.actor.more.remote(None)
            self.open = False

    def took(self, record: AnyRecord) -> None:
        self.answered.add(record.sample_id)
        self.left -= 1

    def unanswered(self) -> list[Cell]:
        return [cell for cell in self.shard if cell.id not in self.answered]


def _sweep(
    ray: ModuleType,
    spec: RunSpec,
    folder: RunFolder,
    slots: list[_Slot],
    order: str,
    show_progress: bool,
    started: float,
    labels: dict[str, str],
) -> RunResult:
    """Wait for every replica to be ready, take the folder (its caller closes it), and run what is left
    of the sweep."""
    first = _ready(ray, slots)
    if show_progress:
        _say_plan(ray, slots[0])
    folder.start(first.labelled(labels))
    done = folder.finished_ids()
    todo: list[Cell] = ray.get(slots[0].actor.todo.remote(frozenset(done)))
    if order == "shuffled":
        random.Random(spec.seed).shuffle(todo)  # as ``run`` shuffles: the naive order, to compare
    progress = RunProgress(f"{spec.task} {spec.model}", todo, enabled=show_progress)
    write = RecordWriter(folder, progress)

    try:
        _dispatch(ray, slots, deque(shards(todo, len(slots))), write)
    finally:
        progress.close()
    return write.result(len(done), time.perf_counter() - started, _replica_seconds(ray, slots))


def _ready(ray: ModuleType, slots: list[_Slot]) -> Manifest:
    """The run's manifest, once every replica has built its backend and task and agrees on it."""
    try:
        answers = ray.get([slot.actor.ready.remote() for slot in slots])
    except ray.exceptions.RayActorError as exc:  # a crash or a kill while loading: its last line says why
        why = [line for line in str(exc).splitlines() if line.strip()][-1:] or [type(exc).__name__]
        raise FathomError(
            f"a Ray replica died while building its backend and task: {why[0].strip()}"
        ) from None
    for answer in answers:
        if isinstance(answer, str):
            raise FathomError(answer)
    first: Manifest = answers[0]
    for slot, other in zip(slots, answers, strict=True):
        if other.identity.written != first.identity.written:
            raise FathomError(
                f"Ray replica {slot.index} would run another run than replica 0 (identity "
                f"{other.identity.fingerprint}, not {first.identity.fingerprint}): install the same "
                "fathom, backend and model files on every node"
            )
        # Another host is expected; another CPU or build may change a real model's greedy answers.
        if differing := [n for n in first.environment.differences(other.environment) if n != "host"]:
            log.warning("Ray replica %d runs on another machine or build than replica 0 (differs in: %s): "
                        "the manifest records replica 0's, and a real model's greedy answers can differ "
                        "between them", slot.index, ", ".join(differing))  # fmt: skip
    return first


def _say_plan(ray: ModuleType, slot: _Slot) -> None:
    """Print the plan's line a local run prints for a real backend, once: replica 0's, whose manifest
    is the one recorded (a replica prints nothing, where its stderr may not reach the user)."""
    plan: str | None = ray.get(slot.actor.plan.remote())
    if plan is not None:
        print(plan, file=sys.stderr)


def _dispatch(ray: ModuleType, slots: list[_Slot], queue: deque[list[Cell]], write: Write) -> None:
    """Hand the shards to the replicas as they want them, tell each stream when there are no more, and
    write their records as they come, until none is left. A replica's death puts its unanswered cells
    first in the queue: none is lost, and none answered twice, since a dead replica's stream is never read
    again."""
    live = list(slots)
    while True:
        for slot in live:  # a shard to each replica that has none, then the next to those that want it
            if slot.stream is None and queue:
                slot.give(queue.popleft())
        for slot in live:
            while queue and slot.wants():
                slot.give(queue.popleft())
            if not queue:
                slot.end()
        busy = {slot.stream: slot for slot in live if slot.stream is not None}
        if not busy:
            return
        [ready], _ = ray.wait(list(busy), num_returns=1)
        slot = busy[ready]
        try:
            records = ray.get(next(slot.stream))
        except StopIteration:
            slot.stream = None
            if slot.left:  # cells handed over after its stream stopped waiting: another stream reads them
                slot.start()
            continue
        except ray.exceptions.RayActorError as exc:
            live.remove(slot)
            # ActorDiedError: gone for good (killed, or out of restarts); else Ray is restarting it.
            if not _died(slot, exc, queue, isinstance(exc, ray.exceptions.ActorDiedError)):
                live.append(slot)  # last: a replica not restarting takes the requeued cells first
            if not live:
                raise FathomError(
                    f"every Ray replica died (the last: {type(exc).__name__}); the samples answered are "
                    "saved: run the same command again to resume"
                ) from None
            continue
        except ray.exceptions.RayTaskError as exc:
            # A replica's own error (a bug, a prompt that cannot be built) stops the run, as it would
            # stop a local one; fathom's one-line errors stay one line.
            if isinstance(exc.cause, FathomError):
                raise FathomError(str(exc.cause)) from None
            raise
        for record in records:
            write(record)
            slot.took(record)


def _died(slot: _Slot, exc: Exception, queue: deque[list[Cell]], for_good: bool) -> bool:
    """Queue a dead replica's unanswered cells first; whether it is gone for good."""
    unanswered = slot.unanswered()
    if unanswered:
        queue.appendleft(unanswered)
    slot.stream, slot.deaths, slot.left, slot.open = None, slot.deaths + 1, 0, False
    gone = for_good or slot.deaths > RESTARTS
    log.warning(
        "Ray replica %d died (%s); its %d unanswered samples go to %s",
        slot.index,
        type(exc).__name__,
        len(unanswered),
        "the others" if gone else "the next free replica, and Ray restarts it",
    )
    return gone


def _replica_seconds(ray: ModuleType, slots: list[_Slot]) -> float:
    """The time a replica spent in its model, on average over those still alive."""
    seconds = []
    for slot in slots:
        try:
            seconds.append(ray.get(slot.actor.seconds.remote()))
        except ray.exceptions.RayActorError:
            continue  # a replica gone for good took its clock with it
    return sum(seconds) / len(seconds) if seconds else 0.0
