"""Long outputs (``fathom run listing``): a log of records spread through a haystack, and a question
whose answer grows with the input: the id of every record that matches a condition, one a line.

The design, and why:

- **Records** are one line each (``prompts/log_records.py``):
  ``#40417 2024-03-07 14:02 | user=alice | action=refund | amount=120``. The condition is a user and
  an action together; ``N`` records match it, and as many look-alikes do not: each has the user
  with another action, or the action with another user (a coin each), so that neither field alone
  finds the answer. Ids are distinct five-digit numbers, times rise through March as a log's do.
  ``N`` is the run's axis: ``--items 8,32,128`` (``DEFAULT_ITEMS`` when left out); a cell's records'
  task is ``listing:N``.
- **Placement** is state tracking's (``prompts/line_stream.py``): the records, in order, at depths
  drawn uniformly and sorted, each on a line of its own at a sentence boundary, the prompt exactly
  its length in the model's tokens.
- **The output budget** grows with the answer: each sample's ``max_new_tokens`` is the expected
  answer's tokens in the model's tokenizer (the ids, one a line) with a margin of a quarter and
  ``MARGIN`` tokens more, so a model that lists every id and a few words besides is not cut short.
  ``--max-new-tokens`` overrides it (to study truncation). The record keeps the budget it ran with.
- **Grading** is item-level (``grade``): the ids the answer names, each counted once, against the
  matching ids; precision, recall and their F1, which is the sample's score. An answer cut at its
  budget (finish reason ``length``) is graded as it stands; the summary counts such answers.
- **Too many items** for a length are refused when the task is made, before any sample, with how
  many fit: every record at its longest, with its look-alike, must fit beside the instruction and
  question.
"""

from __future__ import annotations

import functools
import itertools
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from fathom.prompts import PromptText
from fathom.prompts import log_records as logs
from fathom.prompts.line_stream import place_lines
from fathom.prompts.needles import needle_rng
from fathom.prompts.tokenizers import Tokenizer
from fathom.records import Cell, Score
from fathom.spec import RunSpec
from fathom.tasks.base import Sample
from fathom.tasks.counted_lines import CountAxis, CountedLines, answer_budget, cell_count

# Bump when the text, the generator or the grader below changes the prompts or the grades.
LISTING_VERSION = 1
TASK = "listing"
DEFAULT_ITEMS = (8, 32, 128)
MARGIN = 16  # tokens past a quarter more than the expected answer: room for a short preamble
SCORING = "listing"
MINUTES = 31 * 24 * 60  # March, minute by minute
AMOUNTS = range(1, 1000)
LISTING_TEXT = PromptText(
    before=(
        "Below is a long document with log records scattered through it, one a line, each with an id, "
        "a time, a user, an action and an amount. The prose between the records is not part of the "
        "log.\n\n<document>\n"
    ),
    after=" </document>\n\nQuestion: {question}",
    answer_prefix="Answer:",
)


@dataclass(frozen=True)
class Log:
    """One sample's records in order, the condition asked, and the ids that match it, in order."""

    lines: tuple[str, ...]
    user: str
    action: str
    matching: tuple[str, ...]


def draw_log(rng: random.Random, count: int, space: logs.LogSpace = logs.EVAL_LOGS) -> Log:
    """``count`` records that match a drawn user and action, and as many look-alikes, shuffled: of
    ``space``'s users, actions and ids."""
    user, action = rng.choice(space.users), rng.choice(space.actions)
    size = 2 * count
    idents = rng.sample(space.ids, size)
    minutes = sorted(rng.sample(range(MINUTES), size))
    fakes = set(rng.sample(range(size), count))
    # Each look-alike's other field, and which field it changes (a coin): drawn in bulk, as a
    # 128k prompt's hundreds of records, one draw at a time, cost more than the prompt's building.
    other_users = rng.choices([u for u in space.users if u != user], k=count)
    other_actions = rng.choices([a for a in space.actions if a != action], k=count)
    coins = rng.choices((True, False), k=count)
    amounts = rng.choices(AMOUNTS, k=size)
    lines, matching, fake = [], [], 0
    for index, ident in enumerate(idents):
        who, what = user, action
        if index in fakes:  # the user doing something else, or someone else doing it
            if coins[fake]:
                what = other_actions[fake]
            else:
                who = other_users[fake]
            fake += 1
        else:
            matching.append(f"#{ident}")
        day, rest = divmod(minutes[index], 24 * 60)
        lines.append(logs.record(ident, day + 1, rest, who, what, amounts[index]))
    return Log(tuple(lines), user, action, tuple(matching))


