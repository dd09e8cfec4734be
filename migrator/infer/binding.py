"""Whether a module binds a name at run time, read from its syntax: what `if TYPE_CHECKING:`
imports exists for type checkers only, what a module `__getattr__` forwards is served by a
deprecation shim (a move to rewrite now), and where each imported name comes from.
"""

from __future__ import annotations

import ast


def is_type_checking(test: ast.expr) -> bool:
    """`TYPE_CHECKING` or `typing.TYPE_CHECKING` (any module's attribute of that name)."""
    if isinstance(test, ast.Name):
        return test.id == "TYPE_CHECKING"
    return isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"


def import_sources(
    node: ast.Import | ast.ImportFrom, dotted: str, is_package: bool
) -> dict[str, str]:
    """The names an import statement binds -> the absolute module they come from
    (`from . import x` in `pkg.sub` -> {"x": "pkg"}; `import a.b` -> {"a": "a"})."""
    if isinstance(node, ast.Import):
        out = {}
        for alias in node.names:
            bound = alias.asname or alias.name.split(".")[0]
            out[bound] = alias.name if alias.asname else alias.name.split(".")[0]
        return out
    base = node.module or ""
    if node.level:
        parts = dotted.split(".")
        keep = len(parts) - node.level + (1 if is_package else 0)
        base = ".".join([*parts[: max(keep, 0)], *([base] if base else [])])
    return {(a.asname or a.name): base for a in node.names if a.name != "*"}


def forwarded_names(body: list[ast.stmt]) -> set[str]:
    """Names a module-level `__getattr__` serves by name: the strings it spells, and the
    string keys or items of module-level collections it reads (`_MOVED = {"Old": ...}`)."""
    getattr_fn = next(
        (
            n
            for n in body
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == "__getattr__"
        ),
        None,
    )
    if getattr_fn is None:
        return set()
    collections = _string_collections(body)
    out: set[str] = set()
    for node in ast.walk(getattr_fn):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if node.value.isidentifier():
                out.add(node.value)
        elif isinstance(node, ast.Name) and node.id in collections:
            out |= collections[node.id]
    return out


def _string_collections(body: list[ast.stmt]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for node in body:
        if not isinstance(node, (ast.Assign, ast.AnnAssign)) or node.value is None:
            continue
        value = node.value
        if isinstance(value, ast.Dict):
            items = [k for k in value.keys if k is not None]
        elif isinstance(value, (ast.Set, ast.List, ast.Tuple)):
            items = list(value.elts)
        else:
            continue
        strings = {
            i.value
            for i in items
            if isinstance(i, ast.Constant) and isinstance(i.value, str) and i.value.isidentifier()
        }
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for target in targets:
            if isinstance(target, ast.Name) and strings:
                out[target.id] = strings
    return out
