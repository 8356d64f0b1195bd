"""RULER's aggregation tasks: common words extraction (cwe), the ten words a numbered list repeats
most, and frequent words extraction (fwe), the three most frequent coded words of a text whose word
counts follow a Zipf law.

Every word (and every list number) is tokenised once, with the space that comes before it in the
text, and a context is those ids joined: its size is known before it is built, and the prompt's
count is exact for the ids returned. The answers are spread over the whole context, so no needle
positions are recorded (RULER defines no depth for these tasks; a depth would say nothing).

Where fathom differs from RULER, and why:

- The length. RULER grows the word count in steps (of ten for cwe, of a 32nd of the length for fwe),
  re-tokenising the whole prompt each time, and keeps the last count that fits; its fwe even fills
  the whole length, leaving no room for the tokens to generate. Here the counts are worked out from
  the tokens of each piece, and the prompt fills the length less the tokens to generate, nearly
  always exactly. ``--fill ruler`` takes RULER's counts instead (``sizing.py``): cwe's distinct
  words in tens, fwe's words in 32nds of the length from a sixth of it, with no gap closed; fwe's
  still leave the tokens to generate their room.
- cwe's gap. The uncommon words (``freq_ucw`` times each) stop while at least one more entry fits
  (or up to three words sooner, where only that lets the rest be filled exactly); the few tokens
  left are filled by a handful of further words that appear once (below 4096, where every uncommon
  word appears once, they are simply more uncommon words).
- fwe's gap. The word count is the largest whose Zipf counts fit; the tokens left get more "..."
  (the noise, already the most frequent) and, where the noise's tokens do not divide them, one more
  occurrence of a few rare words, all kept below the third answer's count.
- The shuffles. RULER shuffles every list with one fixed seed; here each sample's generator does.
- cwe's example. RULER writes it inside the model's chat template; here it is plain text at the
  head of the user's message, as for vt.
- The length that RULER's rules read (cwe's repeats below 4096, fwe's vocabulary of length // 50) is
  the target plus the family's tokens to generate: with ``--max-new-tokens`` it is off by the
  difference.
- fwe's vocabulary has at least five words: RULER's rule would leave fewer than the three answers
  and a rarer word below 250 tokens.
"""

from __future__ import annotations

import functools
import hashlib
import math
import random
import string
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from fathom.errors import PromptError
from fathom.prompts import PromptText, assemble, frame, length_tolerance, too_short
from fathom.prompts.haystack.index import Ids
from fathom.tasks.ruler.base import (
    Draft,
    Setting,
    Steps,
    after_example,
    encode_units,
    solved_example,
    task_text,
)
from fathom.tasks.ruler.catalogue import Variant
from fathom.tasks.ruler.splits import cwe_words, fwe_letters

SHORT = 4096  # below this length RULER repeats cwe's words less and shows a shorter example
SINGLES_POOL = 64  # cwe words set aside to close the gap, varied enough in size to close it exactly
BACK_OFF = 3  # uncommon cwe words that may give way to words that appear once, to close the gap
NOISE = "..."
RARE_SLOTS = 16  # fwe's rarest words that may take one more occurrence to close the gap
# RULER's sizing steps (--fill ruler): cwe's words by ten; fwe's by a 32nd of the length, from as many
# words as the length holds coded words' letters.
CWE_STEP, FWE_SHARE = 10, 32


@dataclass(frozen=True)
class Repeats:
    """How often a cwe list repeats each of its common and each of its other words."""

    common: int
    uncommon: int


# RULER's solved example: 40 words repeated 10 and 3 times; below 4096, 20 words, 3 and 1 times.
EXAMPLE, SHORT_EXAMPLE = (40, Repeats(10, 3)), (20, Repeats(3, 1))
SHORT_REPEATS = Repeats(6, 1)  # the task's own list below 4096


def numbered(words: list[str]) -> str:
    """``1. w 2. w ...``, as RULER writes a cwe list and its answer."""
    return " ".join(f"{i}. {word}" for i, word in enumerate(words, 1))


def spaced(setting: Setting, words: list[str]) -> list[Ids]:
    """Each word's ids as it reads after a space in running text."""
    return encode_units(setting.tokenizer, [" " + word for word in words])


