"""What assignment targets and attribute chains name, read from their `ast`."""

from __future__ import annotations

import ast


def bound(target: ast.expr) -> list[str]:
    """The names an assignment target binds: `a`, `a, (b, *c)`; not `a` of `a.x` or `a[i]`."""
    if isinstance(target, (ast.Tuple, ast.List)):
        return [n for e in target.elts for n in bound(e)]
    if isinstance(target, ast.Starred):
        return bound(target.value)
    return [target.id] if isinstance(target, ast.Name) else []


def path(node: ast.expr) -> tuple[str, ...]:
    """The attributes `a.b.c` reads after its root name: (b, c)."""
    attrs: list[str] = []
    while isinstance(node, ast.Attribute):
        attrs.insert(0, node.attr)
        node = node.value
    return tuple(attrs)
