"""Needle in a haystack: needles at a chosen depth of a haystack of a chosen length.

One plain needle by default; hard needle sets on request (``prompts/needle_sets.py``). A run sweeps
*variants* beside lengths and depths: the haystack's domain (``--corpus code,prose``: one corpus a
variant) and, for low-overlap needles, the literal twin of every question (the same items, names and
haystack, asked in the needle's own words). Each variant's cells carry its own task name
(``niah:code``, ``niah:literal``); a run of one plain variant is plain ``niah`` as it always was.
Every variant of a cell draws the same needles, so variants compare sample by sample.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from fathom.errors import PromptError, SpecError
from fathom.prompts import PromptBuilder, PromptText, TooShort
from fathom.prompts.builder import Apart, Crowded, NeedleText
from fathom.prompts.haystack import Corpus, corpus_info, load_corpus, tokenize_corpus
from fathom.prompts.hygiene import MAX_REDRAWS, HaystackCheck, haystack_check
from fathom.prompts.latent import LATENT_VERSION, items_in, latent_kind
from fathom.prompts.latent_forms import FORMS_VERSION, Forms
from fathom.prompts.names import check_pool
from fathom.prompts.needle_checks import check_hardness, check_room
from fathom.prompts.needle_sets import (
    GOLD,
    LATENT_KINDS,
    PART,
    SPLIT_KINDS,
    Hardness,
    NeedleSet,
    needle_set,
)
from fathom.prompts.needle_styles import PROSE_STYLE, Indented, Style, style_for
from fathom.prompts.needles import needle_rng
from fathom.prompts.odd_names import odd_name_answer
from fathom.prompts.spaces import EVAL, Space
from fathom.prompts.split_needles import split_depths
from fathom.prompts.templates import resolve_template
from fathom.prompts.tokenizers import Tokenizer
from fathom.records import DISTRACTOR_ROLES, Cell
from fathom.spec import RunSpec
from fathom.tasks import probe
from fathom.tasks.base import Document, Sample
from fathom.tasks.latent_hygiene import Windows, held_places, literal_neighbours
from fathom.tasks.perplexity import PERPLEXITY, DocumentBuilder

# Bump when anything below or in the needle generators changes the prompts.
NIAH_VERSION = 1
NIAH_TEXT = PromptText(
    before=(
        "Below is a long document. Somewhere in it is a sentence that answers the question that "
        "follows the document. Read the whole document carefully.\n\n<document>\n"
    ),
    # The closing tag opens with a space: a newline would merge with a full stop ending the
    # haystack in BPE vocabularies (".\n" is one token), and the count would drift.
    after=" </document>\n\nQuestion: {question}\nAnswer in one short sentence, using only the document.",
    answer_prefix="Answer:",
)
# For needles that only answer together (several, or one in parts): the same words, in the plural.
NIAH_SEVERAL_TEXT = PromptText(
    before=(
        "Below is a long document. Somewhere in it are sentences that together answer the question "
        "that follows the document. Read the whole document carefully.\n\n<document>\n"
    ),
    after=" </document>\n\nQuestion: {question}\nAnswer in one short sentence, using only the document.",
    answer_prefix="Answer:",
)
# Bump when the needle sets' generators change what a hard sample holds (plain samples keep NIAH_VERSION).
# 2: distractors keep their gap from the gold needles on the boundaries used, not the depths asked.
# 3: low-overlap characters are named from a pool of real names (none the haystack holds), not made up.
# 4: low-overlap places are checked against the sample's windows, case and all, not the whole corpus,
# and drawn once for all of a run's corpora (tasks/latent_hygiene.py).
NEEDLE_SETS_VERSION = 4


# Where each sample's haystack starts: the corpus's start (every sample reads the same text, which a
# prefix cache reuses) or a boundary drawn per sample (k independent draws of haystack).
HAYSTACK_OFFSETS = ("start", "random")
LITERAL = "literal"  # the variant that asks low-overlap needles in the needle's own words


@dataclass(frozen=True, eq=False)
class Variant:
    """What one variant's cells read: a corpus, its prompt builder and checker, the needle kind
    its questions are asked in, and the style its keyed needles are written in."""

    task: str
    corpus: Corpus
    builder: PromptBuilder
    check: HaystackCheck
    needle_kind: str
    style: Style

    @property
    def lines(self) -> bool:
        """Whether the haystack has lines (code, markup, mixtures with them): a needle then ends its
        own line, so the code that follows it stays on a line of its own."""
        return self.corpus.units != "sentence"


def variant_task(domain: str | None, literal: bool) -> str:
    """``niah``, or ``niah:`` and the domain and/or ``literal`` joined by ``+``."""
    parts = [part for part in (domain, LITERAL if literal else None) if part]
    return f"{NiahTask.name}:{'+'.join(parts)}" if parts else NiahTask.name


class NiahTask:
    name = "niah"

    def __init__(self, spec: RunSpec, tokenizer: Tokenizer, space: Space = EVAL) -> None:
        self.spec = spec
        # What the needles are drawn from: evaluation's space, or (fathom export) the training one.
        self.space = space
        self.needle_kind = spec.needle or "number"
        latent_forms = Forms(spec.relations, spec.needle_orders, spec.question_templates)
        self.hardness = Hardness(
            spec.distractors,
            spec.needles,
            spec.split_distance,
            literal_distractor=spec.literal_distractor,
            forms=latent_forms,
        )
        check_room(self.needle_kind, self.hardness, min(spec.lengths))
        check_hardness(self.needle_kind, self.hardness, space)
        # Several needles are graded by the share found (all-or-nothing is that share being 1); a split
        # code's halves in the order asked.
        default = "share" if spec.needles > 1 else "ordered" if self.needle_kind == "split" else "contains"
        self.scoring = spec.scoring or default
        self.max_new_tokens = spec.max_new_tokens or 32
        self.template = resolve_template(spec.template, tokenizer)
        self.tokenizer = tokenizer
        self._windows = Windows(tokenizer)
        several = spec.needles > 1 or self.needle_kind in SPLIT_KINDS
        self.words = NIAH_SEVERAL_TEXT if several else NIAH_TEXT
        text = PromptText(self.words.before, self.words.after, self.words.answer_prefix, spec.system_prompt)
        domains = spec.domains or (spec.corpus or "prose",)
        if len(set(domains)) != len(domains):
            raise SpecError(f"--corpus names a corpus twice: {', '.join(domains)}")
        distance = self.hardness.split_distance
        if self.needle_kind in SPLIT_KINDS and distance is not None:
            for depth in spec.depths:  # every cell's parts must fit, before any sample runs
                split_depths(depth, distance)
        if spec.haystack_offset not in HAYSTACK_OFFSETS:
            raise SpecError(
                f"unknown haystack offset '{spec.haystack_offset}': use one of {', '.join(HAYSTACK_OFFSETS)}"
            )
        if spec.perplexity and len(domains) > 1:
            raise SpecError("--perplexity reads one corpus: give one --corpus, or run perplexity per domain")
        forms = [(self.needle_kind, False)]
        if self.needle_kind in LATENT_KINDS and not LATENT_KINDS[self.needle_kind][1]:
            forms.append((latent_kind(LATENT_KINDS[self.needle_kind][0], True), True))
        self.variants: dict[str, Variant] = {}
        for domain in domains:
            corpus = load_corpus(domain)
            builder = PromptBuilder(tokenizer, self.template, text, tokenize_corpus(corpus, tokenizer))
            check = haystack_check(corpus.whole_text)
            style = style_for(spec.needle_style, corpus.name)
            for kind, literal in forms:
                task = variant_task(domain if len(domains) > 1 else None, literal)
                self.variants[task] = Variant(task, corpus, builder, check, kind, style)
        if self.needle_kind in LATENT_KINDS:
            # The characters' names: none that a corpus of the run already holds, in any of its domains.
            checks = {v.corpus.name: v.check for v in self.variants.values()}.values()
            names = space.names.without(lambda name: any(check.mentions([name]) for check in checks))
            # Nor any item whose anchor one holds, gold or distractor: a needle's own words are its alone
            # (the export's check counts an evaluated anchor anywhere in training text as shared).
            named = frozenset(
                item.id for item in items_in(space.split) if any(c.mentions([item.key]) for c in checks)
            )
            self.space = dataclasses.replace(space, names=names, withheld=space.withheld | named)
            check_hardness(self.needle_kind, self.hardness, self.space)
            check_pool(self.space.names, self.hardness.needles, self.hardness.distractors, space.split)
        self.corpus = next(iter(self.variants.values())).corpus  # domains[0]'s, read once above
        # With --perplexity, documents of the same corpus at the same lengths, k per length.
        self.documents = DocumentBuilder(self.corpus, tokenizer, spec.seed) if spec.perplexity else None
        if self.hardness.distractors or self.hardness.literal_distractor:
            self._check_gaps()

    def cells(self) -> Iterator[Cell]:
        # Variant (domain) first, then length, then depth: consecutive prompts share the haystack up
        # to the earlier needle. A literal twin follows its sample: they differ only in the question.
        spec = self.spec
        for domain_tasks in _by_corpus(self.variants):
            for length in spec.lengths:
                for depth in spec.depths:
                    for index in range(spec.samples):
                        yield from (Cell(task, length, depth, index) for task in domain_tasks)
                if self.documents is not None:  # one corpus only
                    yield from self.documents.cells((length,), spec.samples)

    def probed_items(self) -> tuple[str, ...]:
        """The low-overlap items the grid's gold needles are of, each once, in the order first drawn:
        the closed-book probes the run asks (``fathom.tasks.probe``); none for other needle kinds."""
        return self._probed if self.needle_kind in LATENT_KINDS else ()

    @functools.cached_property
    def _probed(self) -> tuple[str, ...]:
        used: dict[str, None] = {}
        for cell in self.cells():
            variant = self.variants.get(cell.task)
            if variant is not None:  # not a perplexity document
                used |= dict.fromkeys(probe.items_of(self._needles(variant, cell)[0].keys))
        return tuple(used)

    def prepare(self, cell: Cell) -> Sample | Document:
        if cell.probe is not None:
            return probe.closed_book(cell, self.tokenizer, self.template, self.spec.system_prompt)
        if cell.task == PERPLEXITY and self.documents is not None:
            return self.documents.build(cell)
        variant = self.variants.get(cell.task)
        if variant is None:
            raise ValueError(f"cell {cell.id} is no cell of this niah run")
        needles, redraws = self._needles(variant, cell)
        start = self._start(variant, cell)
        try:
            prompt = variant.builder.place(
                cell.length, needles.question, _placements(variant, needles), start or 0, self._apart(needles)
            )
        except TooShort as short:
            raise self._what_fits(short, variant, needles) from None
        except Crowded as crowded:  # a cell the check before the run did not build (an export's)
            raise self._crowded(crowded, variant, cell) from None
        golds = [p.text for p in needles.placements if p.role in (GOLD, PART)]
        similarity = round(max(variant.check.similarity(text) for text in golds), 4)
        sample = Sample.of_needles(
            cell,
            prompt,
            variant.builder.text,
            needles,
            self.scoring,
            self.max_new_tokens,
            redraws,
            haystack_offset=None if start is None else variant.builder.corpus.unit_start(start),
            similarity=similarity,
        )
        if self.needle_kind not in LATENT_KINDS:
            return sample
        # The shortcut through it: the odd-name reader's answer from the context the model reads.
        context = prompt.ids[prompt.head_tokens : prompt.head_tokens + prompt.context_tokens]
        odd_name = odd_name_answer(self.tokenizer.decode(context.tolist())) or ""
        return dataclasses.replace(
            sample,
            latent_items=probe.items_of(needles.keys),
            odd_name=odd_name,
            literal_neighbours=literal_neighbours(needles, self._window(variant, cell)),
        )

    def _needles(self, variant: Variant, cell: Cell) -> tuple[NeedleSet, tuple[str, ...]]:
        # Seeded by the task's name, not the variant's: every variant of a cell draws the same needles.
        rng = needle_rng(self.spec.seed, *self.space.stream, self.name, cell.length, cell.depth, cell.sample)
        return self._draw(variant, cell, rng)

    def _apart(self, needles: NeedleSet) -> Apart:
        """The distractors kept the gap from every gold needle and part on the boundaries used."""
        golds = frozenset(i for i, p in enumerate(needles.placements) if p.role in (GOLD, PART))
        return Apart(self.hardness.gap, golds)

    def _check_gaps(self) -> None:
        """Refuse, before any sample is built, a cell whose haystack has no boundary the gap from its
        gold needles (too few boundaries at its length): each cell's layout, without its prompt."""
        for cell in self.cells():
            variant = self.variants.get(cell.task)
            if variant is None:  # a perplexity document
                continue
            needles, _ = self._needles(variant, cell)
            start = self._start(variant, cell) or 0
            try:
                variant.builder.layout(
                    cell.length, needles.question, _placements(variant, needles), start, self._apart(needles)
                )
            except TooShort as short:
                raise self._what_fits(short, variant, needles) from None
            except Crowded as crowded:
                raise self._crowded(crowded, variant, cell) from None

    def _crowded(self, crowded: Crowded, variant: Variant, cell: Cell) -> SpecError:
        """A cell whose haystack has no boundary the gap from its gold needles, said for its length."""
        units, gap = "line" if variant.lines else "sentence", self.hardness.gap
        return SpecError(
            f"at length {cell.length}, no {units} boundary of the haystack lies {gap:g} of it from the "
            f"needles at depth {cell.depth:g}: its {crowded.boundaries} boundaries hold {crowded.fit} "
            "needles that far apart; use longer lengths or --distractors 0"
        )

    def corpora(self) -> list[dict[str, Any]]:
        """The corpora of the run's variants, each once, as the manifest lists them."""
        seen = {v.corpus.name: v for v in self.variants.values()}
        return [dataclasses.asdict(corpus_info(v.corpus, v.builder.corpus)) for v in seen.values()]

    def _what_fits(self, short: TooShort, variant: Variant, needles: NeedleSet) -> PromptError:
        """A length too short for the needles asked: how many distractors fit it, where fewer would."""
        lures = [p.text for p in needles.placements if p.role in DISTRACTOR_ROLES]
        if not lures:
            return short
        tokenizer = variant.builder.tokenizer
        each = max(1, -(-sum(len(tokenizer.encode(text)) for text in lures) // len(lures)))
        fits = max(0, len(lures) - -(-(short.overhead - short.length) // each))
        return PromptError(
            f"{short}; at {short.length} tokens, {fits} of the {len(lures)} distractors fit "
            f"(about {each} tokens each): use --distractors {fits} or longer lengths"
        )

    def _start(self, variant: Variant, cell: Cell) -> int | None:
        """Where the sample's haystack starts: the corpus's start, or (--haystack-offset random) a
        boundary drawn for the sample, the same for every variant on that corpus."""
        if self.spec.haystack_offset == "start":
            return None
        where = (variant.corpus.name, cell.length, cell.depth, cell.sample)
        rng = needle_rng(self.spec.seed, *self.space.stream, "offset", *where)
        return variant.builder.corpus.random_start(rng)

    def _window(self, variant: Variant, cell: Cell) -> str:
        """The text of the sample's window of the variant's corpus: its haystack and a little more."""
        start = self._start(variant, cell) or 0
        return self._windows.text(variant.builder.corpus, cell.length, start)

    def _draw(self, variant: Variant, cell: Cell, rng: random.Random) -> tuple[NeedleSet, tuple[str, ...]]:
        """The sample's needles, drawn again while the corpus already holds an answer, a subject or
        a distractor's value (the fixed sf needle is the published one, taken as it is). Low-overlap
        needles are drawn again while a window of any of the run's corpora names a place of their
        chains (their names and anchors are none the corpora hold): every domain then draws the same
        needles."""
        depth = cell.depth
        assert depth is not None  # NIAH cells always have one
        latent = self.needle_kind in LATENT_KINDS
        per_corpus = {v.corpus.name: v for v in self.variants.values()}.values()
        windows = [self._window(v, cell) for v in per_corpus] if latent else []
        reasons: list[str] = []
        for _ in range(MAX_REDRAWS + 1):
            needles = needle_set(variant.needle_kind, self.hardness, depth, rng, self.space, variant.style)
            if latent:
                held = held_places(needles, windows)
            else:
                held = variant.check.mentions([*needles.answers, *needles.subjects, *needles.lures])
            if not held or self.needle_kind == "sf":
                return needles, tuple(reasons)
            where = "a window of the run's corpora" if latent else "the corpus"
            reasons.append(f"{where} already holds {', '.join(repr(h) for h in held)}")
        raise PromptError(
            f"corpus '{variant.corpus.name}' holds some value of every {self.needle_kind} needle drawn "
            f"({MAX_REDRAWS + 1} tries; the last: {reasons[-1]}): use another corpus or needle kind"
        )

    def identity(self) -> dict[str, Any]:
        text = repr(self.words).encode()
        documents = {} if self.documents is None else {"perplexity": self.documents.identity()}
        # Plain samples are what they always were; hard ones name their generators' version.
        plain = self.hardness.plain and self.needle_kind not in (*SPLIT_KINDS, *LATENT_KINDS)
        hard = {} if plain else {"needle_sets": NEEDLE_SETS_VERSION}
        if self.needle_kind in LATENT_KINDS:  # the items, and the probe asked of each
            hard |= {"latent_items": LATENT_VERSION, "probe": probe.PROBE_VERSION}
        if not self.hardness.forms.plain:  # the forms' wording; the one form of before keeps its identity
            hard |= {"latent_forms": FORMS_VERSION}
        corpora = {v.corpus.name: v.corpus.sha256 for v in self.variants.values()}
        # Native needles are other prompts than the prose ones every corpus had before them: their
        # style is named, so a run begun with prose needles never resumes into native ones (and is
        # never compared with them); prose keeps the identity it always had.
        styles = {v.corpus.name: v.style.name for v in self.variants.values() if v.style.name != PROSE_STYLE}
        # One corpus keeps the keys it always had; several are listed by name.
        where = (
            {"corpus": self.corpus.name, "corpus_sha256": self.corpus.sha256}
            if len(corpora) == 1
            else {"corpora": corpora}
        )
        return {
            **documents,
            **hard,
            "task": self.name,
            "version": NIAH_VERSION,
            **where,
            **({"needle_styles": styles} if styles else {}),
            "template": self.template.name,
            "template_sha256": self.template.sha256,
            "prompt_text_sha256": hashlib.sha256(text).hexdigest(),
        }


def _placements(variant: Variant, needles: NeedleSet) -> list[tuple[float, NeedleText]]:
    """Each needle's depth and text; in a haystack of lines, a needle ends its own line, and a
    native one there (code, markup) takes its neighbours' indentation where it lands."""
    if variant.lines and variant.style.indented:
        return [(p.depth, Indented(p.text, variant.style.apart)) for p in needles.placements]
    end = "\n" if variant.lines else ""
    return [(p.depth, p.text + end) for p in needles.placements]


def _by_corpus(variants: dict[str, Variant]) -> list[list[str]]:
    """The variants' task names grouped by corpus, in order."""
    groups: dict[str, list[str]] = {}
    for task, variant in variants.items():
        groups.setdefault(variant.corpus.name, []).append(task)
    return list(groups.values())
