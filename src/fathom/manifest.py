"""A run's manifest as typed data: what manifest.json holds, read and upgraded from the schema it was
written in.

``fathom.run.manifest`` makes a run's manifest and ``fathom.run.store`` writes and reads it; report,
compare and runs read it, and so does ``fathom.analysis.paired`` (two runs' identities and machines).
It sits below them all, beside the spec it holds, since analysis and run never import each other.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from fathom.schemas import MANIFEST_SCHEMA, Versions, read
from fathom.spec import RunSpec

# How a backend's settings say that each record's length is its provider's count of the prompt as sent
# (``backends.base.Counting``), not the run's tokenizer's: its ``counted_by`` opens with this.
PROVIDER_COUNTED = "provider: "


def identity_sha256(identity: Mapping[str, Any]) -> str:
    """A run identity's fingerprint, which every record carries: a reader can tell a record that
    another run wrote (a folder reused by hand, a file copied in) from one of its own."""
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class TokenizerIdentity:
    name: str
    sha256: str  # a hash of the vocabulary: two tokenizers of one name may differ


@dataclass(frozen=True)
class BackendIdentity:
    name: str
    settings: dict[str, Any]  # as the backend resolved them, its defaults included


@dataclass(frozen=True)
class _IdentityJson:
    """The identity's JSON form, as ``read`` checks it."""

    spec: RunSpec
    tokenizer: TokenizerIdentity
    task: dict[str, Any]  # the task's own identity: its version, hashes of its corpus and template
    backend: BackendIdentity
    # Schema 4: the version of the scoring method the spec names (or the task chose, where it names
    # none), where it has one (fathom.scoring.SCORING_VERSIONS): a run graded the old way does not
    # resume under the new.
    scoring: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Identity(_IdentityJson):
    """What decides a run's prompts and answers: a run resumes, and two runs compare, only where it
    matches. ``written`` is its JSON as written, which its fingerprint and the match are taken over:
    the typed fields written anew need not give it back (a spec from an older fathom lacks keys
    added since, or holds a default since changed)."""

    written: dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, data: Any) -> Identity:
        parts = read(_IdentityJson, data)
        # As it reads back from the file (tuples as lists), so a new run's matches a written one's.
        return cls(**vars(parts), written=json.loads(json.dumps(data)))

    @property
    def fingerprint(self) -> str:
        return identity_sha256(self.written)


@dataclass(frozen=True)
class Served:
    """How the backend served the run: what it read, whether prompt lengths are exact, its trained
    window and its limit on prompt and new tokens (None: unknown, or none)."""

    input: str | None = None  # "ids", "text" or "chat"; None in the first manifests
    exact_lengths: bool = True
    trained_window: int | None = None
    max_prompt_tokens: int | None = None
    # Schema 4: the backend's transport settings (``Tuned.transport_settings``), outside the identity:
    # those of the run's first start; a resume with others is listed in ``Manifest.resumes``.
    transport: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, data: Any) -> Served:
        # The first manifests said "accepts_ids" where "input" came to say more; its one key that
        # no longer means anything, left out rather than refused.
        if isinstance(data, dict):
            data = {key: value for key, value in data.items() if key != "accepts_ids"}
        return read(cls, data)


@dataclass(frozen=True)
class Environment:
    """Where the run was made. Every field is None in manifests from before fathom recorded it."""

    fathom_version: str | None = None
    git_sha: str | None = None
    git_dirty: bool | None = None  # the package's files differ from git_sha's (None: no git checkout)
    python: str | None = None
    platform: str | None = None
    host: str | None = None
    created: str | None = None  # ISO 8601, UTC
    # Real models' greedy answers depend on the arithmetic: the CPU (model, SIMD flags, cores) and
    # the backend's build decide near-ties, so these say where a run can be repeated.
    cpu: dict[str, Any] | None = None
    backend_build: dict[str, Any] | None = None

    def differences(self, other: Environment) -> list[str]:
        """The fields in which ``other`` differs from this environment, but for the time: where none
        does, it is the same machine and software."""
        return [
            f.name for f in dataclasses.fields(self)
            if f.name != "created" and getattr(self, f.name) != getattr(other, f.name)
        ]  # fmt: skip


