"""RULER's prompts laid out as RULER writes them (its ``scripts/data/synthetic`` generators and its
``base`` template), checked line by line at RULER's first lengths with cl100k.

Each test states RULER's layout independently of fathom's code: how its generator joins its list of
lines (``"\\n".join`` for niah, ``" ".join`` for vt), where it inserts needles, what it writes around
vt's example, and that its ``base`` template is the task text followed by the answer prefix.
"""

from __future__ import annotations

import random
import re
from pathlib import Path

import numpy as np
import pytest

from fathom.cli import main
from fathom.errors import SpecError
from fathom.prompts.haystack.corpora import NOISE_TEXT
from fathom.prompts.haystack.index import Ids
from fathom.prompts.templates import NAMED_TEMPLATES, resolve_template
from fathom.prompts.tokenizers import Tokenizer, load_tokenizer
from fathom.records import Cell
from fathom.spec import RunSpec
from fathom.tasks.base import Sample
from fathom.tasks.ruler.base import Lines, Setting
from fathom.tasks.ruler.catalogue import ALL_VARIANTS
from fathom.tasks.ruler.niah import NeedleFamily, line
from fathom.tasks.ruler.suite import RulerTask
from fathom.tasks.ruler.vt import EXAMPLE_CLOSING, unit

CL100K = load_tokenizer("cl100k_base")
CHAR = load_tokenizer("char")
LENGTHS = [4096, 8192]
NEEDLE = re.compile(r"One of the special magic (numbers|uuids) for ([\w-]+) is: ([\w-]+)\.")
# A vt line after the first: the joining space, perhaps a statement (a hop with its trailing space),
# then the noise paragraph.
VT_LINE = re.compile(r" (?:(VAR [A-Z]{5} = (?:\d{5}|VAR [A-Z]{5} )) )?" + re.escape(NOISE_TEXT))


def prepare(task: str, length: int, template: str = "base", index: int = 0) -> Sample:
    spec = RunSpec(task, "sim:perfect", "cl100k_base", (length,), (), 1, seed=0, template=template)
    return RulerTask(spec, CL100K).prepare(Cell(task, length, None, index))


def pieces(sample: Sample, tokenizer: Tokenizer = CL100K) -> tuple[str, str, str]:
    """The prompt's text before the context, the context, and after it."""
    prompt = sample.prompt
    end = prompt.head_tokens + prompt.context_tokens
    return (
        tokenizer.decode(prompt.ids[: prompt.head_tokens].tolist()),
        tokenizer.decode(prompt.ids[prompt.head_tokens : end].tolist()),
        tokenizer.decode(prompt.ids[end:].tolist()),
    )


def needle_texts(sample: Sample) -> list[str]:
    ids = sample.prompt.ids
    return [
        CL100K.decode(ids[n.token_offset : n.token_offset + n.tokens].tolist()) for n in sample.prompt.needles
    ]


def joined(parts: list[tuple[Ids, bool]]) -> str:
    return CHAR.decode(np.concatenate([ids for ids, _ in parts]).tolist())


@pytest.mark.parametrize("length", LENGTHS)
def test_niah_single_1_puts_each_paragraph_and_the_needle_on_a_line_of_its_own(length: int) -> None:
    sample = prepare("niah_single_1", length)
    head, context, tail = pieces(sample)
    assert len(sample.prompt.ids) == sample.prompt.target_tokens == length - 128
    # The haystack opens right after the instruction's newline, with no space.
    assert head.endswith("afterwards.\n") and not context[0].isspace()
    # Every line is the paragraph or a needle; only the first may be a paragraph's tail (what an
    # exact fill leaves), and it still ends where the paragraph ends.
    assert context.endswith("\n")
    first, *lines = context[:-1].split("\n")
    assert NOISE_TEXT.endswith(first) and first.strip() == first
    needles = [line for line in lines if line != NOISE_TEXT]
    assert len(needles) == 1 and NEEDLE.fullmatch(needles[0])
    assert needle_texts(sample) == [needles[0] + "\n"]
    # No needle after the last line, and the question follows the whole last paragraph after one
    # newline: never mid-sentence.
    assert lines[-1] == NOISE_TEXT
    assert tail.startswith("What is the special magic number for ")
    assert len(lines) > length // 30  # a paragraph is 24 cl100k tokens a line


