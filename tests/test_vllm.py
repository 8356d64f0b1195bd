"""The vllm backend: its adapter against a fake ``vllm`` that records what the engine was given and
answers like vLLM's RequestOutput; the tokenizer and config are real, in a model folder without
weights, so these tests need transformers but not torch. One test runs the real engine on random
weights, where torch, vllm and a CUDA GPU are all present.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import json
import sys
import time
import types
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

import numpy as np
import pytest

pytest.importorskip("transformers")

from fathom import registry  # after the skip: the backend needs transformers
from fathom.backends import hf_model
from fathom.backends.base import Request, ScoreRequest
from fathom.cli import main
from fathom.errors import FathomError, MissingExtraError, SpecError

FAKE_VERSION = "0.0.fake"


def llama_folder(tmp_path_factory: pytest.TempPathFactory, hf_model_dir: Path) -> tuple[Path, Any]:
    """A folder holding the tokenizer trained in conftest, and the config of a tiny Llama (64-wide
    heads, Llama 3 RoPE scaled from 1k to 4k), not yet saved."""
    from transformers import LlamaConfig

    folder = tmp_path_factory.mktemp("llama")
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (folder / name).write_bytes((hf_model_dir / name).read_bytes())
    rope = {"rope_type": "llama3", "factor": 4.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0}
    config = LlamaConfig(
        architectures=["LlamaForCausalLM"],
        vocab_size=3000,
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=4096,
        rope_scaling={**rope, "original_max_position_embeddings": 1024, "rope_theta": 10000.0},
        bos_token_id=None,
        eos_token_id=2,  # <|im_end|>
    )
    return folder, config


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory, hf_model_dir: Path) -> Path:
    """The tiny Llama's folder without weights (and so without torch): all the fake engine reads."""
    folder, config = llama_folder(tmp_path_factory, hf_model_dir)
    config.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def weighted_model_dir(tmp_path_factory: pytest.TempPathFactory, hf_model_dir: Path) -> Path:
    """The tiny Llama with random weights, saved as transformers saves a model folder, for the real
    engine: only where torch, vllm and a CUDA GPU are all present."""
    torch = pytest.importorskip("torch")
    if importlib.util.find_spec("vllm") is None or not torch.cuda.is_available():
        pytest.skip("needs vllm and a CUDA GPU")
    from transformers import LlamaForCausalLM

    folder, config = llama_folder(tmp_path_factory, hf_model_dir)
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(folder)
    return folder


class FakeTokensPrompt(TypedDict):
    prompt_token_ids: list[int]


@dataclass
class FakeVllm:
    """What the fake engine received, and how it behaves."""

    engines: list[dict[str, Any]] = field(default_factory=list)
    calls: list[tuple[list[Any], list[dict[str, Any]], dict[str, Any]]] = field(default_factory=list)
    fail: Exception | None = None  # raised by generate
    fail_load: Exception | None = None  # raised by LLM()
    has_model_config: bool = True
    delay_s: float = 0.0  # how long generate takes
    metrics: list[Any] = field(default_factory=list)  # each output's RequestOutput.metrics, in order


def fake_outputs(prompts: Sequence[FakeTokensPrompt], params: Sequence[dict[str, Any]]) -> list[Any]:
    """vLLM's RequestOutput shape; a prompt gets min(3, max_tokens) tokens, "length" if that is all."""
    outputs = []
    for prompt, p in zip(prompts, params, strict=True):
        ids, count = prompt["prompt_token_ids"], min(3, p["max_tokens"])
        answer = types.SimpleNamespace(
            text=f"read {len(ids)}",
            token_ids=list(range(count)),
            finish_reason="length" if count == p["max_tokens"] else "stop",
        )
        output = types.SimpleNamespace(prompt_token_ids=list(ids), outputs=[answer], prompt_logprobs=None)
        if p.get("prompt_logprobs") is not None:
            output.prompt_logprobs = [None] + [fake_entry(i, token) for i, token in enumerate(ids[1:], 1)]
        outputs.append(output)
    return outputs


def fake_logprob(position: int) -> float:
    return -0.01 * position