@dataclass(frozen=True)
class Start:
    """A start of the run: the records written before it (in the order of samples.jsonl, damaged
    lines aside), where it ran, and the backend's transport settings. The manifest lists the first
    start in its own sections and (schema 5) each resume that differs from the start before it."""

    records_before: int
    environment: Environment
    transport: dict[str, Any] = field(default_factory=dict)

    def differences(self, earlier: Start) -> list[str]:
        """What differs from ``earlier``: the environment's fields but the time, and "transport"."""
        return [
            *earlier.environment.differences(self.environment),
            *["transport"] * (earlier.transport != self.transport),
        ]


@dataclass(frozen=True)
class JudgeIdentity:
    """An LLM judge of the run's answers (schema 3), as ``fathom judge`` used it: which of the run's
    judges it was, its backend and settings, their fingerprint (which its judgements carry), its
    family as far as fathom can tell, the family of the model under test beside it, and the rubric."""

    role: str  # "judge" or "judge2"
    name: str  # as named, e.g. llamacpp:gemma3-270m
    settings: dict[str, Any]
    identity: str
    family: str | None
    tested_family: str | None
    rubric: str  # name@version
    rubric_sha256: str
    rubric_kind: str  # "binary" or "ordinal"
    scale: tuple[int, ...]
    passing: int  # the rubric's least score that counts as correct


@dataclass(frozen=True)
class Manifest:
    """manifest.json: the run's identity, how many samples complete it, the backend as served, and
    where the run was made."""

    identity: Identity
    # Outside the identity, which decides whether a run resumes: how many samples make the run
    # complete, so 'fathom runs' can tell a partial run without rebuilding its task. None in
    # manifests from before fathom recorded it.
    planned: int | None = None
    backend: Served = field(default_factory=Served)
    environment: Environment = field(default_factory=Environment)
    # Schema 2: the corpora the haystacks are cut from (name, source, licence, units, tokens in the
    # run's tokenizer, sha256), where the task says; outside the identity, which holds their hashes.
    corpora: tuple[dict[str, Any], ...] = ()
    # Schema 3: the LLM judges of its answers, outside the identity (judging changes no answer).
    judges: tuple[JudgeIdentity, ...] = ()
    # Schema 5: the resumes that ran elsewhere, or with other transport settings, than the start
    # before them (``resumed_by``); a real model's answers can differ between machines and builds.
    resumes: tuple[Start, ...] = ()
    # Schema 6: the run's labels (``--label step=1200``): which checkpoint of a training run made it,
    # for ``fathom series``. Outside the identity, so checkpoints' runs still compare; a resume keeps
    # them (``fathom.run.store`` refuses one with other labels).
    labels: dict[str, str] = field(default_factory=dict)
    schema: int = MANIFEST_SCHEMA

    def __post_init__(self) -> None:
        # Read as a dict alone (``schemas.read``): a label is text, which orders and prints as such.
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in self.labels.items()):
            raise TypeError("field 'labels' is not an object of text labels")

    @property
    def spec(self) -> RunSpec:
        return self.identity.spec

    @property
    def provider_counted(self) -> str | None:
        """The backend's ``counted_by`` where its records' lengths are its provider's counts, else None."""
        counted = self.identity.backend.settings.get("counted_by")
        return counted if isinstance(counted, str) and counted.startswith(PROVIDER_COUNTED) else None

    def to_json(self) -> dict[str, Any]:
        data = {
            "schema": self.schema,
            "identity": self.identity.written,
            "backend": dataclasses.asdict(self.backend),
            "environment": dataclasses.asdict(self.environment),
        }
        if self.corpora:
            data["corpora"] = list(self.corpora)
        if self.judges:
            data["judges"] = [dataclasses.asdict(judge) for judge in self.judges]
        if self.resumes:
            data["resumes"] = [dataclasses.asdict(resume) for resume in self.resumes]
        if self.labels:
            data["labels"] = dict(self.labels)
        return data if self.planned is None else data | {"planned": self.planned}

    @classmethod
    def from_json(cls, data: Any) -> Manifest:
        """NewerSchemaError for a manifest of a newer fathom; TypeError (or the spec's own error) for
        JSON that is no manifest."""
        if not isinstance(data, dict):
            raise TypeError(f"a JSON {type(data).__name__}, not an object")
        return read(cls, MANIFESTS.upgrade(data))

    def judged_by(self, judge: JudgeIdentity) -> Manifest:
        """This manifest with ``judge`` listed, in place of an entry of the same role and rubric."""
        kept = tuple(j for j in self.judges if (j.role, j.rubric_sha256) != (judge.role, judge.rubric_sha256))
        return dataclasses.replace(self, judges=(*kept, judge))

    def completed_by(self, newer: Manifest) -> Manifest:
        """This manifest with what a manifest from an older fathom lacks taken from ``newer`` (a
        resume's, of the same identity), and only that: what it says about the run stays."""
        return self if self.planned is not None else dataclasses.replace(self, planned=newer.planned)

    def resumed_by(self, resume: Start) -> Manifest:
        """This manifest with ``resume`` (a later start of the same run) listed: the run folder lists
        the resumes that differ from the latest start (``Start.differences``)."""
        return dataclasses.replace(self, resumes=(*self.resumes, resume))

    def labelled(self, labels: Mapping[str, str]) -> Manifest:
        """This manifest with ``labels`` in place of its own."""
        return dataclasses.replace(self, labels=dict(labels))

    def starts(self) -> list[Start]:
        """The run's starts that the manifest holds: the first, then the resumes it lists."""
        return [Start(0, self.environment, self.backend.transport), *self.resumes]


