"""Version guards: `if vllm_version_is("0.11.0"): <old code> else: <new code>`.

A guard is a call to one of the helpers `Options.version_guards` names (also reached as an
attribute: `utils.vllm_version_is(...)`) with one version string literal. The suffix of the
helper's name says how the running version compares to the argument: `_is`/`_eq` (==),
`_lt` (<), `_le` (<=), `_gt` (>), `_ge` (>=).

A condition is decided for the versions code may still run on (a `Floor`) with three-valued
logic over `not`, `and` and `or`: `vllm_version_is("0.11.0") and flag` is False on every
later version whatever `flag` is, `vllm_version_is("0.11.0") or flag` depends on `flag` and
stays undecided. Anything else (a comparison, another call, a version that is not a
literal) is undecided.

While migrating, the branch that runs only on versions older than the version the run
migrates to is frozen: no rewriter edits it or counts its references (it is reported once,
at info level). Undecided branches are migrated as any other code.
"""

from __future__ import annotations

import ast

from migrator.core import findings as F
from migrator.core.settings import COMPARISONS
from migrator.rewrite.sites.buffer import EditBuffer
from migrator.rewrite.sites.context import SiteContext
from migrator.rewrite.sites.plan import Floor
from rules import RulesError, version_key


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


def freeze_old_branches(ctx: SiteContext, buf: EditBuffer) -> None:
    """Freeze the branches that run only on versions before the one the run migrates to."""
    if not ctx.resolver.steps:
        return
    target = ctx.resolver.steps[-1].version
    floor = Floor(target, inclusive=True)
    for node in ctx.sites.branches:
        if isinstance(node, ast.Try):
            continue
        value = decide(node.test, ctx.options.version_guards, floor)
        if value is None:
            continue
        span = _old_span(ctx, node, value)
        if span is None or buf.is_frozen(*span):
            continue  # nothing there, or --drop-compat removes it
        buf.freeze(*span)
        first, last = (ctx.smap.position(offset)[0] for offset in span)
        if any(line in ctx.lines for line in range(first, last + 1)):
            condition = ast.get_source_segment(ctx.smap.text, node.test) or "the guard"
            side = "else" if value else "if"
            message = (
                f"the {side} branch of `{condition}` runs only on versions before {target}: "
                "old branch of a version guard, kept as it is"
            )
            finding = F.Finding("", 0, 0, F.GUARDED_BRANCH, "branch", message, step=target)
            buf.report(finding, span[0])


def _old_span(ctx: SiteContext, node: ast.If | ast.IfExp, value: bool) -> tuple[int, int] | None:
    """The span of the branch `node` takes when its test is not `value`; None if empty.

    A statement's span runs from its header (so comments above the first statement are in
    it) to the end of its last statement."""
    test_end = ctx.smap.span(node.test)[1]
    if isinstance(node, ast.IfExp):
        return ctx.smap.span(node.orelse if value else node.body)
    if not value:
        return test_end, ctx.smap.span(node.body[-1])[1]
    if not node.orelse:
        return None
    return ctx.smap.span(node.body[-1])[1], ctx.smap.span(node)[1]