def fake_entry(position: int, token: int) -> dict[int, Any]:
    """vLLM's entry for one prompt token: its own Logprob, and the top-ranked token's beside it."""
    return {token: types.SimpleNamespace(logprob=fake_logprob(position), rank=2), token + 1: None}


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeVllm]:
    """A fake ``vllm`` and ``vllm.inputs`` in sys.modules; the backend module imports it afresh."""
    record = FakeVllm()

    class LLM:
        def __init__(self, **kwargs: Any) -> None:
            if record.fail_load is not None:
                raise record.fail_load
            record.engines.append(kwargs)
            # vLLM's dtype is a torch.dtype; the backend records its str, which this stands in for.
            config = types.SimpleNamespace(
                max_model_len=kwargs["max_model_len"] or 4096, dtype="torch.bfloat16"
            )
            self.llm_engine = types.SimpleNamespace(
                **({"model_config": config} if record.has_model_config else {})
            )

        def generate(self, prompts: list[Any], sampling_params: list[Any], **kwargs: Any) -> list[Any]:
            params = [p.kwargs for p in sampling_params]
            record.calls.append((prompts, params, kwargs))
            time.sleep(record.delay_s)
            if record.fail is not None:
                raise record.fail
            outputs = fake_outputs(prompts, params)
            for output, metrics in zip(outputs, record.metrics, strict=False):
                output.metrics = metrics
            return outputs

    class SamplingParams:
        def __init__(self, **kwargs: Any) -> None:
            self.kwargs = kwargs

    module, inputs = types.ModuleType("vllm"), types.ModuleType("vllm.inputs")
    module.__dict__.update(LLM=LLM, SamplingParams=SamplingParams, inputs=inputs, __version__=FAKE_VERSION)
    inputs.__dict__.update(TokensPrompt=FakeTokensPrompt)
    monkeypatch.setitem(sys.modules, "vllm", module)
    monkeypatch.setitem(sys.modules, "vllm.inputs", inputs)
    sys.modules.pop("fathom.backends.vllm", None)
    yield record
    sys.modules.pop("fathom.backends.vllm", None)  # bound to the fake: later imports start afresh


def backend(rest: str, tokenizer: str = "auto") -> Any:
    module = importlib.import_module("fathom.backends.vllm")
    return module.VLLMBackend(rest, tokenizer)


def request(ids: list[int], max_new_tokens: int = 8, stop: tuple[str, ...] = ()) -> Request:
    return Request("s", np.asarray(ids, dtype=np.int32), max_new_tokens, stop=stop)


def test_the_engine_gets_the_options_with_prefix_caching_on(fake: FakeVllm, model_dir: Path) -> None:
    options = "max_model_len=2k&dtype=bfloat16&tp=2&gpu_memory_utilization=0.5&seed=7&enforce_eager=1"
    backend(f"{model_dir}?{options}")
    backend(str(model_dir))
    backend(f"{model_dir}?prefix_caching=0")
    chosen, default, uncached = fake.engines
    path = str(model_dir)
    common = {"model": path, "tokenizer": path, "enable_prefix_caching": True, "disable_log_stats": False}
    assert chosen == {
        **common,
        "max_model_len": 2048,
        "dtype": "bfloat16",
        "tensor_parallel_size": 2,
        "seed": 7,
        "gpu_memory_utilization": 0.5,
        "enforce_eager": True,
    }
    assert default == {
        **common,
        "max_model_len": None,
        "dtype": "auto",
        "tensor_parallel_size": 1,
        "seed": 0,
        "gpu_memory_utilization": 0.9,
        "enforce_eager": False,
    }
    assert uncached == {**default, "enable_prefix_caching": False}


def test_windows_come_from_the_config_and_the_engine(fake: FakeVllm, model_dir: Path) -> None:
    chosen = backend(f"{model_dir}?max_model_len=2k")
    assert (chosen.trained_window, chosen.max_prompt_tokens) == (4096, 2048)
    assert chosen.window == {"max_position_embeddings": 4096, "original_max_position_embeddings": 1024}
    assert backend(str(model_dir)).max_prompt_tokens == 4096  # the engine's own default
    fake.has_model_config = False  # an engine that does not say: the option is the limit
    assert backend(f"{model_dir}?max_model_len=3k").max_prompt_tokens == 3072


