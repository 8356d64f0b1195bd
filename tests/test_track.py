"""--log mlflow and --log wandb (``fathom.track``): what ``fathom run``, ``compare`` and ``series`` log,
read back from where each tracker wrote it, for real and offline: MLflow into a SQLite store under
the test's folder, read through MLflow's own client; W&B in offline mode, read from the run's .wandb
log (the records wandb-core wrote; W&B 0.31 writes no wandb-summary.json or config.yaml offline).
Nothing here reaches a network: W&B is offline with its system metrics, metadata and error reports
off, and MLflow's telemetry is off.

A tracker's tests are skipped with the install hint where its library is not installed."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import logging
import shutil
import struct
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar

import pytest

from fathom.cli import main
from fathom.report.derive import run_spec
from fathom.spec import RunSpec
from fathom.track.base import redacted
from fathom.track.logged import label_step, log_run
from fathom.track.mlflow_tracker import MlflowTracker, _param_text
from fathom.track.trackers import open_trackers
from fathom.track.wandb_tracker import artifact_name

Test = TypeVar("Test", bound=Callable[..., None])

SPEC = RunSpec(
    task="niah", model="sim:perfect", tokenizer="char", lengths=(1024, 2048), depths=(0.0, 1.0), samples=2
)
# For the comparison and the series: 20 pairs at 2k, which a checkpoint with a cliff at 1k loses all of.
GRID = dataclasses.replace(SPEC, depths=tuple(d / 9 for d in range(10)))
CLIFF = "sim:cliff?window=1k&accuracy=1&floor=0"
RUN_ARGS = ("--tokenizer", "char", "--lengths", "1k,2k", "--depths", "2", "--samples", "2", "--no-progress")
SECRET = "sk-fathom-test-secret-0123456789"  # a key in the environment, which nothing may record


def needs(module: str) -> Callable[[Test], Test]:
    """Skipped with the install hint where the tracker's library is not installed."""
    return pytest.mark.skipif(
        importlib.util.find_spec(module) is None, reason=f"needs {module}: pip install -e '.[{module}]'"
    )


@pytest.fixture(autouse=True)
def offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test in its own folder (MLflow puts artifacts in ./mlruns), both trackers offline and
    quiet, none of the developer's tracking configuration, and a key in the environment. W&B reads
    its environment once per process (``wandb.setup``): its service is stopped after each test, so
    the next one's is read anew."""
    monkeypatch.chdir(tmp_path)
    for name in ("MLFLOW_TRACKING_URI", "MLFLOW_EXPERIMENT_NAME", "MLFLOW_EXPERIMENT_ID", "MLFLOW_RUN_ID"):
        monkeypatch.delenv(name, raising=False)
    for name in ("WANDB_PROJECT", "WANDB_ENTITY", "WANDB_API_KEY", "WANDB_BASE_URL", "WANDB_RUN_ID"):
        monkeypatch.delenv(name, raising=False)
    settings = {
        "MLFLOW_DISABLE_TELEMETRY": "true",
        "DO_NOT_TRACK": "true",
        "WANDB_MODE": "offline",
        "WANDB_SILENT": "true",
        "WANDB_CONSOLE": "off",
        "WANDB_ERROR_REPORTING": "false",
        "WANDB_DISABLE_GIT": "true",
        "WANDB_DISABLE_CODE": "true",
        "WANDB_X_DISABLE_STATS": "true",
        "WANDB_X_DISABLE_META": "true",
        "WANDB_X_SAVE_REQUIREMENTS": "false",
        "WANDB_DIR": str(tmp_path),
        "WANDB_DATA_DIR": str(tmp_path / "wandb-data"),
        "WANDB_CACHE_DIR": str(tmp_path / "wandb-cache"),
        "WANDB_CONFIG_DIR": str(tmp_path / "wandb-config"),
        "OPENAI_API_KEY": SECRET,
    }
    for name, value in settings.items():
        monkeypatch.setenv(name, value)
    yield
    if sys.modules.get("wandb") is not None:
        sys.modules["wandb"].teardown()


