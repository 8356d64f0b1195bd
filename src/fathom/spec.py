"""The run specification, validated at the boundary so bad input fails before any work."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from dataclasses import dataclass
from typing import Any

from fathom.errors import SpecError
from fathom.units import format_count, parse_count

# Sizes beyond these are typing mistakes, not sweeps: refused up front, before any memory is spent on
# them. A prompt of MAX_LENGTH tokens is 128 MB of ids; a run of MAX_PLANNED samples per task is
# weeks of a fast model's time, and its records fill gigabytes.
MAX_LENGTH = 32 * 1024 * 1024
MAX_DEPTHS = 1001
MAX_SAMPLES = 100_000
MAX_PLANNED = 1_000_000
# How a RULER task sizes its haystack: "exact" fills each prompt and its tokens to generate to the
# length; "ruler" takes the count of units RULER's own search gives (docs/ruler.md), below it.
FILLS = ("exact", "ruler")
# niah: how keyed needles are written: in the haystack's own form (prompts/needle_styles.py) or as
# the English prose sentence every corpus had before.
NEEDLE_STYLES = ("native", "prose")
# niah, low-overlap needles: the forms drawn from (prompts/latent_forms.py): what the needle says its
# character did at the anchor, whether the name or the anchor comes first, and the question's wording.
RELATIONS = ("visit", "home", "work")
NEEDLE_ORDERS = ("name-first", "place-first")
QUESTION_TEMPLATES = (1, 2, 3)


@dataclass(frozen=True)
class RunSpec:
    """Everything that decides which prompts are built and how they are answered and graded.

    Checked here: what holds whatever the task. Which options a task takes (its knobs: needle,
    corpus, perplexity, ...) its registry entry says, and ``fathom.registry`` checks.
    """

    task: str
    model: str
    tokenizer: str  # a tokenizer name, or "auto": the model's own (cl100k_base for simulated models)
    lengths: tuple[int, ...]
    depths: tuple[float, ...]  # empty for tasks that draw needle depths per sample (RULER's)
    samples: int
    seed: int = 0
    # None leaves the choice to the task: NIAH reads prose, asks for numbers, grades by "contains"
    # and lets the model write 32 tokens; each RULER task has its own haystack, metric and budget.
    corpus: str | None = None
    needle: str | None = None
    template: str = "auto"
    system_prompt: str | None = None
    scoring: str | None = None
    max_new_tokens: int | None = None
    # Also score perplexity documents of the haystack corpus at every length, and the gold answer's
    # teacher-forced log-probability of every sample (niah's).
    perplexity: bool = False
    answer_logprob: bool = False
    # Ask every sample's question once more with the context left out: a question the model answers
    # without it is no evidence that it used the context (memorised data, a guessable answer).
    control: bool = True
    # niah: hard needles (prompts/needle_sets.py): look-alike distractors, several needles asked
    # for at once, and the share of the haystack between a split needle's parts (None: drawn).
    distractors: int = 0
    needles: int = 1
    split_distance: float | None = 0.25
    # niah: where each sample's haystack starts in its corpus: "start" (every sample the same
    # text, which a prefix cache reuses) or "random" (k independent draws, recorded per sample).
    haystack_offset: str = "start"
    # niah: keyed needles in their haystack's form ("native": a constant in code, a field in
    # reStructuredText, German in German text) or always as English prose ("prose"); one of NEEDLE_STYLES.
    needle_style: str = "native"
    # niah: several corpora swept as an axis (domain x length x depth); empty: the one ``corpus``.
    domains: tuple[str, ...] = ()
    # niah, low-overlap needles: a sentence naming each question's place, unrelated to it, placed in the
    # haystack as a literal-match distractor (NoLiMa's hardest case; prompts/needle_sets.py).
    literal_distractor: bool = False
    # niah, low-overlap needles: each needle's form is drawn from these (one of each: that one form).
    relations: tuple[str, ...] = ("visit",)
    needle_orders: tuple[str, ...] = ("name-first",)
    question_templates: tuple[int, ...] = (1,)
    # Real suites (longbench, longbench-e, longbench-v2, infinitebench): the folder holding the suite's
    # official files, the tasks of it to run (empty: all), and whether a prompt longer than the length
    # has its middle cut, as the suites do (False refuses such prompts instead).
    data: str | None = None
    suite_tasks: tuple[str, ...] = ()
    truncate: bool = True
    # RULER tasks: how the haystack is sized, one of FILLS.
    fill: str = "exact"
    # state: the counts of relevant list operations swept as an axis; empty: the task's default.
    ops: tuple[int, ...] = ()
    # listing: the counts of matching records (the answer's items) swept as an axis; empty: the default.
    items: tuple[int, ...] = ()
    # mrcr: how many times the asked piece of writing is asked for, swept as an axis; empty: the default.
    repeats: tuple[int, ...] = ()
    # Thinking models: the tokens of reasoning allowed before each sample's answer budget (None: no
    # budget asked; a request's max tokens are then the answer's alone), and whether records keep the
    # reasoning's text (its tokens are kept always).
    thinking_budget: int | None = None
    keep_reasoning: bool = False

    def __post_init__(self) -> None:
        if not self.lengths:
            raise SpecError("no lengths given: pass e.g. --lengths 1k,2k,4k")
        if any(n <= 0 for n in self.lengths):
            raise SpecError(f"lengths must be positive token counts, got {list(self.lengths)}")
        if max(self.lengths) > MAX_LENGTH:
            raise SpecError(
                f"a length of {max(self.lengths):.3g} tokens is beyond fathom's limit of "
                f"{format_count(MAX_LENGTH)} tokens: check --lengths (k = 1024, M = 1024k)"
            )
        if any(not 0.0 <= d <= 1.0 for d in self.depths):
            raise SpecError(f"depths must lie in [0, 1] (0 = start, 1 = end), got {list(self.depths)}")
        if not 1 <= self.samples <= MAX_SAMPLES:
            raise SpecError(
                f"samples per cell must lie in 1..{MAX_SAMPLES} (3 or more for intervals), got {self.samples}"
            )
        if len(self.depths) > MAX_DEPTHS:
            raise SpecError(f"at most {MAX_DEPTHS} depths, got {len(self.depths)}")
        planned = len(self.lengths) * max(1, len(self.depths)) * self.samples
        if planned > MAX_PLANNED:
            raise SpecError(
                f"this spec plans {planned:.3g} samples per task ({len(self.lengths)} lengths x "
                f"{max(1, len(self.depths))} depths x {self.samples} samples), more than fathom runs in one "
                f"run ({MAX_PLANNED:,}): split the sweep into several runs"
            )

        if self.max_new_tokens is not None and self.max_new_tokens < 1:
            raise SpecError(f"max new tokens must be at least 1, got {self.max_new_tokens}")
        if self.max_new_tokens is not None and self.max_new_tokens > MAX_LENGTH:
            raise SpecError(
                f"--max-new-tokens of {self.max_new_tokens:,} is beyond fathom's longest context, "
                f"{format_count(MAX_LENGTH)} tokens: give at most that (niah's default is 32)"
            )
        if self.thinking_budget is not None and not 1 <= self.thinking_budget <= MAX_LENGTH:
            raise SpecError(
                f"--thinking-budget takes a count of tokens in 1..{format_count(MAX_LENGTH)}, got "
                f"{self.thinking_budget:,}"
            )
        if any(count < 1 for count in self.ops):
            raise SpecError(f"--ops takes counts of operations of at least 1, got {list(self.ops)}")
        if any(count < 1 for count in self.items):
            raise SpecError(f"--items takes counts of records of at least 1, got {list(self.items)}")
        if any(count < 1 for count in self.repeats):
            raise SpecError(f"--repeats takes counts of asks of at least 1, got {list(self.repeats)}")
        if self.fill not in FILLS:
            raise SpecError(f"unknown fill '{self.fill}': use one of {', '.join(FILLS)}")
        check_forms(self.relations, self.needle_orders, self.question_templates)
        if self.needle_style not in NEEDLE_STYLES:
            raise SpecError(
                f"unknown needle style '{self.needle_style}': use native (the haystack's own form) or prose"
            )

    def to_json(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        # Added after the first runs: left out at their defaults, so those runs keep their identity.
        for name, default in _LATER_FIELDS.items():
            if data[name] == default:
                del data[name]
        # Controls came later still, and on by default: runs from before them, whose spec lacks the
        # key, read as runs with controls, and resuming one adds its controls.
        if data["control"]:
            del data["control"]
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunSpec:
        values = dict(data)
        values["lengths"] = tuple(values["lengths"])
        values["depths"] = tuple(values["depths"])
        values["domains"] = tuple(values.get("domains", ()))
        values["suite_tasks"] = tuple(values.get("suite_tasks", ()))
        values["ops"] = tuple(values.get("ops", ()))
        values["items"] = tuple(values.get("items", ()))
        values["repeats"] = tuple(values.get("repeats", ()))
        for name in ("relations", "needle_orders", "question_templates"):
            if name in values:
                values[name] = tuple(values[name])
        return cls(**values)

    @property
    def sha256(self) -> str:
        return hashlib.sha256(json.dumps(self.to_json(), sort_keys=True).encode()).hexdigest()


_LATER_FIELDS: dict[str, object] = {
    "perplexity": False,
    "answer_logprob": False,
    "distractors": 0,
    "needles": 1,
    "split_distance": 0.25,
    "haystack_offset": "start",
    "needle_style": "native",
    "domains": (),
    "literal_distractor": False,
    "relations": ("visit",),
    "needle_orders": ("name-first",),
    "question_templates": (1,),
    "data": None,
    "suite_tasks": (),
    "truncate": True,
    "fill": "exact",
    "ops": (),
    "items": (),
    "repeats": (),
    "thinking_budget": None,
    "keep_reasoning": False,
}


def check_forms(
    relations: tuple[str, ...], orders: tuple[object, ...], templates: tuple[object, ...]
) -> None:
    """Refuse an empty, unknown or repeated relation, needle order or question template."""
    for given, known, flag in (
        (relations, RELATIONS, "--relations"),
        (orders, NEEDLE_ORDERS, "--needle-orders"),
        (templates, QUESTION_TEMPLATES, "--question-templates"),
    ):
        choices = f"use one or more of {', '.join(map(str, known))}, or all"
        if not given:
            raise SpecError(f"{flag} names none: {choices}")
        for value in given:
            if value not in known:
                raise SpecError(f"{flag}: unknown value '{value}': {choices}")
        if len(set(given)) != len(given):
            raise SpecError(f"{flag} names a value twice ({', '.join(map(str, given))}): name each once")


def parse_choices(text: str, known: tuple[object, ...]) -> tuple[str, ...]:
    """A comma list of names as given (checked by ``check_forms``), or ``all`` for every one of ``known``."""
    if text.strip() == "all":
        return tuple(map(str, known))
    return tuple(part.strip() for part in text.split(","))


def parse_templates(text: str) -> tuple[int, ...]:
    """``--question-templates``: template numbers (``1,3``) or ``all``."""
    parts = parse_choices(text, QUESTION_TEMPLATES)
    for part in parts:
        if not part.isdigit() or len(part) > 3:
            raise SpecError(
                f"--question-templates: unknown value '{part}': use one or more of 1, 2, 3, or all"
            )
    return tuple(int(part) for part in parts)


def add_latent_arguments(parser: Any, taken: str) -> None:
    """The options that shape low-overlap needles, shared by ``fathom run`` and ``fathom export``;
    ``taken`` says which tasks take them, for the help."""
    parser.add_argument(
        "--literal-distractor",
        action="store_true",
        help=f"{taken}: with latent needles, a sentence naming each question's place, unrelated to it, "
        "in the haystack (a literal-match distractor)",
    )
    parser.add_argument(
        "--relations",
        default="visit",
        help=f"{taken}: what a latent needle says its character did at the anchor: visit (each item's own "
        "needle), home, work; a comma list or all draws one per needle",
    )
    parser.add_argument(
        "--needle-orders",
        default="name-first",
        help=f"{taken}: name-first or place-first (the anchor before the character: an "
        "inverted needle); a comma list or all draws one per needle",
    )
    parser.add_argument(
        "--question-templates",
        default="1",
        help=f"{taken}: which of each relation's three question wordings to ask (1, 2, 3; a comma list "
        "or all draws one per needle)",
    )


def parse_lengths(text: str) -> tuple[int, ...]:
    """``"1k,2k,4k"`` -> (1024, 2048, 4096); sorted, duplicates removed. An empty entry (``1k,,2k``)
    is a typing slip that may have lost a length, so it is refused rather than skipped."""
    if not text.strip():
        return ()  # RunSpec refuses a spec of no lengths, with its own message
    parts = text.split(",")
    if any(not p.strip() for p in parts):
        raise SpecError(
            f"--lengths '{text}' has an empty entry: separate lengths by single commas, e.g. 1k,2k,4k"
        )
    return tuple(sorted({parse_count(p) for p in parts}))


def parse_ops(text: str | None) -> tuple[int, ...]:
    """``--ops 4,16,64``: counts of operations, sorted, duplicates removed; None or "" leaves the default."""
    return parse_counts(text, "--ops", "4,16,64")


def parse_items(text: str | None) -> tuple[int, ...]:
    """``--items 8,32,128``: counts of matching records, as ``parse_ops`` reads its counts."""
    return parse_counts(text, "--items", "8,32,128")


def parse_repeats(text: str | None) -> tuple[int, ...]:
    """``--repeats 2,4,8``: how many times mrcr's asked piece is asked for, as ``parse_ops`` reads."""
    return parse_counts(text, "--repeats", "2,4,8")


