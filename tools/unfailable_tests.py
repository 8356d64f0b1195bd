#!/usr/bin/env python3
"""Find tests that cannot fail, or that check the code only against itself.

Reads test files with ``ast`` (nothing is imported or run) and prints one line per finding::

    tests/test_x.py:109 test_y  assert-ifexp  assert a == b if c else b"\\n"

Two kinds of pattern, told apart by ``CERTAIN``:

* certain: the assertion holds whatever the code under test does: ``assert X if c else "s"`` (a
  branch that is a constant), ``assert (x, "why")``, ``assert x == x``, ``assert len(x) >= 0``,
  ``assert ... or True``, an ``AssertionError`` caught and dropped. ``tests/test_tests_can_fail.py``
  keeps the suite free of them.
* suspect: a pattern that is often fine and has to be read: a conditional assertion whose branches
  both check, the same call on both sides of a comparison (a check of determinism, or of the code
  against itself), a function of fathom's called on both sides of ``==`` (directly or through a name
  assigned from it), a test with no check at all, or whose every assertion sits in a loop over
  something that may be empty (or is ``all(...)`` over it). Listed for review, not refused.

Usage: ``python tools/unfailable_tests.py [--all] [PATH ...]`` (default ``tests``; ``--all`` adds
the suspects). Exit status 1 when a certain pattern is found.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

CERTAIN = frozenset(
    {
        "assert-ifexp",
        "assert-constant",
        "assert-self-compare",
        "assert-len-nonnegative",
        "assert-or-true",
        "swallowed-assertion",
    }
)
# Calls that check something besides ``assert``: pytest's, and a helper whose name says so.
CHECKING_CALLS = frozenset({"raises", "warns", "fail", "deprecated_call"})
CHECKING_PREFIXES = ("assert", "check", "expect", "verify")
# What an ``except`` may catch an AssertionError as.
CATCHES_ASSERTION = frozenset({"AssertionError", "Exception", "BaseException"})
# Calls that make a loop's iterable from literals without ever making it empty.
LITERAL_WRAPPERS = frozenset({"enumerate", "zip", "sorted", "reversed", "list", "tuple"})


@dataclass(frozen=True)
class Finding:
    path: Path
    line: int
    test: str
    pattern: str
    source: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line} {self.test}  {self.pattern}  {self.source}"


@dataclass(frozen=True)
class Module:
    """What a test file's findings need beyond the test itself."""

    path: Path
    lines: list[str]
    helpers: frozenset[str]  # the module's functions that check (assert, raise, call pytest's checks)
    fathom: frozenset[str]  # the names it imports from fathom


def _called_name(call: ast.Call) -> str:
    func = call.func
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else ""


def _is_truthy_constant(node: ast.expr) -> bool:
    if isinstance(node, ast.Constant):
        return bool(node.value)
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return bool(node.elts)
    if isinstance(node, ast.Dict):
        return bool(node.keys)
    return isinstance(node, ast.JoinedStr) and any(
        not isinstance(v, ast.Constant) or v.value for v in node.values
    )


