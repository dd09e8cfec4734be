"""One upstream module, summarised from its `ast` as JSON data: what each top-level name is,
and for each class its bases, methods, attributes and the types its fields declare.

Shape (lists and dicts only, for `migrator.core.indexcache`):
`{"names": {name: binding}, "getattr": bool}`, where a binding is `["class", class]`,
`["func", signature]`, `["alias", "dotted.target"]` (an import, or `X = Y` of a name) or
`["value", ""]`; a class is `{"bases": [dotted | "?"], "methods": {name: signature},
"attrs": [name], "types": {attr: dotted}, "fields": [[name, has_default, kw_only]] | None,
"dynamic": bool, "new": bool, "decorated": bool, "calls": {method: [name]}, "abstract":
[method], "abc": bool}`, `calls` naming the methods each method calls on its own object
(`self.m(...)`, `super().m(...)`), `abstract` its `@abstractmethod`s, `abc` whether it
derives from `abc.ABC` or has the `ABCMeta` metaclass (where abstract methods are enforced). Dotted
names are absolute, resolved in the module's own imports; "?" is a base that is not a plain
name.
"""

from __future__ import annotations

import ast
import builtins
from dataclasses import replace
from typing import Any

from migrator.verify_api.nodes import statements
from migrator.verify_api.signature import annotated_class, of_function

_BUILTINS = frozenset(dir(builtins))


