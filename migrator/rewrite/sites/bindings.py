"""What the imports of a block bind, and which handlers catch a failed import: the reading
of compatibility code that compatibility pairs (`compat.py`) and `--drop-compat`'s
`try`/`except ImportError` collapse (`drop.py`) share. Not a rewriter."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from migrator.rewrite.import_plan import absolute_module
from migrator.rewrite.sites.context import SiteContext

_IMPORT_ERRORS = {"ImportError", "ModuleNotFoundError"}

# One binding an import makes: (statement, dotted path it imports, where that path resolves).
Binding = tuple[ast.stmt, str, str]


def catches_import_error(handler: ast.ExceptHandler) -> bool:
    """Whether `handler` catches ImportError or ModuleNotFoundError (alone or in a tuple)."""
    caught = handler.type
    names = caught.elts if isinstance(caught, ast.Tuple) else [caught]
    return any(isinstance(n, ast.Name) and n.id in _IMPORT_ERRORS for n in names)


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
