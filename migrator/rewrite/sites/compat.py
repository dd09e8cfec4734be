"""Compatibility pairs: one name bound from a moved path in one branch and from its new path
in a sibling branch - `try`/`except ImportError` (or `ModuleNotFoundError`, or a tuple of
them), `if`/`else`, or a conditional expression `a.b if cond else c.d`.

That is code a human wrote to run against both layouts: rewriting the old branch would
leave two copies of the new path and no fallback. Both branches are kept as they are (the
other rewriters skip what `buf.kept` holds) and the pair is reported at info level.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from migrator.core import findings as F
from migrator.rewrite.import_plan import absolute_module
from migrator.rewrite.locator import dotted_name
from migrator.rewrite.sites.buffer import EditBuffer
from migrator.rewrite.sites.context import SiteContext

_IMPORT_ERRORS = {"ImportError", "ModuleNotFoundError"}

# One binding an import makes: (statement, dotted path it imports, where that path resolves).
Binding = tuple[ast.stmt, str, str]


def keep_pairs(ctx: SiteContext, buf: EditBuffer) -> None:
    for node in ctx.sites.branches:
        if isinstance(node, ast.IfExp):
            _expression_pair(ctx, buf, node)
            continue
        for first, second, how in _sibling_branches(node):
            _statement_pairs(ctx, buf, first, second, how)


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


def catches_import_error(handler: ast.ExceptHandler) -> bool:
    """Whether `handler` catches ImportError or ModuleNotFoundError (alone or in a tuple)."""
    caught = handler.type
    names = caught.elts if isinstance(caught, ast.Tuple) else [caught]
    return any(isinstance(n, ast.Name) and n.id in _IMPORT_ERRORS for n in names)


def _statement_pairs(
    ctx: SiteContext, buf: EditBuffer, first: list[ast.stmt], second: list[ast.stmt], how: str
) -> None:
    theirs = bindings(ctx, second)
    for name, (stmt, path, new) in bindings(ctx, first).items():
        other = theirs.get(name)
        if other is None or other[1] == path or other[2] != new:
            continue
        old_stmt, old = (stmt, path) if path != new else (other[0], other[1])
        if buf.is_frozen(*ctx.smap.span(old_stmt)):
            continue  # the old branch of a version guard, or code --drop-compat removes
        buf.kept.update((id(stmt), id(other[0])))
        shown = name.removeprefix("import ")
        message = (
            f"'{old}' and its new path '{new}' both bind '{shown}' in sibling branches "
            f"({how}): compatibility code, kept as it is"
        )
        finding = F.Finding("", 0, 0, F.COMPAT_PAIR, "import", message, old, new)
        buf.report(finding, ctx.smap.span(old_stmt)[0])


def bindings(ctx: SiteContext, block: list[ast.stmt]) -> dict[str, Binding]:
    """The names the imports of `block` (and of blocks nested in it) bind to table paths.

    `import a.b` binds `a`, which both paths share: it is keyed by where it resolves."""
    resolver = ctx.resolver
    found: dict[str, Binding] = {}
    for stmt in _statements(block):
        if isinstance(stmt, ast.Import):
            for alias in stmt.names:
                if resolver.is_ours(alias.name):
                    new = resolver.resolve_module(alias.name).new
                    found[alias.asname or f"import {new}"] = (stmt, alias.name, new)
        elif isinstance(stmt, ast.ImportFrom):
            module = absolute_module(ctx.package, stmt.level, stmt.module)
            if module is None or not resolver.is_ours(module):
                continue
            for alias in stmt.names:
                path = f"{module}.{alias.name}"
                if alias.name != "*":
                    found[alias.asname or alias.name] = (stmt, path, resolver.resolve(path).new)
    return found


def _statements(block: list[ast.stmt]) -> Iterator[ast.stmt]:
    """The statements of `block` and of the blocks nested in it, not inside definitions."""
    for stmt in block:
        yield stmt
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        for field in ("body", "orelse", "finalbody"):
            yield from _statements(getattr(stmt, field, []))
        for handler in getattr(stmt, "handlers", []):
            yield from _statements(handler.body)


def _expression_pair(ctx: SiteContext, buf: EditBuffer, node: ast.IfExp) -> None:
    """`X = old.path if cond else new.path` (either order), as chains or string literals."""
    names = [_dotted(ctx, side) for side in (node.body, node.orelse)]
    if None in names or names[0] == names[1]:
        return
    new = [ctx.resolver.resolve(n).new for n in names]  # type: ignore[arg-type]
    if new[0] != new[1] or buf.is_frozen(*ctx.smap.span(node)):
        return  # not a pair, or one side is a version guard's old branch or removed
    buf.kept.update((id(node.body), id(node.orelse)))
    old, side = (names[0], node.body) if names[0] != new[0] else (names[1], node.orelse)
    message = (
        f"'{old}' and its new path '{new[0]}' are the two sides of a conditional expression: "
        "compatibility code, kept as it is"
    )
    finding = F.Finding("", 0, 0, F.COMPAT_PAIR, "attribute", message, old or "", new[0])
    buf.report(finding, ctx.smap.span(side)[0])


def _dotted(ctx: SiteContext, node: ast.expr) -> str | None:
    """The table path a chain or a string literal spells, or None."""
    if isinstance(node, ast.Attribute):
        name = dotted_name(node)
    elif isinstance(node, ast.Constant) and isinstance(node.value, str):
        name = node.value
    else:
        return None
    return name if name is not None and ctx.resolver.is_ours(name) else None
