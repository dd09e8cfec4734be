"""What the imports of a block bind, and which handlers catch a failed import: the reading
of compatibility code that compatibility pairs (`compat.py`) and `--drop-compat`'s
`try`/`except ImportError` collapse (`drop.py`) share. Not a rewriter."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from migrator.rewrite.import_plan import absolute_module
from migrator.rewrite.locator import dotted_name
from migrator.rewrite.sites.context import SiteContext

_IMPORT_ERRORS = {"ImportError", "ModuleNotFoundError"}

# One binding a block makes: (statement, dotted path it binds, where that path resolves, the
# nodes that spell it - the statement, and for `X = m.X` the chain and the import binding `m`).
Binding = tuple[ast.stmt, str, str, tuple[ast.AST, ...]]


def catches_import_error(handler: ast.ExceptHandler) -> bool:
    """Whether `handler` catches ImportError or ModuleNotFoundError (alone or in a tuple)."""
    caught = handler.type
    names = caught.elts if isinstance(caught, ast.Tuple) else [caught]
    return any(isinstance(n, ast.Name) and n.id in _IMPORT_ERRORS for n in names)


def bindings(ctx: SiteContext, block: list[ast.stmt]) -> dict[str, Binding]:
    """The names the imports of `block` (and of blocks nested in it) bind to table paths,
    and the names bound through them: `import a.b.mod as m` then `X = m.X` binds `X` to
    `a.b.mod.X`, as `from a.b.mod import X` does.

    `import a.b` binds `a`, which both paths share: it is keyed by where it resolves."""
    resolver = ctx.resolver
    found: dict[str, Binding] = {}
    modules: dict[str, tuple[ast.stmt, str]] = {}  # local name -> (import, the path it names)
    for stmt in _statements(block):
        if isinstance(stmt, ast.Import):
            for alias in stmt.names:
                if alias.asname:
                    modules[alias.asname] = (stmt, alias.name)
                if resolver.is_ours(alias.name):
                    new = resolver.resolve_module(alias.name).new
                    found[alias.asname or f"import {new}"] = (stmt, alias.name, new, (stmt,))
        elif isinstance(stmt, ast.ImportFrom):
            module = absolute_module(ctx.package, stmt.level, stmt.module)
            if module is None or not resolver.is_ours(module):
                continue
            for alias in stmt.names:
                path = f"{module}.{alias.name}"
                if alias.name != "*":
                    modules[alias.asname or alias.name] = (stmt, path)
                    new = resolver.resolve(path).new
                    found[alias.asname or alias.name] = (stmt, path, new, (stmt,))
        elif isinstance(stmt, ast.Assign):
            _assigned(ctx, stmt, modules, found)
    return found


def _assigned(
    ctx: SiteContext,
    stmt: ast.Assign,
    modules: dict[str, tuple[ast.stmt, str]],
    found: dict[str, Binding],
) -> None:
    """`X = m.X` (m bound by an import of the block) or `X = a.b.X`: X bound to a table path."""
    if len(stmt.targets) != 1 or not isinstance(stmt.targets[0], ast.Name):
        return
    name = dotted_name(stmt.value)
    if name is None or "." not in name:
        return
    head, _, rest = name.partition(".")
    binder = modules.get(head)
    path = f"{binder[1]}.{rest}" if binder is not None else name
    if not ctx.resolver.is_ours(path):
        return
    nodes: tuple[ast.AST, ...] = (stmt, stmt.value, *(binder[:1] if binder else ()))
    found[stmt.targets[0].id] = (stmt, path, ctx.resolver.resolve(path).new, nodes)


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
