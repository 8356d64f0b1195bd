"""The llama.cpp backend on the two small GGUFs: the model's own tokenizer, exact ids in, greedy
answers out, the KV cache of a shared prefix reused, and one-line errors."""

from __future__ import annotations

import hashlib
import json
import mmap
import re
import shutil
import struct
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from fathom.backends.base import Request, ScoreRequest
from fathom.backends.local_models import resolve_model_path
from fathom.cli import main
from fathom.errors import SpecError, TokenizerError
from fathom.prompts import PromptBuilder, length_tolerance
from fathom.prompts.haystack import load_corpus, tokenize_corpus
from fathom.prompts.haystack.corpora import Corpus
from fathom.prompts.needles import make_needle, needle_rng
from fathom.prompts.templates import resolve_template
from fathom.records import THINKING, FirstToken
from fathom.run.runner import prepare
from fathom.spec import RunSpec
from fathom.tasks.niah import NIAH_TEXT
from fathom.tasks.ruler.catalogue import SUITE

llama_cpp = pytest.importorskip("llama_cpp")
from fathom.backends.llamacpp import LlamaCppBackend, _Answer  # noqa: E402
from fathom.backends.llamacpp_vocab import (  # noqa: E402
    LlamaCppTokenizer,
    load_llama,
    tokenizer_digest,
)

MODELS = ("smollm2", "gemma3-270m")
# A slice of the prose corpus: real text, tokenised in a second rather than the whole corpus's five.
PROSE = Corpus("prose-head", load_corpus("prose").text[:150_000], "tests")


@pytest.fixture(scope="module")
def vocab() -> dict[str, LlamaCppTokenizer]:
    """Each model's tokenizer from a vocabulary-only load (no weights)."""
    return {name: LlamaCppTokenizer(load_llama(resolve_model_path(name), vocab_only=True)) for name in MODELS}


# One thread: llama.cpp's threads spin at barriers, so on two cores that another process also uses,
# two threads run 2-15 times slower than one (measured here); on idle cores they gain about 1.5x.
@pytest.fixture(scope="module")
def smol() -> LlamaCppBackend:
    return LlamaCppBackend("smollm2?n_ctx=2k&threads=1", "auto")


@pytest.fixture(scope="module")
def gemma() -> LlamaCppBackend:
    return LlamaCppBackend("gemma3-270m?n_ctx=2k&threads=1", "auto")


def prose_ids(tokenizer: LlamaCppTokenizer, start: int, count: int) -> list[int]:
    return [int(i) for i in tokenize_corpus(PROSE, tokenizer).ids[start : start + count]]


