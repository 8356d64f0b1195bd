"""Does an export share anything with evaluation runs? Read both and look.

The training space is disjoint from evaluation's by construction (``prompts/spaces.py``); this
check does not take that on trust. From every record of the given run folders it collects what
evaluation drew (answers and needle values; the adjective-noun keys its questions ask about, and
the distractors' keys; the made-up people they name, and the distractors' people; the low-overlap
items' anchors), and looks for each, as whole words and with its case, in every message of every
exported line. A key is looked for as its needle writes it, hyphen and all (``amber-anchor``): its
two words apart are ordinary prose ("a little window" is no ``little-window``), which any haystack
holds, and a passphrase is drawn from training's own words, none of them a key's.

Compared: NIAH records of fathom's generated needle kinds, RULER's synthetic needles (numbers,
UUIDs, variable names), and babi's stories: their people and places, each record's story drawn
again from its seed and cell as the prompt drew it (``tasks.babi.story_of``, as the report's
supporting facts are), looked for as names; their objects are ordinary nouns, not compared. Not
compared: the sf needle (one published sentence, never exported), RULER's tasks whose answers are
ordinary words or facts (cwe, fwe, qa), which any haystack holds, and state's lists of small
numbers (an export's act on other lists, of three-digit values: ``tasks/state.py``'s TRAIN_LISTS).
"""

from __future__ import annotations

import functools
import json
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from fathom.export.examples import ExportError
from fathom.prompts.latent import LatentItem, load_items
from fathom.prompts.needle_sets import LATENT_KINDS, PLURAL_QUESTIONS
from fathom.prompts.needles import KEYED_NEEDLES
from fathom.records import SampleRecord
from fathom.run.store import RunFolder
from fathom.tasks import babi
from fathom.tasks.niah import NiahTask

VALUE, KEY, NAME, ANCHOR = "value", "key", "name", "anchor"
# NIAH kinds whose questions name an adjective-noun key, and those that name a made-up person.
_KEYED = (*KEYED_NEEDLES, "split")
_PEOPLE = ("fact", "chain")
# RULER's synthetic needles: the kinds whose answers no text holds by chance.
_RULER_KEYED = ("numbers", "uuids")
_RULER_VARIABLES = "variables"
# Words, hyphenated ones whole: a UUID is one word, so its digit groups never match a 4-digit code.
_WORD = re.compile(r"[^\W_]+(?:-[^\W_]+)*")
_COMPOUND = re.compile(r"\b[a-z]+(?:-[a-z]+)+\b")
_CAPITALISED = re.compile(r"\b[A-Z][a-z]+(?: [A-Z][a-z]+)*")
# The compounds the question templates hold themselves ("two-word"): no key, in every question.
_TEMPLATE_COMPOUNDS = frozenset(
    compound
    for template in (*PLURAL_QUESTIONS.values(), *(keyed.question for keyed in KEYED_NEEDLES.values()))
    for compound in _COMPOUND.findall(template)
)


@dataclass(frozen=True)
class Drawn:
    """One thing evaluation drew, and the first record it was found in."""

    kind: str  # VALUE, KEY, NAME or ANCHOR
    text: str
    run: Path
    sample_id: str


@dataclass(frozen=True)
class Overlap:
    """A thing evaluation drew, found in the export: in which lines, and in which message there."""

    drawn: Drawn
    lines: tuple[tuple[int, str], ...]  # (line number, role)


@dataclass(frozen=True)
class CheckResult:
    export: Path
    examples: int
    runs: tuple[Path, ...]
    records: int  # the records compared
    skipped: int  # the records whose answers are ordinary words (RULER's cwe, fwe, qa; sf)
    drawn: int  # the distinct things looked for
    overlaps: tuple[Overlap, ...]


