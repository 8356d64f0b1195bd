"""One kind of named entry (task, backend, scoring method): fathom's own, and plugins' found by their
entry points, read without importing a plugin until one of its names is asked for or all are listed.
``fathom.registry`` says how a plugin's name is refused when it clashes."""

from __future__ import annotations

import difflib
import functools
import logging
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from typing import Generic, TypeVar

from fathom.backends.base import BackendEntry
from fathom.errors import SpecError
from fathom.scoring import ScoringEntry
from fathom.tasks.base import TaskEntry

_log = logging.getLogger(__name__)

EntryT = TypeVar("EntryT", TaskEntry, BackendEntry, ScoringEntry)
BUILT_IN = "fathom"


@dataclass(frozen=True)
class Listed(Generic[EntryT]):
    """An entry by name, and where it comes from: ``BUILT_IN``, or a plugin's package and version."""

    name: str
    origin: str
    entry: EntryT


@dataclass(frozen=True)
class Kind(Generic[EntryT]):
    """One kind of named entry: fathom's own in ``built_in``, plugins' in the entry-point ``group``."""

    noun: str
    group: str
    entry_type: type[EntryT]
    built_in: Mapping[str, EntryT]

    def names(self) -> list[str]:
        """Every name, fathom's first, read without importing any plugin."""
        return [*self.built_in, *(name for name in _claims(self.group) if name not in self.built_in)]

    def entry(self, name: str) -> EntryT:
        """The entry named ``name``; a SpecError if there is none, or if a plugin's cannot be used."""
        found = self.find(name)
        if found is None:
            names = self.names()
            raise SpecError(
                f"unknown {self.noun} '{name}'{close_match(name, names)}: use one of {', '.join(names)}"
            )
        return found

    def find(self, name: str) -> EntryT | None:
        """The entry named ``name``, None if no one has it, or a SpecError if a plugin's cannot be used."""
        if name in self.built_in:
            return self.built_in[name]
        claims = _claims(self.group).get(name, ())
        return self._plugin(claims) if claims else None

    def listed(self) -> list[Listed[EntryT]]:
        """Every entry that can be used, fathom's first; a plugin's that cannot is a warning."""
        found = [Listed(name, BUILT_IN, entry) for name, entry in self.built_in.items()]
        for name, claims in _claims(self.group).items():
            try:
                found.append(Listed(name, _origin(claims[0]), self._plugin(claims)))
            except SpecError as refused:
                _log.warning(str(refused))
        return found

    def warn_if_claimed(self, name: str) -> None:
        """A warning for each plugin that claims the name of one of fathom's own, which is used."""
        if name in self.built_in:
            for claim in _claims(self.group).get(name, ()):
                _log.warning(self._refusal(claim))

    def _plugin(self, claims: Sequence[EntryPoint]) -> EntryT:
        name = claims[0].name
        if name in self.built_in:
            raise SpecError(self._refusal(claims[0]))
        if len(claims) > 1:
            plugins = " and ".join(_origin(claim) for claim in claims)
            raise SpecError(
                f"{self.noun} '{name}' is claimed by the plugins {plugins}, so neither is used: "
                "uninstall one of them"
            )
        what = f"{self.noun} '{name}' of the plugin {_origin(claims[0])}"
        try:
            loaded = claims[0].load()
        except Exception as exc:  # a plugin may fail to import in any way; it must not take fathom down
            raise SpecError(
                f"{what} failed to load ({type(exc).__name__}: {exc}): fix or uninstall it"
            ) from exc
        if not isinstance(loaded, self.entry_type):
            raise SpecError(
                f"{what} loads {claims[0].value}, a {type(loaded).__name__}, not a "
                f"fathom.{self.entry_type.__name__}: fix or uninstall the plugin"
            )
        return loaded

    def _refusal(self, claim: EntryPoint) -> str:
        return (
            f"the plugin {_origin(claim)}'s {self.noun} '{claim.name}' is refused: fathom has one of "
            "that name, which it uses; the plugin must rename its entry point"
        )


def _claims(group: str) -> Mapping[str, tuple[EntryPoint, ...]]:
    """The plugins' names in ``group``, sorted, each with the entry points that claim it, read from
    the installed packages' metadata without importing any."""
    return _scan(group, tuple(sys.path))


@functools.lru_cache(maxsize=16)
def _scan(group: str, path: tuple[str, ...]) -> Mapping[str, tuple[EntryPoint, ...]]:
    # ``path`` is only the cache key: packages are found on sys.path, so a changed one is read afresh.
    claims: dict[str, list[EntryPoint]] = {}
    for claim in entry_points(group=group):
        claims.setdefault(claim.name, []).append(claim)
    return {name: tuple(claims[name]) for name in sorted(claims)}


def _origin(claim: EntryPoint) -> str:
    return f"{claim.dist.name} {claim.dist.version}" if claim.dist is not None else claim.value


def close_match(name: str, names: Sequence[str]) -> str:
    """An "unknown name" message's hint: the one of ``names`` close to ``name``, or nothing."""
    close = difflib.get_close_matches(name, names, n=1, cutoff=0.75)
    return f" (did you mean '{close[0]}'?)" if close else ""
