"""Which branch of a version guard runs at one release of the upstream package, and so which
lines of a file that release never runs: the old lane of a dual-lane block (`if
vllm_version_is("0.29.0"): <old> else: <new>`, what `vam migrate --keep-compat` writes) is not
code that must work at the target. `vam verify-imports --against`, `vam verify-api` and
`vam upgrade` decide guards here; `migrate`'s floor logic (`rewrite/sites/versions.py`)
answers another question (every version from a floor on).

A guard is a call of a helper named in `[tool.vam] version-guards` (also reached as an
attribute, `utils.vllm_version_is(...)`) with one version string literal; the suffix of the
helper's name says how the running version compares to it: `_is`/`_eq` (==), `_lt`, `_le`,
`_gt`, `_ge`.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable
from typing import Any

from migrator.core.settings import COMPARISONS
from rules import RulesError, version_key

_OPS: dict[str, Callable[[Any, Any], Any]] = {
    "==": operator.eq, "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}


def decide(test: ast.expr, helpers: tuple[str, ...], version: str | None) -> bool | None:
    """The value `test` has when the upstream release is `version`: a guard call, its `not`,
    or an `and`/`or` of parts (three-valued: `guard and flag` is False when the guard is);
    None when that cannot be told (no version, any other expression, a bad version)."""
    if version is None:
        return None
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = decide(test.operand, helpers, version)
        return None if inner is None else not inner
    if isinstance(test, ast.BoolOp):
        parts = [decide(v, helpers, version) for v in test.values]
        if isinstance(test.op, ast.And):
            return False if False in parts else (True if all(parts) else None)
        return True if True in parts else (False if all(p is False for p in parts) else None)
    if not (isinstance(test, ast.Call) and len(test.args) == 1 and not test.keywords
            and isinstance(test.args[0], ast.Constant) and isinstance(test.args[0].value, str)):
        return None
    func = test.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    if name not in helpers:
        return None
    op = COMPARISONS.get(name.rpartition("_")[2])
    try:
        running, given = version_key(version), version_key(test.args[0].value)
    except RulesError:
        return None
    return None if op is None else bool(_OPS[op](running, given))


def dead_lines(source: bytes | str, helpers: tuple[str, ...], version: str | None) -> set[int]:
    """The 1-based numbers of the lines release `version` never runs: the body of an `if` (or
    of a conditional expression) whose guard is False there, the `else` branch of one whose
    guard is True. None for a version, or a file that does not parse, has none."""
    if version is None or not helpers:
        return set()
    return branch_lines(source, lambda test: decide(test, helpers, version))


Span = tuple[tuple[int, int], tuple[int, int]]


def dead_spans(source: bytes | str, helpers: tuple[str, ...], version: str | None) -> list[Span]:
    """Where the branches release `version` never takes begin and end, as ((line, column),
    (end line, end column)), 1-based lines and 0-based columns (`ast`'s): unlike
    `dead_lines`, a one-line `"a.X" if guard else "b.X"` has one branch dead here."""
    if version is None or not helpers:
        return []
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    spans: list[Span] = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.If, ast.IfExp)):
            decided = decide(node.test, helpers, version)
            if decided is not None:
                branch = node.orelse if decided else node.body
                parts = branch if isinstance(branch, list) else [branch]
                spans += [((p.lineno, p.col_offset), (p.end_lineno or p.lineno,
                                                       p.end_col_offset or 0)) for p in parts]
    return spans


def within(spans: list[Span], line: int, col: int) -> bool:
    """Whether (line, 0-based column) lies inside one of `spans`."""
    return any(start <= (line, col) < end for start, end in spans)


def branch_lines(source: bytes | str, value: Callable[[ast.expr], bool | None]) -> set[int]:
    """The lines of the branches of `if` statements and conditional expressions that never
    run when `value(test)` decides their test (True: the `else` branch, False: the body;
    None: neither). A file that does not parse has none."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return set()
    dead: set[int] = set()
    for node in ast.walk(tree):
        if not isinstance(node, (ast.If, ast.IfExp)):
            continue
        decided = value(node.test)
        if decided is None:
            continue
        branch, taken = (node.orelse, node.body) if decided else (node.body, node.orelse)
        # A line the test or the taken branch shares (a one-line `a if guard else b`) runs.
        dead.update(_lines(branch) - _lines(taken) - _lines(node.test))
    return dead


def _lines(part: ast.AST | list[ast.stmt]) -> set[int]:
    found: set[int] = set()
    for node in part if isinstance(part, list) else [part]:
        first = getattr(node, "lineno", None)
        if first is not None:
            found.update(range(first, (getattr(node, "end_lineno", None) or first) + 1))
    return found
