"""RULER's aggregation tasks, cwe and fwe: lengths, word counts, cwe's solved example, and a perfect
reader through a whole run."""

from __future__ import annotations

import functools
import json
import math
import random
import re
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fathom.cli import main
from fathom.errors import PromptError
from fathom.prompts import length_tolerance
from fathom.prompts.templates import resolve_template
from fathom.prompts.tokenizers import load_tokenizer
from fathom.records import Cell
from fathom.spec import RunSpec
from fathom.tasks.base import Sample
from fathom.tasks.ruler.base import Setting
from fathom.tasks.ruler.catalogue import VARIANTS, Variant
from fathom.tasks.ruler.suite import RulerTask
from fathom.tasks.ruler.words import SINGLES_POOL, CommonWords, FrequentWords, Repeats, zeta, zipf_counts

TOKENIZERS = {name: load_tokenizer(name) for name in ("char", "cl100k_base")}
ENTRY = re.compile(r"(\d+)\. (.+?)(?= \d+\. |$)")
CWE_QUESTION = "\nQuestion: What are the 10 most common words in the above list?"
CWE_PREFIX = " Answer: The top 10 words that appear most often in the list are:"


@functools.cache
def ruler_task(task: str, tokenizer: str, seed: int) -> RulerTask:
    # Built once per test session: cwe tokenises its whole word list when it is made.
    spec = RunSpec(task, "sim:perfect", tokenizer, (4096,), (), 1, seed=seed, template="none")
    return RulerTask(spec, TOKENIZERS[tokenizer])


def prepare(task: str, tokenizer: str, length: int, index: int = 0, seed: int = 0) -> Sample:
    return ruler_task(task, tokenizer, seed).prepare(Cell(task, length, None, index))


def context_of(sample: Sample, tokenizer: str) -> str:
    prompt = sample.prompt
    ids = prompt.ids[prompt.head_tokens : prompt.head_tokens + prompt.context_tokens]
    return TOKENIZERS[tokenizer].decode(ids.tolist())


def numbered_words(text: str) -> list[str]:
    """The words of a list ``1. w 2. w ...``, checking that it is written exactly so."""
    found = ENTRY.findall(text)
    assert [int(number) for number, _ in found] == list(range(1, len(found) + 1))
    words = [word for _, word in found]
    assert " ".join(f"{i}. {word}" for i, word in enumerate(words, 1)) == text
    return words


@pytest.mark.parametrize("task", ["cwe", "fwe"])
@pytest.mark.parametrize("tokenizer", sorted(TOKENIZERS))
@pytest.mark.parametrize("length", [1024, 4096, 16384, 65536])
def test_prompt_and_tokens_to_generate_fill_the_length_without_passing_it(
    task: str, tokenizer: str, length: int
) -> None:
    if (task, tokenizer, length) in {("cwe", "char", 1024), ("cwe", "char", 4096)}:
        # RULER's example and common words alone take more characters than these lengths have.
        with pytest.raises(PromptError, match=r"below this prompt's fixed overhead .* common words"):
            prepare(task, tokenizer, length)
        return
    sample = prepare(task, tokenizer, length)
    target = length - sample.max_new_tokens
    assert sample.max_new_tokens == VARIANTS[task].text.tokens_to_generate
    assert sample.prompt.target_tokens == target
    assert target - length_tolerance(target) <= len(sample.prompt.ids) <= target


@pytest.mark.parametrize(
    ("task", "tokenizer", "lengths"),
    [
        ("cwe", "cl100k_base", (1024, 4096, 16384)),
        ("cwe", "char", (16384, 65536)),
        ("fwe", "cl100k_base", (1024, 16384)),
        ("fwe", "char", (1024, 4096, 16384)),
    ],
)
def test_the_gap_is_closed_exactly(task: str, tokenizer: str, lengths: tuple[int, ...]) -> None:
    # More than the tolerance asks, and what the gap closers are for: char's "..." has four ids and
    # its coded words seven; cl100k's words have one to five, its list numbers two to four.
    new_tokens = VARIANTS[task].text.tokens_to_generate
    for length in lengths:
        for index in range(6):
            assert len(prepare(task, tokenizer, length, index=index).prompt.ids) == length - new_tokens


