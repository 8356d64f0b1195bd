"""Haystack domains (code, legal, technical, german), code folders with globs, mixtures, and windows
that start at a sample's own offset."""

from __future__ import annotations

import random
import tomllib
from pathlib import Path

import numpy as np
import pytest

from fathom.errors import CorpusError
from fathom.prompts.haystack import (
    catalogue,
    corpora,
    corpus_catalogue,
    corpus_info,
    domains,
    load_corpus,
    tokenize_corpus,
)
from fathom.prompts.haystack.index import TokenizedCorpus
from fathom.prompts.haystack.mixture import PASSAGE_TOKENS, line_break
from fathom.prompts.tokenizers import load_tokenizer

ROOT = Path(__file__).parent.parent
CL100K = load_tokenizer("cl100k_base")
CHAR = load_tokenizer("char")
DOMAINS = {"code": "line", "legal": "sentence", "technical": "line", "german": "sentence"}
# How far a component's share of a window's tokens may stray from its weight, over every window
# (one every 97 tokens): in the worst window, and in 99% of them. A passage is at least
# PASSAGE_TOKENS, and can hold a 400-token sentence (10% of 4k), so the worst 4k window strays by
# about that. Measured (cl100k, worst / 99%): code 0.3 + prose 0.7: 0.051 / 0.028 at 4k, 0.0074 /
# 0.0037 at 32k; legal + technical + german 2: 0.065 / 0.035, 0.0071 / 0.0044; legal + prose:
# 0.067 / 0.033, 0.0089 / 0.0041.
SHARE_TOLERANCE = {4096: (0.075, 0.04), 32768: (0.015, 0.006)}
SOURCES = {
    "code": "networkx 3.6.1",
    "legal": "spdx 2.5.1",
    "technical": "cmake 4.4.4",
    "german": "fortunes-de",
}


def ends_lines(ids: np.ndarray, positions: np.ndarray) -> bool:
    """Whether the cl100k text before each position ends a line."""
    return all(CL100K.decode(ids[max(0, b - 8) : b].tolist()).endswith("\n") for b in positions)


@pytest.mark.domains
@pytest.mark.parametrize("name", DOMAINS)
def test_each_domain_loads_with_its_source_licence_unit_and_hash(name: str) -> None:
    corpus = load_corpus(name)
    named = corpora.NAMED_CORPORA[name]
    assert corpus.licence == named.licence and corpus.units == DOMAINS[name] == named.units
    assert corpus.sha256 == load_corpus(name).sha256
    indexed = tokenize_corpus(corpus, CL100K)
    # Room for a 128k haystack three times over, at a unit boundary every 100 tokens or less.
    assert len(indexed.ids) > 400_000 and len(indexed.boundaries) > len(indexed.ids) / 100
    info = corpus_info(corpus, indexed)
    assert (info.name, info.licence, info.sha256, info.tokens) == (
        name,
        named.licence,
        corpus.sha256,
        len(indexed.ids),
    )
    assert SOURCES[name] in corpus.source


@pytest.mark.domains
def test_a_pinned_package_is_the_same_corpus_on_every_machine() -> None:
    # Changing how a domain is read changes these: the run identities of its haystacks change too.
    assert {name: load_corpus(name).sha256[:16] for name in ("code", "legal", "technical")} == {
        "code": "03d01a12fa3d992f",
        "legal": "f03f80b21e32e4d2",
        "technical": "fc22d0b663544c31",
    }


@pytest.mark.domains
def test_code_keeps_its_lines_and_indentation_and_its_boundaries_start_lines() -> None:
    code = load_corpus("code")
    assert "\n    def " in code.text and "\n\n" in code.text and "  " in code.text
    assert "(288 files)" in code.source  # networkx's library, its 292 test files left out
    indexed = tokenize_corpus(code, CL100K)
    rng = np.random.default_rng(0)
    sample = rng.choice(indexed.boundaries[1:], 500, replace=False)
    assert ends_lines(indexed.ids, sample)
    german = load_corpus("german")
    # Quotations joined as sentences, their attribution lines ("-- Pierre Abélard") left out.
    assert "\n" not in german.text and "Abélard" not in german.text[:300]
    assert german.text.startswith("Man muß wissen, daß Stoff und Form immer miteinander verbunden zugleich")


