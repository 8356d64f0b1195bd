"""Reasoning in a haystack (``fathom run babi``): bAbI-style stories whose sentences are spread through
a haystack, and a question that needs one, two or three of them. BABILong's design (Kuratov et al.,
2024), with fathom's own generator (``tasks/babi_draw.py``) and no copied data.

The design, and why:

- **Tasks** are bAbI's first five (``prompts/babi_story.py``): ``qa1`` one supporting fact, ``qa2``
  two, ``qa3`` three, ``qa4`` two-argument relations, ``qa5`` three-argument relations. ``babi`` runs
  all five; ``babi:qa2`` one alone, as RULER's tasks are named (a cell's task is ``babi:qaN``).
- **Placement** (``prompts/line_stream.py``, shared with ``state``): each sentence on a line of its
  own, in story order, at depths drawn uniformly and sorted, snapped to the haystack's boundaries by
  the prompt builder: every prompt is exactly its length in the model's tokens, under its chat
  template. The record's ``needle_token_offsets`` say where each sentence landed; the story is drawn
  again from the record's seed and cell (``story_of``) to know which ones supported the answer.
- **Grading** is BABILong's (``compare_answers`` in its ``metrics.py``): the answer's first sentence,
  cut at its first full stop (or "Question"), is right when the reference is the one label it names
  that the question does not. The labels are the story's places (qa1-qa4) or people (qa5), matched
  as whole words, ignoring case: BABILong matches substrings, which would find "Ida" in "idea".
- **Too long a story** for a length is refused when the task is made, before any sample, with how
  many sentences fit: every sentence counted at its longest, beside the instruction and question.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator, Sequence
from typing import Any

from fathom.errors import SpecError
from fathom.prompts import PromptText
from fathom.prompts import babi_story as lang
from fathom.prompts.line_stream import place_lines
from fathom.prompts.needles import needle_rng
from fathom.prompts.tokenizers import Tokenizer
from fathom.records import Cell, Score
from fathom.scoring import extract_answer
from fathom.spec import RunSpec
from fathom.tasks import babi_draw as draw
from fathom.tasks.base import Sample
from fathom.tasks.counted_lines import OverCorpus

# Bump when the text, the generator or the grader below changes the prompts or the grades.
BABI_VERSION = 1
TASK = "babi"
NEW_TOKENS = 16  # one word, with room for a short sentence around it
SCORING = "babi"
BABI_TEXT = PromptText(
    before=(
        "Below is a long document. The sentences of a short story are scattered through it, each on a "
        "line of its own, in the order the story happens. The prose between them is no part of the "
        "story.\n\n<document>\n"
    ),
    after=" </document>\n\nAnswer the question from the story with a single word.\nQuestion: {question}",
    answer_prefix="Answer:",
)


def cell_task(task: str) -> str:
    return f"{TASK}:{task}"


def story_task(cell: str) -> str:
    """The bAbI task of a cell's task name, ``babi:qa2`` -> ``qa2``."""
    return cell.partition(":")[2]


def story_of(seed: int, task: str, length: int, sample: int) -> draw.Story:
    """The story of the sample at (``task``, ``length``, ``sample``) of a run seeded ``seed``: the
    prompt's draws start with it, so a record's story is drawn again from its cell alone."""
    return draw.draw_story(needle_rng(seed, task, length, sample), story_task(task))


_CUT = re.compile(r"\.|question", re.IGNORECASE)


def grade(output: str, references: Sequence[str], labels: Sequence[str] = (), question: str = "") -> Score:
    """BABILong's rule: right when the reference is the one label (of ``labels``, the reference
    always among them) that the answer's first sentence names and the question does not."""
    reference = references[0]
    first = _CUT.split(extract_answer(output), maxsplit=1)[0]
    named = {
        label.lower()
        for label in {*labels, reference}
        if _names(first, label) and not _names(question, label)
    }
    right = named == {reference.lower()}
    return Score(float(right), (reference,) if right else (), SCORING)


def _names(text: str, word: str) -> bool:
    return re.search(rf"(?<!\w){re.escape(word)}(?!\w)", text, re.IGNORECASE) is not None


