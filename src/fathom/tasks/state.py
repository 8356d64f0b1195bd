"""State tracking (``fathom run state``): a stream of operations on a small Python list, spread
through a haystack, and a question on the list's final state. In the spirit of Michelangelo's
latent list (Vodrahalli et al., 2024): the answer is in no one line, only in all of them, in order.

The design, and why:

- **The lines are Python** (``items.append(42)``, ``items.insert(0, 7)``, ``items.pop()``,
  ``items.pop(2)``, ``items.remove(7)``, ``items.sort()``), each on a line of its own
  (``prompts/list_ops.py``; ``prompts/line_stream.py`` says how one stands between sentences). Python
  fixes every rule an English sentence would leave open (where ``insert`` puts a value, which end
  ``pop`` takes), it is short in any tokenizer, and it is its own reference: the tests run the
  lines with Python itself.
- **Relevant operations** each change ``items``: a value not in the list is appended or inserted,
  one in it is popped or removed, and ``sort`` comes only when the list is out of order. The list
  starts empty and is kept small (at most ``MOST_ITEMS`` values, 1 to 99, all distinct, so ``remove``
  has one reading). Their count is the run's axis: ``--ops 4,16,64`` (``DEFAULT_OPS`` when left out).
- **Decoys**, as many as the relevant operations, look like operations and change nothing asked:
  half (a coin each) are operations on another list, ``notes``, drawn as ``items``' are; the others
  read ``items`` without changing it (``items.count(7)``, ``items.copy()``, ``items.sort()`` when it
  is already sorted). Relevant lines and decoys are shuffled together, in one order.
- **Placement** (``prompts/line_stream.py``, shared with ``babi``): the lines, in order, at depths
  drawn uniformly and sorted, each snapped to the nearest sentence boundary of the haystack by NIAH's
  prompt builder (``PromptBuilder.place``), which
  makes the prompt exactly its length in the model's tokens and records where each line landed (the
  record's ``needle_depths``: relevant lines and decoys alike).
- **Questions**: the final list, its length or its sum, by the sample's index (0: list, 1: length,
  2: sum, then again), so every cell of three samples or more asks each; the record's
  ``needle_kind`` names it. A cell is a length and an operation count: its records' task is
  ``state:N`` for N relevant operations.
- **Grading** is exact (``grade``): the last bracketed list the answer writes, read whatever its
  spacing, must be the list, values in order; the last whole number it names must be the length or
  the sum (``scoring.whole_numbers``: "1,234" is one number, "12" does not name 2).
- **Too many operations** for a length are refused when the task is made, before any sample, with
  how many fit: every line at its longest must fit beside the instruction and question.
"""

from __future__ import annotations

import dataclasses
import functools
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from fathom.prompts import PromptText
from fathom.prompts import list_ops as ops
from fathom.prompts.line_stream import place_lines
from fathom.prompts.needles import needle_rng
from fathom.prompts.tokenizers import Tokenizer
from fathom.records import Cell, Score
from fathom.scoring import extract_answer, whole_numbers
from fathom.spec import RunSpec
from fathom.tasks.base import Sample
from fathom.tasks.counted_lines import CountAxis, CountedLines, cell_count

# Bump when the text, the generator or the grader below changes the prompts or the grades.
STATE_VERSION = 1
TASK = "state"
DEFAULT_OPS = (4, 16, 64)
MOST_ITEMS = 8  # the list never holds more: small enough to say in one short answer
NEW_TOKENS = 48  # the longest list, "[12, 34, ...]", in any tokenizer's tokens, with room to spare
SCORING = "state"


@dataclass(frozen=True)
class Lists:
    """The two lists' names (the one asked about, the one its decoys act on), the values they hold,
    and the words mixed into each sample's random stream beside the seed and the cell."""

    tracked: str
    other: str
    values: range
    stream: tuple[str, ...] = ()

    def text(self) -> PromptText:
        return PromptText(
            before=(
                "Below is a long document with lines of Python code scattered through it. Two lists "
                f"start empty, {self.tracked} = [] and {self.other} = []; each line of code acts on one of "
                "them, in the order the lines appear. The prose between the lines is not code."
                "\n\n<document>\n"
            ),
            after=" </document>\n\nQuestion: {question}",
            answer_prefix="Answer:",
        )

    def longest(self) -> tuple[str, ...]:
        """The longest lines the generator writes (the largest value, a one-digit index), to size
        the budget."""
        most = max(self.values)
        return (
            f"{self.tracked}.insert({MOST_ITEMS}, {most})",
            f"{self.other}.insert({MOST_ITEMS}, {most})",
            f"{self.tracked}.remove({most})",
            f"{self.tracked}.count({most})",
        )


EVAL_LISTS = Lists(ops.TRACKED, ops.OTHER, range(1, 100))
# fathom export's: other names (opening with c or j, as the training space's words), and three-digit
# values where evaluation's have one or two, so that no training line, and no training list as an
# answer, is one an evaluation prompt holds; a length or sum is a small number any text holds.
TRAIN_LISTS = Lists("cards", "jars", range(100, 1000), ("train",))
STATE_TEXT = EVAL_LISTS.text()


@dataclass(frozen=True)
class Program:
    """The lines of one sample in order, which of them change ``items``, and ``items`` at the end."""

    lines: tuple[str, ...]
    relevant: tuple[bool, ...]
    final: tuple[int, ...]


