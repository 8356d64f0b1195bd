"""The streaming run (fathom.run.stream, the runner, schedule.Intake): prompts built on a worker thread
ahead of the requests, controls and samples in one stream, what is held bounded, a build that fails
mid-stream or a kill mid-stream losing nothing answered, and a text backend's length check made on
the worker, where an ids backend's count is its prompt's by construction."""

from __future__ import annotations

import itertools
import queue
import sys
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest

from fathom import BackendEntry, registry
from fathom.backends.base import Completion, Pulling, Request
from fathom.backends.schedule import Intake, PrefixChunks, prefix_plan
from fathom.backends.sim import SimulatedBackend
from fathom.errors import SpecError
from fathom.prompts import Prompt, PromptText
from fathom.prompts.tokenizers import load_tokenizer
from fathom.records import Cell
from fathom.run.runner import run
from fathom.run.store import RunFolder
from fathom.run.stream import Ahead, BuiltSample
from fathom.spec import RunSpec
from fathom.tasks import control
from fathom.tasks.base import Sample

sys.path.append(str(Path(__file__).parents[1] / "benchmarks"))
from prefix_server import Engine, serving

TOKENIZER = load_tokenizer("cl100k_base")
WAIT = 30.0  # seconds: a bound no working run comes near, for events that must happen


class Windowed(SimulatedBackend):
    """sim:perfect as an HTTP backend streams: it reads a request only when one of its ``slots`` is
    free and answers the oldest in flight first; ``events`` logs each request sent and answered."""

    pulls_requests = True
    slots = 4
    events: ClassVar[list[tuple[str, str]]] = []

    def stream(self, requests: Iterable[Request]) -> Iterator[tuple[int, Completion]]:  # type: ignore[override]
        in_flight: deque[tuple[int, Request]] = deque()
        numbered = enumerate(requests)
        while True:
            while len(in_flight) < self.slots and (pulled := next(numbered, None)) is not None:
                self.events.append(("sent", pulled[1].sample_id))
                in_flight.append(pulled)
            if not in_flight:
                return
            index, request = in_flight.popleft()
            self.events.append(("answered", request.sample_id))
            yield index, self.generate([request])[0]


def _spec(model: str = "windowed:perfect", **changes: object) -> RunSpec:
    spec = RunSpec("niah", model, "cl100k_base", (256, 512), (0.0, 0.5, 1.0), 2)
    return replace(spec, **changes)  # type: ignore[arg-type]


@pytest.fixture
def windowed(monkeypatch: pytest.MonkeyPatch) -> type[Windowed]:
    monkeypatch.setitem(
        registry.BACKENDS, "windowed", BackendEntry(lambda rest, _: Windowed(rest, TOKENIZER), "a window")
    )
    monkeypatch.setattr(Windowed, "events", [])
    return Windowed