def check_export(export: Path, runs: Iterable[Path]) -> CheckResult:
    """Every value, key, name and anchor of ``runs``' records that ``export`` holds."""
    folders = tuple(runs)
    items = load_items()
    drawn: dict[tuple[str, str], Drawn] = {}
    compared = skipped = 0
    for folder in folders:
        run = RunFolder(folder)
        run.read_manifest()  # a folder that is no run folder is an error, not a run without records
        for record in run.records():
            # Perplexity records hold a stretch of the corpus, nothing drawn; a control repeats its
            # sample's question and answers, and holds no needles to tell keys by.
            if not isinstance(record, SampleRecord) or record.control:
                continue
            found = list(_record_terms(record, items))
            compared, skipped = (compared + 1, skipped) if found else (compared, skipped + 1)
            for kind, text in found:
                drawn.setdefault((kind, text), Drawn(kind, text, folder, record.sample_id))
    index = _Index(drawn.values())
    hits: dict[Drawn, list[tuple[int, str]]] = {}
    examples = 0
    for number, messages in _read_export(export):
        examples += 1
        for role, content in messages:
            for shared in index.find(content):
                places = hits.setdefault(shared, [])
                if (number, role) not in places:
                    places.append((number, role))
    overlaps = tuple(Overlap(d, tuple(lines)) for d, lines in hits.items())
    return CheckResult(export, examples, folders, compared, skipped, len(drawn), overlaps)


def _record_terms(record: SampleRecord, items: tuple[LatentItem, ...]) -> Iterator[tuple[str, str]]:
    """What a record's sample drew, by kind; nothing for a record whose answers are ordinary words."""
    kind, question = record.needle_kind, record.question
    context = " ".join(record.needle_context or ())
    niah = record.task == NiahTask.name or record.task.startswith(NiahTask.name + ":")
    if niah and kind != "sf":
        yield from ((VALUE, v) for v in (*record.answers, *record.needle_values) if v)
        stating = list(_stating(context, record.needle_values))
        if kind in _KEYED:
            # The question's compounds but the template's own, and of those, where the needles'
            # context was recorded, the ones they state; and the keys of the distractors' sentences
            # (a near key: "... for brave-helmet is" beside the gold's brave-signal).
            keys = [c for c in _COMPOUND.findall(question) if c not in _TEMPLATE_COMPOUNDS]
            yield from ((KEY, c) for c in keys if not context or c in context)
            stated = {c for sentence in stating for c in _COMPOUND.findall(sentence)}
            yield from ((KEY, c) for c in sorted(stated - _TEMPLATE_COMPOUNDS - set(keys)))
        elif kind in _PEOPLE:
            # The people it names: capitalised runs after its first word ("In which town did ...");
            # and the distractors' people, who keep a name of theirs (the surname, or the person).
            names = [m.group() for m in _CAPITALISED.finditer(question) if m.start()]
            yield from ((NAME, n) for n in names)
            parts = {part for name in names for part in name.split()}
            stated = {m.group() for sentence in stating for m in _CAPITALISED.finditer(sentence)}
            yield from ((NAME, n) for n in sorted(stated - set(names)) if parts & set(n.split()))
        elif kind in LATENT_KINDS:
            yield from ((ANCHOR, item.key) for item in _anchored(record, items, context))
    elif not niah and kind in _RULER_KEYED:
        yield from ((VALUE, v) for v in record.answers if v)
        yield from ((KEY, k) for k in re.split(r",(?: and)? ", question) if k)
    elif not niah and kind == _RULER_VARIABLES:
        yield from ((VALUE, v) for v in (*record.answers, question) if v)
    elif record.task.startswith(babi.TASK + ":"):
        story = babi.story_of(record.seed, record.task, record.length, record.sample)
        yield from ((NAME, n) for n in dict.fromkeys((*record.answers, *story.people, *story.places)))


def _stating(context: str, values: Iterable[str]) -> Iterator[str]:
    """Each sentence of the recorded context that states one of ``values``, up to the value: a
    needle's own words before its value (a needle opens at a sentence's or a line's boundary)."""
    for value in values:
        at = context.find(value) if value else -1
        while at >= 0:
            yield context[max(context.rfind(". ", 0, at), context.rfind("\n", 0, at)) + 1 : at]
            at = context.find(value, at + 1)


