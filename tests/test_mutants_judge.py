"""The judge's pure parts pinned value by value, written against the survivors of mutation testing
(docs/mutation.md): every family ``fathom.judge.lineage`` knows, read from each name it looks at, and
``same_model``'s every way of telling two backends apart; ``parse_verdict``'s fences and reason."""

from __future__ import annotations

import pytest

from fathom.judge.lineage import family, same_model
from fathom.judge.verdicts import Malformed, parse_verdict
from fathom.prompts.judging import Unreadable, load_rubric

QA = load_rubric("qa-correctness")
MARKER = "0123456789abcdef"
KEY = f"score_{MARKER}"


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("hf:HuggingFaceTB/SmolLM2-1.7B", "smollm"),
        ("llamacpp:gemma-2-9b", "gemma"),
        ("hf:codellama-7b", "llama"),  # "codellama" does not start with "llama"
        ("hf:llama-3-8b", "llama"),
        ("vllm:Qwen2.5-7B", "qwen"),
        ("vllm:QwQ-32B", "qwen"),
        ("vllm:Mixtral-8x22B", "mistral"),
        ("vllm:Mistral-7B", "mistral"),
        ("vllm:Ministral-8B", "mistral"),
        ("hf:Phi-3-mini", "phi"),
        ("hf:DeepSeek-V3", "deepseek"),
        ("hf:OLMo-2-7B", "olmo"),
        ("hf:falcon-40b", "falcon"),
        ("hf:internlm2-chat", "internlm"),
        ("hf:glm-4-9b", "glm"),
        ("openai:command-r-plus@http://x", "cohere"),
        ("hf:CohereForAI/c4ai-command-r-v01", "cohere"),
        ("openai:gpt-4o@http://x", "openai"),
        ("openai:claude-3-5-sonnet@http://x", "anthropic"),
    ],
)
def test_each_known_family_is_read_from_a_name_of_its_own(spec: str, expected: str) -> None:
    assert family(spec, {}) == expected


def test_a_family_is_read_word_by_word_from_the_last_part_of_each_name_in_turn() -> None:
    # A word must start with the family's name: "tinyllama" is none of Llama's.
    assert family("hf:tinyllama-1.1b", {}) is None
    assert family("hf:my-llama", {}) == "llama"
    # Only the file or model name counts, not the folder it is in, nor an openai spec's address.
    assert family("hf:/models/llama/SmolLM2", {}) == "smollm"
    assert family("hf:/models/gemma/finetune", {}) is None
    assert family("openai:mine@http://llama-server:8080", {}) is None
    # A spec without a backend prefix is read whole.
    assert family("qwen2", {}) == "qwen"
    # The spec first, then the settings' model, then its model path.
    assert family("llamacpp:gemma", {"model": "qwen", "model_path": "/m/phi.gguf"}) == "gemma"
    assert family("vllm:/m/x", {"model": "qwen", "model_path": "/m/phi.gguf"}) == "qwen"
    assert family("llamacpp:x", {"model_path": "/m/Phi-3.gguf"}) == "phi"
    assert family("llamacpp:x", {"other": "qwen"}) is None


def test_two_backends_are_one_model_only_where_a_name_or_hash_they_both_have_agrees() -> None:
    assert same_model("a", {}, "a", {"model": "other"})
    assert not same_model("a", {}, "b", {})
    assert same_model("llamacpp:a", {"model_path": "/m/x.gguf"}, "llamacpp:b", {"model_path": "/m/x.gguf"})
    assert not same_model("llamacpp:a", {"model_path": "/m/x.gguf"}, "llamacpp:b", {"model_path": "/m/y"})
    # An empty hash or path names nothing, even on both sides.
    assert not same_model("llamacpp:a", {"model_sha256": ""}, "llamacpp:b", {"model_sha256": ""})
    assert not same_model("llamacpp:a", {"model_path": ""}, "llamacpp:b", {"model_path": ""})
    # A served model: its name and server both.
    served = {"model": "m", "base_url": "http://u"}
    assert same_model("openai:m@http://u", served, "openai:m@http://u/", dict(served))
    assert not same_model("openai:m@u", served, "openai:n@u", {"model": "n", "base_url": "http://u"})
    assert not same_model("openai:a", {"base_url": "u"}, "openai:b", {"base_url": "u"})


@pytest.mark.parametrize(
    ("reply", "score", "reason"),
    [
        (f'```\n{{"{KEY}": 1, "reason": " fine "}}\n```', 1, "fine"),
        (f'```json {{"{KEY}": 0, "reason": "no"}}```', 0, "no"),
        (f'  {{"{KEY}": 1, "reason": "spaced"}}  ', 1, "spaced"),
    ],
)
def test_a_fenced_or_spaced_verdict_is_read_with_its_reason_stripped(
    reply: str, score: int, reason: str
) -> None:
    verdict = parse_verdict(reply, QA, MARKER)
    assert (verdict.score, verdict.reason) == (score, reason)


def test_a_reply_nested_past_the_parsers_stack_is_no_object() -> None:
    with pytest.raises(Malformed, match=r"^it was not one JSON object$") as raised:
        parse_verdict('{"a": ' + "[" * 100_000, QA, MARKER)
    assert raised.value.problem is Unreadable.NOT_AN_OBJECT