def sweep(folder: Path, spec: RunSpec = SPEC, **labels: str) -> Path:
    run_spec(spec, folder, show_progress=False, labels=labels)
    return folder


@pytest.fixture(scope="module")
def labelled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished run of the checkpoint at step 1200."""
    return sweep(tmp_path_factory.mktemp("labelled") / "ckpt-1200", step="1200", ckpt="run-7/step-1200")


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """Three checkpoints of a training run: steps 100 and 200 find every needle, step 300 none past 1k."""
    root = tmp_path_factory.mktemp("checkpoints")
    return (
        sweep(root / "step-100", GRID, step="100"),
        sweep(root / "step-200", GRID, step="200"),
        sweep(root / "step-300", dataclasses.replace(GRID, model=CLIFF), step="300"),
    )


def cli(*args: str | Path) -> int:
    status: int = main([str(a) for a in args])
    return status


def snapshot(folder: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under ``folder``: its bytes and its modification time."""
    return {
        str(p.relative_to(folder)): (p.read_bytes(), p.stat().st_mtime_ns)
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


# --- MLflow, read back through its own client -------------------------------------------------------


def mlflow_client(store: str) -> Any:
    """MLflow's own client of the store, made by fathom's tracker: the first one imports MLflow's SQL
    store, whose SQLAlchemy deprecation fathom ignores (this suite fails on any warning)."""
    return MlflowTracker(store).client()


@pytest.fixture(scope="module")
def empty_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite store as MLflow makes it: its tables take seconds to create (dozens of migrations,
    each committed), so they are made once and each test logs into a copy. Made in its own folder:
    the Default experiment keeps the artifact location ./mlruns had when it was made."""
    folder = tmp_path_factory.mktemp("mlflow")
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(folder)
        mlflow_client(f"sqlite:///{folder / 'empty.db'}").search_experiments()
    return folder / "empty.db"


@pytest.fixture
def store(empty_store: Path, tmp_path: Path) -> str:
    """This test's own MLflow store, as a tracking URI."""
    return f"sqlite:///{shutil.copyfile(empty_store, tmp_path / 'mlflow.db')}"


def mlflow_runs(store: str) -> tuple[Any, list[Any]]:
    """The store's client, and every run in it."""
    client = mlflow_client(store)
    return client, client.search_runs([e.experiment_id for e in client.search_experiments()])


def history(client: Any, run: Any, key: str) -> list[tuple[int, float]]:
    return [(m.step, m.value) for m in client.get_metric_history(run.info.run_id, key)]


def artifacts(client: Any, run: Any, folder: str) -> list[str]:
    return [a.path for a in client.list_artifacts(run.info.run_id, folder)]


@needs("mlflow")
def test_mlflow_holds_the_runs_spec_labels_numbers_plot_and_folder(
    tmp_path: Path, store: str, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "runs" / "checkpoint"
    assert cli("run", "niah", "--model", "sim:perfect", *RUN_ARGS, "--run-dir", folder,
               "--label", "step=300", "--log", f"mlflow={store}") == 0  # fmt: skip
    client, [run] = mlflow_runs(store)
    assert f"logged to mlflow: run {run.info.run_id} of {store}\n" in capsys.readouterr().out
    assert (run.info.run_name, run.info.status, run.data.tags["fathom.command"]) == (
        "checkpoint",
        "FINISHED",
        "run",
    )
    params = run.data.params
    keys = ("task", "model", "tokenizer", "lengths", "depths", "samples", "label/step")
    assert {k: params[k] for k in keys} == {
        "task": "niah",
        "model": "sim:perfect",
        "tokenizer": "char",
        "lengths": "1024,2048",
        "depths": "0.0,1.0",
        "samples": "2",
        "label/step": "300",
    }  # fmt: skip
    assert params["run_folder"] == str(folder.absolute())
    metrics = run.data.metrics
    assert metrics["score"] == metrics["score/len_1k"] == metrics["score/len_2k"] == 1.0
    assert (metrics["effective_length/mean"], metrics["control/answered"]) == (2048, 0.0)
    assert (metrics["samples/graded"], metrics["samples/errors"]) == (2 * 2 * 2, 0)
    assert history(client, run, "score") == [(300, 1.0)]
    assert artifacts(client, run, "images") == ["images/heatmap.png"]
    copied = Path(run.info.artifact_uri.removeprefix("file://")) / "checkpoint"
    assert snapshot(copied).keys() == snapshot(folder).keys()
    assert (copied / "samples.jsonl").read_bytes() == (folder / "samples.jsonl").read_bytes()


@needs("mlflow")
def test_mlflow_without_a_value_logs_where_its_environment_says(
    store: str, labelled: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MLFLOW_TRACKING_URI", store)
    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", "checkpoints")
    where = log_run(open_trackers(["mlflow"]), labelled)
    client, [run] = mlflow_runs(store)
    assert where == [f"mlflow: run {run.info.run_id} of {store}"]
    assert client.get_experiment(run.info.experiment_id).name == "checkpoints"
    assert history(client, run, "score") == [(1200, 1.0)]
    assert run.data.params["label/ckpt"] == "run-7/step-1200"


@needs("mlflow")
def test_a_link_in_a_received_run_folder_carries_nothing_into_the_tracker(
    store: str, labelled: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A run folder may come from someone else: a link in it to a file outside is left out of the
    copy logged (with a warning), and the run's own files are logged whole. (A link to a folder makes
    every command refuse the folder before reading it: ``tests/test_links.py``.)"""
    received = Path(shutil.copytree(labelled, tmp_path / "received"))
    secret = tmp_path / "outside" / "key.txt"
    secret.parent.mkdir()
    secret.write_text("SECRET-KEY-42")
    (received / "notes.txt").symlink_to(secret)
    with caplog.at_level(logging.WARNING, logger="fathom"):
        log_run(open_trackers([f"mlflow={store}"]), received)
    _, [run] = mlflow_runs(store)
    copied = Path(run.info.artifact_uri.removeprefix("file://")) / "received"
    assert sorted(p.name for p in copied.rglob("*")) == sorted(
        p.name for p in received.rglob("*") if not p.is_symlink() and not p.parent.is_symlink()
    )
    assert not any("SECRET-KEY-42" in p.read_text(errors="replace") for p in copied.rglob("*") if p.is_file())
    assert "left 1 link(s) or special file(s) out of the copy" in caplog.text


@needs("mlflow")
def test_compare_logs_its_verdict_what_fired_and_its_plot(
    tmp_path: Path, store: str, checkpoints: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    base, _, new = checkpoints
    out = tmp_path / "comparison"
    assert cli("compare", base, new, "--out", out, "--log", f"mlflow={store}") == 1  # the gate's exit stays
    client, [run] = mlflow_runs(store)
    assert f"logged to mlflow: run {run.info.run_id}" in capsys.readouterr().out
    assert run.info.run_name == "step-300 vs step-100" and run.data.tags["fathom.command"] == "compare"
    params = run.data.params
    assert "length 2k" in params["fired"].split("; ")
    assert (params["new_model"], params["label/step"], params["base_label/step"]) == (CLIFF, "300", "100")
    metrics = run.data.metrics
    assert metrics["regressed"] == 1.0 and metrics["gate/length"] >= 1 and metrics["gate/overall"] == 1
    assert (metrics["difference/len_1k"], metrics["difference/len_2k"]) == (0.0, -1.0)
    assert (metrics["overall/base"], metrics["overall/new"], metrics["overall/difference"]) == (
        1.0,
        0.5,
        -0.5,
    )
    assert (metrics["effective_length/base"], metrics["effective_length/new"]) == (2048, 1024)
    assert history(client, run, "regressed") == [(300, 1.0)]
    assert artifacts(client, run, "images") == ["images/compare.png"]
    logged = artifacts(client, run, "compare-step-300-vs-step-100")
    assert {Path(p).name for p in logged} == {p.name for p in out.iterdir()}


@needs("mlflow")
def test_series_logs_each_checkpoint_at_its_step(
    tmp_path: Path, store: str, checkpoints: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    reversed_order = checkpoints[::-1]  # --by step orders them
    status = cli(
        "series", *reversed_order, "--by", "step", "--out", tmp_path / "series", "--log", f"mlflow={store}"
    )
    assert status == 1  # the last checkpoint regressed
    client, [run] = mlflow_runs(store)
    assert "logged to mlflow" in capsys.readouterr().out
    assert run.data.tags["fathom.command"] == "series" and run.data.params["checkpoints"] == "3"
    assert sorted(history(client, run, "score/len_2k")) == [(100, 1.0), (200, 1.0), (300, 0.0)]
    assert sorted(history(client, run, "regressed/baseline")) == [(100, 0.0), (200, 0.0), (300, 1.0)]
    assert sorted(history(client, run, "effective_length/mean")) == [(100, 2048), (200, 2048), (300, 1024)]
    images = sorted(artifacts(client, run, "images"))
    assert images == ["images/series_effective_length.png", "images/series_lengths.png"]
    folder = artifacts(client, run, "series-step-100-to-step-300")
    assert sorted(Path(p).name for p in folder) == ["series.html", "series.json"]


@needs("mlflow")
@needs("duckdb")
def test_a_series_from_an_index_logs_without_its_folders(
    tmp_path: Path, store: str, checkpoints: tuple[Path, Path, Path]
) -> None:
    runs = shutil.copytree(checkpoints[0].parent, tmp_path / "runs")
    assert cli("index", runs, "--out", tmp_path / "runs.duckdb") == 0
    shutil.rmtree(runs)  # the index holds the runs' records: their folders are not needed
    assert cli("series", "--index", tmp_path / "runs.duckdb", "--by", "step", "--out", tmp_path / "series",
               "--log", f"mlflow={store}") == 1  # fmt: skip
    client, [run] = mlflow_runs(store)
    assert sorted(history(client, run, "score/len_2k")) == [(100, 1.0), (200, 1.0), (300, 0.0)]
    assert "task" not in run.data.params and run.data.params["checkpoints"] == "3"


# --- W&B offline, read back from the run's log -------------------------------------------------------

_BLOCK = 32 * 1024  # the .wandb log's blocks (LevelDB's log format: records cut into chunks)
_FULL, _FIRST, _LAST = 1, 2, 4


def wandb_records(run_dir: Path) -> list[Any]:
    """The records of a W&B offline run's .wandb log: a 7-byte header (":W&B", magic, version), then
    32 KiB blocks of chunks, each with a 7-byte header (CRC, length, type) and a piece of a record;
    a block's last 6 bytes or fewer are padding."""
    from wandb.proto import wandb_internal_pb2

    [log] = run_dir.glob("run-*.wandb")
    data = log.read_bytes()
    assert data[:4] == b":W&B"
    records, pieces, at = [], b"", 7
    while at + 7 <= len(data):
        if _BLOCK - at % _BLOCK < 7:
            at += _BLOCK - at % _BLOCK
            continue
        _, length, kind = struct.unpack("<IHB", data[at : at + 7])
        piece, at = data[at + 7 : at + 7 + length], at + 7 + length
        pieces = piece if kind in (_FULL, _FIRST) else pieces + piece
        if kind in (_FULL, _LAST):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pieces)
            records.append(record)
    return records


@dataclasses.dataclass
class WandbRun:
    """What an offline run's log holds: the run, its config, its history by step, its artifacts."""

    name: str
    project: str
    tags: list[str]
    config: dict[str, Any]
    steps: dict[int, dict[str, Any]]
    artifacts: dict[str, list[str]]
    exit_code: int | None


def _key(item: Any) -> str:
    return str(item.key or "/".join(item.nested_key))


def wandb_run(run_dir: Path) -> WandbRun:
    found = WandbRun("", "", [], {}, {}, {}, None)
    for record in wandb_records(run_dir):
        kind = record.WhichOneof("record_type")
        if kind == "run":
            found.name, found.project, found.tags = (
                record.run.display_name,
                record.run.project,
                list(record.run.tags),
            )
            found.config |= {_key(i): json.loads(i.value_json) for i in record.run.config.update}
        elif kind == "config":
            found.config |= {_key(i): json.loads(i.value_json) for i in record.config.update}
        elif kind == "history":
            row = {_key(i): json.loads(i.value_json) for i in record.history.item}
            found.steps.setdefault(record.history.step.num, {}).update(row)
        elif kind == "artifact":
            found.artifacts[record.artifact.name] = [e.path for e in record.artifact.manifest.contents]
        elif kind == "exit":
            found.exit_code = record.exit.exit_code
    return found


def wandb_run_dirs(tmp_path: Path) -> list[Path]:
    """The offline runs W&B wrote under ``tmp_path``, their logs complete: a run's finish returns
    before W&B's service has written all of its log, which it does by the time it stops."""
    sys.modules["wandb"].teardown()
    return sorted((tmp_path / "wandb").glob("offline-run-*"))


@needs("wandb")
def test_wandb_offline_holds_the_runs_config_numbers_plot_and_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "runs" / "ckpt-1200"
    labels = ("--label", "step=1200", "--label", "ckpt=run-7/step-1200")
    assert cli("run", "niah", "--model", "sim:perfect", *RUN_ARGS, "--run-dir", folder, *labels,
               "--log", "wandb=checkpoints") == 0  # fmt: skip
    [run_dir] = wandb_run_dirs(tmp_path)
    assert f"logged to wandb: offline run in {run_dir} (wandb sync uploads it)" in capsys.readouterr().out
    run = wandb_run(run_dir)
    assert (run.name, run.project, run.tags, run.exit_code) == (
        "ckpt-1200",
        "checkpoints",
        ["fathom.command=run"],
        0,
    )
    assert {k: run.config[k] for k in ("task", "lengths", "samples", "label/step", "label/ckpt")} == {
        "task": "niah",
        "lengths": "1024,2048",
        "samples": 2,
        "label/step": "1200",
        "label/ckpt": "run-7/step-1200",
    }  # fmt: skip
    [step] = run.steps
    logged = run.steps[step]
    assert step == 1200
    assert (logged["score"], logged["score/len_2k"], logged["effective_length/mean"]) == (1, 1, 2048)
    assert logged["images/heatmap/_type"] == "image-file"
    assert (run_dir / "files" / logged["images/heatmap/path"]).read_bytes() == (
        folder / "heatmap.png"
    ).read_bytes()
    assert sorted(run.artifacts["ckpt-1200"]) == sorted(p.name for p in folder.iterdir())


@needs("wandb")
def test_wandb_series_steps_rise_with_the_checkpoints(
    tmp_path: Path, checkpoints: tuple[Path, Path, Path]
) -> None:
    assert cli("series", *checkpoints, "--by", "step", "--out", tmp_path / "series", "--log", "wandb") == 1
    [run_dir] = wandb_run_dirs(tmp_path)
    run = wandb_run(run_dir)
    assert run.project == "uncategorized"  # W&B's own default, without WANDB_PROJECT
    assert sorted(run.steps) == [100, 200, 300]
    assert [run.steps[s]["score/len_2k"] for s in (100, 200, 300)] == [1, 1, 0]
    assert [run.steps[s]["regressed/best"] for s in (100, 200, 300)] == [0, 0, 1]
    assert run.steps[300]["images/series_lengths/_type"] == "image-file"


# --- both: the run folder, the keys, the failures -----------------------------------------------------


@needs("mlflow")
@needs("wandb")
def test_logging_leaves_the_run_folder_as_it_was_and_records_no_key(
    tmp_path: Path, store: str, labelled: Path
) -> None:
    before = snapshot(labelled)
    where = log_run(open_trackers([f"mlflow={store}", "wandb"]), labelled)
    assert [line.split(":")[0] for line in where] == ["mlflow", "wandb"]
    assert snapshot(labelled) == before  # no file added, changed or touched
    assert len(wandb_run_dirs(tmp_path)) == 1
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert written and not [p for p in written if SECRET.encode() in p.read_bytes()]


@needs("mlflow")
def test_a_tracker_that_fails_warns_and_keeps_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "run"
    assert cli("run", "niah", "--model", "sim:perfect", *RUN_ARGS, "--run-dir", folder,
               "--log", "mlflow=nosuchscheme://u:pw@host/x") == 0  # fmt: skip
    captured = capsys.readouterr()
    [warning] = [line for line in captured.err.splitlines() if "logging to mlflow failed" in line]
    assert warning.startswith("fathom: warning: ") and "run the same command again to log it" in warning
    assert "pw@" not in captured.err and "logged to" not in captured.out
    assert (folder / "summary.json").is_file() and "samples written: 16" in captured.out


@pytest.mark.parametrize("tracker", ["mlflow", "wandb"])
def test_a_tracker_not_installed_is_refused_before_the_run(
    tmp_path: Path, tracker: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, tracker, None)  # import mlflow now raises ImportError
    assert cli("run", "niah", "--model", "sim:perfect", *RUN_ARGS, "--out", tmp_path / "runs",
               "--log", f"{tracker}=somewhere") == 2  # fmt: skip
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(
        f"fathom: error: {tracker} is not installed; install it with: "
    )
    assert f"[{tracker}]'" in err
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (
            "tensorboard",
            "names no tracker fathom knows (mlflow, wandb): e.g. --log mlflow=sqlite:///mlflow.db",
        ),
        ("mlflow=", "has nothing after '='"),
        ("wandb= ", "has nothing after '='"),
    ],
)
def test_a_misnamed_tracker_is_refused_before_the_comparison(
    checkpoints: tuple[Path, Path, Path],
    tmp_path: Path,
    value: str,
    message: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / "comparison"
    assert cli("compare", checkpoints[0], checkpoints[1], "--out", out, "--log", value) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err
    assert not out.exists()


# --- logging to each tracker, with a tracker that records its calls -----------------------------------


class Recording:
    """A tracker that keeps its calls, and raises at the one named ``fail_at``."""

    def __init__(self, name: str, fail_at: str | None = None) -> None:
        self.name, self.fail_at = name, fail_at
        self.calls: list[tuple[Any, ...]] = []

    @property
    def where(self) -> str:
        return f"{len(self.calls)} calls"

    def _call(self, what: str, *args: Any) -> None:
        if what == self.fail_at:
            raise RuntimeError(f"{what} refused by\nhttps://user:key@tracker.example")
        self.calls.append((what, *args))

    def start(self, name: str, params: Mapping[str, Any], tags: Mapping[str, str]) -> None:
        self._call("start", name, params["label/step"], dict(tags))

    def log_metrics(self, metrics: Mapping[str, float], step: int | None) -> None:
        self._call("metrics", step, metrics["score/len_2k"])

    def log_image(self, path: Path, step: int | None) -> None:
        self._call("image", path.name, step, path.read_bytes()[:4])

    def log_folder(self, path: Path, name: str) -> None:
        # The folder logged is a copy that lives as long as the logging: what it held, as it held it.
        self._call(
            "folder", {str(p.relative_to(path)): p.read_bytes() for p in path.rglob("*") if p.is_file()}, name
        )

    def finish(self, failed: bool = False) -> None:
        self.calls.append(("finish", failed))


class Warnings(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.found: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.found.append(record.getMessage())


@pytest.fixture
def warned() -> Iterator[list[str]]:
    """The warnings fathom's logger gives (the CLI prints each as ``fathom: warning: ...``)."""
    handler, logger = Warnings(), logging.getLogger("fathom")
    logger.addHandler(handler)
    yield handler.found
    logger.removeHandler(handler)


def test_a_tracker_that_fails_is_finished_as_failed_and_the_next_still_logs(
    labelled: Path, warned: list[str]
) -> None:
    failing, working = Recording("first", fail_at="folder"), Recording("second")
    assert log_run([failing, working], labelled) == ["second: 5 calls"]
    start = ("start", "ckpt-1200", "1200", {"fathom.command": "run"})
    assert working.calls == [
        start,
        ("metrics", 1200, 1.0),
        ("image", "heatmap.png", 1200, b"\x89PNG"),
        ("folder", {k: v[0] for k, v in snapshot(labelled).items()}, "ckpt-1200"),
        ("finish", False),
    ]
    assert failing.calls[0] == start and failing.calls[-1] == ("finish", True)
    assert warned == [
        "logging to first failed (RuntimeError: folder refused by https://***@tracker.example); what was "
        "logged is complete on disk: run the same command again to log it"
    ]


def test_a_folder_that_cannot_be_read_is_a_warning_and_nothing_is_started(
    tmp_path: Path, warned: list[str]
) -> None:
    trackers = [Recording("first"), Recording("second")]
    assert log_run(trackers, tmp_path / "no-run") == []
    assert [t.calls for t in trackers] == [[], []]
    [warning] = warned
    assert warning.startswith("logging to first, second failed (RunFolderError: run folder ")


# --- the names and values, by hand ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("labels", "step"),
    [({"step": "1200"}, 1200), ({"step": "0"}, 0), ({"step": "1.5"}, None), ({"step": "-3"}, None),
     ({"step": "ckpt-3"}, None), ({"epoch": "3"}, None), ({}, None)],
)  # fmt: skip
def test_a_runs_step_is_its_whole_number_label_step(labels: dict[str, str], step: int | None) -> None:
    assert label_step(labels) == step


def test_addresses_are_shown_without_their_credentials() -> None:
    assert (
        redacted("https://me:key@host:5000/x and http://tok@h") == "https://***@host:5000/x and http://***@h"
    )
    assert redacted("sqlite:///runs/mlflow.db") == "sqlite:///runs/mlflow.db"


def test_long_params_are_cut_visibly_and_artifact_names_made_safe() -> None:
    assert _param_text("x" * 6000) == "x" * 6000
    cut = _param_text("x" * 7000)
    assert len(cut) == 6000 and cut.endswith(" ... (cut)")
    assert artifact_name("niah:mix:prose=1,code=1 / run") == "niah-mix-prose-1-code-1-run"


def test_a_niah_runs_metrics_give_its_worst_depth_effective_length_and_a_ruler_runs_none(
    tmp_path: Path,
) -> None:
    from fathom.analysis.checkpoint import run_numbers
    from fathom.analysis.effective import EffectiveLength
    from fathom.report.compare import read_run
    from fathom.track.logged import run_metrics

    folder = tmp_path / "run"
    assert cli("run", "niah", "--model", "sim:perfect", *RUN_ARGS, "--run-dir", folder) == 0
    numbers = run_numbers(read_run(folder))
    # Every cell 1.0 at 1k and 2k; 4 samples a length are too few for a lower bound of 0.85.
    assert numbers.effective_length == EffectiveLength(2048, None, 2048)
    assert run_metrics(numbers)["effective_length/worst_depth"] == 2048
    worst = {"effective_length/mean", "effective_length/lower_bound", "effective_length/worst_depth"}
    for effective, logged in [
        (EffectiveLength(2048, 1024, 1024), (2048, 1024, 1024)),
        (EffectiveLength(2048, 1024, None), (2048, 1024, 0)),  # no length passes at the worst depth
    ]:
        metrics = run_metrics(dataclasses.replace(numbers, effective_length=effective))
        assert tuple(metrics[key] for key in sorted(worst)) == (logged[1], logged[0], logged[2])
    ruler = run_metrics(dataclasses.replace(numbers, task="vt", effective_length=EffectiveLength(1024, 1024)))
    assert "effective_length/worst_depth" not in ruler and ruler["effective_length/mean"] == 1024
