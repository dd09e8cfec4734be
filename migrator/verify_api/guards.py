"""Which branch of a version guard runs at the target release, so that the old lane of a
dual-lane block (`if vllm_version_is("0.29.0"): <old> else: <new>`) is not read as code that
must work at the target, and which blocks only probe for an attribute (`hasattr`, `try: ...
except AttributeError`)."""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable
from typing import Any

from migrator.core.settings import COMPARISONS
from rules import RulesError, version_key

_OPS: dict[str, Callable[[Any, Any], Any]] = {
    "==": operator.eq, "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}
_PROBES = frozenset({"AttributeError", "TypeError", "ImportError", "ModuleNotFoundError",
                     "NameError"})


def decide(test: ast.expr, helpers: tuple[str, ...], version: str | None) -> bool | None:
    """The value `test` has when the upstream release is `version`: a call of a helper in
    `helpers` (`NAME_is("X")`, `_lt`, `_le`, `_gt`, `_ge`), its `not`, or an `and`/`or` of
    decided parts; None when that cannot be told."""
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
    if not (isinstance(test, ast.Call) and len(test.args) == 1
            and isinstance(test.args[0], ast.Constant) and isinstance(test.args[0].value, str)):
        return None
    name = ast.unparse(test.func).rsplit(".", 1)[-1]
    if name not in helpers:
        return None
    op = COMPARISONS.get(name.rpartition("_")[2])
    try:
        running, given = version_key(version), version_key(test.args[0].value)
    except RulesError:
        return None
    return None if op is None else _OPS[op](running, given)


def probes(test: ast.expr) -> bool:
    """`test` asks whether an attribute exists (`hasattr(...)`, `getattr(..., default)`)."""
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
               and n.func.id in ("hasattr", "getattr") for n in ast.walk(test))


def catches_probe(handlers: list[ast.ExceptHandler]) -> bool:
    """A `try` whose handlers catch what a missing attribute or changed signature raises."""
    for handler in handlers:
        if handler.type is None:
            return True
        kinds = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
        if any(ast.unparse(k).rsplit(".", 1)[-1] in _PROBES | {"Exception"} for k in kinds):
            return True
    return False
