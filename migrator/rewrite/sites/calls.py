"""Calls that pass a parent and a child separately: `mock.patch.object(pkg.parent, "child")`,
`getattr(importlib.import_module("pkg.parent"), "child")`, `getattr(m, "child")` where `m`
names a module (`import pkg.parent as m`, `m = import_module("pkg.parent")`),
`import_module(".child", "pkg.parent")`.

Neither argument names a moved name alone, so nothing is rewritten: a call whose parent
stays but whose child moved below it is reported for a human.
"""

from __future__ import annotations

import ast

from migrator.core import findings as F
from migrator.rewrite.locator import dotted_name
from migrator.rewrite.sites.context import Protected, SiteContext, SiteEdits, SiteOutput


def rewrite_calls(ctx: SiteContext, protected: Protected) -> SiteEdits:
    out = SiteOutput(ctx)
    resolver = ctx.resolver
    bound: dict[str, str] | None = None  # names bound to `import_module("...")`, when needed
    for node in ctx.sites.calls:
        args = [*node.args, *(k.value for k in node.keywords)]
        strings = [
            a.value for a in args if isinstance(a, ast.Constant) and isinstance(a.value, str)
        ]
        if not strings:
            continue
        if bound is None and any(isinstance(a, ast.Name) for a in args):
            # A whole-tree walk, paid only by modules that call import_module at all.
            bound = _imported_modules(ctx.tree) if "import_module" in ctx.smap.text else {}
        parents = strings + [p for a in args if (p := _module_of(a, ctx.aliases, bound or {}))]
        for parent in parents:
            if not resolver.is_ours(parent) or resolver.resolve(parent).changed:
                continue
            moved = resolver.moved_children(parent)
            child = next(
                (s.lstrip(".") for s in strings if s.lstrip(".").split(".")[0] in moved), None
            )
            start, end = ctx.smap.span(node)
            if child is not None and not protected.skip(start, end):
                full = f"{parent}.{child}"
                message = (
                    f"'{parent}' and '{child}' are passed separately; together they name "
                    f"'{full}', which moved to '{resolver.resolve(full).new}'"
                )
                out.report(F.needs_human("string", message, old=full), start)
                break
    return out.done()


def _module_of(arg: ast.expr, aliases: dict[str, str], bound: dict[str, str]) -> str | None:
    """The dotted module an argument denotes: a chain, a local name bound to one, or an
    `import_module("...")` call; None for anything else."""
    if isinstance(arg, ast.Attribute):
        return dotted_name(arg)
    if isinstance(arg, ast.Name):
        return aliases.get(arg.id) or bound.get(arg.id)
    if isinstance(arg, ast.Call):
        return _imported_module(arg)
    return None


def _imported_module(call: ast.Call) -> str | None:
    """The module `import_module("pkg.mod")` / `importlib.import_module("pkg.mod")` names."""
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    if name != "import_module" or not call.args:
        return None
    first = call.args[0]
    if isinstance(first, ast.Constant) and isinstance(first.value, str):
        return first.value
    return None


def _imported_modules(tree: ast.Module) -> dict[str, str]:
    """Names assigned `import_module("...")` anywhere in the module (scopes are not told
    apart: a hit is a reference for a human to look at, never an edit)."""
    found = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            module = _imported_module(node.value)
            if module is not None:
                found.update({t.id: module for t in node.targets if isinstance(t, ast.Name)})
    return found
