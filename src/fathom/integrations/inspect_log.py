"""``fathom import-inspect LOG --run-dir DIR``: an inspect_ai log of a fathom task (``fathom/niah``,
``fathom/ruler``, ``fathom/suite``, ``fathom/state``, ``fathom/babi``, ``fathom/listing``,
``fathom/mrcr``) made a fathom run folder, which ``fathom report``, the heatmap and ``fathom compare``
read as any other; a log of ``-T control=true`` brings its controls back as control records.

The import is a fathom run whose backend is the log: the spec is the one the log's task metadata
holds (its model ``inspect:MODEL``), its task is made again with the same tokenizer, and the runner
builds each logged cell's prompt and records it with the answer inspect logged for it
(``InspectAnswers``), graded by fathom as a run grades. So the records are a run's in every field,
and a log whose prompts differ from the ones this fathom builds (another version, corpus or tokenizer
file) is refused, sample by sample, by the prompts' sha256.

The log is read with inspect's own reader, its header first and then one sample at a time, keeping
only each answer: a large ``.eval`` log is never held whole (a ``.json`` log is one document, which
inspect's reader reads whole). Nothing is written until the log has been read
and checked; the folder is written under a temporary name beside DIR and renamed to DIR when whole,
so a refusal or a failure leaves no folder behind.
"""

from __future__ import annotations

import dataclasses
import os
import secrets
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fathom.errors import FathomError, MissingExtraError, RunFolderError
from fathom.integrations.inspect_answers import InspectAnswers, LoggedAnswer, completion_of
from fathom.prompts.tokenizers import Tokenizer, load_tokenizer
from fathom.records import Cell
from fathom.registry import create_task
from fathom.run.clock import BackendClock
from fathom.run.manifest import manifest
from fathom.run.progress import RunProgress
from fathom.run.runner import answer_cells
from fathom.run.store import RunFolder
from fathom.run.writer import RecordWriter
from fathom.spec import RunSpec
from fathom.tasks import probe

KEY = "fathom"  # the key of fathom's metadata on the task and on each sample (inspect_tasks.KEY)
FATHOM_TASKS = tuple(
    f"fathom/{name}" for name in ("niah", "ruler", "suite", "state", "babi", "listing", "mrcr")
)
# What a sample's answer needs of the log: its id, output, error and metadata; the rest (the prompt
# again as messages, the events, attachments) is left unread.
_UNREAD = {"messages", "events", "attachments", "store"}


class InspectLogError(FathomError):
    """An inspect log that is not one fathom can import: unreadable, or not of a fathom task."""


@dataclass(frozen=True)
class Imported:
    """What an import wrote: the folder, the model inspect ran, its records and their errors, and the
    samples the task plans (more than written where inspect ran part of them: ``--limit``)."""

    folder: Path
    model: str
    written: int
    errors: int
    planned: int


def import_log(log: Path, run_dir: Path) -> Imported:
    """Write the run folder ``run_dir`` (new, or an empty folder) from the inspect log ``log``."""
    reader = _reader()
    if not log.is_file():
        raise InspectLogError(f"inspect log '{log}' {'is not a file' if log.exists() else 'does not exist'}")
    _check_target(run_dir)
    header = _read(log, lambda: reader.read_eval_log(str(log), header_only=True))
    spec, identity = _identity(header, log)
    tokenizer = load_tokenizer(spec.tokenizer)
    task = create_task(spec, tokenizer)
    counted = identity.get("tokenizer")
    vocabulary = counted.get("sha256") if isinstance(counted, dict) else None
    if vocabulary != tokenizer.identity or identity.get("task") != task.identity():
        raise InspectLogError(
            f"'{log}' was made with another tokenizer vocabulary or task build than '{spec.tokenizer}' and "
            f"fathom's {spec.task} give here (a corpus, tokenizer file or fathom version differs): import it "
            "where the log was made"
        )
    planned = [cell.id for cell in probe.plan(task, spec.control)]
    answers = _answers(reader, log, spec.sha256, set(planned), tokenizer)
    model = f"inspect:{header.eval.model}"
    spec = dataclasses.replace(spec, model=model)
    backend = InspectAnswers(header.eval.model, tokenizer, answers, _config(header))
    run_dir.parent.mkdir(parents=True, exist_ok=True)
    # Made as any folder is (mkdtemp's would be its owner's alone), named for no other import.
    building = run_dir.parent / f".{run_dir.name}.importing-{os.getpid()}-{secrets.token_hex(4)}"
    building.mkdir()
    try:
        with RunFolder(building) as folder:
            folder.start(manifest(spec, tokenizer, task, backend, len(planned)))
            write = RecordWriter(folder, RunProgress(model, (), enabled=False))
            cells: Iterator[Cell] = (cell for cell in probe.plan(task, spec.control) if cell.id in answers)
            answer_cells(spec, BackendClock(backend), task, cells, write)
            result = write.result(0, 0.0, 0.0)
        if run_dir.is_dir():
            run_dir.rmdir()  # empty, as checked: the whole folder takes its place
        building.rename(run_dir)
    except BaseException:
        shutil.rmtree(building, ignore_errors=True)
        raise
    return Imported(run_dir, model, result.written, result.errors, len(planned))


