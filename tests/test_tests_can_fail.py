"""No test that cannot fail: tools/unfailable_tests.py reads the suite and finds none of the patterns
that always pass (docs/mutation.md, "Tests that could not fail"); and it finds each of them where
one is planted, so this check can fail too."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from repo_tools import load_tool

ROOT = Path(__file__).resolve().parents[1]


TOOL = load_tool("unfailable_tests")


def found(tmp_path: Path, body: str) -> list[str]:
    """The patterns the tool finds in one test whose body is ``body``."""
    path = tmp_path / "test_planted.py"
    path.write_text("def test_planted(x, y, line):\n" + textwrap.indent(textwrap.dedent(body), "    "))
    return [f.pattern for f in TOOL.findings(path)]


def test_no_test_in_the_suite_holds_a_pattern_that_always_passes() -> None:
    files = TOOL.test_files([ROOT / "tests"])
    assert len(files) > 100 and Path(__file__) in files
    assert [str(f) for path in files for f in TOOL.findings(path) if f.pattern in TOOL.CERTAIN] == []


@pytest.mark.parametrize(
    ("body", "pattern"),
    [
        ('assert x == line if line != b"\\n" else b"\\n"\n', "assert-ifexp"),
        ('assert (x == 1, "x is one")\n', "assert-constant"),
        ('assert f"{x}"\n', "assert-constant"),
        ("assert x.value == x.value\n", "assert-self-compare"),
        ("assert len(x) >= 0\n", "assert-len-nonnegative"),
        ("assert x == 1 or True\n", "assert-or-true"),
        ("try:\n    assert x == 1\nexcept AssertionError:\n    pass\n", "swallowed-assertion"),
        ("try:\n    assert x == 1\nexcept Exception:\n    y = 2\n", "swallowed-assertion"),
        ("assert (x == 1) if y else (x == 2)\n", "conditional-assert"),
        ("assert f(x) == f(x)\n", "same-expression-twice"),
        ("y = x + 1\n", "no-check"),
        ("for a in x:\n    assert a > 0\n", "loop-only-assert"),
        ("assert all(a > 0 for a in x)\n", "loop-only-assert"),
    ],
)
def test_each_pattern_is_found_where_it_is_planted(tmp_path: Path, body: str, pattern: str) -> None:
    assert found(tmp_path, body) == [pattern]


@pytest.mark.parametrize(
    "body",
    [
        "assert x == line\n",
        'assert x == 1, "x is one"\n',
        "assert len(x) >= 1\n",
        "try:\n    assert x == 1\nexcept AssertionError:\n    raise ValueError(x)\n",
        "with pytest.raises(ValueError):\n    int(x)\n",
        "for a in (1, 2, 3):\n    assert f(a) > 0\n",
        "assert len(x) == 3 and all(a > 0 for a in x)\n",
        "assert f(x) != f(y)\n",
    ],
)
def test_a_test_that_can_fail_is_not_found(tmp_path: Path, body: str) -> None:
    assert found(tmp_path, body) == []
