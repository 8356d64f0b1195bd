"""fathom.plan.readers pinned whole, written against the survivors of mutation testing
(docs/mutation.md, sixth round): each reader's Architecture compared field by field with one written
out by hand, every fallback (names, heads, experts, windows) taken and not taken, and each refusal's
message read whole."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from test_plan import SMOLLM2

from fathom.errors import MissingExtraError, SpecError, install_command
from fathom.plan import readers
from fathom.plan.arch import Architecture
from fathom.plan.presets import PRESETS
from fathom.plan.readers import from_config, from_gguf_metadata, load_architecture

# A dense model of round numbers, as config.json names it.
DENSE = {
    "model_type": "llama",
    "num_hidden_layers": 4,
    "hidden_size": 16,
    "num_attention_heads": 4,
    "intermediate_size": 32,
    "vocab_size": 100,
}


def test_a_dense_config_falls_back_for_every_field_it_leaves_out() -> None:
    # No KV heads: as many as query heads; no head_dim: 16 / 4; tied (transformers' default); no
    # window, no context; named by the folder that holds the config.
    assert from_config(DENSE, "/models/tiny-llama/config.json") == Architecture(
        "tiny-llama", 4, 16, 4, 4, 4, 32, 100, tied_embeddings=True, source="/models/tiny-llama/config.json"
    )
    # An expert count per token in a dense model's config is not read.
    assert from_config({**DENSE, "num_experts_per_tok": 2}, "config.json").experts_used == 0


def test_a_configs_own_values_and_name_win() -> None:
    config = {
        **DENSE,
        "_name_or_path": "org/model",
        "num_key_value_heads": 2,
        "head_dim": 8,
        "tie_word_embeddings": False,
        "max_position_embeddings": 2048,
    }
    assert from_config(config, "/models/folder/config.json") == Architecture(
        "org/model", 4, 16, 4, 2, 8, 32, 100, context=2048, source="/models/folder/config.json"
    )
    # No name and no folder: the model type.
    assert from_config(DENSE, "config.json").name == "llama"


@pytest.mark.parametrize(
    ("experts", "name"), [({"num_local_experts": 8}, "Mixtral's"), ({"num_experts": 8}, "Qwen's")]
)
def test_a_mixture_of_experts_is_read_under_either_name(experts: dict[str, int], name: str) -> None:
    arch = from_config({**DENSE, **experts, "num_experts_per_tok": 2}, "config.json")
    assert (arch.experts, arch.experts_used) == (8, 2), name
    assert from_config({**DENSE, **experts}, "config.json").experts_used == 0


def test_a_nested_text_config_overrides_the_outer_one() -> None:
    outer = {**DENSE, "vocab_size": 5, "model_type": "vlm", "text_config": {**DENSE, "hidden_size": 32}}
    arch = from_config(outer, "config.json")
    assert (arch.hidden, arch.vocab, arch.head_dim, arch.name) == (32, 100, 8, "llama")
    assert from_config({**DENSE, "text_config": None}, "config.json").hidden == 16


@pytest.mark.parametrize("bad", [None, 0, -4, True, "4", 4.0])
def test_a_required_value_that_is_no_positive_whole_number_is_missing(bad: object) -> None:
    with pytest.raises(SpecError) as refused:
        from_config({**DENSE, "num_hidden_layers": bad, "vocab_size": bad}, "cfg")
    assert str(refused.value) == "cfg lacks num_hidden_layers, vocab_size: the plan's arithmetic needs them"


@pytest.mark.parametrize(
    ("extra", "window"),
    [
        # A window only where it is a positive whole number, and not switched off.
        ({"sliding_window": None}, (None, 0)),
        ({"sliding_window": 0}, (None, 0)),
        ({"sliding_window": True}, (None, 0)),
        ({"sliding_window": 4096, "use_sliding_window": False}, (None, 0)),
        # Qwen's switch on, Mistral's absent: every layer windowed (not a Gemma).
        ({"sliding_window": 4096, "use_sliding_window": True}, (4096, 5)),
        ({"sliding_window": 4096}, (4096, 5)),
        # The layers' own list decides.
        ({"sliding_window": 8, "layer_types": ["sliding_attention", "full_attention"] * 2 + ["x"]}, (8, 2)),
        # Gemma 2 from its first layer, every other one: 3 of 5.
        ({"sliding_window": 8, "model_type": "gemma2"}, (8, 3)),
        # Gemma 3: every sixth layer global, or every pattern-th where the config says.
        ({"sliding_window": 8, "model_type": "gemma3_text"}, (8, 5)),
        ({"sliding_window": 8, "model_type": "gemma3_text", "sliding_window_pattern": 2}, (8, 3)),
        ({"sliding_window": 8, "model_type": "gemma3_text", "sliding_window_pattern": None}, (8, 5)),
        # Another Gemma: none counted.
        ({"sliding_window": 8, "model_type": "gemma"}, (8, 0)),
    ],
)
def test_a_configs_sliding_window_and_the_layers_it_covers(extra: dict[str, Any], window: tuple) -> None:
    arch = from_config({**DENSE, "num_hidden_layers": 5, **extra}, "config.json")
    assert (arch.sliding_window, arch.sliding_layers) == window


@pytest.mark.parametrize(
    ("family", "layers", "sliding"),
    [("gemma2", 5, 3), ("gemma2", 4, 2), ("gemma3", 12, 10), ("gemma3", 13, 11), ("llama", 12, 0)],
)
def test_each_familys_sliding_layers_counted_by_hand(family: str, layers: int, sliding: int) -> None:
    assert readers._family_sliding(family, layers) == sliding


# A GGUF's metadata as llama.cpp gives it: every value a string.
GGUF = {
    "general.architecture": "llama",
    "llama.block_count": "4",
    "llama.embedding_length": "16",
    "llama.feed_forward_length": "32",
    "llama.attention.head_count": "4",
}


def test_gguf_metadata_falls_back_for_every_key_it_leaves_out() -> None:
    # Named by the file; as many KV heads as query heads, of 16 / 4; untied until the tensors say.
    assert from_gguf_metadata(GGUF, 100, "/m/tiny.Q4.gguf") == Architecture(
        "tiny.Q4", 4, 16, 4, 4, 4, 32, 100, source="/m/tiny.Q4.gguf"
    )


def test_gguf_metadatas_own_values_win() -> None:
    meta = {
        **GGUF,
        "general.name": "Tiny",
        "llama.attention.head_count_kv": 2,
        "llama.attention.key_length": "8",
        "llama.vocab_size": "50",
        "llama.expert_count": "8",
        "llama.expert_used_count": "2",
        "llama.context_length": "2048",
        # Not a Gemma: the window is not counted, and not kept.
        "llama.attention.sliding_window": "512",
    }
    assert from_gguf_metadata(meta, 100, "t.gguf") == Architecture(
        "Tiny", 4, 16, 4, 2, 8, 32, 50, experts=8, experts_used=2, context=2048, source="t.gguf"
    )
    assert from_gguf_metadata({**GGUF, "llama.expert_used_count": "2"}, 100, "t.gguf").experts_used == 0


def test_a_gemma2_ggufs_window_covers_every_other_layer() -> None:
    meta = {key.replace("llama", "gemma2"): value for key, value in GGUF.items()}
    meta = {**meta, "general.architecture": "gemma2", "gemma2.attention.sliding_window": "4096"}
    arch = from_gguf_metadata(meta, 100, "g.gguf")
    assert (arch.sliding_window, arch.sliding_layers) == (4096, 2)


@pytest.mark.parametrize(
    ("meta", "vocab", "message"),
    [
        ({}, 100, "f.gguf has no general.architecture: is it a model's GGUF?"),
        (
            {**GGUF, "general.architecture": ""},
            100,
            "f.gguf has no general.architecture: is it a model's GGUF?",
        ),
        (
            {k: v for k, v in GGUF.items() if k.endswith("architecture")},
            100,
            "f.gguf lacks llama.block_count, llama.embedding_length, llama.feed_forward_length, "
            "llama.attention.head_count: the plan needs it",
        ),
        # A per-layer array is no shape this arithmetic reads.
        (
            {**GGUF, "llama.feed_forward_length": [32, 64]},
            100,
            "f.gguf lacks llama.feed_forward_length: the plan needs it",
        ),
        ({**GGUF, "llama.block_count": "four"}, 100, "f.gguf lacks llama.block_count: the plan needs it"),
        (GGUF, 0, "f.gguf lacks llama.vocab_size: the plan needs it"),
    ],
)
def test_gguf_metadata_without_what_the_plan_needs_is_refused_whole(
    meta: dict[str, Any], vocab: int, message: str
) -> None:
    with pytest.raises(SpecError) as refused:
        from_gguf_metadata(meta, vocab, "f.gguf")
    assert str(refused.value) == message


def test_an_architecture_is_a_preset_in_any_case_a_folder_or_a_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert load_architecture("LLaMA-3.1-8B") is PRESETS["llama-3.1-8b"]
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(DENSE), encoding="utf-8")
    assert load_architecture(str(folder)).source == str(folder / "config.json")
    assert load_architecture(str(folder / "config.json")).name == "model"
    # A home folder's ~ is expanded.
    monkeypatch.setenv("HOME", str(tmp_path))
    assert load_architecture("~/model").source == str(folder / "config.json")
    # A file that opens with GGUF's magic is read as one, whatever its name.
    read: list[Path] = []
    monkeypatch.setattr(readers, "read_gguf", lambda path: read.append(path) or PRESETS["smollm2-135m"])
    (tmp_path / "weights.bin").write_bytes(b"GGUF\x03\x00\x00\x00")
    assert load_architecture(str(tmp_path / "weights.bin")) is PRESETS["smollm2-135m"]
    assert read == [tmp_path / "weights.bin"]


def test_what_is_no_architecture_is_refused_whole(tmp_path: Path) -> None:
    presets = ", ".join(PRESETS)
    with pytest.raises(SpecError) as unknown:
        load_architecture(str(tmp_path / "nothing"))
    assert str(unknown.value) == (
        f"unknown architecture '{tmp_path / 'nothing'}': use one of {presets} (fathom plan --list), "
        "or a config.json, a model folder or a .gguf file"
    )
    with pytest.raises(SpecError) as empty:
        load_architecture(str(tmp_path))
    assert str(empty.value) == (
        f"no config.json in '{tmp_path}': give a model folder, a config.json or a .gguf file"
    )
    (tmp_path / "config.json").write_text("[1]")
    with pytest.raises(SpecError) as listed:
        load_architecture(str(tmp_path))
    assert (
        str(listed.value) == f"'{tmp_path / 'config.json'}' holds no JSON object: give a model's config.json"
    )
    (tmp_path / "config.json").write_text("{")
    with pytest.raises(SpecError) as broken:
        load_architecture(str(tmp_path))
    assert str(broken.value).startswith(
        f"cannot read '{tmp_path / 'config.json'}' as a config.json (Expecting"
    )
    (tmp_path / "config.json").write_bytes(b'{"a": "\xff"}')
    with pytest.raises(SpecError, match=r"as a config\.json \('utf-8' codec can't decode byte 0xff"):
        load_architecture(str(tmp_path))


def _write_gguf(path: Path, tied: bool) -> None:
    """A GGUF of two layers, hidden 8, 2 heads and 1 KV head of 4, an MLP of 16 and 10 words, named,
    with its embedding (f32) and one MLP matrix (f16), and an output head (f32) unless ``tied``."""
    import gguf

    writer = gguf.GGUFWriter(path, "llama")
    writer.add_name("Tiny GGUF")
    for key, value in (("block_count", 2), ("embedding_length", 8), ("feed_forward_length", 16)):
        writer.add_uint32(f"llama.{key}", value)
    writer.add_uint32("llama.attention.head_count", 2)
    writer.add_uint32("llama.attention.head_count_kv", 1)
    writer.add_uint32("llama.context_length", 512)
    writer.add_array("tokenizer.ggml.tokens", [f"t{i}" for i in range(10)])
    writer.add_tensor("token_embd.weight", np.zeros((10, 8), dtype=np.float32))
    writer.add_tensor("blk.0.ffn_up.weight", np.zeros((16, 8), dtype=np.float16))
    if not tied:
        writer.add_tensor("output.weight", np.zeros((10, 8), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


@pytest.fixture
def without_llama_cpp(monkeypatch: pytest.MonkeyPatch) -> set[str]:
    """importlib sees no llama_cpp (and no more of what the test adds to the set)."""
    pytest.importorskip("gguf")
    real = importlib.util.find_spec
    hidden = {"llama_cpp"}
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name in hidden else real(name))
    return hidden


@pytest.mark.parametrize("tied", [True, False])
def test_the_gguf_package_reads_a_files_names_numbers_and_tensors(
    tmp_path: Path, without_llama_cpp: set[str], tied: bool
) -> None:
    path = tmp_path / "tiny.gguf"
    _write_gguf(path, tied)
    # 80 + 128 weights, 80 x 4 + 128 x 2 bytes; an output head of 80 more in f32.
    params, stored = (208, 576) if tied else (288, 896)
    assert load_architecture(str(path)) == Architecture(
        "Tiny GGUF", 2, 8, 2, 1, 4, 16, 10, tied_embeddings=tied, context=512, exact_params=params,
        stored_bytes=stored, source=str(path),
    )  # fmt: skip


def test_a_damaged_gguf_is_refused_with_the_readers_reason(
    tmp_path: Path, without_llama_cpp: set[str]
) -> None:
    path = tmp_path / "bad.gguf"
    path.write_bytes(b"GGUF\x03\x00\x00\x00")
    with pytest.raises(SpecError, match=rf"^cannot read the GGUF file '{path}' \(.+\)$"):
        load_architecture(str(path))


def test_a_gguf_with_neither_reader_names_the_extra(tmp_path: Path, without_llama_cpp: set[str]) -> None:
    without_llama_cpp.add("gguf")
    with pytest.raises(MissingExtraError) as refused:
        readers.read_gguf(tmp_path / "m.gguf")
    assert str(refused.value) == (
        "llama-cpp-python (or gguf), to read a GGUF file's metadata, is not installed; install it with: "
        + install_command("llamacpp")
    )


def _llama(exact: int, size: int, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A llama-cpp-python model as from_llama reads it: its metadata, its vocabulary's size, and the
    exact counts llama.cpp gives of its tensors. llama.cpp gives every value as a string: one that is
    not (the context length here) is not read."""
    llama_cpp = pytest.importorskip("llama_cpp")
    model = object()
    monkeypatch.setattr(llama_cpp, "llama_model_n_params", lambda m: exact if m is model else None)
    monkeypatch.setattr(llama_cpp, "llama_model_size", lambda m: size if m is model else None)
    metadata = {**GGUF, "general.name": "Tiny", "llama.context_length": 2048}
    return SimpleNamespace(metadata=metadata, n_vocab=lambda: 100, model=model)