def _zero(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value == 0 and not isinstance(node.value, bool)


def _len_nonnegative(compare: ast.Compare) -> bool:
    def is_len(node: ast.expr) -> bool:
        return isinstance(node, ast.Call) and _called_name(node) == "len"

    left, op, right = compare.left, compare.ops[0], compare.comparators[0]
    return (isinstance(op, ast.GtE) and is_len(left) and _zero(right)) or (
        isinstance(op, ast.LtE) and _zero(left) and is_len(right)
    )


def _self_compared(compare: ast.Compare) -> list[ast.expr]:
    """Operands compared with themselves by an operator that is then always true."""
    operands = [compare.left, *compare.comparators]
    always = ast.Eq | ast.Is | ast.LtE | ast.GtE | ast.In
    return [
        a
        for a, op, b in zip(operands, compare.ops, operands[1:], strict=False)
        if isinstance(op, always) and ast.dump(a) == ast.dump(b)
    ]


def _assertion_patterns(test: ast.expr) -> Iterator[str]:
    if isinstance(test, ast.IfExp):
        # ``assert a == b if c else "why"``: a branch that is a constant always holds.
        constant = _is_truthy_constant(test.body) or _is_truthy_constant(test.orelse)
        yield "assert-ifexp" if constant else "conditional-assert"
    if _is_truthy_constant(test):
        yield "assert-constant"
    for node in ast.walk(test):
        if isinstance(node, ast.Compare):
            for operand in _self_compared(node):
                # The same names are equal; the same call twice may be a check of determinism.
                calls = any(isinstance(n, ast.Call) for n in ast.walk(operand))
                yield "same-expression-twice" if calls else "assert-self-compare"
            if len(node.ops) == 1 and _len_nonnegative(node):
                yield "assert-len-nonnegative"
        if (
            isinstance(node, ast.BoolOp)
            and isinstance(node.op, ast.Or)
            and any(map(_is_truthy_constant, node.values))
        ):
            yield "assert-or-true"


def _swallows(node: ast.Try) -> bool:
    """A try whose body asserts and whose handler catches that assertion and drops it."""

    def catches(handler: ast.ExceptHandler) -> bool:
        if handler.type is None:
            return True
        names = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
        return any(isinstance(n, ast.Name) and n.id in CATCHES_ASSERTION for n in names)

    def reraises(handler: ast.ExceptHandler) -> bool:
        return any(
            isinstance(n, ast.Raise) or (isinstance(n, ast.Call) and _called_name(n) == "fail")
            for n in ast.walk(handler)
        )

    asserts = any(isinstance(n, ast.Assert) for stmt in node.body for n in ast.walk(stmt))
    return asserts and any(catches(h) and not reraises(h) for h in node.handlers)


def _own_nodes(function: ast.FunctionDef) -> Iterator[ast.AST]:
    """The nodes of a function, without those of functions and classes defined inside it."""
    stack: list[ast.AST] = list(function.body)
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
            stack.extend(ast.iter_child_nodes(node))


def _is_checking_call(node: ast.AST, helpers: frozenset[str]) -> bool:
    if not isinstance(node, ast.Call):
        return False
    name = _called_name(node)
    return name in CHECKING_CALLS or name in helpers or name.startswith(CHECKING_PREFIXES)


def _checks(function: ast.FunctionDef, helpers: frozenset[str]) -> bool:
    return any(
        isinstance(n, ast.Assert | ast.Raise) or _is_checking_call(n, helpers) for n in ast.walk(function)
    )


def _checking_helpers(tree: ast.Module) -> frozenset[str]:
    """The module's functions that check, found to a fixpoint (a helper calling a checking helper)."""
    functions = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]
    checking: frozenset[str] = frozenset()
    while True:
        more = {f.name for f in functions if f.name not in checking and _checks(f, checking)}
        if not more:
            return checking
        checking |= more


def _never_empty(iterable: ast.expr) -> bool:
    """A loop's iterable written out in the test: a non-empty literal, a range of constants, or one
    of those enumerated, zipped or sorted."""
    if isinstance(iterable, ast.Tuple | ast.List | ast.Set | ast.Dict | ast.Constant):
        return _is_truthy_constant(iterable)
    if isinstance(iterable, ast.Call) and isinstance(iterable.func, ast.Name):
        if iterable.func.id == "range":
            return all(isinstance(a, ast.Constant | ast.UnaryOp) for a in iterable.args)
        if iterable.func.id in LITERAL_WRAPPERS:
            return bool(iterable.args) and all(_never_empty(a) for a in iterable.args)
    return False