@pytest.mark.parametrize("task", ["niah_multikey_2", "niah_multikey_3"])
@pytest.mark.parametrize("length", LENGTHS)
def test_needle_lines_meet_the_question_after_one_newline(task: str, length: int) -> None:
    sample = prepare(task, length)
    _, context, _ = pieces(sample)
    text = CL100K.decode(sample.prompt.ids.tolist())
    assert context.endswith(".\n") and "\n\n" not in context and not context[0].isspace()
    assert all(NEEDLE.fullmatch(line) for line in context[:-1].split("\n"))
    assert re.search(r"is: [\w-]+\.\nWhat is the special magic (number|uuid) for ", text)
    (needle,) = sample.prompt.needles
    assert needle.token_offset + needle.tokens < sample.prompt.head_tokens + sample.prompt.context_tokens


def test_needle_lines_of_one_size_leave_their_gap_to_a_lines_tail_at_the_top() -> None:
    # One character per token: every uuid line has the same length, so whole lines leave a gap; a
    # line's tail fills it first, and the context still ends with a whole line before the question.
    family = NeedleFamily(
        ALL_VARIANTS["niah_multikey_3"], Setting(CHAR, resolve_template("base", CHAR), None, None)
    )
    for seed in range(5):
        prompt = family.draft(3968, random.Random(seed)).prompt
        end = prompt.head_tokens + prompt.context_tokens
        first, *lines = CHAR.decode(prompt.ids[prompt.head_tokens : end].tolist())[:-1].split("\n")
        assert len(prompt.ids) == 3968 and not NEEDLE.fullmatch(first) and not first.startswith(" ")
        assert re.search(r"is: [\w-]+\.$", first) and all(NEEDLE.fullmatch(line) for line in lines)
        assert prompt.needles[0].token_offset > prompt.head_tokens + len(first)  # never before the tail


@pytest.mark.essays
@pytest.mark.parametrize("task", ["niah_single_2", "niah_multikey_1"])
@pytest.mark.parametrize("length", LENGTHS)
def test_an_essay_opens_right_after_the_newline_without_a_space(task: str, length: int) -> None:
    sample = prepare(task, length)
    head, context, _ = pieces(sample)
    assert head.endswith("afterwards.\n") and context.startswith("April 2012A palliative care nurse")
    assert len(sample.prompt.ids) == sample.prompt.target_tokens


@pytest.mark.essays
def test_a_needle_at_depth_zero_opens_the_essay_as_rulers_join_writes_it() -> None:
    # RULER joins its pieces with spaces, the needle first at depth 0: " One of ... 1234567. April".
    setting = Setting(CL100K, resolve_template("base", CL100K), None, None)
    family = NeedleFamily(ALL_VARIANTS["niah_multikey_1"], setting)
    opened = 0
    for seed in range(40):
        prompt = family.draft(4096 - 128, random.Random(seed)).prompt
        context = CL100K.decode(prompt.ids[prompt.head_tokens : prompt.head_tokens + 40].tolist())
        if prompt.needles[0].depth == 0.0:
            opened += 1
            assert re.match(r" One of the special magic numbers for [\w-]+ is: \d+\. April 2012A", context)
        else:
            assert context.startswith("April 2012A")
    assert opened  # seeds 0..39 draw depth 0 for some first needle (4 of 40 depths, 10% a sample)


@pytest.mark.parametrize("length", LENGTHS)
def test_vt_lays_out_its_lines_example_and_question_as_ruler(length: int) -> None:
    sample = prepare("vt", length)
    head, context, tail = pieces(sample)
    assert len(sample.prompt.ids) == sample.prompt.target_tokens == length - 30
    # " " + the example (instruction, context, question, answer prefix, " " + answer) + "\n\n" and
    # two more newlines before the real task.
    example, real = head.split(EXAMPLE_CLOSING)
    assert example.startswith(" Memorize and track the chain(s)") and real.startswith("Memorize and track")
    assert re.search(r"they are:  [A-Z]{3}( [A-Z]{3}){4}$", example)
    # The example holds what RULER's search gives it with cl100k: ten noise lines, ~360 tokens (RULER's
    # own examples measure 356 to 364).
    assert example.count(NOISE_TEXT + "\n") == 10
    assert 330 <= len(CL100K.encode(example + "\n\n")) <= 400
    # The context: a first line (a paragraph's tail, or the paragraph, or a statement and it), then
    # lines that open with the joining space; five statements, each opening its own line.
    assert context.endswith(NOISE_TEXT + "\n\n") and tail.startswith("Question: Find all variables")
    first, *lines = context[:-2].split("\n")
    assert NOISE_TEXT.endswith(first) or re.fullmatch(r"VAR [A-Z]{5} = \d{5} " + re.escape(NOISE_TEXT), first)
    matches = [VT_LINE.fullmatch(line) for line in lines]
    assert all(matches)
    statements = [m.group(1) for m in matches if m and m.group(1)]
    assert len(statements) + first.startswith("VAR") == 5
    assert all(s.endswith(" ") for s in statements if "= VAR" in s)  # hops: "VAR B = VAR A  The..."
    assert [t.strip() for t in needle_texts(sample)][-len(statements) :] == [s.strip() for s in statements]