def v1_to_v2(data: dict[str, Any]) -> dict[str, Any]:
    """Schema 2 lists the run's corpora; a manifest of schema 1 has none (read as absent)."""
    if "corpora" in data:
        raise TypeError("unknown field 'corpora' (a field of schema 2, in a manifest of schema 1)")
    return data


def v2_to_v3(data: dict[str, Any]) -> dict[str, Any]:
    """Schema 3 lists the run's LLM judges; a manifest of schema 2 has none (read as absent)."""
    if "judges" in data:
        raise TypeError("unknown field 'judges' (a field of schema 3, in a manifest of schema 2)")
    return data


def v3_to_v4(data: dict[str, Any]) -> dict[str, Any]:
    """Schema 4's identity names the version of a versioned scoring method, and its backend section
    the backend's transport settings (``Served.transport``); one of schema 3 has neither."""
    identity = data.get("identity")
    if isinstance(identity, dict) and "scoring" in identity:
        raise TypeError("unknown field 'scoring' (a field of schema 4, in a manifest of schema 3)")
    return data


def v4_to_v5(data: dict[str, Any]) -> dict[str, Any]:
    """Schema 5 lists the resumes made elsewhere (``Manifest.resumes``); one of schema 4 has none (a
    resume kept the manifest it found, so its records may come from more than the one machine)."""
    if "resumes" in data:
        raise TypeError("unknown field 'resumes' (a field of schema 5, in a manifest of schema 4)")
    return data


def v5_to_v6(data: dict[str, Any]) -> dict[str, Any]:
    """Schema 6 holds the run's labels (``Manifest.labels``); one of schema 5 has none."""
    if "labels" in data:
        raise TypeError("unknown field 'labels' (a field of schema 6, in a manifest of schema 5)")
    return data


MANIFESTS = Versions("manifest", MANIFEST_SCHEMA, (v1_to_v2, v2_to_v3, v3_to_v4, v4_to_v5, v5_to_v6))
