"""Domain-native needles (issue 29, item 6): a constant in code, a field in reStructuredText, a
German sentence and question in German text; the prose needle kept as ``--needle-style prose``."""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path

import pytest

from fathom.backends.base import Request
from fathom.backends.sim import SimulatedBackend
from fathom.cli import main
from fathom.prompts.needle_styles import CODE, GERMAN, PROSE, Indented, indentation, style_for
from fathom.prompts.needles import constant_name
from fathom.prompts.tokenizers import load_tokenizer
from fathom.records import DISTRACTOR_ROLES, Cell
from fathom.spec import RunSpec
from fathom.tasks.base import Sample
from fathom.tasks.niah import NiahTask

CL100K = load_tokenizer("cl100k_base")
KEYED = ("number", "words", "uuid")
SAMPLES = 6
LENGTH = 3000


def samples(corpus: str, kind: str, **changes: object) -> list[Sample]:
    """SAMPLES samples of one cell each, their depths spread over the haystack, with look-alikes."""
    base = RunSpec("niah", "sim:perfect", "cl100k_base", (LENGTH,), (0.5,), SAMPLES, corpus=corpus)
    spec = dataclasses.replace(base, needle=kind, distractors=2, **changes)
    task = NiahTask(spec, CL100K)
    built = [task.prepare(Cell("niah", LENGTH, i / (SAMPLES - 1), i)) for i in range(SAMPLES)]
    assert all(isinstance(s, Sample) and s.needles is not None for s in built)
    return [s for s in built if isinstance(s, Sample)]


def landed(sample: Sample) -> list[tuple[str, str, str]]:
    """Each needle's text as it landed in the prompt, with the prompt's text before and after it."""
    ids = sample.prompt.ids.tolist()
    return [
        (
            CL100K.decode(ids[: n.token_offset]),
            CL100K.decode(ids[n.token_offset : n.token_offset + n.tokens]),
            CL100K.decode(ids[n.token_offset + n.tokens :]),
        )
        for n in sample.prompt.needles
    ]


def found_by_the_perfect_reader(sample: Sample) -> bool:
    """Whether sim:perfect answers with every gold value and no look-alike's."""
    prompt = sample.prompt
    request = Request(
        sample.cell.id,
        prompt.ids,
        64,
        query_keys=sample.query_keys,
        context=(prompt.head_tokens, prompt.head_tokens + prompt.context_tokens),
        patterns=sample.patterns,
        question=sample.question,
    )
    (completion,) = SimulatedBackend("perfect", CL100K).generate([request])
    assert sample.needles is not None
    said = completion.text
    return all(a in said for a in sample.answers) and not any(v in said for v in sample.needles.lures)


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def test_a_constant_line_takes_its_neighbours_indentation_and_the_function_still_parses() -> None:
    function = "def f(x):\n    if x:\n        y = 1\n    else:\n        y = 2\n    return y\n"
    lines = function.splitlines(keepends=True)
    needle = Indented(CODE.keyed["number"].render("mellow-blanket", "7234567"))
    for at in range(1, len(lines)):  # every boundary inside the function
        before, after = "".join(lines[:at]), "".join(lines[at:])
        line = needle.fit("\n" + before, after)
        assert line.strip() == "SPECIAL_MAGIC_NUMBER_MELLOW_BLANKET = 7234567"
        ast.parse(before + line + after)  # raises on a wrong indentation
    # Before an else, the line stays in the branch above it; with nothing after, the line above's.
    assert indentation("\n        y = 1\n", "    else:\n") == "        "
    assert indentation("\n    return y\n", "") == "    "
    assert indentation("", "") == ""
    assert constant_name("mellow-blanket") == "MELLOW_BLANKET"


def test_only_named_domains_have_native_needles_and_prose_overrides_them() -> None:
    assert style_for("native", "code") is CODE and style_for("native", "german") is GERMAN
    for corpus in ("prose", "essays", "dir:/tmp/src", "mix:code=0.3,prose=0.7"):
        assert style_for("native", corpus) is PROSE
    assert style_for("prose", "code") is PROSE


@pytest.mark.domains
@pytest.mark.parametrize("kind", KEYED)
def test_code_needles_are_assignments_at_their_neighbours_indentation(kind: str) -> None:
    indented = 0
    for sample in samples("code", kind):
        assert len(sample.prompt.ids) == LENGTH
        for before, text, after in landed(sample):
            # A line of its own: after a line break (its own, where the haystack ends inside a line).
            assert (before + text[: len(text) - len(text.lstrip("\n"))]).endswith("\n"), repr(before[-80:])
            text = text.lstrip("\n")
            assert text.endswith("\n") and text.count("\n") == 1
            (statement,) = ast.parse(text.strip()).body
            assert isinstance(statement, ast.Assign) and isinstance(statement.targets[0], ast.Name)
            assert re.fullmatch(
                r"(SPECIAL_MAGIC_(NUMBER|IDENTIFIER)|SECRET_PASSPHRASE)_[A-Z_]+", statement.targets[0].id
            )
            following = next(line for line in after.split("\n") if line.strip())
            previous = next(line for line in reversed(before.split("\n")) if line.strip())
            assert _indent(text) in (_indent(following), _indent(previous))
            indented += _indent(text) != ""
        assert sample.question.startswith("Which") and "the code assign" in sample.question
        assert sample.needles is not None and any(k in sample.question for k in sample.needles.subjects)
    assert indented  # networkx's source is mostly indented: some needle landed inside a block


