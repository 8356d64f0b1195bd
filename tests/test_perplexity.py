"""Perplexity documents, their records and arithmetic, answer likelihood and the trap figure, on
simulated models whose log-probabilities are a known profile."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fathom import BackendEntry, registry
from fathom.analysis.perplexity import bucket_sums, perplexity_table, position_buckets
from fathom.backends.sim import DEFAULT_NLL
from fathom.cli import main
from fathom.errors import SpecError
from fathom.prompts.haystack import load_corpus, tokenize_corpus
from fathom.prompts.tokenizers import load_tokenizer
from fathom.records import PerplexityRecord, SampleRecord, record_from_json
from fathom.report.derive import run_spec
from fathom.run.store import RunFolder
from fathom.spec import RunSpec
from fathom.tasks.perplexity import DocumentBuilder


def spec(**changes: Any) -> RunSpec:
    values: dict[str, Any] = {
        "task": "perplexity",
        "model": "sim:perfect?nll=2",
        "tokenizer": "cl100k_base",
        "lengths": (1024, 2048),
        "depths": (),
        "samples": 3,
    }
    return RunSpec(**{**values, **changes})


def documents(folder: Path) -> list[PerplexityRecord]:
    return [r for r in RunFolder(folder).records() if isinstance(r, PerplexityRecord)]


@given(st.integers(min_value=1, max_value=3_000_000))
def test_position_buckets_cover_every_position_once(length: int) -> None:
    buckets = position_buckets(length)
    assert buckets[0][0] == 0 and buckets[-1][1] == length
    assert all(lo < hi for lo, hi in buckets)
    assert all(a[1] == b[0] for a, b in itertools.pairwise(buckets))  # no gap, no overlap
    assert buckets[0][1] == min(length, 1024)


@given(st.integers(min_value=2, max_value=20_000), st.integers(min_value=1, max_value=50))
def test_bucket_sums_count_every_scored_token_once(length: int, first: int) -> None:
    first = min(first, length - 1)
    logprobs = tuple(-(i % 7) / 3 for i in range(length - first))
    record = PerplexityRecord(
        "perplexity|L1|S0",
        "perplexity",
        length,
        0,
        0,
        "c",
        0,
        "x",
        length,
        length,
        first,
        logprobs,
        0.0,
        False,
    )
    sums = bucket_sums(record)
    assert sum(count for *_, count in sums) == len(logprobs)
    assert math.isclose(sum(nll for _, _, nll, _ in sums), -math.fsum(logprobs), abs_tol=1e-6)


def test_flat_profile_gives_its_known_perplexity(runs: Path) -> None:
    result = run_spec(spec(), runs / "flat", show_progress=False)
    records = documents(result.folder)
    assert len(records) == 6 and all(r.error is None for r in records)
    for record in records:
        # No BOS in cl100k: every token of the document but the first is scored.
        assert record.first_position == 1 and len(record.logprobs) == record.length - 1
        assert record.actual_tokens == record.length
    summary = json.loads((result.folder / "summary.json").read_text())
    assert summary["kind"] == "perplexity"
    for row in summary["perplexity"]["lengths"]:
        assert row["perplexity"] == pytest.approx(math.exp(2.0), rel=1e-6)
        assert row["documents"] == 3 and row["tokens"] == 3 * (row["length"] - 1)
    assert (result.folder / "perplexity.png").stat().st_size > 10_000


def test_rising_profile_beyond_the_window_gives_its_known_perplexity(runs: Path) -> None:
    window, length = 1024, 4096
    result = run_spec(spec(model=f"sim:cliff?window={window}", lengths=(length,), samples=1), runs / "cliff")
    positions = np.arange(1, length)
    nll = DEFAULT_NLL + np.log2(np.maximum(positions / window, 1.0))
    table = perplexity_table(documents(result.folder))
    assert table["lengths"][0]["perplexity"] == pytest.approx(math.exp(nll.mean()), rel=1e-5)
    assert table["lengths"][0]["beyond_window"]
    by_bucket = {(b["lo"], b["hi"]): b for b in table["buckets"]}
    assert set(by_bucket) == {(0, 1024), (1024, 2048), (2048, 4096)}
    inside = nll[(positions >= 2048) & (positions < 4096)]
    assert by_bucket[(2048, 4096)]["perplexity"] == pytest.approx(math.exp(inside.mean()), rel=1e-5)
    assert by_bucket[(0, 1024)]["perplexity"] == pytest.approx(math.exp(DEFAULT_NLL), rel=1e-6)


def test_documents_are_corpus_slices_from_different_offsets() -> None:
    tokenizer = load_tokenizer("cl100k_base")
    corpus = load_corpus("prose")
    builder = DocumentBuilder(corpus, tokenizer, seed=0)
    tokens = tokenize_corpus(corpus, tokenizer)
    built = [builder.build(cell) for cell in builder.cells((2048,), 4)]
    assert built[0].corpus_offset == 0  # the NIAH haystack's own start
    assert len({d.corpus_offset for d in built}) == 4
    for document in built:
        at = document.corpus_offset
        assert at in set(tokens.boundaries.tolist())
        assert np.array_equal(document.ids, tokens.ids[at : at + 2048])
    again = DocumentBuilder(corpus, tokenizer, seed=0).build(built[2].cell)
    assert again.corpus_offset == built[2].corpus_offset  # seeded
    other = DocumentBuilder(corpus, tokenizer, seed=1).build(built[2].cell)
    assert other.corpus_offset != built[2].corpus_offset


class _CharsWithBos:
    """The char tokenizer with a BOS id, as a model's own tokenizer may have."""

    def __init__(self) -> None:
        self.inner = load_tokenizer("char")
        self.bos_id = 7
        self.name, self.identity = "char+bos", self.inner.identity + "+bos"

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_a_model_with_a_bos_gets_it_first() -> None:
    tokenizer: Any = _CharsWithBos()
    builder = DocumentBuilder(load_corpus("prose"), tokenizer, seed=0)
    document = builder.build(builder.cells((500,), 1)[0])
    assert len(document.ids) == 500 and document.ids[0] == 7
    # The corpus is tokenised with a leading space, so every unit starts like a sentence.
    assert tokenizer.decode(document.ids[1:].tolist()) == (" " + load_corpus("prose").text)[:499]


