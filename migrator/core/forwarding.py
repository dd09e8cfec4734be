"""What a module-level `__getattr__` (PEP 562) serves, read from its source, never run.

Packages keep moved names importable from their old home for a release or two through a
module `__getattr__`. The shapes read here are the ones vLLM uses:

    _DEPRECATED_MAPPINGS = {"get_open_port": "network_utils"}     # vllm/utils (0.11.1+)
    def __getattr__(name):
        if name in _DEPRECATED_MAPPINGS:
            warnings.warn(..., DeprecationWarning)
            module = __import__(f"vllm.utils.{_DEPRECATED_MAPPINGS[name]}", ...)
            return getattr(module, name)
        raise AttributeError(...)

    def __getattr__(name):                                           # vllm/v1/engine/processor
        if name == "Processor":
            from .input_processor import InputProcessor
            warnings.warn(...)
            return InputProcessor
        raise AttributeError(...)

A branch that calls a `warn`/`deprecat...` function serves a *deprecated* name (it will go);
one that does not serves a lazy import (MODULE_ATTRS in vllm/__init__.py). When every branch
is one of these and the function then raises AttributeError, the `__getattr__` is *closed*:
any other name is missing, as surely as if there were no `__getattr__` at all (provided it
serves at least one name: an empty placeholder stays "unknown").
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass, field

from migrator.core.modname import RelativeImportError, resolve_relative


@dataclass(frozen=True)
class Served:
    """A name `__getattr__` serves: `target` is its dotted new home ("" when the source does not
    say), `deprecated` whether serving it warns."""

    name: str
    target: str
    deprecated: bool


@dataclass
class Getattr:
    """The names one module's `__getattr__` serves, and whether it serves nothing else."""

    served: dict[str, Served] = field(default_factory=dict)
    closed: bool = False


