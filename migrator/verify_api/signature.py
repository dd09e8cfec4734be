"""Signatures read from `ast`, and the two questions `verify-api` asks of them: does a call
bind, and does an override accept every call the method it overrides accepts.

A `Signature` lists every parameter, `self` included; `bound()` drops the first positional
one (a method called on an instance or a class). Defaults are known only as present or
absent, annotations only as source text of the return type.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, replace
from typing import Any

POSONLY = "posonly"
POS = "pos"
KWONLY = "kwonly"
VARARGS = "varargs"
VARKW = "varkw"
_POSITIONAL = (POSONLY, POS)

# What an override can get wrong, as (kind, parameter): NOT_ACCEPTED, the upstream method
# can be called with a parameter the override cannot take; REQUIRED, the override needs a
# parameter the upstream method's callers do not pass.
NOT_ACCEPTED = "not-accepted"
NAMED_OTHERWISE = "named-otherwise"
REQUIRED = "required"

# What a call can get wrong (`bind`).
BAD_KEYWORD = "keyword"
TOO_MANY = "positional"
TWICE = "twice"  # by position and by keyword
MISSING = "missing"


@dataclass(frozen=True)
class Param:
    name: str
    kind: str
    default: bool = False


@dataclass(frozen=True)
class Signature:
    """`params` in order; `kind` is "method", "static", "class" or "property" (how the
    function is bound: its decorators); `returns` the return annotation's source ("")."""

    params: tuple[Param, ...]
    kind: str = "method"
    returns: str = ""

    def bound(self) -> Signature:
        """Without the parameter an instance or class call binds (none for a staticmethod)."""
        if self.kind == "static" or not self.params or self.params[0].kind not in _POSITIONAL:
            return self
        return replace(self, params=self.params[1:])

    def named(self, name: str) -> Param | None:
        return next((p for p in self.params if p.name == name), None)

    @property
    def positional(self) -> list[Param]:
        return [p for p in self.params if p.kind in _POSITIONAL]

    def has(self, kind: str) -> bool:
        return any(p.kind == kind for p in self.params)

    def takes_keyword(self, name: str) -> bool:
        param = self.named(name)
        return (param is not None and param.kind in (POS, KWONLY)) or self.has(VARKW)

    def to_json(self) -> list[Any]:
        return [[[p.name, p.kind, int(p.default)] for p in self.params], self.kind, self.returns]

    @classmethod
    def from_json(cls, data: list[Any]) -> Signature:
        params, kind, returns = data
        return cls(tuple(Param(str(n), str(k), bool(d)) for n, k, d in params), str(kind),
                   str(returns))


def of_function(node: ast.FunctionDef | ast.AsyncFunctionDef) -> Signature:
    """The signature `node` declares; the kind from @staticmethod/@classmethod/@property (and
    `*.setter`, `cached_property`)."""
    args = node.args
    params: list[Param] = []
    positional = [*args.posonlyargs, *args.args]
    first_default = len(positional) - len(args.defaults)
    for i, arg in enumerate(positional):
        kind = POSONLY if i < len(args.posonlyargs) else POS
        params.append(Param(arg.arg, kind, i >= first_default))
    if args.vararg:
        params.append(Param(args.vararg.arg, VARARGS, True))
    for arg, default in zip(args.kwonlyargs, args.kw_defaults, strict=True):
        params.append(Param(arg.arg, KWONLY, default is not None))
    if args.kwarg:
        params.append(Param(args.kwarg.arg, VARKW, True))
    returns = ast.unparse(node.returns) if node.returns is not None else ""
    return Signature(tuple(params), _binding(node.decorator_list), returns)


def _binding(decorators: list[ast.expr]) -> str:
    for decorator in decorators:
        name = ast.unparse(decorator).rsplit(".", 1)[-1]
        if name == "staticmethod":
            return "static"
        if name == "classmethod":
            return "class"
        if name in ("property", "cached_property", "setter", "getter", "deleter"):
            return "property"
    return "method"


