"""What a version guard says about the versions code may still run on: the helpers phase 1
(`guards.py`, `drop.py`) decides conditions with. Not a rewriter.

A guard is a call to one of the helpers `Options.version_guards` names (also reached as an
attribute: `utils.vllm_version_is(...)`) with one version string literal. The suffix of the
helper's name says how the running version compares to the argument: `_is`/`_eq` (==),
`_lt` (<), `_le` (<=), `_gt` (>), `_ge` (>=).

A condition is decided for the versions code may still run on (a `Floor`) with three-valued
logic over `not`, `and` and `or`: `vllm_version_is("0.11.0") and flag` is False on every
later version whatever `flag` is, `vllm_version_is("0.11.0") or flag` depends on `flag` and
stays undecided. Anything else (a comparison, another call, a version that is not a
literal) is undecided.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from migrator.core.settings import COMPARISONS
from rules import RulesError, version_key


@dataclass(frozen=True)
class Floor:
    """The versions code may still run on: `version` and later (`inclusive`), or only the
    versions after it."""

    version: str
    inclusive: bool

    def excludes(self, version: str) -> bool:
        """Whether `version` itself can no longer run."""
        key, floor = version_key(version), version_key(self.version)
        return key < floor or (key == floor and not self.inclusive)

    def at_or_above(self, version: str) -> bool:
        """Whether every version that can still run is `version` or later."""
        return version_key(version) <= version_key(self.version)


def comparison(helper: str) -> str | None:
    """The comparison a helper's name says (`vllm_version_lt` -> `<`), or None."""
    return COMPARISONS.get(helper.rpartition("_")[2])


def decide(test: ast.expr, helpers: tuple[str, ...], floor: Floor) -> bool | None:
    """The value of `test` on every version above `floor`; None when it is not known."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        value = decide(test.operand, helpers, floor)
        return None if value is None else not value
    if isinstance(test, ast.BoolOp):
        values = [decide(v, helpers, floor) for v in test.values]
        absorbing = isinstance(test.op, ast.Or)  # True decides an `or`, False an `and`
        if absorbing in values:
            return absorbing
        return None if None in values else not absorbing
    if isinstance(test, ast.Call):
        return guard_value(test, helpers, floor)
    return None


def guard_value(call: ast.Call, helpers: tuple[str, ...], floor: Floor) -> bool | None:
    """The value of one guard call above `floor`; None for any other call, or when the
    guard is true on some of those versions and false on others."""
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    if name not in helpers or len(call.args) != 1 or call.keywords:
        return None
    arg = call.args[0]
    if not isinstance(arg, ast.Constant) or not isinstance(arg.value, str):
        return None
    try:
        version_key(arg.value)
    except RulesError:
        return None
    op, version = comparison(name), arg.value
    if op in ("==", "<=") and floor.excludes(version):
        return False
    if op == ">" and floor.excludes(version):
        return True
    if op == "<" and floor.at_or_above(version):
        return False
    if op == ">=" and floor.at_or_above(version):
        return True
    return None


def mentions_decided_guard(test: ast.expr, helpers: tuple[str, ...], floor: Floor) -> bool:
    """Whether some guard call in `test` is decided above `floor` (even if `test` is not)."""
    return any(
        isinstance(node, ast.Call) and guard_value(node, helpers, floor) is not None
        for node in ast.walk(test)
    )