def test_a_document_longer_than_the_corpus_is_refused(runs: Path) -> None:
    with pytest.raises(SpecError, match="larger corpus"):
        run_spec(spec(corpus="noise", lengths=(64,)), runs / "short", show_progress=False)
    assert not (runs / "short" / "samples.jsonl").exists()


def test_niah_with_perplexity_and_answer_likelihood_draws_the_trap(runs: Path) -> None:
    code = main(
        [
            "run",
            "niah",
            "--model",
            "sim:lost-in-the-middle?window=4k&dip=1",
            "--lengths",
            "1k,4k",
            "--depths",
            "0,0.5",
            "--samples",
            "3",
            "--perplexity",
            "--answer-logprob",
            "--run-dir",
            str(runs / "trap"),
            "--no-progress",
        ]
    )
    assert code == 0
    records = RunFolder(runs / "trap").records()
    samples = [r for r in records if isinstance(r, SampleRecord) and not r.control]
    assert len(samples) == 12 and len(documents(runs / "trap")) == 6
    for sample in samples:
        assert sample.answer_logprobs is not None and sample.answer_error is None
        # The sim's answer probability is its profile: 1 at 1k, and at 4k 1 - 4 d (1 - d) at the
        # needle's depth d (the window's full dip): about 1 at the start, 0 in the middle.
        chance = (
            1.0 - 4 * sample.needle_depths[0] * (1 - sample.needle_depths[0])
            if sample.length == 4096
            else 1.0
        )
        assert math.exp(sample.answer_logprob or 0.0) == pytest.approx(max(chance, 1e-6), abs=0.02)
    summary = json.loads((runs / "trap" / "summary.json").read_text())
    perplexities = [row["perplexity"] for row in summary["perplexity"]["lengths"]]
    assert perplexities == pytest.approx([math.exp(DEFAULT_NLL)] * 2)  # flat: the trap
    likelihood = [row["mean_probability"] for row in summary["answer_likelihood"]]
    assert likelihood == pytest.approx([1.0, 0.5], abs=0.02)
    assert (runs / "trap" / "trap.png").stat().st_size > 10_000 and (runs / "trap" / "heatmap.png").exists()
    # Resuming finds every record of both kinds done.
    assert main(["run", "niah", "--model", "sim:lost-in-the-middle?window=4k&dip=1", "--lengths", "1k,4k",
                 "--depths", "0,0.5", "--samples", "3", "--perplexity", "--answer-logprob",
                 "--run-dir", str(runs / "trap"), "--no-progress"]) == 0  # fmt: skip
    assert len(RunFolder(runs / "trap").records()) == 30  # 12 samples, their 12 controls, 6 documents