def _fresh(rng: random.Random, state: Sequence[int], values: range) -> int:
    """A value not in ``state``: drawn again while it is (at most MOST_ITEMS of 99 or more are)."""
    while (value := rng.choice(values)) in state:
        pass
    return value


def change(rng: random.Random, target: str, state: list[int], values: range) -> ops.Op:
    """An operation that changes ``state``: growing it while it is short, never past MOST_ITEMS."""
    size = len(state)
    # Growth twice as likely while the list is short, so that few operations leave more than nothing.
    methods = ["append", "insert"] * (2 if size < MOST_ITEMS // 2 else 1) if size < MOST_ITEMS else []
    if size:
        methods += ["pop", "remove"]
    if state != sorted(state):
        methods.append("sort")
    method = rng.choice(methods)
    if method == "append":
        return ops.Op(target, method, (_fresh(rng, state, values),))
    if method == "insert":
        return ops.Op(target, method, (rng.randint(0, size), _fresh(rng, state, values)))
    if method == "pop":
        return ops.Op(target, method, (rng.randrange(size),) if size > 1 and rng.random() < 0.5 else ())
    if method == "remove":
        return ops.Op(target, method, (rng.choice(state),))
    return ops.Op(target, method)


def decoy(rng: random.Random, lists: dict[str, list[int]], names: Lists) -> ops.Op:
    """A line that changes nothing asked: an operation on the other list, or a read of the tracked."""
    if rng.random() < 0.5:
        return change(rng, names.other, lists[names.other], names.values)
    state = lists[names.tracked]
    reads = ["count", "copy"] + (["sort"] if state == sorted(state) else [])
    method = rng.choice(reads)
    return ops.Op(names.tracked, method, (rng.choice(names.values),) if method == "count" else ())


def program(rng: random.Random, count: int, names: Lists = EVAL_LISTS) -> Program:
    """``count`` relevant operations and as many decoys, shuffled together, from empty lists."""
    lists: dict[str, list[int]] = {names.tracked: [], names.other: []}
    decoys = set(rng.sample(range(2 * count), count))
    lines, relevant = [], []
    for index in range(2 * count):
        is_decoy = index in decoys
        tracked = lists[names.tracked]
        op = decoy(rng, lists, names) if is_decoy else change(rng, names.tracked, tracked, names.values)
        ops.apply(lists, op)
        lines.append(op.line)
        relevant.append(not is_decoy)
    return Program(tuple(lines), tuple(relevant), tuple(lists[names.tracked]))


_LIST = re.compile(r"\[([^\[\]]*)\]")


def grade(output: str, references: Sequence[str]) -> Score:
    """1 where the answer's last bracketed list is the reference list, values in order and spaces
    aside, or, for a number, where the last whole number the answer names is the reference."""
    reference = references[0]
    if reference.startswith("["):
        lists = _LIST.findall(output)
        said = _numbers(lists[-1]) if lists else None
        right = said is not None and said == _numbers(reference[1:-1])
    else:
        numbers = whole_numbers(extract_answer(output))
        right = bool(numbers) and numbers[-1] == reference
    return Score(float(right), (reference,) if right else (), SCORING)


def _numbers(inside: str) -> tuple[int, ...] | None:
    """The values of a bracketed list's inside ("3, 1,2"), or None where one is no whole number."""
    parts = [part.strip() for part in inside.split(",")]
    if parts == [""]:
        return ()
    return tuple(int(p) for p in parts) if all(p.isascii() and p.isdigit() for p in parts) else None


def question_kind(sample: int) -> str:
    return ops.QUESTION_KINDS[sample % len(ops.QUESTION_KINDS)]


class StateTask(CountedLines):
    axis = CountAxis(TASK, "--ops", "operations", "each with its decoy line")

    def __init__(self, spec: RunSpec, tokenizer: Tokenizer, lists: Lists = EVAL_LISTS) -> None:
        self.lists = lists  # fathom export's programs act on the training lists
        text = dataclasses.replace(lists.text(), system=spec.system_prompt)
        self._build(spec, tokenizer, text, spec.ops or DEFAULT_OPS)

    @functools.cached_property
    def line_tokens(self) -> int:
        """The most tokens one line of code takes."""
        lines = [self.form.format(line) for line in self.lists.longest()]
        return max(len(ids) for ids in self.tokenizer.encode_batch(lines))

    @functools.cached_property
    def overhead(self) -> int:
        """The most tokens the template, instruction and question take, over the question kinds."""
        questions = [ops.question(k, self.lists.tracked) for k in ops.QUESTION_KINDS]
        return max(sum(map(len, self.builder.frame(q))) for q in questions)

    def prepare(self, cell: Cell) -> Sample:
        count = cell_count(cell.task)
        rng = needle_rng(self.spec.seed, *self.lists.stream, cell.task, cell.length, cell.sample)
        drawn = program(rng, count, self.lists)
        kind = question_kind(cell.sample)
        asked = ops.question(kind, self.lists.tracked)
        prompt = place_lines(self.builder, rng, cell.length, asked, drawn.lines, self.form)
        return Sample(
            cell,
            prompt,
            self.builder.text,
            asked,
            (ops.answer(kind, list(drawn.final)),),
            kind,
            query_keys=(f"{self.lists.tracked}.",),
            scoring=SCORING,
            max_new_tokens=self.spec.max_new_tokens or NEW_TOKENS,
            grader=grade,
        )

    def identity(self) -> dict[str, Any]:
        return self._identity(STATE_VERSION, (STATE_TEXT, [ops.question(k) for k in ops.QUESTION_KINDS]))
