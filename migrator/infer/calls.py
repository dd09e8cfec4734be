"""How a definition is called: its parameters, and whether a renamed successor still accepts
every call the old one did (a rename keeps the user's calls; a replacement breaks them).

A function's parameters are its own; a class's are its `__init__`'s (without `self`), or, for
a `@dataclass` without one, its fields after those of the dataclass bases defined in the
same module. Unknown (a class that inherits its constructor from elsewhere): None, which
never blocks a rename.
"""

from __future__ import annotations

import ast
import difflib
from collections.abc import Mapping
from typing import Protocol

# (name, kind, has a default); kind: "pos" (positional or keyword), "kw" (keyword-only),
# "args" (*args), "kwargs" (**kwargs).
Param = tuple[str, str, bool]
Params = tuple[Param, ...]

NAME_SIMILARITY = 0.85  # difflib ratio: a fixed typo or one changed word (destory/destroy)


class HasParams(Protocol):
    params: Params | None
    bases: tuple[str, ...]


def params_of(node: ast.AST | None) -> tuple[Params | None, tuple[str, ...]]:
    """The parameters of a def or class statement, and (for a dataclass without `__init__`)
    the names of its bases, whose fields come first."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return _arguments(node.args, skip_self=False), ()
    if not isinstance(node, ast.ClassDef):
        return None, ()
    for item in node.body:
        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name == "__init__":
            return _arguments(item.args, skip_self=True), ()
    if not any(_is_dataclass(d) for d in node.decorator_list):
        return None, ()
    fields = tuple(
        (item.target.id, "pos", item.value is not None)
        for item in node.body
        if isinstance(item, ast.AnnAssign)
        and isinstance(item.target, ast.Name)
        and "ClassVar" not in ast.unparse(item.annotation)
    )
    return fields, tuple(b.id for b in node.bases if isinstance(b, ast.Name))


def _is_dataclass(decorator: ast.expr) -> bool:
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
    return name == "dataclass"


def _arguments(args: ast.arguments, skip_self: bool) -> Params:
    positional = [*args.posonlyargs, *args.args][1 if skip_self else 0 :]
    first_default = len(positional) - len(args.defaults)
    out: list[Param] = [(a.arg, "pos", i >= first_default) for i, a in enumerate(positional)]
    if args.vararg is not None:
        out.append((args.vararg.arg, "args", True))
    out += [
        (a.arg, "kw", d is not None) for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True)
    ]
    if args.kwarg is not None:
        out.append((args.kwarg.arg, "kwargs", True))
    return tuple(out)


def resolved(definition: HasParams, defs: Mapping[str, HasParams], depth: int = 0) -> Params | None:
    """`definition`'s parameters with its dataclass bases' fields first (bases defined in
    `defs`, the same module); None when a base is defined elsewhere."""
    if definition.params is None or not definition.bases:
        return definition.params
    inherited: list[Param] = []
    for base in definition.bases:
        parent = defs.get(base)
        if parent is None or depth > 8:
            return None
        fields = resolved(parent, defs, depth + 1)
        if fields is None:
            return None
        inherited += fields
    return (*inherited, *definition.params)


def accepts(old: Params | None, new: Params | None) -> bool:
    """Whether every call of the old signature is a valid call of the new one (by arity,
    and keyword-only names); True when either is unknown."""
    if old is None or new is None:
        return True
    old_pos = [p for p in old if p[1] == "pos"]
    new_pos = [p for p in new if p[1] == "pos"]
    new_varargs = any(p[1] == "args" for p in new)
    new_varkw = any(p[1] == "kwargs" for p in new)
    if sum(1 for p in new_pos if not p[2]) > sum(1 for p in old_pos if not p[2]):
        return False
    if not new_varargs and len(new_pos) < len(old_pos):
        return False
    old_names = {p[0] for p in old}
    new_kw = {p[0] for p in new if p[1] in ("pos", "kw")}
    if any(p[1] == "kw" and not p[2] and p[0] not in old_names for p in new):
        return False
    return new_varkw or all(p[0] in new_kw for p in old if p[1] == "kw")


def close_names(old: str, new: str) -> float:
    """How alike two names are (difflib ratio, 0 to 1)."""
    return difflib.SequenceMatcher(None, old, new).ratio()


def registrations(tree: ast.Module, package: str) -> list[tuple[str, str]]:
    """(name, module path) for each call that registers a module of `package` under a name
    (`register_connector("Name", "pkg.mod", "Class")`: the first other string argument)."""
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        texts = [a.value for a in node.args if isinstance(a, ast.Constant)]
        strings = [t for t in texts if isinstance(t, str)]
        paths = [t for t in strings if t.startswith(package + ".") and _dotted(t)]
        names = [t for t in strings if t not in paths]
        if len(paths) == 1 and names:
            out.append((names[0], paths[0]))
    return out


def _dotted(text: str) -> bool:
    return all(part.isidentifier() for part in text.split("."))