def read_getattr(source: bytes, module: str, is_package: bool,
                 exists: Callable[[str], bool]) -> Getattr | None:
    """What the module-level `__getattr__` in `source` serves; None when there is none or the
    file does not parse. `exists(dotted)` says whether a module exists (to read mapping values
    such as `"network_utils"` as submodules of the package)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    functions: list[ast.FunctionDef] = []
    tables: dict[str, dict[str, str]] = {}
    _top_level(tree.body, functions, tables)
    if not functions:
        return None
    function = functions[-1]  # the last definition wins at run time
    if not function.args.args:
        return Getattr()
    package = module if is_package else module.rpartition(".")[0]
    reader = _Reader(function.args.args[0].arg, module, package, tables, exists, tree.body)
    found = reader.read(function.body)
    # One that serves nothing is a placeholder (a shim still being written): not a forwarder.
    found.closed = found.closed and bool(found.served)
    return found


def _top_level(body: list[ast.stmt], functions: list[ast.FunctionDef],
               tables: dict[str, dict[str, str]]) -> None:
    """Module-level `def __getattr__` and string-to-string dict literals, looking into
    if/else and try blocks (`if TYPE_CHECKING: ... else: def __getattr__`)."""
    for stmt in body:
        if isinstance(stmt, ast.FunctionDef) and stmt.name == "__getattr__":
            functions.append(stmt)
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign)) and isinstance(stmt.value, ast.Dict):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            table = _str_dict(stmt.value)
            for target in targets:
                if isinstance(target, ast.Name) and table is not None:
                    tables[target.id] = table
        elif isinstance(stmt, ast.If):
            _top_level(stmt.body, functions, tables)
            _top_level(stmt.orelse, functions, tables)
        elif isinstance(stmt, ast.Try):
            for block in (stmt.body, stmt.orelse, stmt.finalbody):
                _top_level(block, functions, tables)


def _str_dict(node: ast.Dict) -> dict[str, str] | None:
    table = {}
    for key, value in zip(node.keys, node.values, strict=True):
        if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
            return None
        table[key.value] = value.value if isinstance(value, ast.Constant) \
            and isinstance(value.value, str) else ""
    return table


class _Reader:
    def __init__(self, param: str, module: str, package: str, tables: dict[str, dict[str, str]],
                 exists: Callable[[str], bool], module_body: list[ast.stmt]) -> None:
        self.param = param
        self.module = module
        self.package = package
        self.tables = tables
        self.exists = exists
        self.module_body = module_body

    def read(self, body: list[ast.stmt]) -> Getattr:
        found = Getattr()
        for stmt in body:
            if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
                continue  # the docstring
            if isinstance(stmt, (ast.Import, ast.ImportFrom)):
                continue
            if isinstance(stmt, ast.If):
                if not self.branch(stmt, found):
                    return found  # a test not understood: other names may be served
                continue
            found.closed = _raises_attribute_error(stmt)
            return found
        return found

    def branch(self, node: ast.If, found: Getattr) -> bool:
        """Record what an `if name ...:` chain serves; False when a test is not understood."""
        names = self.tested_names(node.test)
        if names is None:
            return False
        deprecated = _warns(node.body)
        for name, hint in names.items():
            target = self.target_of(name, hint, node.body)
            found.served[name] = Served(name, target, deprecated)
        if len(node.orelse) == 1 and isinstance(node.orelse[0], ast.If):
            return self.branch(node.orelse[0], found)
        if node.orelse:
            found.closed = len(node.orelse) == 1 and _raises_attribute_error(node.orelse[0])
            return False
        return True

    def tested_names(self, test: ast.expr) -> dict[str, str] | None:
        """{name: mapping value or ""} for `name == "X"`, `name in ("X", ...)`, `name in TABLE`."""
        if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
            return None
        left, right = test.left, test.comparators[0]
        if isinstance(test.ops[0], ast.Eq):
            if _is_name(right, self.param):
                left, right = right, left
            if _is_name(left, self.param) and isinstance(right, ast.Constant) \
                    and isinstance(right.value, str):
                return {right.value: ""}
            return None
        if not (isinstance(test.ops[0], ast.In) and _is_name(left, self.param)):
            return None
        if isinstance(right, ast.Name) and right.id in self.tables:
            return dict(self.tables[right.id])
        if isinstance(right, (ast.Tuple, ast.List, ast.Set)):
            names = [e.value for e in right.elts
                     if isinstance(e, ast.Constant) and isinstance(e.value, str)]
            if len(names) == len(right.elts):
                return dict.fromkeys(names, "")
        return None

    def target_of(self, name: str, hint: str, body: list[ast.stmt]) -> str:
        """Where `name` really lives: from a mapping value (`"network_utils"`, `".llm:LLM"`,
        `"pkg.mod"`), else from the import that binds what the branch returns."""
        if hint:
            module, colon, attr = hint.partition(":")
            attr = attr if colon else name
            if module.startswith("."):
                module = self.package + module if len(module) > 1 else self.package
            for candidate in (f"{self.package}.{module}", module):
                if self.exists(candidate):
                    return f"{candidate}.{attr}"
            return ""
        returned = _returned_name(body)
        if returned is None:
            return ""
        for stmts in (body, self.module_body):
            origin = self.imported_as(returned, stmts)
            if origin:
                return origin
        return ""

    def imported_as(self, bound: str, body: list[ast.stmt]) -> str:
        for stmt in body:
            if not isinstance(stmt, ast.ImportFrom):
                continue
            for alias in stmt.names:
                if (alias.asname or alias.name) == bound:
                    try:
                        source = resolve_relative(self.package, stmt.level, stmt.module)
                    except RelativeImportError:
                        return ""  # Python rejects the import: it forwards to nothing
                    return f"{source}.{alias.name}"
        return ""


def _is_name(node: ast.expr, name: str) -> bool:
    return isinstance(node, ast.Name) and node.id == name


def _warns(body: list[ast.stmt]) -> bool:
    for node in ast.walk(ast.Module(body=body, type_ignores=[])):
        if isinstance(node, ast.Call):
            func = node.func
            called = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
            if "warn" in called.lower() or "deprecat" in called.lower():
                return True
    return False


def _returned_name(body: list[ast.stmt]) -> str | None:
    for stmt in body:
        if isinstance(stmt, ast.Return) and isinstance(stmt.value, ast.Name):
            return stmt.value.id
    return None


def _raises_attribute_error(stmt: ast.stmt) -> bool:
    if not isinstance(stmt, ast.Raise) or stmt.exc is None:
        return False
    exc = stmt.exc.func if isinstance(stmt.exc, ast.Call) else stmt.exc
    return isinstance(exc, ast.Name) and exc.id == "AttributeError"
