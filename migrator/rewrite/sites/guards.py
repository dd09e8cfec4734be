"""Version guards (phase 1): `if vllm_version_is("0.11.0"): <old code> else: <new code>`.

While migrating, the branch that runs only on versions older than the version the run
migrates to is protected: no rewriter edits it or counts its references (it is reported
once, at info level). Undecided branches are migrated as any other code. What a guard is
and how a condition is decided: `versions.py`.
"""

from __future__ import annotations

import ast

from migrator.core import findings as F
from migrator.rewrite.sites.context import SiteContext, Span, overlaps
from migrator.rewrite.sites.versions import Floor, decide


def old_branches(
    ctx: SiteContext, removed: tuple[Span, ...]
) -> tuple[tuple[Span, ...], tuple[F.Finding, ...]]:
    """The spans of the branches that run only on versions before the one the run migrates
    to, and their findings. A branch inside `removed` (code `--drop-compat` removes) or
    inside an old branch found earlier is not one."""
    if not ctx.resolver.steps:
        return (), ()
    target = ctx.resolver.steps[-1].version
    floor = Floor(target, inclusive=True)
    spans: list[Span] = []
    findings: list[F.Finding] = []
    for node in ctx.sites.branches:
        if isinstance(node, ast.Try):
            continue
        value = decide(node.test, ctx.options.version_guards, floor)
        if value is None:
            continue
        span = _old_span(ctx, node, value)
        if span is None or overlaps((*removed, *spans), *span):
            continue
        spans.append(span)
        first, last = (ctx.smap.position(offset)[0] for offset in span)
        if any(line in ctx.lines for line in range(first, last + 1)):
            condition = ast.get_source_segment(ctx.smap.text, node.test) or "the guard"
            side = "else" if value else "if"
            message = (
                f"the {side} branch of `{condition}` runs only on versions before {target}: "
                "old branch of a version guard, kept as it is"
            )
            finding = F.Finding("", 0, 0, F.GUARDED_BRANCH, "branch", message, step=target)
            findings.append(ctx.at(finding, span[0]))
    return tuple(spans), tuple(findings)


def _old_span(ctx: SiteContext, node: ast.If | ast.IfExp, value: bool) -> Span | None:
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