@dataclass(frozen=True)
class ItemScores:
    """An answer's items against the reference's: precision, recall and their F1."""

    precision: float
    recall: float
    f1: float
    found: tuple[str, ...]  # the reference items the answer names, in the reference's order


def item_scores(output: str, references: Sequence[str]) -> ItemScores:
    """The ids ``output`` names (each once) against ``references``; an answer naming none has
    precision 0, as a reference of none is never drawn."""
    said, gold = set(logs.ids_in(output)), set(references)
    hits = said & gold
    precision = len(hits) / len(said) if said else 0.0
    recall = len(hits) / len(gold) if gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if hits else 0.0
    return ItemScores(precision, recall, f1, tuple(r for r in references if r in hits))


def grade(output: str, references: Sequence[str]) -> Score:
    """The answer's item-level F1 against the matching ids."""
    scores = item_scores(output, references)
    return Score(scores.f1, scores.found, SCORING)


class ListingTask(CountedLines):
    axis = CountAxis(TASK, "--items", "items", "each record with its look-alike")
    budget_per_sample = True  # each budget sized by its own answer

    def __init__(self, spec: RunSpec, tokenizer: Tokenizer, space: logs.LogSpace = logs.EVAL_LOGS) -> None:
        self.space = space  # evaluation's users, actions and ids, or training's (``fathom export``)
        text = PromptText(
            LISTING_TEXT.before, LISTING_TEXT.after, LISTING_TEXT.answer_prefix, spec.system_prompt
        )
        self._build(spec, tokenizer, text, spec.items or DEFAULT_ITEMS)

    @functools.cached_property
    def line_tokens(self) -> int:
        """The most tokens one record takes: the longest id, time and amount, any user and action."""
        longest = [
            self.form.format(logs.record(self.space.ids[-1], 31, MINUTES // 31 - 1, user, action, 999))
            for user, action in itertools.product(self.space.users, self.space.actions)
        ]
        return max(len(ids) for ids in self.tokenizer.encode_batch(longest))

    @functools.cached_property
    def overhead(self) -> int:
        """The most tokens the template, instruction and question take, over the conditions."""
        questions = [
            logs.question(u, a, self.space.example)
            for u, a in itertools.product(self.space.users, self.space.actions)
        ]
        return max(sum(map(len, self.builder.frame(q))) for q in questions)

    def budget(self, matching: Sequence[str]) -> int:
        """The output budget for an answer listing ``matching``: its tokens, a quarter more, and MARGIN."""
        if self.spec.max_new_tokens:
            return self.spec.max_new_tokens
        return answer_budget(len(self.tokenizer.encode(logs.listed(list(matching)))), MARGIN)

    def prepare(self, cell: Cell) -> Sample:
        rng = needle_rng(self.spec.seed, *self.space.stream, cell.task, cell.length, cell.sample)
        drawn = draw_log(rng, cell_count(cell.task), self.space)
        asked = logs.question(drawn.user, drawn.action, self.space.example)
        prompt = place_lines(self.builder, rng, cell.length, asked, drawn.lines, self.form)
        return Sample(
            cell,
            prompt,
            self.builder.text,
            asked,
            drawn.matching,
            "ids",
            query_keys=(logs.condition(drawn.user, drawn.action),),
            scoring=SCORING,
            max_new_tokens=self.budget(drawn.matching),
            grader=grade,
        )

    def identity(self) -> dict[str, Any]:
        return self._identity(
            LISTING_VERSION, (LISTING_TEXT, logs.question("{user}", "{action}", self.space.example), MARGIN)
        )