class CommonWords:
    """cwe: ``num_cw`` words repeated ``freq_cw`` times among words repeated ``freq_ucw`` times."""

    def __init__(self, variant: Variant, setting: Setting) -> None:
        self.variant, self.setting = variant, setting
        params = variant.params
        self.common: int = params["num_cw"]
        self.repeats = Repeats(params["freq_cw"], params["freq_ucw"])
        self.words = list(cwe_words(setting.split))
        self.word_ids = dict(zip(self.words, spaced(setting, self.words), strict=True))
        self._numbers: list[Ids] = []  # entry i's number ("1.", " 2.", ...) at i - 1
        self._number_sums = np.zeros(1, dtype=np.int64)  # [n]: tokens of the numbers of entries 1..n

    def identity(self) -> dict[str, Any]:
        digest = hashlib.sha256("\n".join(self.words).encode()).hexdigest()
        return {"words": len(self.words), "words_sha256": digest}

    def steps(self, length: int) -> Steps:
        """RULER's: ten distinct words at a time (the ten common ones among them), every word at most."""
        return Steps(CWE_STEP, CWE_STEP, "words", len(self.words))

    def appended(self, draft: Draft) -> str:
        return " " + numbered(list(draft.answers))  # RULER's numbered answer, after a space

    def draft(self, target: int, rng: random.Random, count: int | None = None) -> Draft:
        short = target + self.variant.text.tokens_to_generate < SHORT
        example_size, example_repeats = SHORT_EXAMPLE if short else EXAMPLE
        text = task_text(self.variant, self.setting, {}, "")
        text = after_example(text, self._example(text, example_size, example_repeats, rng), "\n")
        head, tail = frame(self.setting.tokenizer, self.setting.template, text, "")
        order = rng.sample(self.words, len(self.words))
        budget = target - len(head) - len(tail)
        repeats = SHORT_REPEATS if short else self.repeats
        if count is None:
            counts = self._counts(order, repeats, budget, target)
        else:  # RULER's: ``count`` distinct words, the first ten the common ones
            common, uncommon = order[: self.common], order[self.common : count]
            counts = dict.fromkeys(common, repeats.common) | dict.fromkeys(uncommon, repeats.uncommon)
        entries = [word for word, count in counts.items() for _ in range(count)]
        rng.shuffle(entries)
        prompt = assemble(head, [(self._list_ids(entries), False)], tail, target)
        answers = tuple(order[: self.common])
        # The simulated reader cannot count; it reports what mentions its keys, so the keys are the answers.
        return Draft(prompt, text, "", answers, "words", answers)

    def _example(self, text: PromptText, size: int, repeats: Repeats, rng: random.Random) -> str:
        """A small list of ``size`` words, its question and its answer, as RULER shows one first."""
        words = rng.sample(self.words, size)
        common = words[: self.common]
        entries = common * repeats.common + words[self.common :] * repeats.uncommon
        rng.shuffle(entries)
        return solved_example(text, numbered(entries), "", numbered(common))

    def _counts(self, order: list[str], repeats: Repeats, budget: int, target: int) -> dict[str, int]:
        """How often each word appears (common words first) for the list to fill ``budget``: the
        uncommon words while one more entry still fits after them (or up to ``BACK_OFF`` fewer, where
        only that lets the words that appear once fill the rest exactly), then those words."""
        common, pool = order[: self.common], order[self.common : self.common + SINGLES_POOL]
        uncommon = order[self.common + SINGLES_POOL :]
        start = self.common * repeats.common
        common_tokens = repeats.common * int(self._tokens(common).sum())
        used = int(self._number_tokens(start)[start]) + common_tokens
        if used > budget:
            overhead = target - budget + used
            raise too_short(target, overhead, f"template, example and the {self.common} common words")
        # Every entry has a token at least, which bounds the uncommon words that can fit.
        most = min(len(uncommon), (budget - used) // repeats.uncommon)
        sums = self._number_tokens(start + most * repeats.uncommon + 1)
        entries = start + repeats.uncommon * np.arange(most + 1)  # [j]: entries with j uncommon words
        uncommon_tokens = repeats.uncommon * np.concatenate([[0], self._tokens(uncommon[:most]).cumsum()])
        filled = sums[entries] + common_tokens + uncommon_tokens
        next_entry = sums[entries + 1] - sums[entries] + int(self._tokens(pool).min())
        fitting = max(0, int((filled + next_entry <= budget).sum()) - 1)  # the fits are a leading run
        attempts = []
        for taken in range(fitting, max(fitting - BACK_OFF, 0) - 1, -1):
            attempts.append((taken, *self._singles(pool, int(entries[taken]), budget - int(filled[taken]))))
            if attempts[-1][2] == 0:
                break
        taken, once, left = min(attempts, key=lambda attempt: attempt[2])
        # Half the tolerance, as for qa: the rest is for text backends' re-tokenisation.
        if fitting == len(uncommon) and left > length_tolerance(target) // 2:
            raise PromptError(
                f"RULER's {len(self.words)} words fill only {budget - left} of the {budget} tokens this "
                "length leaves the cwe list; use shorter lengths"
            )
        counts = dict.fromkeys(common, repeats.common) | dict.fromkeys(uncommon[:taken], repeats.uncommon)
        return counts | dict.fromkeys(once, 1)

    def _singles(self, pool: list[str], start: int, room: int) -> tuple[list[str], int]:
        """Words of ``pool`` that, once each as entries ``start + 1``..., fill ``room`` tokens: the
        fewest that fill it exactly, else the choice that leaves least; and the tokens left."""
        sizes = self._tokens(pool).tolist()
        most = min(len(pool), room)  # every entry has a token at least
        sums = self._number_tokens(start + most)
        best: tuple[list[str], int] = ([], room)
        for count in range(1, most + 1):
            words_room = room - int(sums[start + count] - sums[start])
            if words_room < count * min(sizes):
                break
            chosen = _largest_first(sizes, count, words_room)
            if chosen is None:
                continue
            left = words_room - sum(sizes[i] for i in chosen)
            if left < best[1]:
                best = ([pool[i] for i in chosen], left)
            if left == 0:
                break
        return best

    def _list_ids(self, entries: list[str]) -> Ids:
        """The list's ids: each entry's number, then its word."""
        self._number_tokens(len(entries))
        numbers, words = self._numbers, self.word_ids
        return np.concatenate([ids for i, word in enumerate(entries) for ids in (numbers[i], words[word])])

    def _tokens(self, words: list[str]) -> NDArray[np.int64]:
        return np.array([len(self.word_ids[word]) for word in words], dtype=np.int64)

    def _number_tokens(self, entries: int) -> NDArray[np.int64]:
        """Cumulative token counts of the list's numbers, covering at least ``entries`` entries."""
        have = len(self._numbers)
        if entries > have:
            first, last = have + 1, max(entries, 2 * have, 1024)
            # An entry is " {i}. {word}" but for the first, which opens the context: "1. {word}".
            texts = [f"{'' if i == 1 else ' '}{i}." for i in range(first, last + 1)]
            self._numbers += encode_units(self.setting.tokenizer, texts)
            self._number_sums = np.concatenate([[0], np.cumsum([len(ids) for ids in self._numbers])])
        return self._number_sums


def _largest_first(sizes: list[int], count: int, total: int) -> list[int] | None:
    """``count`` items (indexes into ``sizes``) whose sizes add up to ``total`` or just under it: each
    the first of the largest that leave every later one room for the smallest; None if they run out."""
    low, left = min(sizes), total
    chosen: list[int] = []
    for slots in range(count, 0, -1):
        most = left - (slots - 1) * low
        fitting = [i for i, size in enumerate(sizes) if size <= most and i not in chosen]
        if not fitting:
            return None
        chosen.append(max(fitting, key=lambda i: sizes[i]))
        left -= sizes[chosen[-1]]
    return chosen


@functools.cache
def zeta(alpha: float, terms: int = 1000) -> float:
    """The Riemann zeta function for ``alpha`` > 1 (scipy's ``zeta``, which RULER uses): a direct
    sum and the Euler-Maclaurin tail, exact to double precision for RULER's alpha."""
    head = math.fsum(math.pow(k, -alpha) for k in range(1, terms))
    n = float(terms)
    tail = (
        math.pow(n, 1 - alpha) / (alpha - 1) + math.pow(n, -alpha) / 2 + alpha * math.pow(n, -alpha - 1) / 12
    )
    return head + tail


def zipf_counts(words: int, ranks: int, alpha: float) -> NDArray[np.int64]:
    """How often each rank appears among ``words`` words, computed and rounded down as RULER does."""
    k = np.arange(1, ranks + 1, dtype=np.float64)
    counts: NDArray[np.int64] = (words * k**-alpha / zeta(alpha)).astype(np.int64)
    return counts


class FrequentWords:
    """fwe: coded words of ``coded_wordlen`` letters, the rank-k one ``words * k**-alpha / zeta(alpha)``
    times; the top rank is "..." (noise), and the answers are ranks 2 to 4."""

    def __init__(self, variant: Variant, setting: Setting) -> None:
        self.variant, self.setting = variant, setting
        self.alpha: float = variant.params["alpha"]
        self.letters = fwe_letters(setting.split, variant.params["coded_wordlen"])

    def identity(self) -> dict[str, Any]:
        return {}

    def steps(self, length: int) -> Steps:
        return Steps(length // self.letters, length // FWE_SHARE, "coded words")

    def appended(self, draft: Draft) -> str:
        return ""  # RULER's fwe measures its prompt alone

    def draft(self, target: int, rng: random.Random, count: int | None = None) -> Draft:
        vocabulary = self._vocabulary(max(5, (target + self.variant.text.tokens_to_generate) // 50), rng)
        text = task_text(self.variant, self.setting, {}, "")
        # The template's space before the context goes with the first word, so that every word has
        # the ids it has in running text.
        text = replace(text, before=text.before.removesuffix(" "))
        head, tail = frame(self.setting.tokenizer, self.setting.template, text, "")
        word_ids = spaced(self.setting, vocabulary)
        if count is None:
            sizes = np.array([len(ids) for ids in word_ids])
            counts = self._counts(sizes, target - len(head) - len(tail), target)
        else:  # RULER's: the Zipf counts of ``count`` words, as they fall
            counts = zipf_counts(count, len(word_ids), self.alpha)
        words = [rank for rank, count in enumerate(counts.tolist()) for _ in range(count)]
        rng.shuffle(words)
        prompt = assemble(head, [(np.concatenate([word_ids[rank] for rank in words]), False)], tail, target)
        answers = tuple(vocabulary[1:4])
        # The simulated reader cannot count; it reports what mentions its keys, so the keys are the answers.
        return Draft(prompt, text, "", answers, "words", answers)

    def _vocabulary(self, size: int, rng: random.Random) -> list[str]:
        """``size`` distinct words in random order, the first of them the noise."""
        coded: dict[str, None] = {}
        while len(coded) < size - 1:
            coded["".join(rng.choices(string.ascii_lowercase, k=self.letters))] = None
        return [NOISE, *coded]

    def _counts(self, sizes: NDArray[np.int64], budget: int, target: int) -> NDArray[np.int64]:
        """Occurrences of each rank that fill ``budget``: the Zipf counts of the most words that fit,
        and the gap closed as the module says."""

        def tokens(words: int) -> int:
            return int(zipf_counts(words, len(sizes), self.alpha) @ sizes)

        shares = np.arange(1, 6, dtype=np.float64) ** -self.alpha / zeta(self.alpha)
        # From this many words on, rank 4 appears at least once more than rank 5 (so ranks 2-4 stand out).
        least = math.ceil(1 / (shares[3] - shares[4]))
        if tokens(least) > budget:
            raise too_short(
                target,
                target - budget + tokens(least),
                "template and a text whose top three words stand out",
            )
        low, high = least, math.ceil((budget + 1) / shares[0]) + 1  # tokens(high) > budget
        while high - low > 1:
            middle = (low + high) // 2
            low, high = (middle, high) if tokens(middle) <= budget else (low, middle)
        counts = zipf_counts(low, len(sizes), self.alpha)
        rare = [rank for rank in range(len(sizes) - 1, 3, -1) if counts[rank] + 1 < counts[3]][:RARE_SLOTS]
        # Noise may also go where a unit of it is too coarse, as long as it stays the most frequent word.
        spare = int(counts[0] - counts[1] - 1)
        noise, extra = _fill_gap(budget - tokens(low), int(sizes[0]), [int(sizes[r]) for r in rare], spare)
        counts[0] += noise
        for index in extra:
            counts[rare[index]] += 1
        return counts


def _fill_gap(gap: int, unit: int, items: list[int], spare: int) -> tuple[int, list[int]]:
    """How many ``unit``-sized pieces to add (or, down to ``-spare``, to take away), and which of
    ``items`` (sizes, each used once at most) to add, to fill ``gap``: exactly if any choice can,
    with as few items as can; what is left over is under a unit."""
    fewest: dict[int, list[int]] = {0: []}  # total of the items -> the fewest items that make it
    for index, size in enumerate(items):
        for total, chosen in list(fewest.items()):
            grown = total + size
            if grown <= gap + spare * unit and (grown not in fewest or len(fewest[grown]) > len(chosen) + 1):
                fewest[grown] = [*chosen, index]
    total, chosen = min(fewest.items(), key=lambda pair: ((gap - pair[0]) % unit, len(pair[1])))
    return (gap - total) // unit, chosen