def test_line_units_rebuild_rulers_joins() -> None:
    # RULER: "\n".join(paragraphs with needles inserted) for niah, " ".join(noise lines and
    # statements) for vt; the newline before the question closes the last line in fathom's ids.
    niah = Lines(CHAR, "P.", line)
    parts = niah.parts(3, ["N1.", "N2."], [0, 2])
    assert joined(parts) == "\n".join(["N1.", "P.", "P.", "N2.", "P."]) + "\n"
    assert [needle for _, needle in parts] == [True, False, False, True, False]
    vt = Lines(CHAR, "P.\n", unit)
    assert (
        joined(vt.parts(3, ["S1", "S2 "], [0, 2])) == " ".join(["S1", "P.\n", "P.\n", "S2 ", "P.\n"]) + "\n"
    )


def test_a_lead_is_a_lines_tail_with_a_word_and_no_opening_space() -> None:
    vt = Lines(CHAR, "Go on.\n", unit)  # a line after the first is " Go on.\n"
    assert joined(vt.parts(1, [], [], lead=4)) == "on.\n Go on.\n\n"
    assert CHAR.decode(vt.lead(7).tolist()) == "Go on.\n"  # type: ignore[union-attr]
    assert vt.lead(2) is None  # ".\n" has no word: the gap stays open


def test_lines_fit_a_budget_exactly_and_count_is_what_sizing_sets() -> None:
    lines = Lines(CHAR, "Go.", line)
    count, lead = lines.fit(22, ["N."])
    assert (count, lead) == (4, 3)  # "N.\n" and four "Go.\n" lines take 19 of 22
    built = lines.parts(count, ["N."], [3], lead)
    assert joined(built) == "o.\nGo.\nGo.\nGo.\nN.\nGo.\n" and sum(len(ids) for ids, _ in built) == 22
    # Two tokens left: no tail with a word is that short, so the context is two short of the budget.
    assert lines.fit(21, ["N."]) == (4, 2)
    assert sum(len(ids) for ids, _ in lines.parts(4, ["N."], [0], 2)) == 19
    assert lines.fit(2, ["N."]) == (0, -1)  # the needle alone overflows: the caller says too short


@pytest.mark.parametrize("task", ["niah_single_1", "niah_multikey_2", "vt"])
def test_base_joins_the_question_and_the_answer_prefix_with_one_space(task: str) -> None:
    base = CL100K.decode(prepare(task, 4096, "base").prompt.ids.tolist())
    none = CL100K.decode(prepare(task, 4096, "none").prompt.ids.tolist())
    question = r"(mentioned in the provided text\?|in the text above\.)"
    assert re.search(question + r" (The special magic|Answer: According)", base)
    assert re.search(question + r"\n\n (The special magic|Answer: According)", none)
    assert not base.endswith(("\n", "\n\n"))


def test_base_is_rulers_template_and_an_unknown_name_lists_it() -> None:
    head, tail = resolve_template("base", CHAR).wrap(CHAR, None, "intro \u27e6fathom-context\u27e7 outro")
    assert (head, tail) == ("intro ", " outro")
    with pytest.raises(SpecError) as unknown:
        resolve_template("fancy", CHAR)
    assert "base" in str(unknown.value) and all(name in str(unknown.value) for name in NAMED_TEMPLATES)


def test_the_cli_refuses_an_unknown_template_with_the_known_ones(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "run"
    code = main(["run", "niah_single_1", "--model", "sim:perfect", "--tokenizer", "cl100k_base",
                 "--lengths", "4k", "--samples", "1", "--template", "fancy", "--run-dir", str(folder),
                 "--no-progress"])  # fmt: skip
    err = capsys.readouterr().err
    assert code != 0 and "Traceback" not in err and not (folder / "samples.jsonl").exists()
    assert "unknown chat template 'fancy'" in err and "base" in err