def parse_counts(text: str | None, flag: str, example: str) -> tuple[int, ...]:
    """An axis of whole counts (``--ops``, ``--items``): sorted, duplicates removed; None or "" leaves
    the task's default."""
    if not text or not text.strip():
        return ()
    parts = [part.strip() for part in text.split(",")]
    if not all(part.isascii() and part.isdigit() and len(part) <= 6 for part in parts):
        raise SpecError(f"{flag} takes whole counts separated by commas, e.g. {example}, not '{text}'")
    return tuple(sorted({int(part) for part in parts}))


def parse_depths(text: str) -> tuple[float, ...]:
    """A count of evenly spaced depths (``"11"`` -> 0, 0.1, ..., 1) or a list (``"0,0.5,1"``)."""
    text = text.strip()
    if text.isdigit():
        count = int(text)
        if not 1 <= count <= MAX_DEPTHS:
            raise SpecError(f"--depths takes a count of 1..{MAX_DEPTHS} depths, not {text}")
        if count == 1:
            return (0.5,)
        return tuple(round(i / (count - 1), 6) for i in range(count))
    try:
        values = {float(p) for p in text.split(",") if p.strip()}
    except ValueError:
        values = {math.nan}
    if not values or any(math.isnan(v) for v in values):
        raise SpecError(f"cannot read depths '{text}': write a count (11) or fractions (0,0.5,1)")
    return tuple(sorted(values))