def test_a_sample_goes_before_the_last_control_is_answered_and_records_are_a_batch_runs(
    windowed: type[Windowed], runs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert isinstance(Windowed("perfect", TOKENIZER), Pulling)
    assert not isinstance(SimulatedBackend("perfect", TOKENIZER), Pulling)
    prepare, threads = control.prepared, set()

    def spied(task: object, cell: Cell) -> object:
        threads.add(threading.current_thread().name)
        return prepare(task, cell)  # type: ignore[arg-type]

    monkeypatch.setattr(control, "prepared", spied)
    result = run(_spec(), runs / "streamed", show_progress=False)
    assert (result.written, result.errors) == (24, 0)  # 12 samples, 12 controls
    events = windowed.events
    sent = [sample_id for kind, sample_id in events if kind == "sent"]
    answered = [sample_id for kind, sample_id in events if kind == "answered"]
    assert sorted(sent) == sorted(answered) and len(sent) == len(set(sent)) == 24
    controls = [i for i in sent if i.startswith("control|")]
    assert sent[: len(controls)] == controls  # the plan's order: the controls open the run
    first_sample = events.index(("sent", next(i for i in sent if not i.startswith("control|"))))
    last_control = events.index(("answered", controls[-1]))
    assert first_sample < last_control  # one stream: no wait for the controls to be done
    # Built on the worker, not on the thread that sends and writes.
    assert threads == {"fathom-build"}
    # The records are those of the same run answered in batches (sim:perfect), field for field.
    run(_spec("sim:perfect"), runs / "batched", show_progress=False)

    def records(name: str) -> dict[str, dict[str, object]]:
        # Apart from the time taken and the run's identity (its model's name differs).
        apart = {"latency_s": 0.0, "run_identity": ""}
        return {r.sample_id: {**r.to_json(), **apart} for r in RunFolder(runs / name).records()}

    assert records("streamed") == records("batched")
    fields = [
        list(next(iter(RunFolder(runs / name).records())).to_json()) for name in ("streamed", "batched")
    ]
    assert fields[0] == fields[1]  # in the same order


def test_a_real_server_gets_samples_while_controls_are_in_flight(
    runs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with serving(TOKENIZER, Engine(slots=2, cache_tokens=1 << 20, scale=0.01)) as simulated:
        spec = RunSpec(
            "niah", f"openai:sim@{simulated.url}?retries=1", "cl100k_base", (1024, 2048), (0.0, 1.0), 2
        )
        result = run(spec, runs / "served", show_progress=False)
        assert (result.written, result.errors) == (16, 0)
        controls = [s for s in simulated.log if "special magic numbers for" not in s.prompt]
        samples = [s for s in simulated.log if s not in controls]
        assert len(controls) == len(samples) == 8
        assert min(s.arrived for s in samples) < max(c.done for c in controls)
    assert all(r.score == 1.0 for r in RunFolder(runs / "served").records() if not r.control)


def _cells(count: int, length: int = 100) -> list[Cell]:
    return [Cell("niah", length, 0.5, i) for i in range(count)]


def test_at_most_the_bound_is_built_while_nothing_is_answered() -> None:
    builds: list[int] = []
    more = threading.Event()

    def build(cell: Cell) -> BuiltSample:
        builds.append(cell.sample)
        if len(builds) > 5:
            more.set()
        return _built(cell)

    ahead = Ahead(_cells(20), build, prompts=5)
    try:
        held = [next(ahead.samples()) for _ in range(5)]
        assert not more.wait(1.0) and len(builds) == 5 and ahead.prompts == 5
        ahead.done(held[0])  # one written: one more may be built, no more
        assert more.wait(WAIT)
        assert not (len(builds) > 6 or _wait_for(lambda: len(builds) > 6, 1.0))
    finally:
        ahead.close()
    assert not ahead._worker.is_alive()


def test_the_token_bound_holds_and_a_longer_prompt_goes_alone() -> None:
    builds: list[int] = []

    def build(cell: Cell) -> BuiltSample:
        builds.append(cell.length)
        return _built(cell)

    ahead = Ahead([*_cells(3, 400), *_cells(1, 5000), *_cells(2, 400)], build, prompts=100, tokens=1000)
    try:
        first = [next(ahead.samples()) for _ in range(3)]
        assert not _wait_for(lambda: len(builds) > 3, 1.0) and ahead.tokens == 1200  # 1200 >= 1000: full
        for ready in first:
            ahead.done(ready)
        long = next(ahead.samples())
        assert long.cell.length == 5000  # built once none is held, though it is past the bound
        assert not _wait_for(lambda: len(builds) > 4, 1.0)
        ahead.done(long)
        assert [r.cell.length for r in itertools.islice(ahead.samples(), 2)] == [400, 400]
        assert ahead.peek() is None and ahead.failure is None
    finally:
        ahead.close()


def test_a_build_that_fails_mid_stream_stops_the_run_with_the_answered_saved(
    windowed: type[Windowed], runs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    prepare, seen = control.prepared, []

    def failing(task: object, cell: Cell) -> object:
        seen.append(cell.id)
        if len(seen) == 17:  # the 12 controls and 4 samples are built
            raise SpecError("this prompt cannot be built")
        return prepare(task, cell)  # type: ignore[arg-type]

    monkeypatch.setattr(control, "prepared", failing)
    with pytest.raises(SpecError, match=r"^this prompt cannot be built$"):
        run(_spec(), runs / "a", show_progress=False)
    # Every prompt built before it answered and written: the window's in flight were not dropped.
    assert set(RunFolder(runs / "a").finished_ids()) == set(seen[:16])
    assert not [t for t in threading.enumerate() if t.name in ("fathom-build", "fathom-intake")]
    monkeypatch.setattr(control, "prepared", prepare)
    result = run(_spec(), runs / "a", show_progress=False)
    assert (result.skipped, result.written, result.errors) == (16, 8, 0)


@pytest.mark.parametrize("kill_at", [3, 14])
def test_a_kill_mid_stream_resumes_with_each_record_once(
    windowed: type[Windowed], runs: Path, monkeypatch: pytest.MonkeyPatch, kill_at: int
) -> None:
    appended, append = [0], RunFolder.append

    def killed(folder: RunFolder, record: object) -> None:
        if appended[0] == kill_at:
            raise KeyboardInterrupt
        appended[0] += 1
        append(folder, record)  # type: ignore[arg-type]

    monkeypatch.setattr(RunFolder, "append", killed)
    with pytest.raises(KeyboardInterrupt):
        run(_spec(), runs / "k", show_progress=False)
    monkeypatch.setattr(RunFolder, "append", append)
    assert len(RunFolder(runs / "k").finished_ids()) == kill_at
    assert not [t for t in threading.enumerate() if t.name == "fathom-build"]
    result = run(_spec(), runs / "k", show_progress=False)
    assert (result.skipped, result.written, result.errors) == (kill_at, 24 - kill_at, 0)
    ids = [r.sample_id for r in RunFolder(runs / "k").records()]
    assert len(ids) == len(set(ids)) == 24


def test_an_ids_backend_reads_the_count_it_is_recorded_with_and_a_text_backend_is_checked_on_the_worker(
    windowed: type[Windowed], runs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: dict[str, int] = {}
    generate = SimulatedBackend.generate

    def reading(backend: SimulatedBackend, requests: list[Request]) -> list[Completion]:
        seen.update((r.sample_id, len(r.ids)) for r in requests)
        return generate(backend, requests)

    monkeypatch.setattr(SimulatedBackend, "generate", reading)
    run(_spec(), runs / "ids", show_progress=False)
    records = list(RunFolder(runs / "ids").records())
    # An ids backend reads the ids, so their count is the one recorded and checked against the target.
    assert seen == {r.sample_id: r.actual_tokens for r in records} and len(seen) == 24
    assert all(r.actual_tokens == r.target_tokens for r in records if not r.control)
    # A text backend's prompt is decoded and encoded again, to count what it reads: on the worker.
    encode, threads = type(TOKENIZER).encode_with_specials, set()

    def counting(tokenizer: object, text: str) -> list[int]:
        if len(text) > 500:  # a prompt, not a needle's or template's words
            threads.add(threading.current_thread().name)
        return encode(tokenizer, text)  # type: ignore[arg-type]

    monkeypatch.setattr(type(TOKENIZER), "encode_with_specials", counting)
    run(_spec("windowed:perfect?input=text"), runs / "text", show_progress=False)
    assert threads == {"fathom-build"}


def _intake(
    prompts: list[np.ndarray], size: int, lookahead: int
) -> tuple[Intake[np.ndarray], list[int], Callable[[int], None]]:
    """An intake of ``prompts``, the indices it has read, and a function that hands it the next
    ``count`` it read, as its event loop would (here, on the test's thread)."""
    reads: list[int] = []

    def source() -> Iterator[np.ndarray]:
        for index, prompt in enumerate(prompts):
            reads.append(index)
            yield prompt

    posted: queue.Queue[Callable[[], None]] = queue.Queue()
    intake = Intake(source(), size, PrefixChunks(lambda ids: ids), lookahead)
    intake.start(posted.put)

    def arrive(count: int) -> None:
        for _ in range(count):
            posted.get(timeout=WAIT)()

    return intake, reads, arrive


def test_an_intake_reads_no_further_ahead_of_those_sent_than_its_lookahead() -> None:
    rng = np.random.default_rng(1)
    prompts = [rng.integers(0, 50_000, 100) for _ in range(8)]  # no two share a prefix
    intake, reads, arrive = _intake(prompts, size=8, lookahead=3)
    try:
        arrive(3)
        assert reads == [0, 1, 2]  # no fourth: three read, none sent
        assert sorted(intake.take(0)) == [0, 1, 2]  # none in flight: all that came go
        arrive(3)
        assert reads == [0, 1, 2, 3, 4, 5]
        assert [intake.item(i) is prompts[i] for i in range(3)] == [True] * 3
    finally:
        intake.close()


def test_an_intake_plans_a_group_once_it_is_whole_as_the_whole_run_would() -> None:
    rng = np.random.default_rng(0)
    haystacks = [rng.integers(0, 50_000, 2000) for _ in range(2)]
    # Two groups (haystacks) of three prompts, each a needle deeper than the last, all 600+ shared.
    prompts = [
        np.concatenate([haystack[: 600 * depth], rng.integers(0, 50_000, 20), haystack[600 * depth :]])
        for haystack in haystacks
        for depth in (1, 2, 3)
    ]
    intake, _, arrive = _intake(prompts, size=3, lookahead=100)
    try:
        arrive(3)  # the first group, whole, but nothing after it yet
        assert intake.take(1) == []  # one in flight: the group may go on, so it waits
        arrive(1)  # the second group's first prompt: the first group cannot go on
        first, whole = prefix_plan(prompts[:3]), prefix_plan(prompts)
        assert [whole.after[i] for i in range(3)] == list(first.after)  # as the whole run plans it
        leader = first.order[0]
        assert sum(after == leader for after in first.after) == 2  # the others wait for it
        assert intake.take(1) == [leader] and intake.take(2) == []
        intake.answered(leader)
        assert sorted(intake.take(1)) == sorted({0, 1, 2} - {leader})  # answered: they go
        assert intake.take(0) == [3]  # none in flight: the open group goes as it is
    finally:
        intake.close()


def _built(cell: Cell) -> BuiltSample:
    """A sample of ``cell.length`` tokens, as a build makes it."""
    ids = np.zeros(cell.length, dtype=np.int32)
    prompt = Prompt(ids, cell.length, 0, cell.length, ())
    sample = Sample(cell, prompt, PromptText("", "", ""), "q?", ("a",), "number", (), "contains", 8)
    return BuiltSample(sample, Request(cell.id, ids, 8), cell.length, None)


def _wait_for(condition: object, seconds: float) -> bool:
    """Whether ``condition`` came true within ``seconds`` (a bound on something that must not happen)."""
    event = threading.Event()
    for _ in range(int(seconds / 0.05)):
        if condition():  # type: ignore[operator]
            return True
        event.wait(0.05)
    return bool(condition())  # type: ignore[operator]
