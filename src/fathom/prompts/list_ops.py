"""The state-tracking task's language: lines of Python that act on small lists of numbers.

Each line is a method call on a named list (``items.append(42)``, ``items.insert(0, 7)``,
``items.pop()``, ``items.remove(7)``, ``items.sort()``) or a call that reads one and changes
nothing (``items.count(7)``, ``items.copy()``). Every line is real Python, so Python's own list
is the interpreter: ``replay`` runs the lines it can read on plain lists, and the task (which
draws the lines) and a simulated reader (which finds them in a prompt) share it. Kept in
``prompts`` so that both can import it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

TRACKED, OTHER = "items", "notes"  # the list asked about, and the one its decoys act on
# What each method takes: a value, an index and a value, an optional index, or nothing.
CHANGES = ("append", "insert", "pop", "remove", "sort")
READS = ("count", "copy")
QUESTION_KINDS = ("list", "length", "sum")
_QUESTIONS = {  # on the tracked list, evaluation's or an export's (tasks/state.py's Lists)
    "list": "What is {0} after the last line of code? Answer with the list as Python prints it, "
    "e.g. [3, 1, 2].",
    "length": "What is len({0}) after the last line of code? Answer with the number.",
    "sum": "What is sum({0}) after the last line of code? Answer with the number.",
}
_LINE = re.compile(r"^([a-z_]+)\.(append|insert|pop|remove|sort|count|copy)\(([0-9, ]*)\)$")


@dataclass(frozen=True)
class Op:
    """One line: ``target.method(*args)``."""

    target: str
    method: str
    args: tuple[int, ...] = ()

    @property
    def line(self) -> str:
        return f"{self.target}.{self.method}({', '.join(map(str, self.args))})"


def parse(line: str) -> Op | None:
    """The line as an operation, or None where it is none this language writes."""
    match = _LINE.match(line.strip())
    if match is None:
        return None
    target, method, args = match.groups()
    try:
        values = tuple(int(part) for part in args.split(",")) if args.strip() else ()
    except ValueError:
        return None
    return Op(target, method, values)


def apply(lists: dict[str, list[int]], op: Op) -> None:
    """Run ``op`` on its list as Python does (a list not yet named starts empty)."""
    getattr(lists.setdefault(op.target, []), op.method)(*op.args)


def replay(lines: Iterable[str]) -> dict[str, list[int]]:
    """The lists after the lines that parse, in order, from empty lists; a line that would raise in
    Python (a pop from an empty list, a remove of a missing value) is skipped."""
    lists: dict[str, list[int]] = {}
    for line in lines:
        op = parse(line)
        if op is not None:
            try:
                apply(lists, op)
            except (IndexError, ValueError, TypeError):
                continue
    return lists


def question(kind: str, tracked: str = TRACKED) -> str:
    return _QUESTIONS[kind].format(tracked)


def asked(text: str) -> str | None:
    """The question kind of a question this module wrote on evaluation's list, or None for any other."""
    return next((kind for kind in _QUESTIONS if question(kind) == text), None)


def answer(kind: str, state: list[int]) -> str:
    """The reference answer: the list as Python prints it, its length or its sum."""
    if kind == "list":
        return str(state)
    return str(len(state) if kind == "length" else sum(state))
