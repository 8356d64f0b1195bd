"""The run folder: manifest.json, the append-only samples.jsonl, and the files derived from them.

What a run folder promises (docs/run-folder.md, "Guarantees"): one writer at a time, holding ``run.lock``;
records appended whole, one line each, on disk before the next sample starts; no record of another
run adopted; damaged lines moved aside, never silently dropped (see ``fathom.run.lines``).
"""

from __future__ import annotations

import dataclasses
import fcntl
import json
import logging
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from fathom.errors import FathomError, NewerSchemaError, RunFolderError, first_line
from fathom.manifest import Manifest, Start
from fathom.records import AnyRecord, check_values, is_retried
from fathom.run.appends import append_line, append_to, quarantine
from fathom.run.labels import labels_text
from fathom.run.lines import Parsed, read_file, sample_reader
from fathom.safe_files import open_append, read_bounded, refuse_links, replacing

MANIFEST = "manifest.json"
SAMPLES = "samples.jsonl"
QUARANTINE = "samples.quarantine"  # lines moved aside: torn tails of killed writes, damaged lines
LOCK = "run.lock"
MANIFEST_MOST = 16 << 20  # a manifest holds a few KB; read whole, and the folder may be someone else's

R = TypeVar("R")
T = TypeVar("T")

log = logging.getLogger(__name__)


def is_final(record: AnyRecord) -> bool:
    """Whether a sample is done: graded, or failed in a way that another attempt would repeat (a
    prompt that missed its length, one too long); a resume retries the rest (``ErrorKind.retried``)."""
    return not is_retried(record.error)


def latest_records(records: list[AnyRecord]) -> list[AnyRecord]:
    """One record per sample: the last one written. A retried sample keeps its failed attempt in
    samples.jsonl (append-only), but only its latest record counts."""
    latest: dict[str, AnyRecord] = {}
    for record in records:
        latest[record.sample_id] = record
    return list(latest.values())