def count_evaluated(backend: LlamaCppBackend, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The number of tokens of each call to the model's eval, recorded as they happen."""
    counts: list[int] = []
    original = backend.llm.eval

    def counting_eval(tokens: list[int]) -> None:
        counts.append(len(tokens))
        original(tokens)

    monkeypatch.setattr(backend.llm, "eval", counting_eval)
    return counts


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("template", ["auto", "chatml"])
def test_built_prompts_decode_to_text_that_encodes_back_to_the_same_ids(
    vocab: dict[str, LlamaCppTokenizer], model: str, template: str
) -> None:
    tokenizer = vocab[model]
    build = PromptBuilder(
        tokenizer, resolve_template(template, tokenizer), NIAH_TEXT, tokenize_corpus(PROSE, tokenizer)
    )
    for index, (length, depth) in enumerate([(1024, 0.0), (3000, 0.4), (8192, 1.0)]):
        needle = make_needle(["number", "uuid", "fact"][index], needle_rng(index))
        ids = build.build(length, depth, needle).ids.tolist()
        text = tokenizer.decode(ids)
        assert tokenizer.encode_with_specials(text) == ids
        assert text.count(needle.text) == 1
        assert text.endswith("Answer:")
        if model == "gemma3-270m":  # its GGUF says add_bos_token: the BOS once, first
            assert ids[0] == 2 and ids.count(2) == 1
        else:  # no BOS: the ChatML prompt opens with <|im_start|>
            assert ids[0] == 1


@pytest.mark.parametrize("model", MODELS)
def test_plain_text_round_trips_and_special_strings_stay_text(
    vocab: dict[str, LlamaCppTokenizer], model: str
) -> None:
    tokenizer = vocab[model]
    text = PROSE.text[:20_000] + " পাকিস্তানের" + " " * 40 + "end"  # pieces over 32 bytes too
    assert tokenizer.decode(tokenizer.encode(text)) == text
    assert tokenizer.encode_batch([text, "a b"]) == [tokenizer.encode(text), tokenizer.encode("a b")]
    special = "<|im_start|>" if model == "smollm2" else "<bos>"
    assert len(tokenizer.encode_with_specials(special)) == 1
    assert len(tokenizer.encode(special)) > 1
    assert tokenizer.decode(tokenizer.encode(special)) == special


def test_a_vocabulary_that_puts_a_space_before_text_still_round_trips(
    vocab: dict[str, LlamaCppTokenizer], tmp_path: Path
) -> None:
    """Gemma's vocabulary with add_space_prefix switched on, as Llama 2's and Mistral's have it."""
    copy = tmp_path / "spm.gguf"
    shutil.copyfile(resolve_model_path("gemma3-270m"), copy)
    key = b"tokenizer.ggml.add_space_prefix"
    with copy.open("r+b") as handle, mmap.mmap(handle.fileno(), 0) as data:
        at = data.find(key) + len(key)
        assert data[at : at + 5] == b"\x07\x00\x00\x00\x00"  # a bool, false
        data[at + 4] = 1
    native = llama_cpp.Llama(str(copy), vocab_only=True, verbose=False)
    assert len(native.tokenize(b" The", add_bos=False)) == 2  # a space of its own, then " The"
    tokenizer = LlamaCppTokenizer(load_llama(copy, vocab_only=True))
    assert tokenizer.identity != vocab["gemma3-270m"].identity
    build = PromptBuilder(
        tokenizer, resolve_template("none", tokenizer), NIAH_TEXT, tokenize_corpus(PROSE, tokenizer)
    )
    ids = build.build(2000, 0.5, make_needle("fact", needle_rng(1))).ids.tolist()
    assert tokenizer.encode_with_specials(tokenizer.decode(ids)) == ids


def test_bos_and_chat_template_come_from_the_gguf(vocab: dict[str, LlamaCppTokenizer]) -> None:
    smol, gemma = vocab["smollm2"], vocab["gemma3-270m"]
    # SmolLM2's GGUF says add_bos_token false: its prompts start with the template's own tokens.
    assert smol.bos_id is None
    assert (smol.bos_token, smol.eos_token) == ("<|im_start|>", "<|im_end|>")
    assert smol.chat_template is not None and "<|im_start|>" in smol.chat_template
    assert resolve_template("auto", smol).name == f"tokenizer:{smol.name}"
    assert (gemma.bos_id, gemma.bos_token, gemma.eos_token) == (2, "<bos>", "<eos>")
    assert gemma.chat_template is None
    assert resolve_template("auto", gemma).name == "none"
    assert smol.name == f"llamacpp:{resolve_model_path('smollm2')}"
    assert smol.identity != gemma.identity


def _gguf(path: Path, entries: list[tuple[str, int, bytes]]) -> Path:
    """A GGUF header (version 3, no tensors) with the given (key, type, encoded value) entries."""
    data = b"GGUF" + struct.pack("<IQQ", 3, 0, len(entries))
    for key, kind, value in entries:
        data += struct.pack("<Q", len(key)) + key.encode() + struct.pack("<I", kind) + value
    path.write_bytes(data)
    return path


def _strings(*items: str) -> bytes:
    return struct.pack("<IQ", 8, len(items)) + b"".join(struct.pack("<Q", len(s)) + s.encode() for s in items)


def test_tokenizer_identity_covers_the_tokenizer_entries_only(tmp_path: Path) -> None:
    tokens = ("tokenizer.ggml.tokens", 9, _strings("a", "b", "ab"))
    bos = ("tokenizer.ggml.bos_token_id", 4, struct.pack("<I", 1))
    scores = ("tokenizer.ggml.scores", 9, struct.pack("<IQ", 6, 3) + struct.pack("<3f", 0, 1, 2))
    q4 = _gguf(tmp_path / "q4.gguf", [("general.file_type", 4, struct.pack("<I", 3)), tokens, bos, scores])
    q8 = _gguf(tmp_path / "q8.gguf", [scores, bos, tokens, ("general.file_type", 4, struct.pack("<I", 7))])
    other = _gguf(
        tmp_path / "other.gguf", [("tokenizer.ggml.tokens", 9, _strings("a", "b", "ba")), bos, scores]
    )
    assert tokenizer_digest(q4) == tokenizer_digest(q8) != tokenizer_digest(other)
    (tmp_path / "junk.gguf").write_bytes(b"not a model")
    with pytest.raises(TokenizerError, match=r"junk\.gguf"):
        tokenizer_digest(tmp_path / "junk.gguf")


def _records(folder: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in (folder / "samples.jsonl").read_text().splitlines()]


@pytest.mark.slow
def test_smollm2_finds_the_needle_at_1k_through_the_cli(tmp_path: Path) -> None:
    args = ["run", "niah", "--model", "llamacpp:smollm2?threads=1", "--lengths", "1k", "--depths", "3"]
    assert main([*args, "--samples", "1", "--run-dir", str(tmp_path), "--no-progress"]) == 0
    records = [r for r in _records(tmp_path) if not r.get("control")]
    controls = [r for r in _records(tmp_path) if r.get("control")]
    assert [r["error"] for r in records] == [None] * 3
    assert all(r["actual_tokens"] == r["target_tokens"] == 1024 for r in records)
    assert sum(r["score"] == 1.0 for r in records) >= 2, [r["output"] for r in records]
    # Without the haystack no model can produce a random 7-digit number.
    assert len(controls) == 3 and all(c["error"] is None and c["score"] == 0.0 for c in controls)
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["backend"] == {
        "input": "ids",
        "exact_lengths": True,
        "trained_window": 8192,
        "max_prompt_tokens": 8192,  # n_ctx defaults to the trained context
        "transport": {},  # no settings that only change how requests travel
    }
    assert manifest["identity"]["backend"]["settings"]["decoding"] == "greedy"
    assert {r["first_token"] for r in _records(tmp_path)} == {"forced"}
    assert manifest["identity"]["tokenizer"]["name"].startswith("llamacpp:")
    # The build that decides the arithmetic is recorded beside the run, outside its identity.
    build = manifest["environment"]["backend_build"]
    assert build["llama_cpp_version"] == manifest["identity"]["backend"]["settings"]["llama_cpp_version"]
    assert build["system_info"].startswith("CPU : ")


@pytest.mark.slow
def test_smollm2_runs_every_ruler_task_end_to_end(tmp_path: Path) -> None:
    # 1152 tokens: the shortest length that holds qa_2's ten HotpotQA paragraphs for most questions.
    args = ["run", "ruler", "--model", "llamacpp:smollm2?threads=1&n_ctx=2k", "--lengths", "1152"]
    assert main([*args, "--samples", "1", "--run-dir", str(tmp_path), "--no-progress"]) == 0
    records = {r["task"]: r for r in _records(tmp_path)}
    assert sorted(records) == sorted(SUITE)
    for task, record in records.items():
        assert record["error"] is None, (task, record["error"])
        target = 1152 - record["max_new_tokens"]
        assert (
            target - length_tolerance(target) <= record["actual_tokens"] <= record["target_tokens"] == target
        )
        assert 0.0 <= record["score"] <= 1.0 and record["output"]
    # A real pass: a 135M model finds a single needle at 1k in RULER's own prompt.
    singles = [records[f"niah_single_{i}"]["score"] for i in (1, 2, 3)]
    assert sum(singles) >= 2, [records[f"niah_single_{i}"]["output"] for i in (1, 2, 3)]
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["kind"] == "ruler" and {cell["task"] for cell in summary["grid"]} == set(SUITE)


def _request(ids: list[int], max_new_tokens: int = 1, stop: tuple[str, ...] = ()) -> Request:
    return Request("s", np.asarray(ids, dtype=np.int32), max_new_tokens, stop=stop)


def _last_logits(backend: LlamaCppBackend) -> np.ndarray:
    row = llama_cpp.llama_get_logits_ith(backend.llm.ctx, -1)
    return np.ctypeslib.as_array(row, shape=(backend.llm.n_vocab(),)).copy()


@pytest.mark.slow
def test_a_shared_prefix_is_evaluated_once_and_gives_the_same_logits(
    gemma: LlamaCppBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    evaluated = count_evaluated(gemma, monkeypatch)
    ids = prose_ids(gemma.tokenizer, 0, 10_000)
    first = [2, *ids[:1199]]  # Gemma's BOS, then prose
    second = first[:1080] + ids[5000:5120]  # shares 90%
    # Shares one 512-token batch, then goes on for 700: Gemma's sliding-window layers look 512
    # tokens back, into positions that a cache the size of the window has already dropped.
    third = first[:512] + ids[8000:8700]
    for prompt, new in [(first, 1200), (second, 120), (third, 700)]:
        evaluated.clear()
        [answer] = gemma.generate([_request(prompt)])
        assert answer.error is None and sum(evaluated) == new
    assert gemma.llm.input_ids[: len(third)].tolist() == third  # exactly the ids: no second BOS
    cached = _last_logits(gemma)
    # From scratch in the same batches (other splits round differently): the very same logits.
    gemma.llm.reset()  # type: ignore[no-untyped-call]
    gemma.llm.eval(third[:512])
    gemma.llm.eval(third[512:])
    assert np.allclose(_last_logits(gemma), cached, rtol=0, atol=1e-4)


CHAT = "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n"


def test_generation_ends_at_the_token_limit_at_a_stop_string_or_at_the_end_of_turn(
    smol: LlamaCppBackend,
) -> None:
    tokenizer = smol.tokenizer
    ids = tokenizer.encode_with_specials(CHAT)
    free = smol.generate([_request(ids, 24)])[0]
    assert free.finish_reason == "stop" and free.completion_tokens < 24  # the model's <|im_end|>
    assert free.prompt_tokens == len(ids) and free.error is None and "<|im_end|>" not in free.text
    short = smol.generate([_request(ids, 2)])[0]
    assert (short.finish_reason, short.completion_tokens) == ("length", 2)
    assert free.text.startswith(short.text)
    word = free.text.split()[1]
    stopped = smol.generate([_request(ids, 24, stop=(word, "never"))])[0]
    assert stopped.finish_reason == "stop"
    assert stopped.text == free.text[: free.text.index(word)]


def _answered(smol: LlamaCppBackend) -> list[int]:
    """A prompt that SmolLM2 would answer by ending its turn at once: its own whole answer to CHAT."""
    ids = smol.tokenizer.encode_with_specials(CHAT)
    [free] = smol.generate([_request(ids, 24)])
    assert free.finish_reason == "stop" and free.completion_tokens < 24
    return [int(i) for i in smol.llm.input_ids[: smol.llm.n_tokens]]  # the prompt and answer, no end


def test_a_model_whose_first_choice_is_the_end_answers_with_its_best_other_token(
    smol: LlamaCppBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = _answered(smol)
    smol.llm.reset()  # type: ignore[no-untyped-call]
    smol.llm.eval(ids)
    logits = _last_logits(smol)
    order = [int(t) for t in np.argsort(-logits, kind="stable")]
    assert smol.tokenizer.is_end(order[0])  # unforced, the answer would be empty
    best = next(t for t in order if not smol.tokenizer.is_end(t))
    evaluated = count_evaluated(smol, monkeypatch)
    [answer] = smol.generate([_request(ids, 6)])
    assert answer.error is None and answer.first_token == FirstToken.FORCED
    assert smol.llm.input_ids[len(ids)] == best and answer.text.startswith(smol.tokenizer.decode([best]))
    assert answer.text.strip() and answer.completion_tokens >= 1
    assert max(evaluated) == 1  # the prompt's cache was kept: one token at a time after it
    assert smol.settings()["first_token"] == "forced"


def test_an_end_offered_first_is_replaced_by_the_models_own_best_token(
    smol: LlamaCppBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stand-in model that offers its end of turn first, the true logits untouched: forcing must
    give the answer the model gives anyway, through one more call that starts from the token."""
    ids = smol.tokenizer.encode_with_specials(CHAT)
    [plain] = smol.generate([_request(ids, 8)])
    end = smol.tokenizer.encode_with_specials("<|im_end|>")[0]
    real, calls = smol.llm.generate, []

    def ending_first(tokens: list[int], **options: object) -> Iterator[int]:
        calls.append(list(tokens))
        stream = real(tokens, **options)  # type: ignore[arg-type]
        if len(calls) == 1:
            next(stream)  # its real first token, whose logits stay for the backend to read
            yield end
        yield from stream

    monkeypatch.setattr(smol.llm, "generate", ending_first)
    [forced] = smol.generate([_request(ids, 8)])
    assert (forced.text, forced.completion_tokens, forced.first_token) == (plain.text, 8, FirstToken.FORCED)
    assert [len(c) for c in calls] == [len(ids), len(ids) + 1] and calls[1][:-1] == ids
    # Were the end offered again (forcing gone wrong), the record would say the model stopped at once.
    calls.clear()
    monkeypatch.setattr(smol, "_best_not_end", lambda: end)
    [stopped] = smol.generate([_request(ids, 8)])
    assert (stopped.text, stopped.completion_tokens, stopped.first_token) == ("", 1, FirstToken.END)


def test_prefill_and_decode_times_add_up_to_the_latency(smol: LlamaCppBackend) -> None:
    ids = [1, *range(100, 900)]  # 801 tokens, none of them cached by the previous request
    smol.llm.reset()  # type: ignore[no-untyped-call]
    answer = smol.generate([_request(ids, 8)])[0]
    assert answer.prefill_s is not None and answer.decode_s is not None
    assert answer.prefill_s > 0 and answer.decode_s >= 0
    assert answer.prefill_s + answer.decode_s == pytest.approx(answer.latency_s, abs=1e-6)
    # 801 prompt tokens in one prefill cost more than the answer's few decode steps after it.
    assert answer.prefill_s > answer.decode_s / max(answer.completion_tokens, 1)


def test_a_prompt_over_n_ctx_is_refused_without_evaluating_anything(
    smol: LlamaCppBackend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    evaluated = count_evaluated(smol, monkeypatch)
    done = smol.generate([_request([1] * 2041, 8)])[0]
    assert done.error == "too_long: 2041 prompt tokens + 8 new exceed n_ctx 2048"
    assert evaluated == []
    # Through the runner, which refuses it before the backend sees it.
    monkeypatch.setattr(llama_cpp.Llama, "eval", lambda *_: pytest.fail("a refused prompt was evaluated"))
    args = [
        "run",
        "niah",
        "--model",
        "llamacpp:smollm2?n_ctx=1k",
        "--lengths",
        "1k",
        "--depths",
        "1",
        "--no-control",
        "--keep-too-long",
    ]
    # Refused as too long: a final error, so the run exits 3.
    assert main([*args, "--samples", "1", "--run-dir", str(tmp_path), "--no-progress"]) == 3
    [record] = _records(tmp_path)
    assert str(record["error"]).startswith("too_long: 1024 prompt tokens + 32 new exceed")


def test_a_failing_request_is_recorded_and_the_next_one_runs(smol: LlamaCppBackend) -> None:
    [failed] = smol.generate([_request([1, 10**6, 3])])  # an id outside the vocabulary
    assert (failed.error, failed.finish_reason) == ("backend_error: llama_decode returned -1", "error")
    [answered] = smol.generate([_request([1, 5, 3])])
    assert answered.error is None and answered.completion_tokens == 1
    with pytest.raises(TokenizerError, match="outside the vocabulary"):
        smol.tokenizer.decode([10**6])  # llama.cpp itself would abort the process


def test_gemma_reads_its_single_bos_and_reports_its_settings(capsys: pytest.CaptureFixture[str]) -> None:
    backend = LlamaCppBackend("gemma3-270m?n_ctx=1k&threads=1&batch=256&seed=7&flash_attn=1", "auto")
    assert capsys.readouterr().err == ""  # llama.cpp's load messages stay quiet
    tokenizer = backend.tokenizer
    build = PromptBuilder(
        tokenizer, resolve_template("auto", tokenizer), NIAH_TEXT, tokenize_corpus(PROSE, tokenizer)
    )
    ids = build.build(200, 0.5, make_needle("number", needle_rng(0))).ids.tolist()
    [answer] = backend.generate([_request(ids, 2)])
    assert answer.error is None and answer.prompt_tokens == 200
    assert backend.llm.input_ids[:200].tolist() == ids and ids[:2].count(2) == 1
    assert (backend.trained_window, backend.max_prompt_tokens) == (32768, 1024)
    settings = backend.settings()
    assert settings["model_sha256"] == hashlib.sha256(backend.path.read_bytes()).hexdigest()
    keys = ("n_ctx", "threads", "batch", "seed", "decoding", "swa_full", "flash_attn", "first_token")
    assert {k: settings[k] for k in keys} == {
        "first_token": "forced",
        "flash_attn": True,
        "n_ctx": 1024,
        "threads": 1,
        "batch": 256,
        "seed": 7,
        "decoding": "greedy",
        "swa_full": True,
    }


SETTING = "llamacpp setting"
TOKENS = "a whole number of tokens from 1 to 64M"  # n_ctx: room for fathom's longest prompt
THREADS = "a whole number of threads from 1 to 4096"


@pytest.mark.parametrize(
    ("model", "tokenizer", "message"),
    [
        ("/no/such/model.gguf", "auto", "no model at '/no/such/model.gguf'"),
        ("{junk}", "auto", "junk.gguf' is not a GGUF file"),
        ("{folder}", "auto", "is a folder: give the .gguf model file itself"),
        ("smollm2", "cl100k_base", "not 'cl100k_base': drop --tokenizer"),
        ("smollm2?n_gpu=1", "auto", "llamacpp has no setting 'n_gpu=1': its settings are n_ctx=, threads=, "
         "batch=, seed=, flash_attn="),
        ("smollm2?nctx=8k", "auto", "llamacpp has no setting 'nctx=8k' (did you mean 'n_ctx'?)"),
        ("smollm2?threads=two", "auto", f"{SETTING} 'threads' must be {THREADS}, not 'two'"),
        ("smollm2?threads=0", "auto", f"{SETTING} 'threads' must be {THREADS}, not '0'"),
        ("smollm2?n_ctx=0", "auto", f"{SETTING} 'n_ctx' must be {TOKENS} (e.g. 16k), not '0'"),
        ("smollm2?batch=1.5", "auto",
         f"{SETTING} 'batch' must be a whole number of tokens from 1 to 1M (e.g. 512), not '1.5'"),
        ("smollm2?seed=4294967296", "auto",
         f"{SETTING} 'seed' must be a whole number from 0 to 4294967295, not '4294967296'"),
        ("smollm2?flash_attn=yes", "auto", f"{SETTING} 'flash_attn' must be 1 (on) or 0 (off), not 'yes'"),
    ],
)  # fmt: skip
def test_bad_models_and_options_are_one_line_errors(
    model: str, tokenizer: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "junk.gguf").write_bytes(b"not a model at all")
    model = model.format(junk=tmp_path / "junk.gguf", folder=tmp_path)
    with pytest.raises(SpecError, match=re.escape(message)):
        LlamaCppBackend(model, tokenizer)
    args = ["run", "niah", "--model", f"llamacpp:{model}", "--tokenizer", tokenizer, "--lengths", "1k"]
    assert main([*args, "--run-dir", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def _log_softmax_rows(logits: np.ndarray) -> np.ndarray:
    rows = logits.astype(np.float64)
    peak = rows.max(axis=1, keepdims=True)
    return rows - (peak + np.log(np.exp(rows - peak).sum(axis=1, keepdims=True)))


@pytest.mark.slow
def test_token_scores_equal_llama_cpps_own_logits_and_survive_prefix_reuse(smol: LlamaCppBackend) -> None:
    ids = np.asarray(prose_ids(smol.tokenizer, 0, 700), dtype=np.int32)
    [scores] = smol.score([ScoreRequest("doc", ids, 1)])
    assert scores.error is None and scores.first_position == 1 and len(scores.logprobs) == 699
    # llama.cpp's own way: every position's logits kept (logits_all), in the same 512-token batches.
    reference = load_llama(smol.path, n_ctx=1024, n_threads=1, n_threads_batch=1, logits_all=True)
    reference.eval(ids.tolist())
    want = _log_softmax_rows(reference.scores[: len(ids) - 1])[np.arange(len(ids) - 1), ids[1:]]
    assert np.abs(scores.logprobs - want).max() < 1e-4
    # A later start, past the first batch, after a prompt that shares the first 600 tokens: the
    # cache is reused up to the token before the first scored one, and the numbers do not move.
    smol.generate([_request([*ids[:600].tolist(), 42, 43])])
    [tail] = smol.score([ScoreRequest("tail", ids, 530)])
    assert tail.first_position == 530 and np.abs(tail.logprobs - want[529:]).max() < 1e-4


@pytest.mark.slow
def test_the_answer_continuation_is_scored_right_after_generating(smol: LlamaCppBackend) -> None:
    prompt = np.asarray(prose_ids(smol.tokenizer, 100, 300), dtype=np.int32)
    answer = np.asarray(smol.tokenizer.encode(" 4821937"), dtype=np.int32)
    request = Request("s", prompt, 4, continuation=answer)
    [done] = smol.generate([request])
    assert done.error is None and done.continuation_error is None
    assert done.continuation_logprobs is not None and len(done.continuation_logprobs) == len(answer)
    [alone] = smol.score([ScoreRequest("s", np.concatenate([prompt, answer]), len(prompt))])
    assert np.allclose(done.continuation_logprobs, alone.logprobs, atol=1e-4)
    assert all(value < 0 for value in done.continuation_logprobs)


def test_a_sequence_over_n_ctx_is_not_scored(smol: LlamaCppBackend) -> None:
    [scores] = smol.score([ScoreRequest("long", np.ones(2049, dtype=np.int32), 1)])
    assert scores.error == "too_long: 2049 tokens exceed n_ctx 2048" and len(scores.logprobs) == 0
    with pytest.raises(ValueError, match="cannot score from token 0"):
        smol.score([ScoreRequest("bad", np.ones(8, dtype=np.int32), 0)])


# Thinking models (issue #35 item 1): a think block in the model's words split off its answer, and the
# budgets a llama.cpp model cannot honour refused before any work.


def test_a_think_block_is_split_off_the_models_words_and_an_unclosed_one_is_still_thinking(
    smol: LlamaCppBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    said: list[str] = []
    # The model's greedy words stood in for: SmolLM2 writes no think block of its own.
    monkeypatch.setattr(
        smol, "_greedy", lambda ids, request: _Answer(said.pop(0), 9, "stop", None, FirstToken.FORCED)
    )
    said[:] = ["<think>Looking for the number.</think> It is 7.", "<think>Looking for", "It is 7."]
    answered, thinking, plain = smol.generate(
        [Request(f"s{i}", np.asarray([1, 2, 3], dtype=np.int32), 9) for i in range(3)]
    )
    # SmolLM2's tokens: Looking, " for", " the", " number", "." are 5; Looking, " for" are 2.
    assert (answered.text, answered.reasoning_tokens, answered.finish_reason) == ("It is 7.", 5, "stop")
    assert (thinking.text, thinking.reasoning_tokens, thinking.finish_reason) == ("", 2, THINKING)
    assert (plain.text, plain.reasoning_tokens) == ("It is 7.", None)  # no block: the answer, whole


def test_a_budget_with_think_tags_off_is_refused_in_one_line_and_nothing_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "run"
    model = "llamacpp:smollm2?n_ctx=2k&threads=1&think_tags=off"
    grid = ["--lengths", "1k", "--depths", "0.5", "--samples", "1", "--no-progress"]
    assert (
        main(["run", "niah", "--model", model, *grid, "--thinking-budget", "64", "--run-dir", str(folder)])
        == 2
    )
    assert capsys.readouterr().err == (
        "fathom: error: llamacpp:smollm2 has think_tags=off, so it would grade the reasoning as the answer: "
        "drop --thinking-budget, or give one it can honour\n"
    )
    assert not folder.exists()


@pytest.mark.parametrize(("budget", "fits"), [(992, True), (993, False)])
def test_a_thinking_budget_counts_against_the_context_before_any_work(budget: int, fits: bool) -> None:
    """n_ctx 2048: a 1k prompt, the thinking budget, then niah's answer of 32 tokens. 1024 + 992 + 32
    is 2048, which fits; one more does not."""
    spec = RunSpec(
        "niah", "llamacpp:smollm2?n_ctx=2k&threads=1", "auto", (1024,), (0.5,), 1, thinking_budget=budget
    )
    if fits:
        prepare(spec)
        return
    with pytest.raises(
        SpecError,
        # The sample's prompt (the control's, without its haystack, fits).
        match=r"^1 of 2 prompts exceed the backend's context of 2048 tokens \(the longest: 1024 prompt "
        r"tokens \+ 1025 new",
    ):
        prepare(spec)