@pytest.mark.parametrize(
    ("tokenizer", "length", "common", "uncommon"),
    [("cl100k_base", 2048, 6, 1), ("cl100k_base", 8192, 30, 3), ("char", 32768, 30, 3)],
)
def test_cwe_answers_are_the_ten_words_repeated_most(
    tokenizer: str, length: int, common: int, uncommon: int
) -> None:
    sample = prepare("cwe", tokenizer, length, index=1)
    counts = Counter(numbered_words(context_of(sample, tokenizer)))
    assert len(set(sample.answers)) == 10 and sample.kind == "words"
    assert sample.query_keys == sample.answers and sample.question == ""
    assert all(counts[answer] == common for answer in sample.answers)
    others = Counter(count for word, count in counts.items() if word not in sample.answers)
    # Uncommon words, and (where uncommon words appear more than once) a few once, to close the gap.
    assert set(others) <= {uncommon, 1} and others[uncommon] > 10
    assert uncommon == 1 or others[1] <= 12
    assert prepare("cwe", tokenizer, length, index=1).prompt.needles == ()


@pytest.mark.parametrize(("length", "size", "common", "uncommon"), [(2048, 20, 3, 1), (8192, 40, 10, 3)])
def test_cwe_shows_a_solved_example_before_the_task(
    length: int, size: int, common: int, uncommon: int
) -> None:
    sample = prepare("cwe", "cl100k_base", length, index=2)
    before = sample.text.before
    task_start = before.rindex("Below is a numbered list of words.")
    example, task = before[: task_start - 1], before[task_start:]
    assert before[task_start - 1] == "\n" and example.startswith("Below is a numbered list of words.")
    assert task.endswith("Memorize the ones that appear most often.\n")
    listed, answer = example[len(task) :].split(CWE_QUESTION + CWE_PREFIX)
    answers = numbered_words(answer)
    counts = Counter(numbered_words(listed))
    assert len(counts) == size and len(answers) == 10
    assert {word: counts[word] for word in answers} == dict.fromkeys(answers, common)
    assert set(counts[word] for word in counts if word not in answers) == {uncommon}
    # The example is in the head, before the task's own words, and never in the context.
    tokenizer = TOKENIZERS["cl100k_base"]
    head = tokenizer.decode(sample.prompt.ids[: sample.prompt.head_tokens].tolist())
    assert head.endswith(before) and "Question" not in context_of(sample, "cl100k_base")