def summarise(source: bytes, module: str, is_package: bool) -> dict[str, Any]:
    """The summary of module `module` from its bytes (a module that does not parse is empty)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return {"names": {}, "getattr": False}
    scope = _Scope(module, is_package)
    for node in _top_level(tree.body):
        scope.visit(node)
    return {"names": scope.names, "getattr": "__getattr__" in scope.names}


def _top_level(body: list[ast.stmt]) -> list[ast.stmt]:
    """Statements at module level, including those under `if`/`try` (version branches)."""
    out: list[ast.stmt] = []
    for node in body:
        if isinstance(node, ast.If):
            out += _top_level(node.body) + _top_level(node.orelse)
        elif isinstance(node, ast.Try):
            out += _top_level(node.body)
            for handler in node.handlers:
                out += _top_level(handler.body)
            out += _top_level(node.orelse) + _top_level(node.finalbody)
        else:
            out.append(node)
    return out


class _Scope:
    def __init__(self, module: str, is_package: bool) -> None:
        self.module = module
        self.package = module if is_package else module.rpartition(".")[0]
        self.names: dict[str, list[Any]] = {}

    def visit(self, node: ast.stmt) -> None:
        if isinstance(node, ast.ClassDef):
            self.names[node.name] = ["class", self._class(node)]
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            self.names[node.name] = ["func", self.signature(node)]
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    self.names[alias.asname] = ["alias", alias.name]
                else:
                    head = alias.name.split(".")[0]
                    self.names[head] = ["alias", head]
        elif isinstance(node, ast.ImportFrom):
            base = self._from(node)
            for alias in node.names:
                if alias.name != "*" and base:
                    self.names[alias.asname or alias.name] = ["alias", f"{base}.{alias.name}"]
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            self._assign(node)

    def _from(self, node: ast.ImportFrom) -> str:
        if not node.level:
            return node.module or ""
        parts = self.package.split(".") if self.package else []
        if node.level - 1 > len(parts):
            return ""
        parts = parts[: len(parts) - node.level + 1]
        return ".".join([*parts, node.module] if node.module else parts)

    def _assign(self, node: ast.Assign | ast.AnnAssign) -> None:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        value = node.value
        for target in targets:
            if not isinstance(target, ast.Name):
                continue
            dotted = self.dotted(value) if value is not None else None
            if dotted and isinstance(value, (ast.Name, ast.Attribute)):
                self.names[target.id] = ["alias", dotted]
            else:
                self.names[target.id] = ["value", ""]

    def signature(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> list[Any]:
        """The signature as JSON, its return annotation resolved to the class it names."""
        return replace(of_function(node), returns=self.annotation(node.returns)).to_json()

    def dotted(self, node: ast.expr | None) -> str | None:
        """The absolute dotted name an expression `a.b.C` spells in this module, else None."""
        if isinstance(node, ast.Attribute):
            head = self.dotted(node.value)
            return f"{head}.{node.attr}" if head else None
        if isinstance(node, ast.Name):
            binding = self.names.get(node.id)
            if binding is None:
                where = "builtins" if node.id in _BUILTINS else self.module
                return f"{where}.{node.id}"
            if binding[0] == "alias":
                return str(binding[1])
            return f"{self.module}.{node.id}"
        return None

    def annotation(self, node: ast.expr | None) -> str:
        """The class an annotation names (`X`, `Optional[X]`, `X | None`, `"X"`), else ""."""
        found = annotated_class(node)
        return (self.dotted(found) or "") if found is not None else ""

    def _class(self, node: ast.ClassDef) -> dict[str, Any]:
        # `Base[T]` derives from Base.
        bases = [self.dotted(b.value if isinstance(b, ast.Subscript) else b) or "?"
                 for b in node.bases]
        methods: dict[str, Any] = {}
        attrs: set[str] = set()
        types: dict[str, str] = {}
        calls: dict[str, list[str]] = {}
        for item in node.body:
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                methods[item.name] = self.signature(item)
                _self_attrs(item, attrs, types, self)
                if called := _self_calls(item):
                    calls[item.name] = called
            elif isinstance(item, ast.ClassDef):
                attrs.add(item.name)
            elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                attrs.add(item.target.id)
                if found := self.annotation(item.annotation):
                    types[item.target.id] = found
            elif isinstance(item, ast.Assign):
                attrs.update(t.id for t in item.targets if isinstance(t, ast.Name))
        return {
            "bases": bases, "methods": methods, "attrs": sorted(attrs), "types": types,
            "fields": _fields(node), "dynamic": bool({"__getattr__", "__getattribute__"} & set(
                methods)) or any(k.arg == "metaclass" for k in node.keywords),
            "new": "__new__" in methods,
            # Another decorator may write the constructor (attrs, a registry that wraps the
            # class): a class with one and no `__init__` has no known signature.
            "decorated": any(_decorator_name(d) not in _DATACLASS_MAKERS
                             for d in node.decorator_list),
            "calls": calls,
            "abstract": sorted(i.name for i in node.body
                               if isinstance(i, (ast.FunctionDef, ast.AsyncFunctionDef))
                               and any(_decorator_name(d) in _ABSTRACT for d in i.decorator_list)),
            "abc": "abc.ABC" in bases or any(
                k.arg == "metaclass" and ast.unparse(k.value).endswith("ABCMeta")
                for k in node.keywords),
        }


def _self_calls(func: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    """The methods `func` calls on its own object: `self.m(...)`, `super().m(...)`."""
    owner = "" if of_function(func).kind == "static" or not func.args.args else \
        func.args.args[0].arg
    found: set[str] = set()
    for node in ast.walk(func):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        on = node.func.value
        if (isinstance(on, ast.Name) and owner and on.id == owner) or (
                isinstance(on, ast.Call) and isinstance(on.func, ast.Name)
                and on.func.id == "super"):
            found.add(node.func.attr)
    return sorted(found)


def _self_attrs(func: ast.FunctionDef | ast.AsyncFunctionDef, attrs: set[str],
                types: dict[str, str], scope: _Scope) -> None:
    """`self.X = ...` and `self.X: T = ...` anywhere in a method (and `cls.X` in one)."""
    owner = func.args.args[0].arg if func.args.args else ""
    if not owner:
        return
    for node in statements(func):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = [e for t in node.targets
                       for e in (t.elts if isinstance(t, ast.Tuple) else [t])]
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            targets = [node.target]
        for target in targets:
            if (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name)
                    and target.value.id == owner):
                attrs.add(target.attr)
                if isinstance(node, ast.AnnAssign) and (found := scope.annotation(
                        node.annotation)):
                    types.setdefault(target.attr, found)


_ABSTRACT = frozenset({"abstractmethod", "abstractproperty"})

# Decorators that make a class a dataclass. vLLM's `vllm.config.utils.config` makes a
# pydantic dataclass (a `dataclass_transform`); from 0.16.0 its config classes carry it
# alone, without `@dataclass`, and a class read without fields takes no keyword at all.
_DATACLASS_MAKERS = frozenset({"dataclass", "config"})


def _decorator_name(decorator: ast.expr) -> str:
    """The last component of what a decorator names (`dataclass` for
    `@dataclasses.dataclass(frozen=True)`)."""
    return ast.unparse(decorator.func if isinstance(decorator, ast.Call) else decorator) \
        .rsplit(".", 1)[-1]


def _fields(node: ast.ClassDef) -> list[list[Any]] | None:
    """The init fields of a dataclass (any decorator named as in `_DATACLASS_MAKERS`, called
    or not), else None: (name, has a default, keyword-only)."""
    decorator = next((d for d in node.decorator_list
                      if _decorator_name(d) in _DATACLASS_MAKERS), None)
    if decorator is None:
        return None
    kw_only = isinstance(decorator, ast.Call) and any(
        k.arg == "kw_only" and isinstance(k.value, ast.Constant) and k.value.value is True
        for k in decorator.keywords)
    fields: list[list[Any]] = []
    for item in node.body:
        if not (isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)):
            continue
        annotation = ast.unparse(item.annotation)
        if "ClassVar" in annotation:
            continue
        if annotation.rsplit(".", 1)[-1] == "KW_ONLY":
            kw_only = True
            continue
        default, init = _field_default(item.value)
        if init:
            fields.append([item.target.id, default, kw_only])
    return fields


def _field_default(value: ast.expr | None) -> tuple[bool, bool]:
    """(has a default, is an init parameter) of a field's value."""
    if value is None:
        return False, True
    if isinstance(value, ast.Call) and ast.unparse(value.func).rsplit(".", 1)[-1] == "field":
        words = {k.arg: k.value for k in value.keywords}
        init = words.get("init")
        in_init = not (isinstance(init, ast.Constant) and init.value is False)
        return bool({"default", "default_factory"} & set(words)), in_init
    return True, True
