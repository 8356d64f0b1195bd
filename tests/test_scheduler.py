"""The openai backend's schedule (fathom.backends.schedule): prompts that share a long prefix wait for
their group's leader, a bounded window of requests in flight, every request answered once, and a run
against the simulated prefix-caching server of benchmarks/prefix_server.py (written whole, resumed
after an interrupt, its failures recorded)."""

from __future__ import annotations

import asyncio
import contextlib
import sys
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from fathom.backends.base import Request
from fathom.backends.jsonhttp import LANE
from fathom.backends.openai import OpenAIBackend
from fathom.backends.schedule import SHARED_TOKENS, Plan, Window, in_order, prefix_plan
from fathom.prompts.tokenizers import Tokenizer, load_tokenizer
from fathom.records import Cell
from fathom.run import runner
from fathom.run.runner import run
from fathom.run.store import RunFolder
from fathom.spec import RunSpec

sys.path.append(str(Path(__file__).parents[1] / "benchmarks"))
from prefix_server import Engine, PrefixServer, serving

TOKENIZER = load_tokenizer("cl100k_base")
HELD_AT_MOST = 60.0  # seconds a held completion waits for the others: only a hang reaches it


@pytest.fixture(autouse=True)
def _local(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")  # a proxy from the environment must not see these
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


@pytest.fixture
def server() -> Iterator[PrefixServer]:
    """Two slots, a large cache, 1 simulated second = 10 ms."""
    with serving(TOKENIZER, Engine(slots=2, cache_tokens=1 << 20, scale=0.01)) as simulated:
        yield simulated


def niah_like(lengths: tuple[int, ...], depths: int, samples: int) -> list[np.ndarray]:
    """Ids shaped as NIAH's in the runner's order: per length one haystack, a needle at each depth
    (needles of one depth open alike), a question at the end."""
    rng = np.random.default_rng(0)
    head, opening = rng.integers(0, 50_000, 30), rng.integers(0, 50_000, 7)
    prompts = []
    for length in lengths:
        haystack = rng.integers(0, 50_000, length)
        for depth in range(depths):
            at = length * depth // (depths - 1)
            for _ in range(samples):
                needle = np.concatenate([opening, rng.integers(0, 50_000, 10)])
                prompts.append(np.concatenate([head, haystack[:at], needle, haystack[at:], head[:5]]))
    return prompts


def test_a_group_waits_for_its_deepest_prompt_and_long_groups_go_first() -> None:
    lengths, depths, samples = (2048, 8192), 5, 3
    prompts = niah_like(lengths, depths, samples)
    plan = prefix_plan(prompts)
    assert sorted(plan.order) == list(range(len(prompts)))
    # The longer length's group first, led by its first prompt at the deepest needle: it holds the
    # whole haystack, the prefix every other prompt of the length shares with it.
    cell = len(prompts) // 2  # the first prompt of the second length
    leader = cell + (depths - 1) * samples
    assert plan.order[0] == leader and plan.after[leader] is None
    for depth in range(depths):
        shares = 8192 * depth // (depths - 1)
        for index in range(cell + depth * samples, cell + (depth + 1) * samples):
            # One wait, for the leader, never for the first sample of its own depth, though their
            # needles open alike: that would cost a prefill to save 7 tokens.
            expected = leader if shares >= SHARED_TOKENS and index != leader else None
            assert plan.after[index] == expected
    # Within the group: the prompts that share the most with the leader go first.
    group = [i for i in plan.order if i >= cell]
    assert group[:3] == [leader, leader + 1, leader + 2]
    assert group[3:6] == [leader - 3, leader - 2, leader - 1]
    # Whoever waits is sent after the one it waits for.
    rank = {index: position for position, index in enumerate(plan.order)}
    assert all(rank[i] > rank[a] for i, a in enumerate(plan.after) if a is not None)


def test_no_groups_without_a_long_shared_prefix() -> None:
    rng = np.random.default_rng(1)
    prompts = [rng.integers(0, 1000, n) for n in (300, 900, 600)]
    plan = prefix_plan(prompts)
    assert plan.after == (None, None, None)
    assert plan.order == (1, 2, 0)  # longest first: the short ones fill the end
    assert prefix_plan([]) == in_order(0) == Plan((), ())


def test_the_window_holds_followers_until_their_leader_is_answered() -> None:
    window = Window(Plan((2, 0, 1, 3), (2, 2, None, None)), size=2)
    assert window.take(0) == [2, 3]
    assert window.take(1) == []  # 0 and 1 wait for 2, and the window holds 2 already
    window.answered(3)
    assert window.take(1) == []
    window.answered(2)
    assert window.take(0) == [0, 1] and window.left == 2


def test_the_runner_hands_long_runs_bounded_in_tokens_with_the_controls_apart(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(runner, "BATCH_TOKENS", 10_000)
    controls = [Cell("niah", 1000, 0.0, i, control=True) for i in range(3)]
    cells = [*controls, *(Cell("niah", 4000, 0.5, i) for i in range(5))]
    assert [len(batch) for batch in runner.batches(cells, OpenAIBackend.requests_per_call, _cell)] == [
        3,
        2,
        2,
        1,
    ]
    # A backend of batches of 16 gets controls and samples together, as it always did.
    assert [len(batch) for batch in runner.batches(cells, runner.BATCH_SIZE, _cell)] == [4, 2, 2]


def _cell(cell: Cell) -> Cell:
    return cell


def words(start: int, count: int) -> str:
    return "".join(f" w{i}" for i in range(start, start + count))


def requests_sharing_prefixes(tokenizer: Tokenizer) -> list[Request]:
    """Three haystacks of about 1,500 tokens, a needle at four depths in each, two samples a depth."""
    texts = []
    for haystack in range(3):
        words_in = 600
        base = haystack * 10_000
        for depth in range(4):
            at = words_in * depth // 3
            for sample in range(2):
                needle = f" The special magic number for k{haystack}-{depth}-{sample} is: {depth}{sample}."
                texts.append(words(base, at) + needle + words(base + at, words_in - at))
    return [
        Request(f"r{i}", np.asarray(tokenizer.encode(text), dtype=np.int32), 8, text=text)
        for i, text in enumerate(texts)
    ]


def test_followers_go_once_their_leader_is_prefilled_and_hit_its_prefix(server: PrefixServer) -> None:
    requests = requests_sharing_prefixes(TOKENIZER)
    plan = prefix_plan([r.ids for r in requests])
    assert sum(a is not None for a in plan.after) >= 9  # the deep prompts of every haystack wait
    backend = OpenAIBackend(f"sim@{server.url}?concurrency=4&retries=1", "cl100k_base")
    done = dict(backend.stream(requests))
    assert sorted(done) == list(range(len(requests)))  # each exactly once
    assert all(c.error is None for c in done.values())
    served = {s.prompt: s for s in server.log}
    assert len(served) == len(server.log) == len(requests)
    assert server.most_in_flight <= 4
    for index, leader in enumerate(plan.after):
        if leader is None:
            continue
        follower, first = served[requests[index].text or ""], served[requests[leader].text or ""]
        assert follower.arrived >= first.prefilled
        mine, its = requests[index].ids, requests[leader].ids
        length = min(len(mine), len(its))
        common = int(np.argmax(np.append(mine[:length] != its[:length], True)))
        assert follower.cached_tokens >= common - common % server.engine.block


def held_until_in_flight(simulated: PrefixServer, monkeypatch: pytest.MonkeyPatch, count: int) -> None:
    """Every completion held until ``count`` requests are in the server at once: however slowly a
    loaded machine sends them, a client that fills its window is seen to. Only a client that never
    sends ``count`` at once waits out HELD_AT_MOST (and fails the test's count)."""
    complete, full = simulated._complete, asyncio.Event()

    async def held(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        if simulated.in_flight >= count:
            full.set()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(full.wait(), HELD_AT_MOST)
        return await complete(body)

    monkeypatch.setattr(simulated, "_complete", held)


@pytest.mark.parametrize("window", [1, 7, 300])
def test_the_window_is_never_exceeded_and_is_filled_through_pools_of_a_few_connections(
    window: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # httpcore's pool scans every connection it holds for each request, so hundreds in flight go
    # through several small pools (jsonhttp.LANE). What that saves the client, per request, is
    # measured by benchmarks/bench_client.py (--concurrency 4 300), not timed here.
    pools: list[int] = []
    made = httpx.AsyncClient

    def client(*args: Any, limits: httpx.Limits, **kwargs: Any) -> httpx.AsyncClient:
        pools.append(limits.max_connections or 0)
        return made(*args, limits=limits, **kwargs)

    monkeypatch.setattr(httpx, "AsyncClient", client)
    with serving(TOKENIZER, Engine(slots=1000, scale=1e-6)) as simulated:
        held_until_in_flight(simulated, monkeypatch, window)
        backend = OpenAIBackend(f"sim@{simulated.url}?concurrency={window}&retries=1", "cl100k_base")
        requests = [
            Request(f"r{i}", np.zeros(4, dtype=np.int32), 8, text=f"question {i}?") for i in range(2 * window)
        ]
        done = [index for index, completion in backend.stream(requests) if completion.error is None]
        assert sorted(done) == list(range(2 * window))
        assert simulated.most_in_flight == window
    assert 0 < max(pools) <= min(window, LANE) and sum(pools) >= window


def test_a_plan_whose_waits_never_end_is_refused(server: PrefixServer) -> None:
    backend = OpenAIBackend(f"sim@{server.url}", "cl100k_base")
    requests = [Request(f"r{i}", np.zeros(4, dtype=np.int32), 8, text="q?") for i in range(2)]
    with pytest.raises(ValueError, match="the plan holds back 2 requests for good"):
        list(backend.stream(requests, Plan((0, 1), (1, 0))))


def spec(url: str) -> RunSpec:
    return RunSpec("niah", f"openai:sim@{url}?retries=1", "cl100k_base", (1024, 2048), (0.0, 0.5, 1.0), 2)


def test_a_run_writes_every_record_once_and_resumes_after_an_interrupt(
    server: PrefixServer, runs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    appended, append = [0], RunFolder.append

    def interrupted(folder: RunFolder, record: object) -> None:
        if appended[0] == 15:  # the controls (12) and 3 samples are on disk
            raise KeyboardInterrupt
        appended[0] += 1
        append(folder, record)  # type: ignore[arg-type]

    monkeypatch.setattr(RunFolder, "append", interrupted)
    with pytest.raises(KeyboardInterrupt):
        run(spec(server.url), runs / "a", show_progress=False)
    monkeypatch.setattr(RunFolder, "append", append)
    assert len(RunFolder(runs / "a").finished_ids()) == 15
    result = run(spec(server.url), runs / "a", show_progress=False)
    assert (result.skipped, result.written, result.errors) == (15, 9, 0)
    ids = [r.sample_id for r in RunFolder(runs / "a").records()]
    assert len(ids) == len(set(ids)) == 24
    samples = [r for r in RunFolder(runs / "a").records() if not r.sample_id.startswith("control")]
    assert len(samples) == 12 and all(r.score == 1.0 for r in samples)  # the server finds the needles


def test_server_errors_are_recorded_and_retried_on_resume(runs: Path) -> None:
    failing = {"on": True}

    def fail(prompt: str) -> bool:  # about a third of the samples (by their questions), no control
        asked = zlib.crc32(prompt[-300:].encode())
        return failing["on"] and "special magic numbers for" in prompt and asked % 3 == 0

    with serving(TOKENIZER, Engine(slots=2, scale=0.01), fail) as simulated:
        first = run(spec(simulated.url), runs / "b", show_progress=False)
        # Controls and samples go as one stream (tests/test_streaming_run.py): each answered once.
        controls = [s for s in simulated.log if "special magic numbers for" not in s.prompt]
        assert len(controls) == 12
        failed = simulated.failed
        assert failed > 0 and first.errors == failed and first.retryable == failed
        records = list(RunFolder(runs / "b").records())
        assert len(records) == 24
        errors = [r.error for r in records if r.error is not None]
        assert errors == ["backend_error: HTTP 500 (1 attempt)"] * failed
        failing["on"] = False
        second = run(spec(simulated.url), runs / "b", show_progress=False)
        assert (second.skipped, second.written, second.errors) == (24 - failed, failed, 0)
        assert all(r.error is None for r in RunFolder(runs / "b").latest())