def _anchored(record: SampleRecord, items: tuple[LatentItem, ...], context: str) -> list[LatentItem]:
    """The items of a low-overlap sample, distractors included: those whose needle, with one of the
    sample's names in it, is in the recorded context; without a context, the items its question
    alone identifies (several items may ask the same question: "Which character has been to Paris?")."""
    if context:
        names = [*record.answers, *record.needle_values]
        return [item for item in items if any(item.needle.replace("{name}", n) in context for n in names)]
    asked = _questions(items)
    return [
        item
        for item in items
        if any(q in record.question and asked[q] == 1 for q in (item.question, item.literal_question))
    ]


@functools.cache
def _questions(items: tuple[LatentItem, ...]) -> Counter[str]:
    """How many items ask each question."""
    return Counter(q for item in items for q in (item.question, item.literal_question))


class _Index:
    """The drawn things by their first word, to find them all in one pass over a text's words."""

    def __init__(self, drawn: Iterable[Drawn]) -> None:
        self._by_first: dict[str, list[tuple[tuple[str, ...], Drawn]]] = {}
        for d in drawn:
            words = tuple(_WORD.findall(d.text))
            if words:
                self._by_first.setdefault(words[0], []).append((words, d))

    def find(self, text: str) -> Iterator[Drawn]:
        words = _WORD.findall(text)
        for at, word in enumerate(words):
            for phrase, d in self._by_first.get(word, ()):
                if tuple(words[at : at + len(phrase)]) == phrase:
                    yield d


def _read_export(path: Path) -> Iterator[tuple[int, list[tuple[str, str]]]]:
    """Each line's number and its messages as (role, content)."""
    with path.open("rb") as stream:  # decoded line by line, so that a line not in UTF-8 is named
        for number, raw in enumerate(stream, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise ExportError(
                    f"{path} line {number} is not UTF-8 text: give the JSONL file fathom export wrote"
                ) from None
            if not line.strip():
                continue
            try:
                data = json.loads(line)
                messages = [(str(m["role"]), m["content"]) for m in data["messages"]]
            except (ValueError, KeyError, TypeError) as exc:
                reason = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
                raise ExportError(
                    f"{path} line {number} is not an exported example ({reason:.80}): "
                    "each line must be a JSON object with a 'messages' list of {role, content}"
                ) from None
            if not all(isinstance(content, str) for _, content in messages):
                raise ExportError(f"{path} line {number} is not an exported example: a content is no text")
            yield number, messages


def check_text(result: CheckResult, most: int = 50) -> list[str]:
    """The check's outcome as lines: the verdict, then each overlap (``most`` of them)."""
    where = f"{result.examples} examples of {result.export}"
    runs = f"{result.records} records of {len(result.runs)} run folder(s)"
    skipped = (
        f"; {result.skipped} records of ordinary-word or small-number answers (sf, RULER's cwe, fwe, qa; "
        "state) not compared"
        if result.skipped
        else ""
    )
    if not result.overlaps:
        return [
            f"no overlap: {where} share no value, key, name or anchor with {runs} ({result.drawn} "
            f"looked for{skipped})"
        ]
    lines = [f"{len(result.overlaps)} overlaps: {where} share these with {runs}{skipped}:"]
    for overlap in result.overlaps[:most]:
        d = overlap.drawn
        (first, role), more = overlap.lines[0], len(overlap.lines) - 1
        also = f" and {more} more line(s)" if more else ""
        lines.append(
            f"  {d.kind} '{d.text}' (from {d.run}, sample {d.sample_id}): export line {first} ({role}){also}"
        )
    if len(result.overlaps) > most:
        lines.append(f"  ... and {len(result.overlaps) - most} more")
    return lines
