"""How the runner hands cells to a backend: in batches for those that batch, one by one for those
that answer one at a time, each batch on disk before the next starts; and what it records of the
code that ran."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import ClassVar

import pytest

from fathom import registry
from fathom.backends.base import Completion, Request
from fathom.backends.sim import SimulatedBackend
from fathom.manifest import source_revision
from fathom.records import ANSWER_BYTES, SampleRecord
from fathom.runner import run
from fathom.spec import RunSpec
from fathom.store import RunFolder
from fathom.tokenizers import load_tokenizer


class _OneByOne(SimulatedBackend):
    """A simulated model that says it runs requests one by one, and fails on its fourth call as
    a killed process would."""

    requests_per_call = 1
    calls: ClassVar[list[int]] = []

    def generate(self, requests: Sequence[Request]) -> list[Completion]:
        self.calls.append(len(requests))
        if len(self.calls) == 4:
            raise KeyboardInterrupt
        return super().generate(requests)


def _spec(model: str) -> RunSpec:
    return RunSpec(
        task="niah", model=model, tokenizer="cl100k_base", lengths=(256, 512), depths=(0.0, 1.0), samples=3
    )


def test_a_one_by_one_backend_gets_single_requests_and_an_interrupt_loses_only_the_one_running(
    runs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(
        registry.BACKENDS, "one", lambda rest, _: _OneByOne(rest, load_tokenizer("cl100k_base"))
    )
    monkeypatch.setattr(_OneByOne, "calls", [])
    with pytest.raises(KeyboardInterrupt):
        run(_spec("one:perfect"), runs / "one", show_progress=False)
    assert _OneByOne.calls == [1, 1, 1, 1]
    assert len(RunFolder(runs / "one").finished_ids()) == 3  # the three answered are on disk
    monkeypatch.setattr(_OneByOne, "calls", [-1] * 4)  # past the failing call
    result = run(_spec("one:perfect"), runs / "one", show_progress=False)
    # 12 samples and their 12 no-context controls, 3 of which were done.
    assert (result.skipped, result.written) == (3, 21) and _OneByOne.calls[4:] == [1] * 21


def test_other_backends_get_sixteen_requests_at_a_time(runs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: ClassVar[list[int]] = []
    original = SimulatedBackend.generate

    def counting(self: SimulatedBackend, requests: Sequence[Request]) -> list[Completion]:
        calls.append(len(requests))
        return original(self, requests)

    monkeypatch.setattr(SimulatedBackend, "generate", counting)
    run(replace(_spec("sim:perfect"), control=False), runs / "many", show_progress=False)
    assert calls == [12]
    run(replace(_spec("sim:perfect"), samples=5), runs / "more", show_progress=False)
    assert calls[1:] == [16, 16, 8]  # 20 samples after their 20 controls


class _Streaming(SimulatedBackend):
    """A simulated model that streams its answers in reverse order, each far over the recorded size,
    and is interrupted after its third."""

    def stream(self, requests: Sequence[Request]) -> Iterator[tuple[int, Completion]]:
        answers = super().generate(requests)
        for count, index in enumerate(reversed(range(len(requests)))):
            if count == 3:
                raise KeyboardInterrupt
            answer = answers[index]
            yield index, replace(answer, text=answer.text + " é" * 40_000)


def test_a_streamed_answer_is_on_disk_as_it_arrives_and_cut_to_size(
    runs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(
        registry.BACKENDS, "stream", lambda rest, _: _Streaming(rest, load_tokenizer("cl100k_base"))
    )
    with pytest.raises(KeyboardInterrupt):
        run(replace(_spec("stream:perfect"), control=False), runs / "s", show_progress=False)
    records = RunFolder(runs / "s").records()
    # The three answered before the interrupt, all of one batch of twelve, the last cells first.
    assert [r.sample_id for r in records] == [f"niah|L512|D1.0000|S{i}" for i in (2, 1, 0)]
    for record in records:
        assert isinstance(record, SampleRecord)
        assert record.score == 1.0  # graded on the whole answer
        original = record.output.split(" é")[0]  # the model's answer before the padding
        assert record.output_truncated and record.output_bytes == len(original.encode()) + 40_000 * 3
        assert ANSWER_BYTES - 3 < len(record.output.encode()) <= ANSWER_BYTES
        assert record.output.encode().decode() == record.output  # cut at a character boundary


def test_the_manifest_names_the_commit_and_whether_the_package_differs_from_it(tmp_path: Path) -> None:
    assert source_revision(tmp_path) == {"git_sha": None, "git_dirty": None}  # not a checkout

    def git(*args: str) -> str:
        done = subprocess.run(["git", "-C", str(tmp_path), *args], capture_output=True, text=True, check=True)
        return done.stdout.strip()

    package = tmp_path / "src" / "pkg"
    package.mkdir(parents=True)
    (package / "code.py").write_text("x = 1\n")
    git("init", "-q")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    sha = git("rev-parse", "HEAD")
    assert source_revision(package) == {"git_sha": sha, "git_dirty": False}
    (tmp_path / "README").write_text("outside the package\n")
    assert source_revision(package)["git_dirty"] is False
    (package / "new.py").write_text("y = 2\n")
    assert source_revision(package) == {"git_sha": sha, "git_dirty": True}
    (package / "new.py").unlink()
    (package / "code.py").write_text("x = 2\n")
    assert source_revision(package)["git_dirty"] is True