def parse_corpora(values: list[str] | None) -> tuple[str | None, tuple[str, ...]]:
    """``--corpus`` as given (it repeats, and takes a comma list of names): one corpus, or several to
    sweep as an axis (``domains``). A mixture's commas are its own: ``mix:code=0.3,prose=0.7`` is one."""
    names: list[str] = []
    for value in values or ():
        parts = [value] if value.startswith("mix:") else [p.strip() for p in value.split(",") if p.strip()]
        names.extend(parts)
    if not names:
        return None, ()
    return (names[0], ()) if len(names) == 1 else (None, tuple(names))


def parse_split_distance(text: str) -> float | None:
    """``--split-distance``: a share of the haystack (0.25), or ``random`` (drawn per sample: None)."""
    if text == "random":
        return None
    try:
        return float(text)
    except ValueError:
        raise SpecError(
            f"--split-distance takes a share of the haystack (0.25) or random, not '{text}'"
        ) from None


# Distractors a low-overlap needle gets unless told: other characters at other anchors, so the gold's
# character is not the only name of the haystack (issue 29: a reader answering the one name it has
# not seen scored 24-29 of 30 with none, about chance with 3). Other kinds get none unless asked.
LATENT_DISTRACTORS = 3


def default_distractors(needle: str | None) -> int:
    """``--distractors`` left out: 3 for the low-overlap kinds (latent-1, latent-2-literal, ...), else 0."""
    return LATENT_DISTRACTORS if needle is not None and needle.startswith("latent-") else 0


def prompt_options(args: Any) -> dict[str, Any]:
    """The spec's fields that decide a NIAH prompt, read from the options ``fathom run`` and
    ``fathom export`` share (parsed command-line arguments)."""
    corpus, domains = parse_corpora(args.corpus)
    return {
        "corpus": corpus,
        "domains": domains,
        "needle": args.needle,
        "distractors": default_distractors(args.needle) if args.distractors is None else args.distractors,
        "needles": args.needles,
        "split_distance": parse_split_distance(args.split_distance),
        "haystack_offset": args.haystack_offset,
        "needle_style": args.needle_style,
        "template": args.template,
        "system_prompt": args.system_prompt,
        "literal_distractor": args.literal_distractor,
        "relations": parse_choices(args.relations, RELATIONS),
        "needle_orders": parse_choices(args.needle_orders, NEEDLE_ORDERS),
        "question_templates": parse_templates(args.question_templates),
    }
