"""The run folder: manifest.json, the append-only samples.jsonl, and the files derived from them."""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from fathom.errors import RunFolderError
from fathom.records import AnyRecord, record_from_json

MANIFEST = "manifest.json"
SAMPLES = "samples.jsonl"
TORN = "samples.torn"  # an incomplete last line left by a kill, kept for inspection
# Errors that another attempt may not repeat (a server that timed out or failed): resuming retries
# these samples. Other errors (a prompt that missed its length, one too long) are final.
RETRIED_ERRORS = ("backend_error",)


def is_final(record: AnyRecord) -> bool:
    return record.error is None or not record.error.startswith(RETRIED_ERRORS)


class RunFolder:
    """One run's folder. Records are appended one line at a time and flushed to disk each time,
    so a run killed at any moment loses nothing it had written."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._handle: IO[str] | None = None

    @property
    def manifest_path(self) -> Path:
        return self.path / MANIFEST

    @property
    def samples_path(self) -> Path:
        return self.path / SAMPLES

    def read_manifest(self) -> dict[str, Any]:
        if not self.manifest_path.is_file():
            raise RunFolderError(f"'{self.path}' is not a fathom run folder (it has no {MANIFEST})")
        try:
            data: dict[str, Any] = json.loads(self.manifest_path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise RunFolderError(f"cannot read {self.manifest_path}: {exc}") from None
        return data

    def start(self, manifest: dict[str, Any]) -> None:
        """Create the folder, or reopen it for resuming when it holds a run of the same identity."""
        if self.manifest_path.exists():
            existing = self.read_manifest()
            old = existing.get("identity")
            new = json.loads(json.dumps(manifest["identity"]))  # tuples read back as lists
            if old != new:
                raise RunFolderError(
                    f"run folder '{self.path}' holds a different run (differs in: "
                    f"{', '.join(_differences(old, new))}); refusing to mix them: "
                    "pass --run-dir with a new folder, or delete this one"
                )
            # A manifest from an older fathom lacks fields recorded since (such as 'planned'); add
            # them, and only them: what the manifest already says about the run stays as written.
            added = {key: value for key, value in manifest.items() if key not in existing}
            if added:
                self._write_manifest(existing | added)
        else:
            self.path.mkdir(parents=True, exist_ok=True)
            self._write_manifest(manifest)
        self._repair_torn_tail()

    def _write_manifest(self, manifest: dict[str, Any]) -> None:
        _write_atomic(self.manifest_path, json.dumps(manifest, indent=2, sort_keys=True) + "\n")

    def _repair_torn_tail(self) -> None:
        """A kill during a write can leave half a line; move it aside so appends stay valid JSONL."""
        if not self.samples_path.exists():
            return
        data = self.samples_path.read_bytes()
        if not data or data.endswith(b"\n"):
            return
        keep = data.rfind(b"\n") + 1
        with (self.path / TORN).open("ab") as torn:
            torn.write(data[keep:] + b"\n")
        with self.samples_path.open("r+b") as handle:
            handle.truncate(keep)

    def records(self) -> list[AnyRecord]:
        if not self.samples_path.exists():
            return []
        records = []
        lines = self.samples_path.read_text(encoding="utf-8").splitlines()
        for number, line in enumerate(lines, start=1):
            try:
                records.append(record_from_json(json.loads(line)))
            except (json.JSONDecodeError, TypeError) as exc:
                if number == len(lines):
                    break  # a torn last line from a kill; the next run moves it aside
                raise RunFolderError(f"{self.samples_path} line {number} is not a record: {exc}") from None
        return records

    def latest(self) -> list[AnyRecord]:
        """One record per sample: the last one written. A retried sample keeps its failed
        attempt in samples.jsonl (append-only), but only its latest record counts."""
        latest: dict[str, AnyRecord] = {}
        for record in self.records():
            latest[record.sample_id] = record
        return list(latest.values())

    def finished_ids(self) -> set[str]:
        return {record.sample_id for record in self.latest() if is_final(record)}

    def append(self, record: AnyRecord) -> None:
        if self._handle is None:
            self._handle = self.samples_path.open("a", encoding="utf-8")
        self._handle.write(json.dumps(record.to_json(), sort_keys=True) + "\n")
        self._handle.flush()
        os.fsync(self._handle.fileno())

    def write_derived(self, name: str, content: str) -> Path:
        path = self.path / name
        _write_atomic(path, content)
        return path

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None

    def __enter__(self) -> RunFolder:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def _differences(old: Any, new: dict[str, Any]) -> list[str]:
    if not isinstance(old, dict):
        return ["manifest format"]
    found = []
    for section in sorted(set(old) | set(new)):
        a, b = old.get(section), new.get(section)
        if isinstance(a, dict) and isinstance(b, dict):
            found += [f"{section}.{k}" for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
        elif a != b:
            found.append(section)
    return found or ["unknown"]


def _write_atomic(path: Path, content: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(content, encoding="utf-8")
    os.replace(tmp, path)
