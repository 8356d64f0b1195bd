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
supporting facts are), looked for as names; their objects are ordinary nouns, not compared; and
mrcr's conversations: their made-up places, drawn again from each record's seed and cell, and the
random prefix its answer opens with (the pieces themselves are the corpus's, as every haystack is).

Compared within their own family only: what RULER's cwe, fwe and qa and the long outputs drew are
ordinary words, facts and five-digit numbers, which any haystack may hold, so each is looked for
in the export's lines of its own task (``meta.task``; a line without one is searched for all of
them), and there outside the task's own prompt words: cwe's ten common words and fwe's three coded
words (the answers), qa's question whole and the openings of its gold documents (where RULER's data
files are here to find them), and listing's matching ids and the user and action its question names
(``user=alice``). Not compared: the sf needle (one published sentence, never
exported) and state's lists of small numbers (an export's act on other lists, of three-digit
values: ``tasks/state.py``'s TRAIN_LISTS).
"""

from __future__ import annotations

import functools
import json
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from fathom.errors import CorpusError
from fathom.export.examples import ExportError
from fathom.prompts import log_records as logs
from fathom.prompts.latent import LatentItem, load_items
from fathom.prompts.needle_sets import LATENT_KINDS, PLURAL_QUESTIONS
from fathom.prompts.needles import KEYED_NEEDLES
from fathom.records import SampleRecord
from fathom.run.lines import MAX_LINE_BYTES, Overlong, bounded_lines
from fathom.run.store import RunFolder
from fathom.scoring import MRCR_PREFIX_CHARS
from fathom.tasks import babi, listing, mrcr
from fathom.tasks.niah import NiahTask
from fathom.tasks.ruler.catalogue import FAMILIES, VARIANTS
from fathom.tasks.ruler.qa_data import configured_path, load_dataset

VALUE, KEY, NAME, ANCHOR, WORD, QUESTION, DOCUMENT = (
    "value", "key", "name", "anchor", "word", "question", "document"
)  # fmt: skip
# A qa item's gold document is looked for by its opening: so many words (a HotpotQA one's title first).
OPENING = 12
# NIAH kinds whose questions name an adjective-noun key, and those that name a made-up person.
_KEYED = (*KEYED_NEEDLES, "split")
_PEOPLE = ("fact", "chain")
# RULER's synthetic needles: the kinds whose answers no text holds by chance.
_RULER_KEYED = ("numbers", "uuids")
_RULER_VARIABLES = "variables"
# The families compared within their own lines: RULER's (by task name) and the long outputs.
_SCOPED = ("cwe", "fwe", "qa_1", "qa_2", listing.TASK)
# RULER's prompt words of those, taken out of their lines before looking: cwe's ask for the ten most
# "common" words of the "list", words that RULER's word lists hold and a cwe answer may be.
_PROMPT_WORDS = {
    name: tuple(
        piece.strip()
        for text in (FAMILIES[VARIANTS[name].family].template, FAMILIES[VARIANTS[name].family].answer_prefix)
        for piece in re.split(r"\{\w+\}", text)
        if piece.strip()
    )
    for name in ("cwe", "fwe")
}
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

    kind: str  # VALUE, KEY, NAME, ANCHOR, WORD or QUESTION
    text: str
    run: Path
    sample_id: str
    scope: str | None = None  # the family whose exported lines alone are searched (None: all lines)


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
    skipped: int  # the records with nothing to look for (sf; state's small numbers)
    drawn: int  # the distinct things looked for
    overlaps: tuple[Overlap, ...]


def check_export(export: Path, runs: Iterable[Path]) -> CheckResult:
    """Every value, key, name and anchor of ``runs``' records that ``export`` holds."""
    folders = tuple(runs)
    items = load_items()
    drawn: dict[tuple[str, str, str | None], Drawn] = {}
    compared = skipped = 0
    for folder in folders:
        run = RunFolder(folder)
        run.read_manifest()  # a folder that is no run folder is an error, not a run without records
        for record in run.records():
            # Perplexity records hold a stretch of the corpus, nothing drawn; a control repeats its
            # sample's question and answers, and holds no needles to tell keys by.
            if not isinstance(record, SampleRecord) or record.control:
                continue
            scope = _scope(record.task)
            terms = _family_terms(record) if scope else _record_terms(record, items)
            found = [(kind, text, scope) for kind, text in terms]
            compared, skipped = (compared + 1, skipped) if found else (compared, skipped + 1)
            for kind, text, where in found:
                drawn.setdefault((kind, text, where), Drawn(kind, text, folder, record.sample_id, where))
    everywhere = _Index(d for d in drawn.values() if d.scope is None)
    scoped = {name: _Index(d for d in drawn.values() if d.scope == name) for name in _SCOPED}
    hits: dict[Drawn, list[tuple[int, str]]] = {}
    examples = 0
    for number, task, messages in _read_export(export):
        examples += 1
        # A line without a task (no meta) is searched for every family's things.
        families = _SCOPED if task is None else [name for name in (_scope(task),) if name]
        for role, content in messages:
            shared_here = list(everywhere.find(content))
            for name in families:
                shared_here += scoped[name].find(_without_prompt_words(content, name))
            for shared in shared_here:
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
    elif record.task.startswith(mrcr.TASK + ":"):
        # The conversation's made-up places, drawn again as its prompt drew them, and its prefix.
        _, topics = mrcr.topics_of(record.seed, record.task, record.length, record.sample)
        yield from ((NAME, topic) for topic in topics)
        yield from ((VALUE, answer[:MRCR_PREFIX_CHARS]) for answer in record.answers)


