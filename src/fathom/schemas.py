"""The versioned JSON forms of a run folder: each one's current schema, and how older ones are read.

A run folder outlives the fathom that wrote it, so each form it holds (a line of samples.jsonl, the
manifest, summary.json) carries ``schema``, the version of its form. A reader brings an older form up
to date through named steps, one per version (``v1_to_v2``, ``v2_to_v3``, ...), and refuses a newer
one (``NewerSchemaError``): an older fathom cannot know what a newer one's fields mean, and dropping
them would misread the run. Within a version it knows, a reader refuses keys that no fathom wrote in
that version (``read``), for the same reason.

To add a version of a form: bump its number here, append its step to the form's ``Versions``
(``fathom.record_versions``, ``fathom.manifest``, ``fathom.analysis.summary``) and, for records, add a run
folder written by the fathom that introduces it to ``tests/fixtures/records-vN`` (``tests/test_schema.py``
asks for one of every version, and reads each to the summary its own fathom wrote).
"""

from __future__ import annotations

import dataclasses
import functools
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import NoneType, UnionType
from typing import Any, TypeVar

from fathom.errors import NewerSchemaError

# 1: the first records. 2: depth may be None (tasks that draw depths at random), several needles per
# sample, max_new_tokens. 3: the gold answer's teacher-forced log-probabilities; perplexity records
# beside sample records. 4: every record carries its run's identity fingerprint; answers over
# ANSWER_BYTES are cut there. 5: NIAH's hard needles: each needle's role and value, the distractors'
# values an answer holds, the haystack's offset, redraws, and the needles' similarity and overlap.
# 6: real suites' samples: the item's id and splits, the prompt's tokens before the suite's middle
# truncation and whether it was cut. 7: the backend's prefill and decode seconds, where it reports them.
# 8: what came first of the answer (forced, unforced, or the end: stopped before any token), the answer
# ``exact`` took out of a chatty output, and RULER's multi-key answers' other keys' values (``lured``).
# 9: the closed-book probe of a low-overlap item (a record of its own kind: ``probe``), and the items a
# low-overlap sample's gold needles are of (``latent_items``). 10: the odd-name reader's grade on a
# low-overlap sample's prompt (``odd_name_score``), the shortcut baseline beside its score. 11: the
# near neighbours of a low-overlap sample's places that its window names (``literal_neighbours``).
# 12: each low-overlap gold needle's form: its relation, order and question template (``needle_forms``).
# 13: a thinking model's reasoning kept apart from its answer: its tokens (``reasoning_tokens``), and
# its text where the run was asked to keep it (``reasoning``).
RECORD_SCHEMA = 13
# 1: the manifest as written since the first run (sections added since read as absent). 2: the
# corpora the prompts are cut from, with their source, licence, size in tokens and hash. 3: the LLM
# judges of the run's answers, with their rubrics. 4: the identity names the version of the scoring
# method the spec names, where it has one (``exact`` 2 takes the answer out of a chatty output).
# 5: the resumes made on another machine or build, or with other transport settings, than the start
# before them, each with the count of records written before it. 6: the run's labels (``--label
# step=1200``), outside the identity: which checkpoint of a training run it is, for ``fathom series``.
MANIFEST_SCHEMA = 6
# 1: summary.json without a schema, and without a kind for NIAH's grid. 2: both, and error kinds in
# every summary. 3: NIAH's variants (domains, literal twins) and hard-needle sections, where a run has
# them; cells with the needles' similarity to their corpus. 4: the real suites' section (scores by
# actual length, truncation, splits) in a suite run's summary. 5: the LLM judges' sections (scores,
# agreement between judges and with the metric, disagreements), where the run was judged; a suite
# run's scores by task (``suites.by_task``) and its mean over tasks (``suites.mean``); the samples far
# slower per token than their task's others at their length (``slow``). 6: the low-overlap scores by
# the needles' form (``hard.forms``) and apart where a window names a near neighbour of the place
# (``hard.neighbours``). 7: NIAH's effective length at the worst depth (``effective_length.worst_depth``),
# and RULER's four categories, each one's mean over its tasks per length (``categories``). 8: a thinking
# model's reasoning tokens per cell and its samples still thinking (``thinking``); and, added to 8
# before any release wrote it, how close a provider's counts of the prompts came to their target
# lengths (``provider_counts``), where the backend's provider counted them. 9: the 95% interval of
# fewer than 30 fractional scores (an F1, a similarity) is Wilson's of their mean, not the percentile
# bootstrap (``analysis.stats.BOOTSTRAP_LEAST``): a summary of 8 keeps the intervals its fathom wrote.
SUMMARY_SCHEMA = 9
# 1: an LLM judge's verdicts (judgements.jsonl), the first form.
JUDGEMENT_SCHEMA = 1
# 1: a judge's result on a qualification set (qualifications.jsonl), the first form.
QUALIFICATION_SCHEMA = 1

