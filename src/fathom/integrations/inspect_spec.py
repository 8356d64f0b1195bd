"""The spec of a fathom task run inside inspect_ai: its ``-T`` options read with fathom's own parsers,
so that ``-T lengths=4k,8k depths=0,0.5,1 samples=3 needle=uuid`` means what ``fathom run niah
--lengths 4k,8k --depths 0,0.5,1 --samples 3 --needle uuid`` means. No inspect_ai import here: the
options and the spec are fathom's alone.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from fathom.errors import SpecError
from fathom.registry import TASK, check_spec
from fathom.spec import (
    NEEDLE_ORDERS,
    RELATIONS,
    RunSpec,
    default_distractors,
    parse_choices,
    parse_corpora,
    parse_depths,
    parse_items,
    parse_lengths,
    parse_ops,
    parse_repeats,
    parse_split_distance,
    parse_templates,
)

# The spec's model while inspect answers: the model is inspect's (``--model``), unknown when the task
# is made; ``fathom import-inspect`` names it from the log (``inspect:mockllm/model``).
INSPECT_MODEL = "inspect"
# inspect's model is not a fathom backend, so no tokenizer of its own counts the prompts: cl100k_base,
# fathom's count for simulated models, unless ``-T tokenizer=`` names the model's.
DEFAULT_TOKENIZER = "cl100k_base"


def _whole(name: str) -> Callable[[str], int]:
    def parse(text: str) -> int:
        if not (text.isascii() and text.lstrip("-").isdigit() and len(text) <= 9):
            raise SpecError(f"-T {name} takes a whole number, not '{text}'")
        return int(text)

    return parse


def _flag(name: str) -> Callable[[str], bool]:
    def parse(text: str) -> bool:
        if text.lower() not in ("true", "false"):
            raise SpecError(f"-T {name} takes true or false, not '{text}'")
        return text.lower() == "true"

    return parse


def _names(text: str) -> tuple[str, ...]:
    return tuple(name.strip() for name in text.split(",") if name.strip())


# Each -T option: the RunSpec field it sets and how its text reads (the options of ``fathom run`` of
# the same names, dashes as underscores). Which of them a task takes its registry entry says
# (``check_spec`` refuses the others, as ``fathom run`` does).
OPTIONS: dict[str, tuple[str, Callable[[str], Any]]] = {
    "lengths": ("lengths", parse_lengths),
    "depths": ("depths", parse_depths),
    "samples": ("samples", _whole("samples")),
    "seed": ("seed", _whole("seed")),
    "tokenizer": ("tokenizer", str),
    "needle": ("needle", str),
    "distractors": ("distractors", _whole("distractors")),
    "needles": ("needles", _whole("needles")),
    "split_distance": ("split_distance", parse_split_distance),
    "haystack_offset": ("haystack_offset", str),
    "needle_style": ("needle_style", str),
    "literal_distractor": ("literal_distractor", _flag("literal_distractor")),
    "relations": ("relations", lambda text: parse_choices(text, RELATIONS)),
    "needle_orders": ("needle_orders", lambda text: parse_choices(text, NEEDLE_ORDERS)),
    "question_templates": ("question_templates", parse_templates),
    "template": ("template", str),
    "system_prompt": ("system_prompt", str),
    "scoring": ("scoring", str),
    "max_new_tokens": ("max_new_tokens", _whole("max_new_tokens")),
    "fill": ("fill", str),
    "data": ("data", str),
    "suite_tasks": ("suite_tasks", _names),
    "truncate": ("truncate", _flag("truncate")),
    "ops": ("ops", parse_ops),
    "items": ("items", parse_items),
    "repeats": ("repeats", parse_repeats),
    "control": ("control", _flag("control")),
}
# Read apart: the corpus (one, or several swept as an axis) and the task's own name.
CORPUS = "corpus"


def option_text(value: object) -> str:
    """A -T value as fathom's parsers read it: inspect's command line reads ``4k,8k`` as a list and
    ``3`` as a number, and Python callers pass either."""
    if isinstance(value, list | tuple):
        return ",".join(map(option_text, value))
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def inspect_spec(task: str, options: Mapping[str, object]) -> RunSpec:
    """The spec of fathom task ``task`` with ``options`` (-T), checked as ``fathom run`` checks its own:
    an unknown option, a bad value or one the task does not take is one clear SpecError. No-context
    controls are off unless ``-T control=true``: inspect's accuracy is then the samples' alone."""
    known = sorted([*OPTIONS, CORPUS])
    values: dict[str, Any] = {}
    for name, given in options.items():
        if name == CORPUS:
            values["corpus"], values["domains"] = parse_corpora([option_text(given)])
        elif name in OPTIONS:
            field, parse = OPTIONS[name]
            values[field] = parse(option_text(given))
        else:
            raise SpecError(f"fathom/{task} takes no option '{name}': use some of {', '.join(known)}")
    swept = TASK.entry(task).depths == "swept"
    values.setdefault("depths", parse_depths("11") if swept else ())  # fathom run's defaults
    if "lengths" not in values:
        raise SpecError(f"fathom/{task} needs -T lengths=..., the prompts' lengths in tokens (e.g. 4k,8k)")
    values.setdefault("samples", 3)  # fathom run's default
    values.setdefault("tokenizer", DEFAULT_TOKENIZER)
    values.setdefault("distractors", default_distractors(values.get("needle")))
    if values["tokenizer"] == "auto":
        raise SpecError(
            "-T tokenizer=auto names no tokenizer inside inspect (its model is not a fathom backend): name "
            "the model's (a tokenizer.json, hf:FOLDER, tiktoken:PATH) or cl100k_base"
        )
    values.setdefault("control", False)
    spec = RunSpec(task=task, model=INSPECT_MODEL, **values)
    check_spec(spec)
    return spec