class BabiTask(OverCorpus):
    def __init__(self, spec: RunSpec, tokenizer: Tokenizer, pools: draw.Pools = draw.EVAL_POOLS) -> None:
        self.pools = pools  # fathom export's stories draw from the training pools
        self.tasks = draw.TASKS if spec.task == TASK else (story_task(spec.task),)
        text = PromptText(BABI_TEXT.before, BABI_TEXT.after, BABI_TEXT.answer_prefix, spec.system_prompt)
        self._build_over(spec, tokenizer, text)
        self._check_fit()

    def _check_fit(self) -> None:
        """Refuse a story that cannot fit the shortest length, saying how many sentences fit."""
        shortest = min(self.spec.lengths)
        task = max(self.tasks, key=lambda t: draw.SIZES[t])
        fit = self.fitting(shortest)
        if draw.SIZES[task] > fit:
            raise SpecError(
                f"babi:{task}'s story of {draw.SIZES[task]} sentences does not fit a length of {shortest} "
                f"tokens: at most {max(fit, 0)} sentences fit it (up to {self.line_tokens} tokens each, "
                f"beside {self.overhead} tokens of instruction and question); use longer --lengths"
            )

    @functools.cached_property
    def _longest(self) -> dict[str, str]:
        """Each kind of word at its most tokens in this tokenizer: people, places, objects."""
        pools = {"person": self.pools.people, "place": self.pools.places, "thing": self.pools.objects}
        return {
            kind: max(pool, key=lambda w: len(self.tokenizer.encode(" " + w))) for kind, pool in pools.items()
        }

    @functools.cached_property
    def line_tokens(self) -> int:
        """The most tokens a sentence takes: each form with the longest words, a token more a word
        (a word's tokens can merge otherwise beside its neighbours)."""
        person, place, thing = self._longest["person"], self._longest["place"], self._longest["thing"]
        verb = max((*lang.MOVES, *lang.TAKES, *lang.DROPS, *lang.GIVES), key=len)
        forms = [
            (f"{person} {verb} {place}.", 2),
            (f"{person} {verb} the {thing} to {person}.", 3),
            (f"{place} is north of {place}.", 2),
        ]
        encoded = self.tokenizer.encode_batch([self.form.format(text) for text, _ in forms])
        return max(len(ids) + words for ids, (_, words) in zip(encoded, forms, strict=True))

    @functools.cached_property
    def overhead(self) -> int:
        """The most tokens the template, instruction and question take, over the tasks asked."""
        person, place, thing = self._longest["person"], self._longest["place"], self._longest["thing"]
        args = {"qa1": (person,), "qa2": (thing,), "qa3": (thing, place), "qa4": ("north", place),
                "qa5": (thing, person)}  # fmt: skip
        return max(sum(map(len, self.builder.frame(lang.question(t, args[t])))) + 2 for t in self.tasks)

    def fitting(self, length: int) -> int:
        """How many story sentences fit a prompt of ``length`` tokens."""
        return (length - self.overhead) // self.line_tokens

    def cells(self) -> Iterator[Cell]:
        # Length-major, as RULER's: a backend loads each length's KV budget once.
        return (
            Cell(cell_task(task), length, None, index)
            for length in self.spec.lengths
            for task in self.tasks
            for index in range(self.spec.samples)
        )

    def prepare(self, cell: Cell) -> Sample:
        rng = needle_rng(self.spec.seed, *self.pools.stream, cell.task, cell.length, cell.sample)
        story = draw.draw_story(rng, story_task(cell.task), pools=self.pools)
        asked = story.question
        prompt = place_lines(self.builder, rng, cell.length, asked, story.lines, self.form)
        return Sample(
            cell,
            prompt,
            self.builder.text,
            asked,
            (story.answer,),
            story_task(cell.task),
            query_keys=tuple(a for a in story.args if a not in lang.DIRECTIONS),
            scoring=SCORING,
            max_new_tokens=self.spec.max_new_tokens or NEW_TOKENS,
            grader=functools.partial(grade, labels=story.labels, question=asked),
        )

    def identity(self) -> dict[str, Any]:
        wording = (BABI_TEXT, lang.QUESTIONS, draw.SIZES, draw.PLACES, draw.OBJECTS)
        return self._identity(BABI_VERSION, wording)