Step = Callable[[dict[str, Any]], dict[str, Any]]
T = TypeVar("T")


@dataclass(frozen=True)
class Versions:
    """One versioned form: its name in messages, its current schema, and ``steps``, where
    ``steps[i]`` turns version i + 1 into version i + 2."""

    what: str
    current: int
    steps: tuple[Step, ...]

    def __post_init__(self) -> None:
        # A schema bumped without its step would read older forms as if they were current.
        if len(self.steps) != self.current - 1:
            raise ValueError(f"{self.what} schema {self.current} needs {self.current - 1} upgrade steps")

    def upgrade(self, data: Mapping[str, Any]) -> dict[str, Any]:
        """``data`` in the current version's form; a form without ``schema`` is version 1."""
        version = data.get("schema", 1)
        if type(version) is not int or version < 1:
            raise TypeError(f"field 'schema' is {version!r:.40}, not a version number")
        if version > self.current:
            raise NewerSchemaError(self.what, version, self.current)
        upgraded = dict(data)
        try:
            for step in self.steps[version - 1 :]:
                upgraded = step(upgraded)
        except KeyError as exc:  # a step finds a field missing that every form of its version holds
            raise TypeError(f"no field {exc} (a {self.what} of schema {version} has one)") from None
        upgraded["schema"] = self.current
        return upgraded


def read(cls: type[T], data: object) -> T:
    """The dataclass ``cls`` from its JSON form: each field checked against its annotation (``str``,
    ``int``, ``float``, ``bool``, ``X | None``, ``tuple[X, ...]``, ``dict[...]``, ``Any``, or a
    dataclass, read by its own ``from_json`` where it has one), lists as tuples. A wrong type, a
    missing field or a key that is no field is a TypeError: JSON that is no such object is found
    here, never later, in the analysis."""
    if not isinstance(data, dict):
        raise TypeError(f"a JSON {type(data).__name__}, not an object")
    hints, required = _fields(typing.cast(type, cls))
    unknown, missing = sorted(data.keys() - hints.keys()), [n for n in required if n not in data]
    if unknown or missing:
        raise TypeError(f"unknown field '{unknown[0]}'" if unknown else f"no field '{missing[0]}'")
    return cls(**{name: _value(name, value, hints[name]) for name, value in data.items()})


@functools.cache
def _fields(cls: type) -> tuple[dict[str, Any], tuple[str, ...]]:
    """Each field's annotation, and the fields without a default."""
    hints = typing.get_type_hints(cls)
    fields = dataclasses.fields(cls)
    no_default = dataclasses.MISSING
    required = tuple(f.name for f in fields if f.default is no_default and f.default_factory is no_default)
    return {f.name: hints[f.name] for f in fields}, required


_SCALARS: dict[Any, tuple[type, ...]] = {
    str: (str,),
    int: (int,),
    float: (float, int),
    bool: (bool,),
    NoneType: (NoneType,),
}


def _value(name: str, value: Any, hint: Any) -> Any:
    # Exact types, as JSON reads them: JSON true is no number, though Python's bool is an int.
    if hint in _SCALARS:
        if type(value) in _SCALARS[hint]:
            return value
    elif hint is Any:
        return value
    elif isinstance(hint, UnionType):
        if value is None and NoneType in hint.__args__:
            return None
        for arm in hint.__args__:
            try:
                return _value(name, value, arm)
            except TypeError:
                continue
    elif typing.get_origin(hint) is tuple:
        if isinstance(value, list | tuple):
            item = typing.get_args(hint)[0]
            if item not in _SCALARS:
                return tuple(_value(name, x, item) for x in value)
            # In one pass: a perplexity document holds thousands of log-probabilities.
            if all(type(x) in _SCALARS[item] for x in value):
                return tuple(value)
    elif typing.get_origin(hint) is dict:
        if isinstance(value, dict):
            return value
    elif dataclasses.is_dataclass(hint) or hasattr(hint, "from_json"):
        reader = getattr(hint, "from_json", None)  # a form with its own reader: a spec, an identity, Floats
        return read(typing.cast(type, hint), value) if reader is None else reader(value)
    raise TypeError(f"field '{name}' is {value!r:.40}, not {_name(hint)}")


def _name(hint: Any) -> str:
    """An annotation as written: ``int``, ``tuple[float, ...]``, ``str | None``."""
    return hint.__name__ if isinstance(hint, type) and not typing.get_args(hint) else str(hint)