def test_the_tokenizer_is_the_folders_own(fake: FakeVllm, model_dir: Path) -> None:
    from transformers import AutoTokenizer

    tokenizer = backend(str(model_dir)).tokenizer
    folders_own = AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
    own = hf_model.TransformersTokenizer(folders_own, "own")
    assert tokenizer.identity == own.identity
    text = "<|im_start|>user\nThe code is 4817.<|im_end|>\n"
    assert tokenizer.decode(tokenizer.encode_with_specials(text)) == text
    assert tokenizer.encode_with_specials("<|im_start|>") == [1] and tokenizer.eos_token == "<|im_end|>"


def test_one_generate_call_gets_the_exact_ids_and_greedy_params(fake: FakeVllm, model_dir: Path) -> None:
    vllm_backend = backend(f"{model_dir}?seed=5")
    fake.delay_s = 0.3
    requests = [
        request([5, 6, 7], max_new_tokens=8, stop=("\n",)),
        request(list(range(100, 1100)), max_new_tokens=2),
        request([9], max_new_tokens=3, stop=("a", "b")),
    ]
    started = time.perf_counter()
    completions = vllm_backend.generate(requests)
    wall = time.perf_counter() - started
    [(prompts, params, kwargs)] = fake.calls
    assert prompts == [{"prompt_token_ids": r.ids.tolist()} for r in requests]
    assert all(type(i) is int for p in prompts for i in p["prompt_token_ids"])  # not numpy scalars
    greedy = {"temperature": 0.0, "min_tokens": 1, "seed": 5}
    assert params == [
        {**greedy, "max_tokens": 8, "stop": ["\n"]},
        {**greedy, "max_tokens": 2, "stop": None},
        {**greedy, "max_tokens": 3, "stop": ["a", "b"]},
    ]
    assert kwargs == {"use_tqdm": False}
    got = [(c.text, c.prompt_tokens, c.completion_tokens, c.finish_reason, c.error) for c in completions]
    assert got == [
        ("read 3", 3, 3, "stop", None),
        ("read 1000", 1000, 2, "length", None),
        ("read 1", 1, 3, "length", None),
    ]
    assert {c.first_token for c in completions} == {"forced"}  # min_tokens=1
    # Each prompt's latency is its share of the batch's wall time: 0.3 s or more over three prompts.
    assert len({c.latency_s for c in completions}) == 1 and 0.1 <= completions[0].latency_s <= wall / 3
    assert vllm_backend.generate([]) == [] and len(fake.calls) == 1


def test_the_engines_own_clock_gives_each_answers_prefill_and_decode_seconds(
    fake: FakeVllm, model_dir: Path
) -> None:
    v1, v0 = types.SimpleNamespace, types.SimpleNamespace
    fake.metrics = [
        # vLLM V1's RequestStateStats: scheduled at 10 s, first token at 12.5, last at 13.25.
        v1(queued_ts=9.0, scheduled_ts=10.0, first_token_ts=12.5, last_token_ts=13.25),
        # V0's RequestMetrics, on the wall clock.
        v0(arrival_time=99.0, first_scheduled_time=100.0, first_token_time=100.75, last_token_time=101.0),
        None,  # log stats off: no metrics
        v1(scheduled_ts=0.0, first_token_ts=0.0, last_token_ts=0.0),  # stats kept, but never set
        v1(scheduled_ts=5.0, first_token_ts=4.0, last_token_ts=6.0),  # out of order: no times
        v1(scheduled_ts=True, first_token_ts=2.0, last_token_ts=3.0),  # not a number
    ]
    completions = backend(str(model_dir)).generate([request([5, 6, 7])] * 6)
    got = [(c.prefill_s, c.decode_s) for c in completions]
    assert got == [(2.5, 0.75), (0.75, 0.25), (None, None), (None, None), (None, None), (None, None)]


def test_a_failing_generate_fails_each_sample_of_the_batch(fake: FakeVllm, model_dir: Path) -> None:
    fake.fail = RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB\nmore detail")
    completions = backend(str(model_dir)).generate([request([5, 6, 7]), request([8, 9])])
    error = "backend_error: RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB"
    assert [c.error for c in completions] == [error, error]
    assert [(c.text, c.prompt_tokens, c.completion_tokens) for c in completions] == [("", 3, 0), ("", 2, 0)]
    assert {c.finish_reason for c in completions} == {"error"}


