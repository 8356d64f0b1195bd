"""The sandbox chat templates render in: Jinja's own, which refuses unsafe attributes and calls, plus
bounds on the work one render may do.

A chat template is text from outside fathom (a ``--template`` file, or the one a model's files carry),
so it is treated as a hostile program: it may not read other templates (``include``, ``import``,
``extends``), and a render that loops, calls or builds text beyond what any chat template needs is
stopped with a ``TemplateError`` (one line, through ``ChatTemplate``'s refusal), rather than running for
hours or exhausting the machine's memory.
"""

from __future__ import annotations

import contextvars
import json
import operator
from collections.abc import Iterable, Iterator
from typing import Any

from jinja2 import Template, TemplateError, nodes
from jinja2.runtime import Context
from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2.visitor import NodeTransformer

# Real chat templates loop over a conversation's few messages (and perhaps its tools): a render takes
# hundreds of steps and makes a few kilobytes. These bounds are thousands of times that.
MAX_STEPS = 1_000_000  # loop iterations and calls, all of one render together
MAX_SIZE = 16 * 1024 * 1024  # characters of any text (or items of any list) made, and of the output
MAX_EXPONENT = 4096  # ``a ** b`` on whole numbers: beyond this, one number of thousands of digits

# The step count of the render in progress (one per render, so that renders never share a budget).
_steps: contextvars.ContextVar[list[int]] = contextvars.ContextVar("fathom_template_steps")

_FOREIGN = {
    nodes.Include: "include",
    nodes.Import: "import",
    nodes.FromImport: "from ... import",
    nodes.Extends: "extends",
}


def compile_template(source: str) -> Template:
    """A chat template's source compiled in the bounded sandbox; TemplateError if it cannot be."""
    env = _BoundedEnvironment(trim_blocks=True, lstrip_blocks=True)
    return env.from_string(_Bounded().visit(env.parse(source)))


def render_bounded(template: Template, **values: Any) -> str:
    """Render ``template`` (made by ``compile_template``) with a fresh budget of steps."""
    token = _steps.set([0])
    try:
        return template.render(**values)
    finally:
        _steps.reset(token)


class _Bounded(NodeTransformer):
    """Refuses what reads other templates, and routes each loop's items and each call's, filter's and
    concatenation's result through the budget's checks."""

    def generic_visit(self, node: nodes.Node, *args: Any, **kwargs: Any) -> Any:
        for kind, tag in _FOREIGN.items():
            if isinstance(node, kind):
                raise TemplateError(f"it uses {{% {tag} %}}: a chat template must be one self-contained file")
        visited = super().generic_visit(node, *args, **kwargs)
        if isinstance(node, nodes.For):
            node.iter = _filtered(node.iter, "fathom_counted")
        elif isinstance(node, nodes.CallBlock) and isinstance(node.call, nodes.Filter):
            node.call = node.call.node  # {% call %} must name a call: its result is checked as output
        elif isinstance(node, nodes.Call | nodes.Concat | nodes.Add) or (
            isinstance(node, nodes.Filter) and node.node is not None  # not a {% filter %} block's own
        ):
            return _filtered(node, "fathom_checked")
        return visited


def _filtered(node: nodes.Node, name: str) -> nodes.Filter:
    return nodes.Filter(node, name, [], [], None, None, lineno=node.lineno)


def _step() -> None:
    steps = _steps.get()
    steps[0] += 1
    if steps[0] > MAX_STEPS:
        raise TemplateError(f"it takes more than {MAX_STEPS:,} steps (loop iterations and calls) to render")


def _sized(value: Any) -> Any:
    if isinstance(value, str | list | tuple):
        _check_size(len(value))
    return value


def _check_size(size: int) -> None:
    if size > MAX_SIZE:
        raise TemplateError(f"it makes a text or list of more than {MAX_SIZE:,} characters or items")


def _checked(value: Any) -> Any:
    _step()
    return _sized(value)


def _counted(items: Iterable[Any]) -> Iterator[Any]:
    for item in items:
        _step()
        yield item


def _raise(message: str) -> Any:
    raise TemplateError(message)


class _BoundedEnvironment(ImmutableSandboxedEnvironment):
    """The settings transformers uses for chat templates (so the same text renders the same way), its
    ``raise_exception`` and ``tojson``, and the bounds: sizes checked before a product or power is made,
    the output's length as it is joined."""

    intercepted_binops = frozenset({"*", "**"})

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.globals["raise_exception"] = _raise
        self.filters["tojson"] = lambda value, indent=None: json.dumps(
            value, ensure_ascii=False, indent=indent
        )
        self.filters["fathom_counted"] = _counted
        self.filters["fathom_checked"] = _checked

    def call_binop(self, context: Context, operator_: str, left: Any, right: Any) -> Any:
        if operator_ == "*":
            for sized, times in ((left, right), (right, left)):
                if isinstance(sized, str | list | tuple) and isinstance(times, int):
                    _check_size(len(sized) * times)  # the product's length, before it is made
            return _sized(operator.mul(left, right))
        whole = isinstance(left, int) and isinstance(right, int)
        if whole and abs(left) > 1 and right > MAX_EXPONENT:
            raise TemplateError(f"it raises a number to a power above {MAX_EXPONENT}")
        return operator.pow(left, right)

    def concat(self, pieces: Iterable[str]) -> str:
        """The output, refused once it grows beyond MAX_SIZE characters."""
        joined: list[str] = []
        size = 0
        for piece in pieces:
            size += len(piece)
            if size > MAX_SIZE:
                raise TemplateError(f"its output grows beyond {MAX_SIZE:,} characters")
            joined.append(piece)
        return "".join(joined)
