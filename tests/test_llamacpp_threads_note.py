"""The llamacpp backend's line on its threads (#33): a run on a busy machine that takes every core looks
hung, so a backend started without ``threads`` says how many it uses and how to set them."""

from __future__ import annotations

import pytest

pytest.importorskip("llama_cpp", reason="needs the llamacpp extra: pip install -e '.[llamacpp]'")

from fathom.backends.llamacpp import LlamaCppBackend, threads_note


def test_the_note_names_the_threads_and_the_setting_only_when_threads_is_not_given() -> None:
    note = threads_note({"n_ctx": "1k"}, 16)
    assert note is not None and "16 threads" in note and "?threads=N" in note and "\n" not in note
    assert threads_note({"threads": "2"}, 2) is None
    assert threads_note({"threads": "16"}, 16) is None  # given, even as the default: nothing to tell


def test_a_backend_started_without_threads_prints_its_note_once(capsys: pytest.CaptureFixture[str]) -> None:
    backend = LlamaCppBackend("gemma3-270m?n_ctx=256", "auto")
    assert capsys.readouterr().err == f"{threads_note({}, backend.threads)}\n"
    LlamaCppBackend("gemma3-270m?n_ctx=256&threads=1", "auto")
    assert capsys.readouterr().err == ""