def _scope(task: str) -> str | None:
    """The family a record's or an exported line's task is compared within, or None (everywhere)."""
    name = task.split(":", 1)[0]
    return name if name in _SCOPED else None


def _family_terms(record: SampleRecord) -> Iterator[tuple[str, str]]:
    """What a record of a family compared within its own lines drew: cwe's and fwe's answers; qa's
    question; listing's matching ids and its condition's user and action (``user=alice``)."""
    if record.task.startswith("qa"):
        yield QUESTION, record.question
        dataset = VARIANTS[record.task].params["dataset"]
        yield from ((DOCUMENT, opening) for opening in _gold_openings(dataset).get(record.question, ()))
    elif record.task.startswith(listing.TASK):
        yield from ((VALUE, ident) for ident in record.answers)
        condition = logs.asked(record.question)
        yield from ((NAME, field.strip()) for field in (condition or "").split("|") if field.strip())
    else:
        yield from ((WORD, word) for word in record.answers if word)


@functools.cache
def _gold_openings(dataset: str) -> dict[str, tuple[str, ...]]:
    """Each question of a QA dataset, and the openings of its gold documents (the topic it asks
    about); none where RULER's data files are not here (the questions alone are then compared)."""
    try:
        data = load_dataset(dataset, configured_path(dataset))
    except CorpusError:
        return {}
    openings: dict[str, tuple[str, ...]] = {}
    for item in data.items:
        found = (" ".join(_WORD.findall(data.documents[d])[:OPENING]) for d in item.gold)
        openings[item.question] = tuple(dict.fromkeys((*openings.get(item.question, ()), *found)))
    return openings


def _without_prompt_words(content: str, name: str) -> str:
    """``content`` without RULER's prompt words of the family ``name`` (none for the others)."""
    for piece in _PROMPT_WORDS.get(name, ()):
        content = content.replace(piece, " ")
    return content


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


def _read_export(path: Path) -> Iterator[tuple[int, str | None, list[tuple[str, str]]]]:
    """Each line's number, its task (``meta.task``; None without one) and its messages as (role,
    content)."""
    with path.open("rb") as stream:  # decoded line by line, so that a line not in UTF-8 is named
        # An export may come from someone else: no line is held longer than a record can be.
        for number, raw in enumerate(bounded_lines(stream), 1):
            if isinstance(raw, Overlong):
                raise ExportError(
                    f"{path} line {number} is {raw.size:,} bytes, longer than any example fathom "
                    f"writes ({MAX_LINE_BYTES:,}): give the JSONL file fathom export wrote"
                )
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
                reason = f"{type(exc).__name__}: {exc}"  # each of these three always says why
                raise ExportError(
                    f"{path} line {number} is not an exported example ({reason:.80}): "
                    "each line must be a JSON object with a 'messages' list of {role, content}"
                ) from None
            if not all(isinstance(content, str) for _, content in messages):
                raise ExportError(f"{path} line {number} is not an exported example: a content is no text")
            meta = data.get("meta")
            task = meta.get("task") if isinstance(meta, dict) else None
            yield number, task if isinstance(task, str) else None, messages


def check_text(result: CheckResult, most: int = 50) -> list[str]:
    """The check's outcome as lines: the verdict, then each overlap (``most`` of them)."""
    where = f"{result.examples} examples of {result.export}"
    runs = f"{result.records} records of {len(result.runs)} run folder(s)"
    skipped = (
        f"; {result.skipped} records with nothing to look for (sf's published sentence, state's small "
        "numbers, qa_synth) not compared"
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
