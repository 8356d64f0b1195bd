"""MLflow as a tracker, through its client (no global active run, so fathom called from a training
script leaves that script's own MLflow run alone).

Where: the tracking URI given (``--log mlflow=sqlite:///mlflow.db``, ``--log mlflow=http://host:5000``),
else MLflow's own configuration (``MLFLOW_TRACKING_URI``, else MLflow's default, ``./mlflow.db``); the
experiment ``MLFLOW_EXPERIMENT_ID`` or ``MLFLOW_EXPERIMENT_NAME`` (made if absent), else MLflow's
Default. Credentials (``MLFLOW_TRACKING_TOKEN``, ...) are MLflow's to read; fathom never sees them.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from fathom.track.base import Param, import_library, redacted

EXTRA = "mlflow"
DEFAULT_EXPERIMENT = "0"  # MLflow's Default experiment, which every store has
# MLflow's limits on one log_batch call, and on a parameter's value (mlflow.utils.validation).
_PARAMS_PER_BATCH = 100
_METRICS_PER_BATCH = 1000
_PARAM_LENGTH = 6000
_CUT = " ... (cut)"
# MLflow 3's SQL store, imported when first used, configures its SQLAlchemy mappers with a loader
# strategy that SQLAlchemy 2.1 deprecates: MLflow's code, harmless, and for MLflow to change. Ignored
# by its message alone, so that a run under ``-W error`` (fathom's tests) logs with any SQLAlchemy.
_SQLALCHEMY_NOLOAD = r"The ``noload`` loader strategy is deprecated"

T = TypeVar("T")


@contextmanager
def _store_warnings() -> Iterator[None]:
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=_SQLALCHEMY_NOLOAD, category=DeprecationWarning)
        yield


def _batches(items: Sequence[T], size: int) -> Iterator[Sequence[T]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


class MlflowTracker:
    """One MLflow run, made in the experiment MLflow's environment names."""

    name = "mlflow"

    def __init__(self, uri: str | None) -> None:
        self._mlflow = import_library("mlflow", EXTRA)
        self._uri = uri
        self._client: Any = None
        self._run_id = ""

    @property
    def where(self) -> str:
        return f"run {self._run_id} of {redacted(self._client.tracking_uri)}"

    def client(self) -> Any:
        """MLflow's client of the store (``MlflowClient``), which opens it."""
        with _store_warnings():
            return self._mlflow.MlflowClient(tracking_uri=self._uri)

    def start(self, name: str, params: Mapping[str, Param], tags: Mapping[str, str]) -> None:
        client = self.client()
        run = client.create_run(self._experiment(client), run_name=name, tags=dict(tags))
        self._client, self._run_id = client, run.info.run_id
        made = [self._mlflow.entities.Param(key, _param_text(value)) for key, value in params.items()]
        for batch in _batches(made, _PARAMS_PER_BATCH):
            client.log_batch(self._run_id, params=batch)

    def _experiment(self, client: Any) -> str:
        variables = self._mlflow.environment_variables
        given: str | None = variables.MLFLOW_EXPERIMENT_ID.get()
        if given:
            return given
        name: str | None = variables.MLFLOW_EXPERIMENT_NAME.get()
        if not name:
            return DEFAULT_EXPERIMENT
        found = client.get_experiment_by_name(name)
        return str(found.experiment_id if found is not None else client.create_experiment(name))

    def log_metrics(self, metrics: Mapping[str, float], step: int | None) -> None:
        now = int(time.time() * 1000)
        Metric = self._mlflow.entities.Metric
        made = [Metric(key, float(value), now, step or 0) for key, value in metrics.items()]
        for batch in _batches(made, _METRICS_PER_BATCH):
            self._client.log_batch(self._run_id, metrics=batch)

    def log_image(self, path: Path, step: int | None) -> None:
        self._client.log_artifact(self._run_id, str(path), "images")

    def log_folder(self, path: Path, name: str) -> None:
        self._client.log_artifacts(self._run_id, str(path), name)

    def finish(self, failed: bool = False) -> None:
        self._client.set_terminated(self._run_id, "FAILED" if failed else "FINISHED")


def _param_text(value: Param) -> str:
    """A parameter as MLflow keeps it: text, cut (and marked so) at MLflow's limit."""
    text = str(value)
    return text if len(text) <= _PARAM_LENGTH else text[: _PARAM_LENGTH - len(_CUT)] + _CUT
