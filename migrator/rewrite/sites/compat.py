"""Compatibility pairs (phase 1): one name bound from a moved path in one branch and from its
new path in a sibling branch - `try`/`except ImportError` (or `ModuleNotFoundError`, or a
tuple of them), `if`/`else`, or a conditional expression `a.b if cond else c.d`.

That is code a human wrote to run against both layouts: rewriting the old branch would
leave two copies of the new path and no fallback. Both branches are kept as they are (their
nodes are `Protected.kept`, which no rewriter touches) and the pair is reported at info
level - except a `try` that imports the old path first and falls back to the new one:
that runs the old path (through the shims) on every release that serves it, so it is
reported as a warning (`VAM008`) that suggests swapping the branches. Neither is rewritten.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from migrator.core import findings as F
from migrator.rewrite.locator import dotted_name
from migrator.rewrite.sites.bindings import bindings, catches_import_error
from migrator.rewrite.sites.context import SiteContext, Span, overlaps


class _Pairs:
    """The nodes of the pairs found so far and their findings."""

    def __init__(self, ctx: SiteContext, frozen: tuple[Span, ...]):
        self.ctx, self.frozen = ctx, frozen
        self.kept: set[int] = set()
        self.findings: list[F.Finding] = []

    def is_frozen(self, node: ast.stmt | ast.expr) -> bool:
        return overlaps(self.frozen, *self.ctx.smap.span(node))


def compat_pairs(
    ctx: SiteContext, frozen: tuple[Span, ...]
) -> tuple[frozenset[int], tuple[F.Finding, ...]]:
    """The ids of the nodes of every compatibility pair, and the pairs' findings. A pair
    whose old side lies in `frozen` (the old branch of a version guard, code
    `--drop-compat` removes) is not one."""
    pairs = _Pairs(ctx, frozen)
    for node in ctx.sites.branches:
        if isinstance(node, ast.IfExp):
            _expression_pair(pairs, node)
            continue
        for first, second, how in _sibling_branches(node):
            _statement_pairs(pairs, first, second, how)
    return frozenset(pairs.kept), tuple(pairs.findings)


def _sibling_branches(
    node: ast.Try | ast.If,
) -> Iterator[tuple[list[ast.stmt], list[ast.stmt], str]]:
    if isinstance(node, ast.If):
        if node.orelse:
            yield node.body, node.orelse, "if/else"
        return
    for handler in node.handlers:
        if catches_import_error(handler):
            yield node.body, handler.body, "try/except ImportError"


def _statement_pairs(
    pairs: _Pairs, first: list[ast.stmt], second: list[ast.stmt], how: str
) -> None:
    ctx = pairs.ctx
    theirs = bindings(ctx, second)
    for name, (stmt, path, new, nodes) in bindings(ctx, first).items():
        other = theirs.get(name)
        if other is None or other[1] == path or other[2] != new:
            continue
        old_stmt, old = (stmt, path) if path != new else (other[0], other[1])
        if pairs.is_frozen(old_stmt):
            continue  # the old branch of a version guard, or code --drop-compat removes
        pairs.kept.update(id(node) for node in (*nodes, *other[3]))
        shown = name.removeprefix("import ")
        if how.startswith("try") and old_stmt is stmt:
            code, message = F.OLD_FIRST, (
                f"the try branch imports '{old}' and falls back to its new path '{new}' "
                f"(binding '{shown}'): the old path runs for as long as shims serve it; swap "
                "the branches (try the new path first)"
            )
        else:
            code, message = F.COMPAT_PAIR, (
                f"'{old}' and its new path '{new}' both bind '{shown}' in sibling branches "
                f"({how}): compatibility code, kept as it is"
            )
        finding = F.Finding("", 0, 0, code, "import", message, old, new)
        pairs.findings.append(ctx.at(finding, ctx.smap.span(old_stmt)[0]))


def _expression_pair(pairs: _Pairs, node: ast.IfExp) -> None:
    """`X = old.path if cond else new.path` (either order), as chains or string literals."""
    ctx = pairs.ctx
    names = [_dotted(ctx, side) for side in (node.body, node.orelse)]
    if None in names or names[0] == names[1]:
        return
    new = [ctx.resolver.resolve(n).new for n in names]  # type: ignore[arg-type]
    if new[0] != new[1] or pairs.is_frozen(node):
        return  # not a pair, or one side is a version guard's old branch or removed
    pairs.kept.update((id(node.body), id(node.orelse)))
    old, side = (names[0], node.body) if names[0] != new[0] else (names[1], node.orelse)
    message = (
        f"'{old}' and its new path '{new[0]}' are the two sides of a conditional expression: "
        "compatibility code, kept as it is"
    )
    finding = F.Finding("", 0, 0, F.COMPAT_PAIR, "attribute", message, old or "", new[0])
    pairs.findings.append(ctx.at(finding, ctx.smap.span(side)[0]))


def _dotted(ctx: SiteContext, node: ast.expr) -> str | None:
    """The table path a chain or a string literal spells, or None."""
    if isinstance(node, ast.Attribute):
        name = dotted_name(node)
    elif isinstance(node, ast.Constant) and isinstance(node.value, str):
        name = node.value
    else:
        return None
    return name if name is not None and ctx.resolver.is_ours(name) else None
