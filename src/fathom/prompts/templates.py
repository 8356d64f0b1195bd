"""Chat templates: the model's own Jinja template, or a named plain one.

A template is rendered once per prompt shape with a marker where the haystack goes; the text before
and after the marker is what wraps the haystack. Template tokens are part of the prompt and count
towards its length.
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass
from pathlib import Path

from jinja2 import Template, TemplateError

from fathom.errors import SpecError
from fathom.prompts.template_sandbox import compile_template, render_bounded
from fathom.prompts.tokenizers import Tokenizer
from fathom.safe_files import read_bounded

CONTEXT_MARKER = "\u27e6fathom-context\u27e7"
TEMPLATE_MOST = 1 << 20  # bytes read of a template file, at most: models' chat templates are a few KB

NAMED_TEMPLATES = {
    # No chat markup at all: completion-style prompts for base models.
    "none": (
        # Newlines as expressions: trim_blocks would eat one right after a block tag.
        "{% for m in messages %}{{ m['content'] }}{% if not loop.last %}{{ '\\n\\n' }}{% endif %}"
        "{% endfor %}{% if add_generation_prompt %}{{ '\\n\\n' }}{% endif %}"
    ),
    # RULER's own `base` template ("{task_template}", then the answer prefix): the prefix follows the
    # question as written, joined by the space it opens with, where `none` leaves a blank line. A
    # system prompt (RULER's templates have none) comes first, as under `none`.
    "base": (
        "{% for m in messages %}{{ m['content'] }}{% if not loop.last %}{{ '\\n\\n' }}{% endif %}{% endfor %}"
    ),
    "plain": (
        "{% for m in messages %}{% if m['role'] == 'system' %}{{ m['content'] }}\n\n"
        "{% elif m['role'] == 'user' %}User: {{ m['content'] }}\n\n"
        "{% else %}Assistant: {{ m['content'] }}\n\n{% endif %}{% endfor %}"
        "{% if add_generation_prompt %}Assistant: {% endif %}"
    ),
    "chatml": (
        "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    ),
    "llama3": (
        "{{ bos_token }}{% for m in messages %}<|start_header_id|>{{ m['role'] }}<|end_header_id|>\n\n"
        "{{ m['content'] | trim }}<|eot_id|>{% endfor %}"
        "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}"
    ),
}


@dataclass(frozen=True)
class ChatTemplate:
    name: str
    source: str  # Jinja text

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.source.encode("utf-8")).hexdigest()

    def wrap(self, tokenizer: Tokenizer, system: str | None, user: str) -> tuple[str, str]:
        """The template text before and after the marker in ``user``, with a generation prompt."""
        messages = [{"role": "system", "content": system}] if system else []
        messages.append({"role": "user", "content": user})
        rendered = self._render(messages, tokenizer)
        head, found, tail = rendered.partition(CONTEXT_MARKER)
        if not found:
            raise SpecError(f"chat template '{self.name}' drops the user's message; choose another template")
        return head, tail

    def pieces(self, tokenizer: Tokenizer, system: str | None, roles: list[str]) -> list[str]:
        """The template text around each message of a conversation with these roles (``user``,
        ``assistant``, ...), with a generation prompt: one more piece than messages."""
        messages = [{"role": "system", "content": system}] if system else []
        messages += [{"role": role, "content": CONTEXT_MARKER} for role in roles]
        pieces = self._render(messages, tokenizer).split(CONTEXT_MARKER)
        if len(pieces) != len(roles) + 1:
            raise SpecError(f"chat template '{self.name}' drops a message of a conversation; choose another")
        return pieces

    def _render(self, messages: list[dict[str, str]], tokenizer: Tokenizer) -> str:
        try:
            return render_bounded(
                _compile(self.source),
                messages=messages,
                add_generation_prompt=True,
                bos_token=tokenizer.bos_token or "",
                eos_token=tokenizer.eos_token or "",
            )
        # A template is a program from outside fathom (a file, a model's files): whatever error it
        # raises (a division by zero, a recursion without end) is the template's, not fathom's.
        except (TemplateError, ArithmeticError, LookupError, TypeError, ValueError, RecursionError) as exc:
            reason = str(exc) if isinstance(exc, TemplateError) else f"{type(exc).__name__}: {exc}"
            raise SpecError(
                f"chat template '{self.name}' failed to render: {reason:.200}; fix the template or choose "
                "another with --template"
            ) from None


@functools.lru_cache(maxsize=16)
def _compile(source: str) -> Template:
    """Compile once per template text: every prompt of a run renders the same template."""
    return compile_template(source)


def resolve_template(name: str, tokenizer: Tokenizer) -> ChatTemplate:
    """``auto`` (the tokenizer's own template, else ``none``), ``tokenizer``, a named template, or
    the path of a Jinja file."""
    if name == "auto":
        name = "tokenizer" if tokenizer.chat_template else "none"
    if name == "tokenizer":
        if not tokenizer.chat_template:
            named = ", ".join(NAMED_TEMPLATES)
            raise SpecError(
                f"tokenizer '{tokenizer.name}' has no chat template; use --template {named}, or a path "
                "to a Jinja file"
            )
        return ChatTemplate(f"tokenizer:{tokenizer.name}", tokenizer.chat_template)
    if name in NAMED_TEMPLATES:
        return ChatTemplate(name, NAMED_TEMPLATES[name])
    path = Path(name)
    if path.is_file():
        try:
            text = read_bounded(path, TEMPLATE_MOST, "a chat template", user_file=True).decode("utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise SpecError(f"cannot read chat template '{path}' as UTF-8 text ({exc})") from None
        return ChatTemplate(f"file:{path}", text)
    known = ", ".join(["auto", "tokenizer", *NAMED_TEMPLATES])
    raise SpecError(f"unknown chat template '{name}': use one of {known}, or a path to a Jinja file")
