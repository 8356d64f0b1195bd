"""The trackers by name, as ``--log`` gives them (``mlflow``, ``mlflow=URI``, ``wandb``,
``wandb=PROJECT``), and logging that cannot lose what it logs.

A command opens its trackers before it does any work, so a tracker named wrong or not installed is
refused (one line, exit 2) before a run starts; it logs after its own files are complete. A tracker
that fails then (a server away, a login missing) is a warning, not an error: the run folder or the
comparison is already whole, its exit status keeps meaning what it means (a pipeline gates on
``fathom compare``'s 1), and the same command run again logs it.
"""

from __future__ import annotations

import logging
import os
import shutil
import stat
from collections.abc import Callable, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from tempfile import TemporaryDirectory

from fathom.errors import SpecError
from fathom.track.base import Param, Tracker, redacted
from fathom.track.mlflow_tracker import MlflowTracker
from fathom.track.wandb_tracker import WandbTracker

_logger = logging.getLogger(__name__)
COMMAND = "fathom.command"  # the tag that says which command logged a tracked run
_ERROR_LIMIT = 400  # characters of a tracker's error in its warning


@dataclass(frozen=True)
class TrackerEntry:
    """A tracker as ``--log`` names it: what makes it from the value after '=' (None without one),
    and what that value names, for the help and the errors."""

    make: Callable[[str | None], Tracker]
    value: str


TRACKERS: dict[str, TrackerEntry] = {
    "mlflow": TrackerEntry(MlflowTracker, "a tracking URI, e.g. sqlite:///mlflow.db"),
    "wandb": TrackerEntry(WandbTracker, "a project, or ENTITY/PROJECT"),
}
EXAMPLE = "--log mlflow=sqlite:///mlflow.db"


def open_trackers(texts: Sequence[str]) -> list[Tracker]:
    """The trackers ``--log`` names, each library imported: a name fathom does not know, an empty
    value or a library not installed is a one-line error before anything is run or written."""
    trackers = []
    for text in texts:
        name, equals, value = text.partition("=")
        entry = TRACKERS.get(name.strip())
        if entry is None:
            known = ", ".join(TRACKERS)
            raise SpecError(f"--log {text!r} names no tracker fathom knows ({known}): e.g. {EXAMPLE}")
        if equals and not value.strip():
            raise SpecError(f"--log {text!r} has nothing after '=': give {entry.value}, or leave out '='")
        trackers.append(entry.make(value.strip() if equals else None))
    return trackers


@dataclass(frozen=True)
class Logged:
    """What a command logs, as one tracked run in each tracker: its name, the command (the tag
    ``fathom.command``), parameters, metrics at each step in order, PNG images by file name (logged
    at the last step), and folders copied, by artifact name."""

    name: str
    command: str
    params: Mapping[str, Param]
    steps: Sequence[tuple[int | None, Mapping[str, float]]]
    images: Mapping[str, bytes]
    folders: Mapping[str, Path]


def log_to_each(trackers: Sequence[Tracker], make: Callable[[], Logged]) -> list[str]:
    """Make what to log (reading the command's files), then log it to each tracker in turn; where
    each logged, for the CLI to print. A failure, in the reading or in a tracker, is a warning naming
    the trackers it cost and the error, and the next tracker still logs."""
    if not trackers:
        return []
    try:
        logged = make()
    except Exception as exc:  # the command's own files are whole: what cannot be logged is a warning
        _warn(", ".join(tracker.name for tracker in trackers), exc)
        return []
    done = []
    with TemporaryDirectory(prefix="fathom-log-") as folder:
        images = [Path(folder, name) for name in logged.images]
        for image in images:
            image.write_bytes(logged.images[image.name])
        folders = {
            name: _regular_copy(path, Path(folder, "folders", name)) for name, path in logged.folders.items()
        }
        for tracker in trackers:
            try:
                _log(tracker, logged, images, folders)
            except Exception as exc:  # any library's own errors (HTTP, store, login): each a warning
                _warn(tracker.name, exc)
            else:
                done.append(f"{tracker.name}: {tracker.where}")
    return done


def _regular_copy(source: Path, copy: Path) -> Path:
    """``source``'s regular files, copied under ``copy`` as they lie: a run folder may come from
    someone else, and a link in it (to a key, to /etc) must not carry what it points at into a
    tracker. Links and other non-regular entries are left out, with a warning naming the first."""
    skipped: list[Path] = []
    for root, folders, files in os.walk(source):  # links to folders are listed, never entered
        here = Path(root)
        for name in [*folders, *files]:
            entry = here / name
            mode = entry.lstat().st_mode
            if stat.S_ISDIR(mode):
                (copy / entry.relative_to(source)).mkdir(parents=True, exist_ok=True)
            elif stat.S_ISREG(mode):
                target = copy / entry.relative_to(source)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(entry, target, follow_symlinks=False)
            else:
                skipped.append(entry)
    copy.mkdir(parents=True, exist_ok=True)
    if skipped:
        _logger.warning(
            "left %d link(s) or special file(s) out of the copy of %s logged (the first: %s)",
            len(skipped), source, skipped[0],
        )  # fmt: skip
    return copy


def _log(tracker: Tracker, logged: Logged, images: Sequence[Path], folders: Mapping[str, Path]) -> None:
    """One tracked run, started and finished; marked failed where what is logged in it raised."""
    tracker.start(logged.name, logged.params, {COMMAND: logged.command})
    try:
        for step, metrics in logged.steps:
            tracker.log_metrics(metrics, step)
        last = logged.steps[-1][0] if logged.steps else None
        for image in images:
            tracker.log_image(image, last)
        for name, folder in folders.items():
            tracker.log_folder(folder, name)
    except BaseException:
        with suppress(Exception):  # the error that stopped the logging is the one to report
            tracker.finish(failed=True)
        raise
    tracker.finish()


def _warn(names: str, exc: BaseException) -> None:
    _logger.warning(
        "logging to %s failed (%s); what was logged is complete on disk: run the same command again to "
        "log it",
        names,
        error_text(exc),
    )


def error_text(exc: BaseException) -> str:
    """A tracker's error as one line: its type, its message's lines joined (a validation error names
    the setting on its second line), cut at ``_ERROR_LIMIT`` characters, credentials removed."""
    message = " ".join(line.strip() for line in str(exc).splitlines() if line.strip())
    if len(message) > _ERROR_LIMIT:
        message = message[: _ERROR_LIMIT - 3] + "..."
    return redacted(f"{type(exc).__name__}: {message}" if message else type(exc).__name__)