def test_trap_from_a_run_pair_and_a_mismatched_pair(runs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = "sim:cliff?window=2k"
    ppl = run_spec(spec(model=model, lengths=(1024, 4096), samples=2), runs / "ppl", show_progress=False)
    niah = spec(task="niah", model=model, lengths=(1024, 4096), depths=(0.5,), samples=3)
    retrieval = run_spec(niah, runs / "niah", show_progress=False)
    out = runs / "figures" / "trap.png"
    assert main(["trap", str(ppl.folder), str(retrieval.folder), "--out", str(out)]) == 0
    assert out.stat().st_size > 10_000
    other = run_spec(
        spec(model="sim:perfect", lengths=(1024,), samples=1), runs / "other", show_progress=False
    )
    assert main(["trap", str(other.folder), str(retrieval.folder), "--out", str(out)]) == 2
    assert "different models" in capsys.readouterr().err
    assert main(["trap", str(retrieval.folder), "--out", str(out)]) == 2
    assert "no perplexity records" in capsys.readouterr().err


def test_perplexity_flags_belong_to_niah() -> None:
    with pytest.raises(SpecError, match="--perplexity goes with niah"):
        registry.check_spec(spec(task="ruler", perplexity=True))
    with pytest.raises(SpecError, match="--answer-logprob goes with niah"):
        registry.check_spec(spec(task="perplexity", answer_logprob=True))


def test_new_flags_leave_older_run_identities_alone() -> None:
    plain = spec(task="niah", depths=(0.5,))
    assert "perplexity" not in plain.to_json() and "answer_logprob" not in plain.to_json()
    assert spec(task="niah", depths=(0.5,), perplexity=True).sha256 != plain.sha256
    assert RunSpec.from_json(plain.to_json()) == plain


class _NoScores:
    """A backend that generates but cannot read log-probabilities."""

    name, input, exact_lengths = "noscore:x", "ids", True
    trained_window = max_prompt_tokens = None

    def __init__(self, rest: str, tokenizer: str) -> None:
        self.tokenizer = load_tokenizer("cl100k_base")

    def settings(self) -> dict[str, Any]:
        return {}

    def generate(self, requests: Any) -> list[Any]:
        raise AssertionError("never reached")


def test_a_backend_that_cannot_score_fails_before_any_work(
    runs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(registry.BACKENDS, "noscore", BackendEntry(_NoScores, "cannot score"))
    with pytest.raises(SpecError, match=r"cannot read log-probabilities.*llamacpp, hf, vllm"):
        run_spec(spec(model="noscore:x"), runs / "noscore", show_progress=False)
    assert not (runs / "noscore").exists()


def test_records_round_trip_and_older_records_read() -> None:
    document = PerplexityRecord(
        "perplexity|L8|S0", "perplexity", 8, 0, 0, "prose", 0, "ab", 8, 8, 1, (-1.0, -2.5), 0.1, False
    )
    line = json.loads(json.dumps(document.to_json()))
    assert record_from_json(line) == document
    sample = {
        "sample_id": "niah|L1024|D0.5000|S0", "task": "niah", "length": 1024, "depth": 0.5, "sample": 0,
        "seed": 0, "prompt_sha256": "x", "target_tokens": 1024, "actual_tokens": 1024,
        "needle_kind": "number", "needle_token_offsets": [9], "needle_depths": [0.5], "question": "q",
        "answers": ["1"], "output": "1", "finish_reason": "stop", "score": 1.0, "matched": ["1"],
        "scoring": "contains", "latency_s": 0.1, "beyond_window": False, "schema": 2,
    }  # fmt: skip
    old = record_from_json(sample)
    assert isinstance(old, SampleRecord) and old.answer_logprobs is None and old.answer_logprob is None
    new = record_from_json({**sample, "answer_logprobs": [-0.5, -0.25]})
    assert isinstance(new, SampleRecord) and new.answer_logprob == -0.75