class RunFolder:
    """One run's folder. Reading needs no lock; ``start`` takes the folder's lock for writing, which
    ``close`` gives back (a dead process's lock goes with it: the kernel drops it)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None  # samples.jsonl, opened for appending
        self._lock: int | None = None
        self._identity: str | None = None

    @property
    def manifest_path(self) -> Path:
        return self.path / MANIFEST

    @property
    def samples_path(self) -> Path:
        return self.path / SAMPLES

    def read_manifest(self) -> Manifest:
        if not self.path.is_dir():
            problem = "is not a folder" if self.path.exists() else "does not exist"
            raise RunFolderError(f"run folder '{self.path}' {problem}")
        refuse_own_links(self.path)
        if not self.manifest_path.is_file():
            raise RunFolderError(f"'{self.path}' is not a fathom run folder (it has no {MANIFEST})")
        try:
            data = json.loads(read_bounded(self.manifest_path, MANIFEST_MOST, "a manifest").decode("utf-8"))
        except OSError as exc:
            raise RunFolderError(f"cannot read {self.manifest_path}: {exc.strerror or exc}") from None
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
            raise self._damaged("not JSON text") from None
        try:
            return Manifest.from_json(data)
        except NewerSchemaError as exc:
            raise exc.at(str(self.manifest_path)) from None
        except (TypeError, KeyError, ValueError, AttributeError, FathomError) as exc:
            raise self._damaged(first_line(exc)) from None

    def _damaged(self, reason: str) -> RunFolderError:
        return RunFolderError(
            f"{self.manifest_path} is damaged (not the manifest of a run: {reason}): restore it from a "
            "copy, or move the folder aside and start the run again in a new one"
        )

    def identity(self) -> str:
        """The fingerprint that this run's records carry."""
        if self._identity is None:
            self._identity = self.read_manifest().identity.fingerprint
        return self._identity

    def claim(self) -> None:
        """Take the lock of a run folder that exists already (it holds a manifest), before the minutes
        a run's preparation may take: a second writer is refused at once. Any other folder is left as
        it is (a bad setting found in the preparation writes nothing); ``start`` takes its lock."""
        if self._lock is None and os.path.lexists(self.manifest_path):
            self._take_lock()

    def start(self, manifest: Manifest) -> None:
        """Take the folder for writing (unless ``claim`` took it): create it, or reopen it to resume a
        run of the same identity; then move aside whatever in samples.jsonl is not a record of this
        run, and list a resume made elsewhere in the manifest (``Manifest.resumed_by``)."""
        if self._lock is None:
            _make_folder(self.path)
            self._take_lock()
        try:
            adopted = self._adopt(manifest)
            self._identity = manifest.identity.fingerprint
            parsed = self._parse(_checked_only)
            self._quarantine(parsed)
            if parsed.records:
                self._note_resume(adopted, manifest, len(parsed.records))
        except BaseException:
            self.close()
            raise

    def _adopt(self, manifest: Manifest) -> Manifest:
        """The manifest the folder holds once ``manifest``'s run has taken it."""
        holds_samples = self._holds_samples()
        if not self.manifest_path.exists():
            if holds_samples:
                raise RunFolderError(
                    f"run folder '{self.path}' holds samples but no {MANIFEST}, so nothing says which run "
                    "wrote them: restore its manifest.json, or give --run-dir a new folder"
                )
            self._write_manifest(manifest)
            return manifest
        existing = self.read_manifest()
        written, new = existing.identity.written, manifest.identity.written
        if written == new:
            completed = self._relabel(existing.completed_by(manifest), manifest.labels, holds_samples)
            if completed != existing:
                self._write_manifest(completed)
            return completed
        if holds_samples:
            raise RunFolderError(
                f"run folder '{self.path}' holds a different run (differs in: "
                f"{', '.join(_differences(written, new))}); refusing to mix them: "
                "pass --run-dir with a new folder, or delete this one"
            )
        # A run that stopped before its first sample (a bad setting, say) has nothing to protect:
        # the corrected spec takes the folder over.
        log.warning("run folder '%s' held a run with no samples; it now holds this one", self.path)
        self._write_manifest(manifest)
        return manifest

    def _relabel(self, existing: Manifest, labels: dict[str, str], holds_samples: bool) -> Manifest:
        """``existing`` (the folder's, of this run) as a start with ``labels`` takes it: none keeps the
        folder's labels; others are refused where the folder holds records, whose checkpoint its
        labels name, and taken where it holds none."""
        if not labels or labels == existing.labels:
            return existing
        if holds_samples:
            held = labels_text(existing.labels) or "no labels"
            raise RunFolderError(
                f"run folder '{self.path}' holds records labelled {held}, not {labels_text(labels)}: "
                "resume it without --label (it keeps its own), or give another checkpoint's run a new "
                "--run-dir"
            )
        return existing.labelled(labels)

    def _note_resume(self, existing: Manifest, manifest: Manifest, records_before: int) -> None:
        """List ``manifest``'s start in ``existing`` (the folder's) where it differs from the latest."""
        resume = Start(records_before, manifest.environment, manifest.backend.transport)
        differing = resume.differences(existing.starts()[-1])
        if differing:
            log.warning(
                "run folder '%s' is resumed on another machine, build or setting than its last start "
                "(differs in: %s): the manifest lists this start, after the run's first %d records",
                self.path, ", ".join(differing), records_before,
            )  # fmt: skip
            self._write_manifest(existing.resumed_by(resume))

    def _holds_samples(self) -> bool:
        return any(_size(self.path / name) for name in (SAMPLES, QUARANTINE))

    def _take_lock(self) -> None:
        refuse_own_links(self.path)  # before anything in the folder is opened, read or written
        path = self.path / LOCK
        try:
            fd = open_append(path, os.O_RDWR)
        except OSError as exc:
            raise RunFolderError(f"cannot write in run folder '{self.path}': {exc.strerror}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 32).decode("ascii", "replace").strip() or "unknown"
            os.close(fd)
            raise RunFolderError(
                f"run folder '{self.path}' is in use by pid {holder} (another fathom run writes to it): "
                "wait for it to finish, or give --run-dir another folder"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._lock = fd

    def _parse(self, keep: Callable[[AnyRecord], T], set_aside_newer: bool = False) -> Parsed[T]:
        """samples.jsonl, read line by line: what ``keep`` takes of each record (no line is kept: a
        writer that moves damage aside reads the file again, ``quarantine``); a record of a newer
        schema counted as damage with ``set_aside_newer``."""
        reader = sample_reader(self.read_manifest())
        if set_aside_newer:
            reader = _newer_as_damage(reader)
        return read_file(self.samples_path, lambda data: keep(reader(data)))

    def _quarantine(self, parsed: Parsed[Any]) -> None:
        quarantine(parsed, self.samples_path, self.path / QUARANTINE)

    def repair(self, set_aside_newer: bool = False) -> int:
        """Move the damaged lines and torn tail of samples.jsonl aside, under the folder's lock, as a
        resumed run would; how many lines were moved. A record of a newer schema than this fathom's
        is refused (a newer fathom reads it), or, with ``set_aside_newer``, moved aside as well."""
        self.read_manifest()  # no run folder is refused before a lock file is made in it
        self._take_lock()
        try:
            if set_aside_newer:
                parsed = self._parse(_checked_only, set_aside_newer=True)
            else:
                parsed = self._parse_naming_option()
            self._quarantine(parsed)
            return len(parsed.damaged) + bool(parsed.torn)
        finally:
            self.close()

    def _parse_naming_option(self) -> Parsed[None]:
        try:
            return self._parse(_checked_only)
        except NewerSchemaError as exc:
            raise RunFolderError(
                f"{exc}, or 'fathom repair {self.path} --set-aside-newer' moves such lines aside to "
                f"{QUARANTINE} (a newer fathom can read them there)"
            ) from None

    def _write_manifest(self, manifest: Manifest) -> None:
        text = json.dumps(manifest.to_json(), indent=2, sort_keys=True) + "\n"
        _write_atomic(self.manifest_path, [text])

    def records(self) -> list[AnyRecord]:
        """The run's records, in the order written. A damaged line is an error naming it (the run's
        writer moves such lines aside); a torn last line is a write in flight and is left out."""
        return self._read(_whole)

    def _read(self, keep: Callable[[AnyRecord], T]) -> list[T]:
        """What ``keep`` takes of each of the run's records, as ``records`` reads them."""
        parsed = self._parse(keep)
        if parsed.damaged:
            first = parsed.damaged[0]
            more = f" (and {len(parsed.damaged) - 1} more)" if len(parsed.damaged) > 1 else ""
            raise RunFolderError(
                f"{self.samples_path} line {first.line} is not a record of this run: {first.reason}{more}; "
                f"'fathom repair {self.path}' moves damaged lines aside to {QUARANTINE}"
            )
        return parsed.records

    def latest(self) -> list[AnyRecord]:
        """One record per sample: the last one written (``latest_records``)."""
        return latest_records(self.records())

    def finished_ids(self) -> set[str]:
        """The samples whose latest record is final: read holding each sample's id and whether it
        is done, not its records (a resume of a big run would hold them all)."""
        latest = dict(self._read(lambda record: (record.sample_id, is_final(record))))
        return {sample_id for sample_id, final in latest.items() if final}

    def append(self, record: AnyRecord) -> None:
        """Write one record as one line, on disk before this returns. One ``write`` of the whole
        line to a file opened for appending: a reader sees the line whole or not yet."""
        if self._lock is None:
            raise RunFolderError(f"run folder '{self.path}' was not started for writing")
        if self._fd is None:
            self._fd = append_to(self.samples_path)
        # Stamped with the run's identity, so a reader can tell this run's records from another's.
        stamped = dataclasses.replace(record, run_identity=self._identity)
        try:  # what a reader would quarantine, and a resume ask again and again, is never written
            check_values(stamped)
        except ValueError as exc:
            raise RunFolderError(
                f"refusing to write the record of {record.sample_id!r:.100} into {self.samples_path}: {exc} "
                "(a scoring method or backend gave an impossible value; the records before it are kept)"
            ) from None
        append_line(self._fd, stamped.to_json(), self.samples_path)

    def hold(self) -> Manifest:
        """Take the folder's lock for a writer beside the run (``fathom judge``): no run can write
        meanwhile. ``close`` gives it back. The manifest, as it stands."""
        manifest = self.read_manifest()
        self._take_lock()
        return manifest

    def rewrite_manifest(self, manifest: Manifest) -> None:
        """Replace the manifest of a folder held for writing with one of the same identity (what a
        judge adds: its identity and rubric)."""
        if self._lock is None:
            raise RunFolderError(f"run folder '{self.path}' was not taken for writing")
        if manifest.identity.written != self.read_manifest().identity.written:
            raise RunFolderError(f"refusing to give run folder '{self.path}' the manifest of another run")
        self._write_manifest(manifest)

    def write_derived(self, name: str, content: str | Iterable[str]) -> Path:
        """A derived file, its text whole or in parts written as they come (a run's report.html is
        as large as its answers: ``fathom.report.html.page.page_parts``)."""
        path = self.path / name
        _write_atomic(path, [content] if isinstance(content, str) else content)
        return path

    def close(self) -> None:
        for fd in (self._fd, self._lock):
            if fd is not None:
                os.close(fd)  # closing the lock file's descriptor releases the lock
        self._fd = self._lock = None

    def __enter__(self) -> RunFolder:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def refuse_own_links(folder: Path) -> None:
    """Refuse a run folder whose own files (its manifest, lock, records and their quarantines) are
    links or no regular files, or that holds a link to a folder: fathom follows none of them."""
    refuse_links(folder, lambda name: name in (MANIFEST, LOCK) or name.endswith((".jsonl", ".quarantine")))


def _make_folder(path: Path) -> None:
    """The run folder, created if needed; anything that stops it from being one is a clear error."""
    if path.exists() and not path.is_dir():
        raise RunFolderError(f"run folder '{path}' is a file: give --run-dir a folder")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise RunFolderError(f"cannot create run folder '{path}': {exc.strerror or exc}") from None


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def _differences(old: Any, new: dict[str, Any]) -> list[str]:
    found = []
    for section in sorted(set(old) | set(new)):
        a, b = old.get(section), new.get(section)
        if isinstance(a, dict) and isinstance(b, dict):
            found += [f"{section}.{k}" for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
        elif a != b:
            found.append(section)
    return found or ["unknown"]


def _whole(record: AnyRecord) -> AnyRecord:
    return record


def _checked_only(record: object) -> None:
    """A record read, checked and let go: a writer's read counts the records, holding none."""


def _newer_as_damage(reader: Callable[[dict[str, Any]], R]) -> Callable[[dict[str, Any]], R]:
    """``reader``, with a record of a newer schema counted as damage rather than refused."""

    def read(data: dict[str, Any]) -> R:
        try:
            return reader(data)
        except NewerSchemaError as exc:
            raise ValueError(
                f"a newer fathom's {exc.what}, schema {exc.found}; this one reads up to {exc.known}"
            ) from None

    return read


def _write_atomic(path: Path, parts: Iterable[str]) -> None:
    """``path`` replaced whole by the text ``parts`` make, as UTF-8, never written through a link
    (``fathom.safe_files.replacing``)."""
    try:
        with replacing(path) as handle:
            for part in parts:
                handle.write(part.encode())
    except OSError as exc:
        raise RunFolderError(f"cannot write {path}: {exc.strerror or exc}") from None