def test_settings_record_what_changes_outputs(fake: FakeVllm, model_dir: Path) -> None:
    settings = backend(f"{model_dir}?max_model_len=2k&tp=2&seed=3&prefix_caching=0").settings()
    try:
        version = importlib.metadata.version("vllm")
    except importlib.metadata.PackageNotFoundError:
        version = FAKE_VERSION
    assert settings["model"] == str(model_dir)
    assert settings["folder_sha256"] == hf_model.fingerprint(model_dir)["folder_sha256"]
    assert settings["vllm"] == version
    assert settings["dtype"] == "bfloat16"  # the engine's choice for auto
    assert (settings["max_model_len"], settings["tensor_parallel_size"], settings["seed"]) == (2048, 2, 3)
    assert (settings["prefix_caching"], settings["enforce_eager"]) == (False, False)
    assert settings["window"]["original_max_position_embeddings"] == 1024
    json.dumps(settings)  # it goes into the manifest


SETTING = "vllm setting"
TOKENS = "a whole number of tokens from 1 to 64M (e.g. 32k)"
FRACTION = "a number above 0 and at most 1"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ("threads=4", "vllm has no setting 'threads=4': its settings are max_model_len=, dtype=, tp=, "
         "gpu_memory_utilization=, prefix_caching=, seed=, enforce_eager="),
        ("max_model_len=lots", f"{SETTING} 'max_model_len' must be {TOKENS}, not 'lots'"),
        ("max_model_len=0", f"{SETTING} 'max_model_len' must be {TOKENS}, not '0'"),
        ("max_model_len=9" + "9" * 400, f"{SETTING} 'max_model_len' must be {TOKENS}, not '999"),
        ("dtype=float8", f"{SETTING} 'dtype' must be one of auto, bfloat16, float16, float32, not 'float8'"),
        ("tp=0", f"{SETTING} 'tp' must be a whole number of GPUs from 1 to 1024, not '0'"),
        ("tp=1.5", f"{SETTING} 'tp' must be a whole number of GPUs from 1 to 1024, not '1.5'"),
        ("gpu_memory_utilization=1.5", f"{SETTING} 'gpu_memory_utilization' must be {FRACTION}, not '1.5'"),
        ("gpu_memory_utilization=0", f"{SETTING} 'gpu_memory_utilization' must be {FRACTION}, not '0'"),
        ("gpu_memory_utilization=nan", f"{SETTING} 'gpu_memory_utilization' must be {FRACTION}, not 'nan'"),
        ("prefix_caching=yes", f"{SETTING} 'prefix_caching' must be 1 (on) or 0 (off), not 'yes'"),
        ("enforce_eager=2", f"{SETTING} 'enforce_eager' must be 1 (on) or 0 (off), not '2'"),
        ("seed=-1", f"{SETTING} 'seed' must be a whole number of at least 0, not '-1'"),
        ("sed=1", "vllm has no setting 'sed=1' (did you mean 'seed'?): its settings are max_model_len="),
    ],
)  # fmt: skip
def test_bad_options_are_refused_before_the_engine_starts(
    fake: FakeVllm, model_dir: Path, options: str, message: str
) -> None:
    with pytest.raises(SpecError) as raised:
        backend(f"{model_dir}?{options}")
    assert message in str(raised.value)
    assert fake.engines == []