# The shape of GGUF above: its parameters untied (tests/test_plan.py counts the formula) are
# 2 x 100 x 16 embeddings + 4 layers x (attention 16 x 4 x 2 x 8 = 1,024, MLP 3 x 16 x 32 = 1,536,
# norms 32) + 16 = 13,584; tied, 1,600 fewer.
UNTIED = 13_584


@pytest.mark.parametrize(
    ("exact", "tied"),
    [
        (UNTIED, False),
        (UNTIED - 1_600, True),
        # The nearer of the two counts decides: 799 below the untied count is nearer to it, 801 below
        # is nearer to the tied one; 800 below is as near to both, and untied.
        (UNTIED - 799, False),
        (UNTIED - 800, False),
        (UNTIED - 801, True),
        (UNTIED + 50, False),
    ],
)
def test_llama_cpps_exact_count_tells_a_tied_head(
    exact: int, tied: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    arch = readers.from_llama(_llama(exact, 1_000, monkeypatch), "/m/t.gguf")
    assert arch == Architecture(
        "Tiny", 4, 16, 4, 4, 4, 32, 100, tied_embeddings=tied, exact_params=exact, stored_bytes=1_000,
        source="/m/t.gguf",
    )  # fmt: skip


@SMOLLM2
def test_llama_cpp_reads_a_ggufs_names_and_counts_silently(capsys: pytest.CaptureFixture[str]) -> None:
    from fathom.backends.local_models import resolve_model_path

    path = resolve_model_path("smollm2")
    arch = load_architecture(str(path))
    # Its general.name, its file as the source, llama.cpp's exact counts (tests/test_plan.py pins
    # the parameters against the preset), and a head tied to the embedding.
    assert (arch.name, arch.source, arch.exact_params, arch.stored_bytes, arch.tied_embeddings) == (
        "Smollm2 135M 8k Lc100K Mix1 Ep2",
        str(path),
        134_515_008,
        96_576_768,
        True,
    )
    # llama.cpp's log lines are kept off the terminal.
    assert capsys.readouterr() == ("", "")


@SMOLLM2
def test_a_damaged_gguf_is_refused_with_llama_cpps_reason(tmp_path: Path) -> None:
    path = tmp_path / "bad.gguf"
    path.write_bytes(b"GGUF\x03\x00\x00\x00")
    with pytest.raises(SpecError) as refused:
        load_architecture(str(path))
    assert (
        str(refused.value) == f"cannot read the GGUF file '{path}' (Failed to load model from file: {path})"
    )


def test_gguf_metadata_without_a_window_counts_none_and_experts_without_a_count_route_none() -> None:
    gemma2 = {key.replace("llama", "gemma2"): value for key, value in GGUF.items()}
    arch = from_gguf_metadata({**gemma2, "general.architecture": "gemma2"}, 100, "g.gguf")
    assert (arch.sliding_window, arch.sliding_layers) == (None, 0)
    moe = from_gguf_metadata({**GGUF, "llama.expert_count": "8"}, 100, "m.gguf")
    assert (moe.experts, moe.experts_used) == (8, 0)
    # A feed-forward length of 0 is read as 0; a head size from the hidden size is a whole number.
    assert from_gguf_metadata({**GGUF, "llama.feed_forward_length": "0"}, 100, "z.gguf").intermediate == 0
    assert type(from_gguf_metadata(GGUF, 100, "t.gguf").head_dim) is int


def _write_fields(path: Path, fields: list[tuple[str, Any]], tensors: bool = True) -> None:
    """A GGUF of ``fields`` in their order (an int a uint32, a list an array, bytes a raw string)."""
    import gguf

    writer = gguf.GGUFWriter(path, "llama")
    for key, value in fields:
        if isinstance(value, list):
            writer.add_array(key, value)
        elif isinstance(value, bytes):
            writer.add_key_value(key, value, gguf.GGUFValueType.STRING)
        else:
            writer.add_uint32(key, value)
    if tensors:
        writer.add_tensor("token_embd.weight", np.zeros((10, 8), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


SHAPE = [
    ("llama.block_count", 2),
    ("llama.embedding_length", 8),
    ("llama.feed_forward_length", 16),
    ("llama.attention.head_count", 2),
]


def test_the_gguf_package_reads_scalars_past_arrays_and_no_array_as_a_scalar(
    tmp_path: Path, without_llama_cpp: set[str]
) -> None:
    path = tmp_path / "arrays.gguf"
    # The vocabulary first; a feed-forward length per layer is no shape the plan reads.
    per_layer = [("llama.feed_forward_length", [16, 32])]
    _write_fields(
        path, [("tokenizer.ggml.tokens", [f"t{i}" for i in range(10)]), *SHAPE[:2], *per_layer, SHAPE[3]]
    )
    with pytest.raises(SpecError) as refused:
        load_architecture(str(path))
    assert str(refused.value) == f"{path} lacks llama.feed_forward_length: the plan needs it"


def test_the_gguf_package_takes_the_vocabulary_from_the_metadata_or_refuses_without_one(
    tmp_path: Path, without_llama_cpp: set[str]
) -> None:
    counted = tmp_path / "counted.gguf"
    _write_fields(counted, [*SHAPE, ("llama.vocab_size", 10)])
    assert load_architecture(str(counted)).vocab == 10
    none = tmp_path / "none.gguf"
    _write_fields(none, SHAPE)
    with pytest.raises(SpecError) as refused:
        load_architecture(str(none))
    assert str(refused.value) == f"{none} lacks llama.vocab_size: the plan needs it"


def test_the_gguf_package_reads_a_name_that_is_no_utf_8_with_a_replacement(
    tmp_path: Path, without_llama_cpp: set[str]
) -> None:
    path = tmp_path / "named.gguf"
    _write_fields(path, [("general.name", b"T\xffny"), *SHAPE, ("llama.vocab_size", 10)])
    assert load_architecture(str(path)).name == "T\ufffdny"


def test_a_config_of_one_layer_is_read_and_its_head_size_is_a_whole_number() -> None:
    arch = from_config({**DENSE, "num_hidden_layers": 1, "num_attention_heads": 1}, "config.json")
    assert (arch.layers, arch.heads, arch.head_dim) == (1, 1, 16)
    assert type(from_config(DENSE, "config.json").head_dim) is int