def _loop_only(function: ast.FunctionDef, helpers: frozenset[str]) -> bool:
    """Every assertion is in the body of a loop over something that may be empty, or is ``all(...)``
    over a comprehension: vacuous when what it iterates is empty."""
    asserts: list[tuple[ast.Assert, bool]] = []

    def visit(node: ast.AST, in_loop: bool) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
            return
        if isinstance(node, ast.Assert):
            asserts.append((node, in_loop))
        body = node.body if isinstance(node, ast.For) and not _never_empty(node.iter) else []
        for child in ast.iter_child_nodes(node):
            visit(child, in_loop or any(child is stmt for stmt in body))

    for stmt in function.body:
        visit(stmt, False)
    if not asserts or any(_is_checking_call(n, helpers) for n in _own_nodes(function)):
        return False
    return all(in_loop or _all_over_comprehension(a.test) for a, in_loop in asserts)


def _all_over_comprehension(test: ast.expr) -> bool:
    return (
        isinstance(test, ast.Call)
        and _called_name(test) == "all"
        and len(test.args) == 1
        and isinstance(test.args[0], ast.GeneratorExp | ast.ListComp)
        and not any(_never_empty(g.iter) for g in test.args[0].generators)
    )


def _fathom_on_both_sides(test: ast.expr, assigned: dict[str, set[str]], fathom: frozenset[str]) -> set[str]:
    """fathom's functions called on both sides of an ``==``, directly or through a name assigned
    from a call of them."""

    def called(node: ast.expr) -> set[str]:
        direct = {
            n.func.id for n in ast.walk(node) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
        }
        through = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
        return (direct | set().union(*(assigned.get(name, set()) for name in through))) & fathom

    shared: set[str] = set()
    for node in ast.walk(test):
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], ast.Eq):
            shared |= called(node.left) & called(node.comparators[0])
    return shared


def _test_findings(module: Module, function: ast.FunctionDef) -> Iterator[Finding]:
    def finding(node: ast.AST, pattern: str) -> Finding:
        line = getattr(node, "lineno", function.lineno)
        return Finding(module.path, line, function.name, pattern, module.lines[line - 1].strip())

    assigned: dict[str, set[str]] = {}
    for node in _own_nodes(function):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            calls = (
                n for n in ast.walk(node.value) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
            )
            assigned[node.targets[0].id] = {c.func.id for c in calls if isinstance(c.func, ast.Name)}
    for node in _own_nodes(function):
        if isinstance(node, ast.Assert):
            for pattern in dict.fromkeys(_assertion_patterns(node.test)):
                yield finding(node, pattern)
            shared = _fathom_on_both_sides(node.test, assigned, module.fathom)
            if shared:
                yield finding(node, f"fathom-call-both-sides({','.join(sorted(shared))})")
        if isinstance(node, ast.Try) and _swallows(node):
            yield finding(node, "swallowed-assertion")
    if not _checks(function, module.helpers):
        yield finding(function, "no-check")
    elif _loop_only(function, module.helpers):
        yield finding(function, "loop-only-assert")


def findings(path: Path) -> Iterator[Finding]:
    text = path.read_text(encoding="utf-8")
    tree = ast.parse(text, filename=str(path))
    fathom = frozenset(
        alias.asname or alias.name
        for node in tree.body
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("fathom")
        for alias in node.names
    )
    module = Module(path, text.splitlines(), _checking_helpers(tree), fathom)
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test"):
            yield from _test_findings(module, node)


def test_files(paths: list[Path]) -> list[Path]:
    return sorted(
        f for p in paths for f in ([p] if p.is_file() else p.rglob("test_*.py")) if "fixtures" not in f.parts
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("paths", nargs="*", type=Path, default=[Path("tests")])
    parser.add_argument("--all", action="store_true", help="list the suspect patterns too")
    arguments = parser.parse_args(argv)
    found = [f for path in test_files(arguments.paths) for f in findings(path)]
    for f in found:
        if arguments.all or f.pattern in CERTAIN:
            print(f)
    return 1 if any(f.pattern in CERTAIN for f in found) else 0


if __name__ == "__main__":
    sys.exit(main())