def test_bad_specs_fail_in_one_line(
    fake: FakeVllm, model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for model, tokenizer, message in [
        ("vllm:/no/such/model", "auto", "no model at '/no/such/model'"),
        (f"vllm:{model_dir}", "cl100k_base", "vllm: models count with their own tokenizer; drop --tokenizer"),
        (f"vllm:{model_dir}?dtype=fp4", "auto", "vllm setting 'dtype' must be one of"),
        (
            f"vllm:{model_dir}?tp=2&seed=1&tp=4&seed=1",
            "auto",
            f"'{model_dir}?tp=2&seed=1&tp=4&seed=1' sets seed, tp more than once: give each setting once",
        ),
    ]:
        argv = ["run", "niah", "--model", model, "--tokenizer", tokenizer, "--run-dir", str(tmp_path / "r")]
        assert main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert message in err and len(err.splitlines()) == 1
    fake.fail_load = ValueError("max_model_len (8192) is greater than the derived max_model_len\nmore")
    with pytest.raises(
        FathomError, match=r"vllm cannot load .*: max_model_len \(8192\) is greater"
    ) as raised:
        backend(f"{model_dir}?max_model_len=8k")
    assert "\n" not in str(raised.value)
    # vLLM's config checks raise pydantic's ValidationError: its first line only counts errors.
    fake.fail_load = ValidationError(
        "1 validation error for ModelConfig\n  Value error, User-specified max_model_len (16384) is ..."
    )
    with pytest.raises(
        FathomError, match=r"cannot load .*: User-specified max_model_len \(16384\) is \.\.\.$"
    ):
        backend(f"{model_dir}?max_model_len=16k")


class ValidationError(ValueError):
    """pydantic's ValidationError as vLLM's config checks raise it: a count first, errors() after."""

    def errors(self) -> list[dict[str, str]]:
        return [{"msg": "Value error, " + str(self).splitlines()[1].split("Value error, ")[1]}]


def test_the_registry_reaches_the_backend(fake: FakeVllm, model_dir: Path) -> None:
    created = registry.create_backend(f"vllm:{model_dir}?seed=3", "auto")
    assert type(created) is sys.modules["fathom.backends.vllm"].VLLMBackend
    assert (created.name, created.input, created.exact_lengths) == (f"vllm:{model_dir}", "ids", True)
    assert [engine["seed"] for engine in fake.engines] == [3]


def test_a_run_through_the_cli_records_the_engine(
    fake: FakeVllm, model_dir: Path, runs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["run", "niah", "--model", f"vllm:{model_dir}?max_model_len=2k", "--lengths", "1k,4k"]
    # Without --keep-too-long the sweep is refused before its folder is made, with what fits.
    assert main([*argv, "--depths", "0.5", "--samples", "1", "--run-dir", str(runs), "--no-progress"]) == 2
    refusal = capsys.readouterr().err
    assert "1 of 4 prompts exceed the backend's context of 2048 tokens" in refusal
    assert "(?max_model_len=...)" in refusal and "(--lengths 1024)" in refusal and not runs.exists()
    argv.append("--keep-too-long")
    # Recorded as too long: a final error, so the run exits 3.
    assert main([*argv, "--depths", "0.5", "--samples", "1", "--run-dir", str(runs), "--no-progress"]) == 3
    found = list(map(json.loads, (runs / "samples.jsonl").read_text().splitlines()))
    records = {r["length"]: r for r in found if not r.get("control")}
    assert records[1024]["error"] is None and records[1024]["output"] == "read 1024"
    assert records[4096]["error"].startswith("too_long: 4096 prompt tokens")  # past max_model_len
    [(prompts, _, _)] = fake.calls
    # Both questions without their haystacks (the controls, which fit), then the 1k prompt.
    controls = [r["actual_tokens"] for r in found if r.get("control")]
    assert [len(p["prompt_token_ids"]) for p in prompts] == [*controls, 1024] and max(controls) < 256


def test_without_vllm_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch, model_dir: Path) -> None:
    monkeypatch.setitem(sys.modules, "vllm", None)  # None makes the import fail
    monkeypatch.delitem(sys.modules, "fathom.backends.vllm", raising=False)
    with pytest.raises(MissingExtraError, match=r"^vllm is not installed; .*pip install .*\[vllm\]'$"):
        registry.create_backend(f"vllm:{model_dir}", "auto")


def test_without_transformers_the_error_names_the_hf_extra(
    fake: FakeVllm, monkeypatch: pytest.MonkeyPatch, model_dir: Path
) -> None:
    monkeypatch.setitem(sys.modules, "transformers", None)  # None makes the import fail
    monkeypatch.delitem(sys.modules, "fathom.backends.hf_model", raising=False)
    with pytest.raises(MissingExtraError, match=r"^transformers is not installed; .*pip install .*\[hf\]'$"):
        registry.create_backend(f"vllm:{model_dir}", "auto")
    assert fake.engines == []


@pytest.mark.gpu
def test_the_real_engine_answers_from_the_exact_ids(weighted_model_dir: Path) -> None:
    sys.modules.pop("fathom.backends.vllm", None)  # a fake's import may linger
    options = "max_model_len=2k&dtype=bfloat16&gpu_memory_utilization=0.3&enforce_eager=1"
    real = backend(f"{weighted_model_dir}?{options}")
    assert (real.trained_window, real.max_prompt_tokens) == (4096, 2048)
    rng = np.random.default_rng(0)
    requests = [request(rng.integers(10, 3000, n).tolist(), max_new_tokens=5) for n in (1500, 700, 1500)]
    first, again = real.generate(requests), real.generate(requests)  # the second reads cached prefixes
    for completion, sent in zip(first, requests, strict=True):
        assert completion.error is None, completion.error
        assert completion.prompt_tokens == len(sent.ids) and 1 <= completion.completion_tokens <= 5
        assert completion.finish_reason in ("stop", "length")
    assert [c.text for c in again] == [c.text for c in first]
    assert real.settings()["vllm"] == importlib.metadata.version("vllm")


def test_token_scores_come_from_prompt_logprobs_in_one_call(fake: FakeVllm, model_dir: Path) -> None:
    engine = backend(str(model_dir))
    asks = [ScoreRequest("a", np.arange(10, 20, dtype=np.int32), 1), ScoreRequest("b", np.arange(5, 9), 3)]
    first, second = engine.score(asks)
    [(prompts, params, _)] = fake.calls
    assert prompts == [{"prompt_token_ids": list(range(10, 20))}, {"prompt_token_ids": [5, 6, 7, 8]}]
    assert params == [{"temperature": 0.0, "max_tokens": 1, "prompt_logprobs": 0, "seed": 0}] * 2
    assert first.error is None and first.first_position == 1
    assert first.logprobs.tolist() == [fake_logprob(i) for i in range(1, 10)]
    assert (second.first_position, second.logprobs.tolist()) == (3, [fake_logprob(3)])
    with pytest.raises(ValueError, match="first token"):
        engine.score([ScoreRequest("c", np.arange(3), 0)])


def test_the_answer_continuation_and_scoring_failures(fake: FakeVllm, model_dir: Path) -> None:
    engine = backend(str(model_dir))
    ask = Request(
        "s", np.arange(100, 110, dtype=np.int32), 4, continuation=np.asarray([7, 8], dtype=np.int32)
    )
    [done] = engine.generate([ask])
    generated, scored = fake.calls
    assert generated[0] == [{"prompt_token_ids": list(range(100, 110))}]  # the prompt alone first
    assert scored[0] == [{"prompt_token_ids": [*range(100, 110), 7, 8]}]
    assert done.continuation_logprobs == (fake_logprob(10), fake_logprob(11))
    fake.fail = RuntimeError("CUDA out of memory\nmore")
    [failed] = engine.score([ScoreRequest("d", np.arange(4), 1)])
    assert failed.error == "backend_error: RuntimeError: CUDA out of memory"
    fake.fail = None
    engine.llm.generate = lambda prompts, params, **_: [types.SimpleNamespace(prompt_logprobs=[None, {}])]
    [missing] = engine.score([ScoreRequest("e", np.arange(2), 1)])
    assert missing.error == "vllm returned no log-probability for prompt token 1"


def test_a_think_block_is_split_off_and_think_tags_off_refuses_a_budget(
    fake: FakeVllm,
    model_dir: Path,
    runs: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Thinking models (issue #35 item 1): the engine's words with a think block before the answer."""

    def thinking(prompts: Sequence[FakeTokensPrompt], params: Sequence[dict[str, Any]]) -> list[Any]:
        outputs = answered(prompts, params)
        for output in outputs:
            output.outputs[0].text = "<think>Looking for it.</think>" + output.outputs[0].text
        return outputs

    answered = fake_outputs
    monkeypatch.setitem(globals(), "fake_outputs", thinking)
    made = backend(str(model_dir))
    (completion,) = made.generate([request([5, 6, 7])])
    # The folder's tokenizer (trained in conftest on a small text) splits "Looking for it." in 7.
    assert (completion.text, completion.reasoning_tokens) == ("read 3", 7)
    argv = [
        "run",
        "niah",
        "--model",
        f"vllm:{model_dir}?think_tags=off",
        "--lengths",
        "1k",
        "--depths",
        "0.5",
    ]
    assert main([*argv, "--samples", "1", "--thinking-budget", "64", "--run-dir", str(runs)]) == 2
    assert capsys.readouterr().err == (
        f"fathom: error: vllm:{model_dir} has think_tags=off, so it would grade the reasoning as the answer: "
        "drop --thinking-budget, or give one it can honour\n"
    )
    assert not runs.exists()