def test_line_boundaries_are_every_line_start(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("def f(x):\n    return x + 1\n\n\nclass A:\n    pass\r\n")
    (tmp_path / "b.rs").write_text('fn main() {\n\tprintln!("hi");\n}')
    corpus = load_corpus(f"dir:{tmp_path}")
    assert corpus.units == "line" and corpus.licence == "the folder's own"
    assert (
        corpus.text
        == 'def f(x):\n    return x + 1\n\n\nclass A:\n    pass\n\nfn main() {\n\tprintln!("hi");\n}\n'
    )
    indexed = tokenize_corpus(corpus, CHAR)
    line_starts = [0, *(i + 1 for i, c in enumerate(corpus.text[:-1]) if c == "\n")]
    assert indexed.boundaries.tolist() == line_starts  # every line, blank ones too, and no other place
    cl100k = tokenize_corpus(corpus, CL100K)
    assert CL100K.decode(cl100k.ids.tolist()) == corpus.text  # no leading space for lines
    assert ends_lines(cl100k.ids, cl100k.boundaries[1:])


def test_a_folder_with_code_is_read_line_for_line_and_a_glob_picks_its_files(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "main.py").write_text("import os\n\nprint(os.sep)\n")
    (tmp_path / "README.md").write_text("# Title\n\nSome   words.\n")
    (tmp_path / "notes.txt").write_text("A note.  Another.\n")
    (tmp_path / "image.bin").write_bytes(b"\x00\xff")
    everything = load_corpus(f"dir:{tmp_path}")
    # With code in the folder, its prose is read as the lines it is, beside the code.
    assert everything.units == "line" and "# Title\n\nSome   words.\n" in everything.text
    assert "(3 files)" in everything.source
    python = load_corpus(f"dir:{tmp_path}/**/*.py")
    assert python.name == f"dir:{tmp_path}/**/*.py" and python.text == "import os\n\nprint(os.sep)\n"
    prose = load_corpus(f"dir:{tmp_path}/*.txt")
    assert (prose.units, prose.text) == ("sentence", "A note. Another.")
    with pytest.raises(CorpusError, match=r"the glob '\*\*/\*\.go' matches no non-empty file"):
        load_corpus(f"dir:{tmp_path}/**/*.go")


def test_the_same_text_in_lines_is_another_corpus() -> None:
    sentences = corpora.Corpus("x", "One. Two.\n", "tests")
    lines = corpora.Corpus("x", "One. Two.\n", "tests", units="line")
    assert sentences.sha256 != lines.sha256
    assert not np.array_equal(tokenize_corpus(sentences, CHAR).ids, tokenize_corpus(lines, CHAR).ids)


def test_a_missing_or_other_version_of_a_pinned_package_names_the_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(domains.importlib.metadata, "version", lambda name: "0.1")
    with pytest.raises(
        CorpusError,
        match=r"^corpus 'code' needs networkx 3.6.1 \(0.1 is installed\): pip install networkx==3.6.1$",
    ):
        load_corpus("code")

    def absent(name: str) -> str:
        raise domains.importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(domains.importlib.metadata, "version", absent)
    for name, install in [("legal", "pip install spdx==2.5.1"), ("technical", "pip install cmake==4.4.4")]:
        with pytest.raises(CorpusError, match=rf"needs .* \(not installed\): {install}$"):
            load_corpus(name)
    monkeypatch.setattr(domains, "FORTUNES_DE", Path("/absent/zitate"))
    with pytest.raises(
        CorpusError, match=r"^corpus 'german' needs Debian's fortunes-de .*apt-get install fortunes-de"
    ):
        load_corpus("german")


def test_the_domains_extra_pins_what_the_corpora_check() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert sorted(extras["domains"]) == sorted(f"{p.distribution}=={p.version}" for p in domains.PINS)


def reference_window(indexed: TokenizedCorpus, n: int, first: int) -> tuple[list[int], list[int]]:
    """The corpus rotated to start at ``first``, repeated, cut at n, and its boundaries inside."""
    ids, unit = indexed.ids.tolist(), len(indexed.ids)
    rotated = ids[first:] + ids[:first]
    starts = sorted((b - first) % unit for b in indexed.boundaries.tolist())
    inner = [s + k * unit for k in range(n // unit + 1) for s in starts]
    return (rotated * (n // unit + 1))[:n], [s for s in inner if 0 < s < n]


def test_a_window_from_an_offset_starts_at_the_next_boundary_and_wraps() -> None:
    indexed = tokenize_corpus(load_corpus("noise"), CHAR)
    unit, boundaries = len(indexed.ids), indexed.boundaries.tolist()
    assert np.array_equal(indexed.window(250, 0)[0], indexed.window(250)[0])
    for start in range(-3, 2 * unit + 3):
        first = indexed.unit_start(start)
        later = [b for b in boundaries if b >= start % unit]
        assert first == (later[0] if later else 0)
        for n in (1, 7, unit - 1, unit, 3 * unit + 5):
            ids, inner = indexed.window(n, start)
            want_ids, want_inner = reference_window(indexed, n, first)
            assert ids.tolist() == want_ids and inner.tolist() == want_inner, (start, n)
    ids, _ = indexed.window(40, 2)
    assert CHAR.decode(ids.tolist()).startswith(" The sky is blue.")


def test_random_starts_are_boundaries_reproducible_by_seed() -> None:
    indexed = tokenize_corpus(load_corpus("prose"), CL100K)
    draws = [indexed.random_start(random.Random(7)) for _ in range(2)]
    assert draws[0] == draws[1] and draws[0] in set(indexed.boundaries.tolist())
    rng = random.Random(0)
    many = {indexed.random_start(rng) for _ in range(200)}
    assert len(many) > 190 and max(many) > len(indexed.ids) / 2
    ids, _ = indexed.window(5000, draws[0])
    assert CL100K.decode(ids[:1].tolist()).startswith(" ") and draws[0] > 0


def shares(indexed: TokenizedCorpus, window: int) -> np.ndarray:
    """Each component's share of the tokens of every window, one window every 97 tokens."""
    assert indexed.domain_of is not None
    counts = np.cumsum(np.eye(len(indexed.domains))[indexed.domain_of], axis=0)
    counts = np.vstack([np.zeros(len(indexed.domains)), counts])
    firsts = np.arange(0, len(indexed.ids) - window, 97)
    return (counts[firsts + window] - counts[firsts]) / window


def check_mixture(spec: str, weights: list[float]) -> TokenizedCorpus:
    mixed = load_corpus(spec)
    indexed = tokenize_corpus(mixed, CL100K)
    assert indexed.domains == tuple(c.name for c, _ in mixed.components)
    for window, (worst, most) in SHARE_TOLERANCE.items():
        gaps = np.abs(shares(indexed, window) - np.array(weights))
        assert gaps.max() <= worst and np.percentile(gaps, 99) <= most, (spec, window, gaps.max())
    # Decoded and encoded again (as a text backend does), a window is the same ids: the joins
    # between passages do not merge.
    ids, _ = indexed.window(32768, indexed.random_start(random.Random(1)))
    assert CL100K.encode(CL100K.decode(ids.tolist())) == ids.tolist()
    return indexed


def test_a_mixture_of_prose_and_this_checkouts_code_keeps_its_shares_in_every_window() -> None:
    indexed = check_mixture(f"mix:prose=0.7,dir:{ROOT}/src/fathom/**/*.py=0.3", [0.7, 0.3])
    # Where a passage of code follows prose, it starts on a line of its own.
    assert indexed.domain_of is not None
    code_after_prose = np.flatnonzero((indexed.domain_of[1:] == 1) & (indexed.domain_of[:-1] == 0)) + 1
    assert len(code_after_prose) > 100 and ends_lines(indexed.ids, code_after_prose)
    assert set(code_after_prose.tolist()) <= set(indexed.boundaries.tolist())
    passages = np.flatnonzero(np.diff(indexed.domain_of)) + 1
    assert np.median(np.diff(passages)) >= PASSAGE_TOKENS


def test_the_line_break_after_prose_is_one_the_tokenizer_keeps_apart(hf_model_dir: Path) -> None:
    # cl100k reads ".\n" as one token, so a plain newline after a full stop would re-encode to
    # fewer ids: it gets " \n". Whatever each tokenizer gets re-encodes to the same ids in place.
    assert CL100K.encode(".\n") != CL100K.encode(".") + CL100K.encode("\n")
    assert CL100K.decode(line_break(CL100K).tolist()) == " \n"
    for tokenizer in (CL100K, load_tokenizer(f"hf:{hf_model_dir}")):
        ids = line_break(tokenizer).tolist()
        text = tokenizer.decode(ids)
        assert text in (" \n", "\n")
        for word in ("import os", "class A:", "@property", "x = 1"):
            assert tokenizer.encode(f"It ended.{text}{word}") == tokenizer.encode(
                "It ended."
            ) + ids + tokenizer.encode(word)


@pytest.mark.domains
def test_domain_mixtures_keep_their_shares_in_every_window() -> None:
    check_mixture("mix:code=0.3,prose=0.7", [0.3, 0.7])
    check_mixture("mix:legal=1,technical=1,german=2", [0.25, 0.25, 0.5])


def test_a_mixtures_identity_is_its_components_weights_and_version(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("A sentence here. And another one.")
    mixed = load_corpus(f"mix:prose=0.7,dir:{tmp_path}=0.3")
    assert mixed.name == f"mix:prose=0.7,dir:{tmp_path}=0.3" and mixed.text == ""
    assert "public domain" in mixed.licence and "the folder's own" in mixed.licence
    assert mixed.source.startswith("mixture of prose 70% (fathom (public domain)), dir:")
    assert load_corpus(f"mix:prose=7,dir:{tmp_path}=3").sha256 == mixed.sha256  # the same shares
    assert load_corpus(f"mix:prose=0.6,dir:{tmp_path}=0.4").sha256 != mixed.sha256
    assert load_corpus(f"mix:dir:{tmp_path}=0.3,prose=0.7").sha256 != mixed.sha256
    (tmp_path / "a.txt").write_text("A changed sentence. And another one.")
    assert load_corpus(f"mix:prose=0.7,dir:{tmp_path}=0.3").sha256 != mixed.sha256
    info = corpus_info(mixed)
    assert (info.name, info.sha256, info.units, info.tokens) == (mixed.name, mixed.sha256, "mixture", None)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            "mix:code=0.3,poetry=0.7",
            r"unknown corpus 'poetry': use prose, essays, noise, repeat, code, .* or dir:PATH",
        ),
        ("mix:code=-0.3,prose=1.3", r"the weight of code is -0.3; every weight must be above 0"),
        ("mix:code=0,prose=0", r"the weight of code is 0; every weight must be above 0"),
        ("mix:code=nan,prose=1", r"the weight of code is nan"),
        (
            "mix:code=a lot,prose=1",
            r"the weight 'a lot' of code is not a number; write it as mix:NAME=WEIGHT",
        ),
        ("mix:code,prose=1", r"'code' is not NAME=WEIGHT; write it as mix:NAME=WEIGHT,NAME=WEIGHT"),
        ("mix:", r"'' is not NAME=WEIGHT"),
        ("mix:prose=1,prose=2", r"names prose twice"),
        ("mix:prose=1", r"names one corpus: a mixture needs two or more \(or use --corpus prose\)"),
    ],
)
def test_a_bad_mixture_is_refused_before_any_corpus_is_read(
    spec: str, message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(corpora, "_named", lambda *_: pytest.fail("a corpus was read"))
    with pytest.raises(CorpusError, match=rf"^mixture '{spec}'.*{message}") as error:
        load_corpus(spec)
    assert "\n" not in str(error.value)


def test_unknown_corpora_name_every_kind() -> None:
    with pytest.raises(CorpusError, match=r"use one of prose, .*, german, dir:PATH .* or mix:NAME=WEIGHT"):
        load_corpus("poetry")


def test_the_catalogue_lists_every_named_corpus_with_its_licence(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(domains, "FORTUNES_DE", Path("/absent/zitate"))
    entries = {entry.name: entry for entry in corpus_catalogue()}
    assert list(entries) == list(corpora.NAMED_CORPORA)
    assert all(entry.about and entry.licence for entry in entries.values())
    prose = entries["prose"]
    assert prose.info is not None and prose.missing is None and prose.licence == "public domain"
    assert prose.info.tokens is None and prose.info.sha256 == load_corpus("prose").sha256
    german = entries["german"]
    assert (
        german.info is None and german.missing is not None and "apt-get install fortunes-de" in german.missing
    )
    # With a tokenizer, each corpus's size in its tokens (two corpora here: tokenising is the slow part).
    few = {name: corpora.NAMED_CORPORA[name] for name in ("noise", "repeat")}
    monkeypatch.setattr(catalogue, "NAMED_CORPORA", few)
    sized = corpus_catalogue(CL100K)
    assert [(e.name, e.info and e.info.tokens) for e in sized] == [("noise", 24), ("repeat", 18)]