@pytest.mark.domains
def test_technical_needles_are_field_lists_of_their_own() -> None:
    for sample in samples("technical", "number"):
        assert len(sample.prompt.ids) == LENGTH
        assert len(landed(sample)) == 3  # the gold and its two look-alikes, each checked below
        for _, text, _ in landed(sample):
            assert re.fullmatch(
                r"\n{1,2} *:Special magic (number|identifier) for [a-z]+-[a-z]+: [\w-]+\n\n", text
            ), repr(text)


@pytest.mark.domains
@pytest.mark.parametrize("kind", KEYED)
def test_german_text_gets_a_german_needle_and_question_with_prose_values(kind: str) -> None:
    native, prose = samples("german", kind), samples("german", kind, needle_style="prose")
    for german, english in zip(native, prose, strict=True):
        assert len(german.prompt.ids) == LENGTH
        assert german.question.startswith(("Welche", "Aus welchen")) and " für " in german.question
        assert german.answers == english.answers  # the same facts, in German
        assert german.needles is not None
        placements = german.needles.placements
        assert len(placements) == 3 and all(" für " in p.text for p in placements)  # gold, 2 look-alikes
        assert english.question.startswith(("Which", "What"))


@pytest.mark.domains
@pytest.mark.parametrize("corpus", ["code", "technical", "legal", "german"])
@pytest.mark.parametrize("kind", KEYED)
def test_the_perfect_reader_finds_every_native_needle_and_no_look_alike(corpus: str, kind: str) -> None:
    built = samples(corpus, kind) + samples(corpus, kind, needles=2)
    assert all(found_by_the_perfect_reader(sample) for sample in built)
    lures = [p for s in built if s.needles for p in s.needles.placements if p.role in DISTRACTOR_ROLES]
    assert len(lures) == 2 * len(built)  # each sample carried its look-alikes, in the same style


# Prompts built before native needles existed (fathom at d81946a, cl100k, 3000 tokens, depth 0.3,
# sample 0): --needle-style prose builds them byte for byte.
OLD_PROMPTS = {
    "code/number": "1177d4832ba5a8f8",
    "code/words": "8ff11dd4185f9ea4",
    "code/uuid": "27f22aa9fa538661",
    "technical/number": "dc5a1e69d40ed6b7",
    "technical/words": "ffcf0a4c02e53cf5",
    "technical/uuid": "e75574677b120db6",
    "legal/number": "c299fd320b86ccc3",
    "legal/words": "847d9e28ed3aa070",
    "legal/uuid": "558d0643e9bc58f3",
    "german/number": "89341af0dc2a4fe8",
    "german/words": "37bdc342b780132e",
    "german/uuid": "5121b40f0592e187",
}
# Each kind with look-alikes, several needles, or one with a look-alike.
HARDNESS = {"number": (2, 1), "words": (0, 2), "uuid": (1, 1)}


@pytest.mark.domains
@pytest.mark.parametrize("where", OLD_PROMPTS)
def test_prose_style_builds_the_prompts_fathom_built_before_native_needles(where: str) -> None:
    corpus, kind = where.split("/")
    distractors, needles = HARDNESS[kind]
    built = {}
    for style in ("prose", "native"):
        spec = RunSpec("niah", "sim:perfect", "cl100k_base", (3000,), (0.3,), 1, corpus=corpus, needle=kind)
        spec = dataclasses.replace(spec, distractors=distractors, needles=needles, needle_style=style)
        task = NiahTask(spec, CL100K)
        sample = task.prepare(next(iter(task.cells())))
        assert isinstance(sample, Sample)
        built[style] = (sample.prompt.sha256[:16], task.identity())
    assert built["prose"][0] == OLD_PROMPTS[where] != built["native"][0]
    # A native run is another run: its identity names its style, and prose's is what it always was.
    assert built["native"][1]["needle_styles"] == {corpus: style_for("native", corpus).name}
    assert "needle_styles" not in built["prose"][1]


def test_prose_corpora_keep_their_identity_under_the_native_default() -> None:
    spec = RunSpec("niah", "sim:perfect", "char", (1000,), (0.5,), 1)
    native = NiahTask(spec, load_tokenizer("char")).identity()
    prose = NiahTask(dataclasses.replace(spec, needle_style="prose"), load_tokenizer("char")).identity()
    assert native == prose and "needle_styles" not in native
    assert "needle_style" not in spec.to_json()  # the default left out: old specs keep their hash
    assert dataclasses.replace(spec, needle_style="prose").to_json()["needle_style"] == "prose"


@pytest.mark.parametrize(
    ("task", "extra", "message"),
    [
        ("niah", ["--needle-style", "fancy"], r"unknown needle style 'fancy': use native .* or prose$"),
        ("ruler", ["--needle-style", "prose"], r"^fathom: error: --needle-style goes with niah runs"),
    ],
)
def test_bad_needle_style_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], task: str, extra: list[str], message: str
) -> None:
    runs = tmp_path / "runs"
    args = ["run", task, "--model", "sim:perfect", "--tokenizer", "char", "--lengths", "1k", "--samples", "1"]
    depths = ["--depths", "3"] if task == "niah" else []
    assert main([*args, *depths, *extra, "--out", str(runs), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("fathom: error: ") and "\n" not in err and re.search(message, err), err
    assert not runs.exists()