def bind(sig: Signature, positional: int, keywords: tuple[str, ...]) -> tuple[str, str] | None:
    """Why a call with `positional` arguments and `keywords` does not bind to `sig` (already
    bound: no `self`), as (BAD_KEYWORD | TOO_MANY | MISSING, detail), else None."""
    slots = sig.positional
    if positional > len(slots) and not sig.has(VARARGS):
        return TOO_MANY, f"takes {len(slots)} positional arguments, {positional} given"
    filled = {p.name for p in slots[:positional]}
    for keyword in keywords:
        param = sig.named(keyword)
        if param is None or param.kind not in (POS, KWONLY):
            if not sig.has(VARKW):
                return BAD_KEYWORD, keyword
            continue
        if keyword in filled:
            return TWICE, keyword
        filled.add(keyword)
    missing = [p.name for p in sig.params
               if p.kind in (POSONLY, POS, KWONLY) and not p.default and p.name not in filled]
    return (MISSING, ", ".join(missing)) if missing else None


def override_problems(override: Signature, upstream: Signature) -> set[tuple[str, str]]:
    """What in `override` (bound) breaks calls `upstream` (bound) accepts, as (kind, upstream
    parameter) pairs: NOT_ACCEPTED, a positional slot the override lacks or a keyword-only
    parameter it cannot take by name; NAMED_OTHERWISE, a slot it has under another name
    (callers passing it by keyword fail); REQUIRED, a parameter the override requires that
    upstream callers do not pass."""
    problems: set[tuple[str, str]] = set()
    slots = override.positional
    for i, param in enumerate(upstream.positional):
        if i >= len(slots) and not override.has(VARARGS):
            problems.add((NOT_ACCEPTED, param.name))
        elif param.kind == POS and not override.takes_keyword(param.name):
            problems.add((NAMED_OTHERWISE, param.name))
    for param in upstream.params:
        if param.kind == KWONLY and not override.takes_keyword(param.name):
            problems.add((NOT_ACCEPTED, param.name))
    upstream_slots = upstream.positional
    for i, param in enumerate(override.params):
        if param.default or param.kind in (VARARGS, VARKW):
            continue
        if param.kind in _POSITIONAL and (i < len(upstream_slots) or upstream.has(VARARGS)):
            continue
        if param.kind == KWONLY and (upstream.named(param.name) or upstream.has(VARKW)):
            continue
        problems.add((REQUIRED, param.name))
    return problems


def describe(sig: Signature) -> str:
    """`(a, b=..., *, c)`: the bound parameters, for messages."""
    out: list[str] = []
    star = False
    for p in sig.params:
        if p.kind == KWONLY and not star:
            out.append("*")
            star = True
        prefix = {VARARGS: "*", VARKW: "**"}.get(p.kind, "")
        star = star or p.kind == VARARGS
        out.append(f"{prefix}{p.name}{'=...' if p.default and not prefix else ''}")
    return f"({', '.join(out)})"


_NONE = {"None", "NoneType"}
_WRAPPERS = {"Optional", "Union", "Annotated", "Final", "ClassVar", "InitVar"}


def annotated_class(node: ast.expr | None) -> ast.Name | ast.Attribute | None:
    """The class an annotation names: `X`, `"X"`, `X | None`, `Optional[X]`, `Union[X, None]`,
    `Annotated[X, ...]`, `Final[X]`, `ClassVar[X]`; None for anything else (two classes, a
    generic container, a string that does not parse)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        try:
            node = ast.parse(node.value, mode="eval").body
        except SyntaxError:
            return None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        sides = [s for s in (node.left, node.right) if ast.unparse(s) not in _NONE]
        return annotated_class(sides[0]) if len(sides) == 1 else None
    if isinstance(node, ast.Subscript):
        head = ast.unparse(node.value).rsplit(".", 1)[-1]
        if head not in _WRAPPERS:
            return None
        items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if head == "Annotated":
            items = items[:1]
        items = [i for i in items if ast.unparse(i) not in _NONE]
        return annotated_class(items[0]) if len(items) == 1 else None
    return node if isinstance(node, (ast.Name, ast.Attribute)) else None