def _reader() -> Any:
    """inspect_ai's log reader, imported now: a fathom without the extra says how to add it."""
    try:
        import inspect_ai.log
    except ImportError:
        raise MissingExtraError("inspect_ai", "inspect") from None
    return inspect_ai.log


def _check_target(run_dir: Path) -> None:
    """Refuse a run folder that holds anything: an import writes a new run, whole, as ``fathom run``
    never mixes two runs in one folder (and there is nothing to resume: the log is complete)."""
    if run_dir.is_dir() and any(run_dir.iterdir()):
        raise RunFolderError(f"run folder '{run_dir}' is not empty: give --run-dir a new or empty folder")
    if run_dir.exists() and not run_dir.is_dir():
        raise RunFolderError(f"run folder '{run_dir}' is a file: give --run-dir a folder")


def _read(log: Path, read: Any) -> Any:
    """What ``read`` reads of ``log``, any failure of inspect's reader one clear error."""
    try:
        return read()
    except Exception as exc:  # inspect's reader raises what its zip, JSON and pydantic layers raise
        reason = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
        raise InspectLogError(f"cannot read '{log}' as an inspect log: {reason}") from None


def _identity(header: Any, log: Path) -> tuple[RunSpec, dict[str, Any]]:
    """The spec and identity a fathom task's log holds in its task metadata; any other log refused."""
    task = header.eval.task
    identity = (header.eval.metadata or {}).get(KEY)
    if task not in FATHOM_TASKS or not isinstance(identity, dict):
        raise InspectLogError(
            f"'{log}' is an inspect log of task '{task}', not of a fathom task ({', '.join(FATHOM_TASKS)}) "
            "with fathom's metadata: nothing imported"
        )
    if (header.eval.config.epochs or 1) != 1:
        raise InspectLogError(
            f"'{log}' ran each sample {header.eval.config.epochs} times (--epochs); a fathom run answers "
            "each once: run inspect with --epochs 1"
        )
    try:
        return RunSpec.from_json(identity["spec"]), identity
    except (TypeError, KeyError, ValueError, FathomError) as exc:
        raise InspectLogError(f"'{log}' holds no fathom run spec fathom can read: {exc}") from None


def _answers(
    reader: Any, log: Path, run: str, planned: set[str], tokenizer: Tokenizer
) -> dict[str, LoggedAnswer]:
    """Each logged sample's answer by its id, read one sample at a time; a sample of another run or of
    no cell the spec plans refused."""
    answers: dict[str, LoggedAnswer] = {}
    samples = _read(
        log,
        lambda: reader.read_eval_log_samples(str(log), all_samples_required=False, exclude_fields=_UNREAD),
    )
    while (sample := _read(log, lambda: next(samples, None))) is not None:
        facts = sample.metadata.get(KEY)
        sample_id = str(sample.id)
        if not isinstance(facts, dict) or facts.get("run") != run or sample_id not in planned:
            raise InspectLogError(
                f"'{log}' sample {sample_id[:100]!r} is not a sample of the fathom run its task metadata "
                "names: nothing imported"
            )
        error = sample.error.message if sample.error is not None else None
        # A sample without its prompt's sha256 answers no prompt this fathom builds: refused when built.
        answered = str(facts.get("prompt_sha256"))
        answers[sample_id] = LoggedAnswer(completion_of(sample.output, tokenizer, error), answered)
    if not answers:
        raise InspectLogError(f"'{log}' holds no answered sample: nothing imported")
    return answers


def _config(header: Any) -> dict[str, Any]:
    """The generation settings inspect ran the model with (temperature, max tokens, ...): the
    backend's settings in the manifest, which decide its answers."""
    config = header.eval.model_generate_config
    return {} if config is None else config.model_dump(exclude_none=True)