@pytest.mark.parametrize(("tokenizer", "length"), [("char", 1024), ("char", 4096), ("cl100k_base", 16384)])
def test_fwe_counts_follow_zipfs_law_and_the_answers_rank_second_to_fourth(
    tokenizer: str, length: int
) -> None:
    sample = prepare("fwe", tokenizer, length, index=3)
    context = context_of(sample, tokenizer)
    # The template's space before the context opens it, and single spaces part the words.
    assert sample.text.before.endswith("coded words.") and context.startswith(" ")
    words = context.split(" ")[1:]
    assert context == " " + " ".join(words)
    counts = Counter(words)
    noise = counts.pop("...")
    assert all(re.fullmatch("[a-z]{6}", word) for word in counts)
    assert len(counts) < max(5, length // 50)
    ranked = [count for _, count in counts.most_common()]
    assert noise > ranked[0] and ranked[2] > ranked[3]
    assert {word for word, _ in counts.most_common(3)} == set(sample.answers)
    assert sample.query_keys == sample.answers and sample.kind == "words"
    # Rank k appears int(n * k**-2 / zeta(2)) times, one n for ranks 2 to 4; the noise a little
    # more or less, having closed the gap.
    share = [0.0, *(k**-2 / zeta(2.0) for k in range(1, 6))]
    low, high = ranked[0] / share[2], (ranked[0] + 1) / share[2]
    for k, count in ((3, ranked[1]), (4, ranked[2])):
        assert int(low * share[k]) <= count <= int(high * share[k])
    assert abs(noise - low * share[1]) <= 0.05 * noise + 8


def test_zeta_and_zipf_counts_match_scipys_as_ruler_uses_them() -> None:
    assert zeta(2.0) == math.pi**2 / 6
    assert zeta(3.0) == pytest.approx(1.2020569031595942, rel=1e-15)
    assert zeta(1.5) == pytest.approx(2.612375348685488, rel=1e-14)
    assert zipf_counts(1000, 6, 2.0).tolist() == [607, 151, 67, 37, 24, 16]


def test_an_integer_alpha_gives_the_same_law_as_its_float() -> None:
    assert zipf_counts(1000, 6, 2).tolist() == [607, 151, 67, 37, 24, 16]
    sizes = np.array([1, 2, 2, 3, 2, 1, 2])
    as_int = FrequentWords(Variant("fwe", "fwe", {"alpha": 2, "coded_wordlen": 6}), char_setting())
    assert as_int._counts(sizes, 500, 550).tolist() == frequent_words()._counts(sizes, 500, 550).tolist()


# fwe's counts, worked out by hand for alpha = 2, whose zeta is pi^2 / 6: rank k of n words appears
# int(n * k**-2 / zeta(2)) times.
ZETA_2 = math.pi**2 / 6


@functools.cache
def char_setting() -> Setting:
    return Setting(TOKENIZERS["char"], resolve_template("none", TOKENIZERS["char"]), None, None)


def frequent_words() -> FrequentWords:
    return FrequentWords(VARIANTS["fwe"], char_setting())


def zipf_by_hand(words: int, ranks: int) -> list[int]:
    return [int(words * k**-2.0 / ZETA_2) for k in range(1, ranks + 1)]


def most_words(sizes: list[int], budget: int) -> int:
    """The largest word count whose Zipf counts fit ``budget``, counted up one word at a time."""
    words = 0
    while sum(c * s for c, s in zip(zipf_by_hand(words + 1, len(sizes)), sizes, strict=True)) <= budget:
        words += 1
    return words


@pytest.mark.parametrize("budget", range(100, 130))
def test_fwe_answers_have_the_zipf_counts_of_the_most_words_that_fit(budget: int) -> None:
    # Every word one token: the noise is a unit of one, so the gap always closes exactly.
    sizes = [1] * 5
    counts = frequent_words()._counts(np.array(sizes), budget, budget)
    assert counts[1:4].tolist() == zipf_by_hand(most_words(sizes, budget), 5)[1:4]
    assert int(counts @ np.array(sizes)) == budget


@pytest.mark.parametrize(
    ("sizes", "budget", "exact"),
    [
        # char's sizes: "..." and a space are 4 tokens, a coded word and a space 7; 4 and 7 make any
        # count above 17, so every gap closes.
        *(([4] + [7] * 39, budget, True) for budget in (310, 311, 312, 313, 314, 315, 50_000)),
        # 80 words: 48 12 5 3 1 1 0 0 0, 281 tokens. The gap, 3, takes one more each of the three
        # 5-token words (ranks 5, 8 and 9; rank 5 then has 2, still below rank 4's 3) and 3 fewer noise.
        ([4, 4, 4, 4, 5, 4, 4, 5, 5], 284, True),
        # 74 words: 44 11 4 2 1 1 0 0 0, 253 tokens. Rank 5 cannot take one more (it would tie rank 4's
        # 2); ranks 8 and 9 and 2 fewer noise leave 1 of the gap of 3 open.
        ([4, 4, 4, 4, 5, 4, 4, 5, 5], 256, False),
        # 80 words: 48 12 5 3 1 1, 209 tokens. The gap, 1, takes one more 71-token word and 35 fewer
        # noise: 13, still more than rank 2's 12.
        ([2, 2, 2, 2, 2, 71], 210, True),
        # The same with a 73-token word would need 36 fewer noise, 12, as many as rank 2: 1 stays open.
        ([2, 2, 2, 2, 2, 73], 212, False),
    ],
)
def test_fwe_closes_the_gap_keeping_the_noise_first_and_the_answers_above_the_rest(
    sizes: list[int], budget: int, exact: bool
) -> None:
    counts = frequent_words()._counts(np.array(sizes), budget, budget).tolist()
    used = sum(c * s for c, s in zip(counts, sizes, strict=True))
    assert (used == budget) if exact else (0 < budget - used < sizes[0])
    assert counts[0] > counts[1] and min(counts[1:4]) > max(counts[4:])


@functools.cache
def common_words() -> CommonWords:
    return CommonWords(VARIANTS["cwe"], char_setting())


def listed(entries: list[str]) -> int:
    """A cwe list's tokens with the char tokenizer: its characters, ``1. w 2. w ...``."""
    return len(" ".join(f"{i}. {word}" for i, word in enumerate(entries, 1)))


@pytest.mark.parametrize("uncommon", [100, 151])
def test_cwe_takes_an_uncommon_word_after_which_one_more_entry_just_fits(uncommon: int) -> None:
    # The budget is exactly the common words, ``uncommon`` uncommon ones and one entry of the
    # shortest word set aside: that entry fits with nothing to spare, so the list is those words.
    family = common_words()
    order = random.Random(0).sample(family.words, len(family.words))
    common, pool, rest = order[:10], order[10 : 10 + SINGLES_POOL], order[10 + SINGLES_POOL :]
    shortest = min(pool, key=len)
    budget = listed(common * 30 + rest[:uncommon] * 3 + [shortest])
    counts = family._counts(order, Repeats(30, 3), budget, budget + 120)
    assert counts == dict.fromkeys(common, 30) | dict.fromkeys(rest[:uncommon], 3) | {shortest: 1}


def test_cwe_closes_its_gap_with_the_fewest_words_that_fill_it_even_past_a_count_that_cannot() -> None:
    # Entries 401.. have 5-token numbers (" 401."); words of 4, 3, 7, 11, 11, 4, 4 and 11 letters take
    # one token more. 52 tokens: 4 entries leave 32 for their words, which no 4 of them fill exactly
    # (the greedy choice runs out); 5 leave 27 = 8 + 5 + 5 + 5 + 4.
    family = common_words()
    by_length: dict[int, list[str]] = {}
    for word in family.words:
        by_length.setdefault(len(word), []).append(word)
    pool = [by_length[n].pop() for n in (4, 3, 7, 11, 11, 4, 4, 11)]
    once, left = family._singles(pool, 400, 52)
    assert left == 0 and sorted(map(len, once)) == [3, 4, 4, 4, 7]
    assert len("".join(f" {i}. {word}" for i, word in enumerate(once, 401))) == 52


@pytest.mark.parametrize("task", ["cwe", "fwe"])
def test_samples_are_seeded(task: str) -> None:
    first = prepare(task, "cl100k_base", 4096, index=0)
    again = prepare(task, "cl100k_base", 4096, index=0)
    other = prepare(task, "cl100k_base", 4096, index=1)
    reseeded = prepare(task, "cl100k_base", 4096, index=0, seed=1)
    assert (first.prompt.ids == again.prompt.ids).all() and first.answers == again.answers
    assert len({first.prompt.sha256, other.prompt.sha256, reseeded.prompt.sha256}) == 3
    assert len({first.answers, other.answers, reseeded.answers}) == 3


@pytest.mark.parametrize(("task", "what"), [("cwe", "common words"), ("fwe", "top three words stand out")])
def test_a_length_below_the_fixed_overhead_is_refused(task: str, what: str) -> None:
    with pytest.raises(PromptError, match=rf"length \d+ is below this prompt's fixed overhead .*{what}"):
        prepare(task, "cl100k_base", 200)


def test_a_length_beyond_rulers_word_list_is_refused() -> None:
    with pytest.raises(PromptError, match=r"RULER's \d+ words fill only \d+ of the \d+ tokens"):
        prepare("cwe", "cl100k_base", 262144)


def test_cwe_identity_names_its_word_list() -> None:
    identity = ruler_task("cwe", "char", 0).identity()["data"]["cwe"]
    assert identity["words"] > 8000 and re.fullmatch("[0-9a-f]{64}", identity["words_sha256"])
    assert ruler_task("fwe", "char", 0).identity()["data"]["fwe"] == {}


def records(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (folder / "samples.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("task", ["cwe", "fwe"])
@pytest.mark.parametrize("kind", ["ids", "text", "chat"])
def test_a_perfect_reader_scores_full_marks(tmp_path: Path, task: str, kind: str) -> None:
    folder = tmp_path / "run"
    args = ["run", task, "--model", f"sim:perfect?input={kind}", "--tokenizer", "cl100k_base"]
    args += ["--template", "chatml", "--lengths", "2k,8k", "--samples", "2"]
    assert main([*args, "--run-dir", str(folder), "--no-progress"]) == 0
    found = [r for r in records(folder) if not r.get("control")]
    controls = [r for r in records(folder) if r.get("control")]
    assert len(found) == len(controls) == 4
    assert all(r["error"] is None and r["score"] == 1.0 and r["needle_depths"] == [] for r in found)
    assert all(c["error"] is None and c["score"] == 0.0 for c in controls)  # no list, no words to count
