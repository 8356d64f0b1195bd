from __future__ import annotations

from pathlib import Path

import pytest

from fathom.errors import SpecError
from fathom.prompts.templates import CONTEXT_MARKER, NAMED_TEMPLATES, resolve_template
from fathom.prompts.tokenizers import load_tokenizer

CHAR = load_tokenizer("char")


@pytest.mark.parametrize(
    ("name", "head", "tail"),
    [
        ("none", "intro ", " outro\n\n"),
        ("plain", "be brief\n\nUser: intro ", " outro\n\nAssistant: "),
        ("chatml", "<|im_start|>system\nbe brief<|im_end|>\n<|im_start|>user\nintro ",
         " outro<|im_end|>\n<|im_start|>assistant\n"),
    ],
)  # fmt: skip
def test_named_templates_wrap_the_context(name: str, head: str, tail: str) -> None:
    system = None if name == "none" else "be brief"
    got = resolve_template(name, CHAR).wrap(CHAR, system, f"intro {CONTEXT_MARKER} outro")
    assert got == (head, tail)


def test_none_with_a_system_prompt_puts_it_first() -> None:
    got = resolve_template("none", CHAR).wrap(CHAR, "be brief", f"intro {CONTEXT_MARKER} outro")
    assert got == ("be brief\n\nintro ", " outro\n\n")


def test_auto_falls_back_to_none_without_a_tokenizer_template() -> None:
    assert resolve_template("auto", CHAR).name == "none"
    with pytest.raises(SpecError, match="has no chat template"):
        resolve_template("tokenizer", CHAR)


def test_a_jinja_file_is_a_template(tmp_path: Path) -> None:
    path = tmp_path / "t.jinja"
    path.write_text("{% for m in messages %}<<{{ m['content'] }}>>{% endfor %}")
    assert resolve_template(str(path), CHAR).wrap(CHAR, None, f"a{CONTEXT_MARKER}b") == ("<<a", "b>>")


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("{% for m in messages %}", "failed to render"),
        ("{{ raise_exception('no system role') }}", "no system role"),
        ("{% for m in messages %}{{ m['role'] }}{% endfor %}", "drops the user's message"),
    ],
)
def test_broken_templates_are_named(tmp_path: Path, source: str, message: str) -> None:
    path = tmp_path / "bad.jinja"
    path.write_text(source)
    with pytest.raises(SpecError, match=message):
        resolve_template(str(path), CHAR).wrap(CHAR, None, f"x{CONTEXT_MARKER}y")


def test_every_named_template_renders() -> None:
    for name in NAMED_TEMPLATES:
        head, tail = resolve_template(name, CHAR).wrap(CHAR, "s", f"u{CONTEXT_MARKER}v")
        assert head.endswith("u") and tail.startswith("v")
