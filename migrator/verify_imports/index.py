"""Index one module from its AST, never executing it: the names it binds and the imports it makes.

Module-level bindings come from def, class, assignment (plain, augmented, annotated with a
value), for/with targets, imports and `global` statements inside functions. Each binding
carries the *position* of the statement that first binds it at run time: statements are
numbered in execution order, so the cycle check can ask "is X bound yet when this module is
still at statement N?". Only statement bodies are walked, never expressions: that is what
keeps indexing close to the cost of `ast.parse` itself.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

# A binding made only when a function runs (`global X` inside a def): present after import,
# never while the module is still executing.
LATE = 1 << 30

_NO_IMPORT_INSIDE = frozenset({
    ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr, ast.Return, ast.Pass, ast.Raise,
    ast.Assert, ast.Delete, ast.Break, ast.Continue, ast.Nonlocal,
})

_GLOBALS = re.compile(rb"\bglobals\(\)")
_GLOBALS_READ_AFTER = re.compile(rb"\.(?:keys|values|items|get|copy)\(")
_GLOBALS_READ_BEFORE = re.compile(rb"\bin\s+\Z")

_IMPORT_ERRORS = frozenset({"ImportError", "ModuleNotFoundError", "Exception", "BaseException"})


@dataclass(frozen=True)
class ImportedName:
    """One alias of an import: a dotted module (`import a.b`) or a name (`from m import x`)."""

    name: str
    asname: str | None
    line: int
    col: int  # 1-based


@dataclass(frozen=True)
class ImportStmt:
    """One `import` or `from ... import` statement, wherever it appears in the file.

    `module` is the text after `from` without its leading dots (None for `from . import x` and
    for plain `import`), `level` the number of dots. `pos` is the statement's execution position
    when it runs at import time, None when it does not (function bodies, `if TYPE_CHECKING:`,
    `if __name__ == "__main__":`). `guarded` means a `try` around it catches ImportError.
    """

    is_from: bool
    module: str | None
    level: int
    names: tuple[ImportedName, ...]
    line: int
    col: int
    pos: int | None
    typing_only: bool
    guarded: bool

    @property
    def is_star(self) -> bool:
        return self.is_from and self.names[0].name == "*"


@dataclass
class ModuleInfo:
    """What one source file provides and requires.

    `bindings` maps a module-level name to (position, line) of its first run-time binding,
    `rebinds` to the later ones (the cycle check needs them when the first one fails);
    `typing_names` exist only for type checkers (bound under `if TYPE_CHECKING:`, or declared
    by a bare annotation `X: T`); `has_getattr`: a module-level `__getattr__` is bound at run
    time (PEP 562), serving names it does not bind; `defined` are the names bound by
    def/class/assignment (not by import), the candidates for "did you mean" suggestions.
    `all_names` is the literal `__all__` (None when absent or not a literal).
    """

    bindings: dict[str, tuple[int, int]] = field(default_factory=dict)
    rebinds: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    typing_names: set[str] = field(default_factory=set)
    defined: set[str] = field(default_factory=set)
    imports: list[ImportStmt] = field(default_factory=list)
    all_names: list[str] | None = None
    has_getattr: bool = False
    dynamic_globals: bool = False
    syntax_error: tuple[int, int, str] | None = None


@dataclass(frozen=True)
class _Ctx:
    module_scope: bool  # bindings land in the module namespace
    import_time: bool  # statements run while the module is being imported
    typing_only: bool
    guarded: bool


_TOP = _Ctx(module_scope=True, import_time=True, typing_only=False, guarded=False)


def index_source(source: bytes, filename: str = "<unknown>") -> ModuleInfo:
    """Parse `source` (bytes, so PEP 263 cookies and BOMs are honoured) and index it.

    A file that does not parse gives a `ModuleInfo` with `syntax_error` set to (line, col,
    message) and nothing else; it never raises SyntaxError.
    """
    info = ModuleInfo()
    try:
        tree = ast.parse(source, filename=filename)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        # ValueError: null bytes; RecursionError/MemoryError: nesting too deep for the parser.
        line = getattr(exc, "lineno", None) or 1
        col = getattr(exc, "offset", None) or 1
        message = getattr(exc, "msg", None) or str(exc) or type(exc).__name__
        info.syntax_error = (line, col, message)
        return info
    # A cheap textual test first: only modules that mention these can add names at run time.
    info.dynamic_globals = b"sys.modules[__name__]" in source or _writes_globals(source)
    _Indexer(info).block(tree.body, _TOP)
    info.typing_names -= info.bindings.keys()
    return info


class _Indexer:
    def __init__(self, info: ModuleInfo) -> None:
        self.info = info
        self.pos = 0

    # -- bindings ----------------------------------------------------------------------------

    def bind(self, name: str, ctx: _Ctx, line: int, defined: bool, pos: int | None = None) -> None:
        if not ctx.module_scope:
            return
        if ctx.typing_only:
            self.info.typing_names.add(name)
            return
        if name == "__getattr__":  # def, assignment or import alike (`lazy.attach` returns one)
            self.info.has_getattr = True
        add_binding(self.info.bindings, self.info.rebinds, name,
                    (self.pos if pos is None else pos, line))
        if defined:
            self.info.defined.add(name)

    def bind_target(self, target: ast.expr, ctx: _Ctx) -> None:
        if isinstance(target, ast.Name):
            self.bind(target.id, ctx, target.lineno, defined=True)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                self.bind_target(element, ctx)
        elif isinstance(target, ast.Starred):
            self.bind_target(target.value, ctx)

    # -- statements --------------------------------------------------------------------------

    def block(self, body: list[ast.stmt], ctx: _Ctx) -> None:
        if ctx.module_scope:
            for stmt in body:
                self.stmt(stmt, ctx)
            return
        # Inside a def or class only imports and `global` matter: skip simple statements
        # without the dispatch below (most of a file's statements live there).
        for stmt in body:
            if type(stmt) in _NO_IMPORT_INSIDE:
                self.pos += 1
            else:
                self.stmt(stmt, ctx)

    def stmt(self, node: ast.stmt, ctx: _Ctx) -> None:
        self.pos += 1
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            self.import_stmt(node, ctx)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            inner = _Ctx(module_scope=False, import_time=False, typing_only=ctx.typing_only,
                         guarded=False)
            self.block(node.body, inner)
            self.pos += 1  # the name is bound once the def statement completes
            self.bind(node.name, ctx, node.lineno, defined=True)
        elif isinstance(node, ast.ClassDef):
            # A class body runs at import time, but its names are class attributes.
            self.block(node.body, _Ctx(False, ctx.import_time, ctx.typing_only, ctx.guarded))
            self.pos += 1
            self.bind(node.name, ctx, node.lineno, defined=True)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                self.bind_target(target, ctx)
            if ctx.module_scope and _is_all(node.targets):
                self.info.all_names = _literal_names(node.value)
        elif isinstance(node, ast.AugAssign):
            self.bind_target(node.target, ctx)
            if ctx.module_scope and _is_all([node.target]) and self.info.all_names is not None:
                extra = _literal_names(node.value)
                self.info.all_names = None if extra is None else self.info.all_names + extra
        elif isinstance(node, ast.AnnAssign):
            if node.value is not None:
                self.bind_target(node.target, ctx)
                if ctx.module_scope and _is_all([node.target]):
                    self.info.all_names = _literal_names(node.value)
            elif ctx.module_scope and isinstance(node.target, ast.Name):
                # `X: int` alone binds nothing at run time but declares X to type checkers.
                self.info.typing_names.add(node.target.id)
        elif isinstance(node, (ast.For, ast.AsyncFor)):
            self.bind_target(node.target, ctx)
            self.block(node.body, ctx)
            self.block(node.orelse, ctx)
        elif isinstance(node, ast.While):
            self.block(node.body, ctx)
            self.block(node.orelse, ctx)
        elif isinstance(node, ast.If):
            self.if_stmt(node, ctx)
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                if item.optional_vars is not None:
                    self.bind_target(item.optional_vars, ctx)
            self.block(node.body, ctx)
        elif isinstance(node, ast.Try) or type(node).__name__ == "TryStar":
            self.try_stmt(node, ctx)
        elif isinstance(node, ast.Match):
            for case in node.cases:
                self.block(case.body, ctx)
        elif isinstance(node, ast.Expr) and ctx.module_scope:
            self.all_mutation(node.value)
        elif isinstance(node, ast.Global) and not ctx.import_time:
            # `global X` in a def binds X in the module, but only once the function runs.
            for name in node.names:
                add_binding(self.info.bindings, self.info.rebinds, name, (LATE, node.lineno))

    def if_stmt(self, node: ast.If, ctx: _Ctx) -> None:
        if _is_type_checking(node.test):
            typing_ctx = _Ctx(ctx.module_scope, False, True, ctx.guarded)
            self.block(node.body, typing_ctx)
            self.block(node.orelse, ctx)
        elif _is_main_guard(node.test):
            self.block(node.body, _Ctx(ctx.module_scope, False, ctx.typing_only, ctx.guarded))
            self.block(node.orelse, ctx)
        else:
            self.block(node.body, ctx)
            self.block(node.orelse, ctx)

    def try_stmt(self, node: ast.stmt, ctx: _Ctx) -> None:
        handlers: list[ast.ExceptHandler] = getattr(node, "handlers", [])
        guarded = ctx.guarded or any(_catches_import_error(h) for h in handlers)
        self.block(getattr(node, "body", []), _Ctx(ctx.module_scope, ctx.import_time,
                                                   ctx.typing_only, guarded))
        for handler in handlers:
            self.block(handler.body, ctx)
        self.block(getattr(node, "orelse", []), ctx)
        self.block(getattr(node, "finalbody", []), ctx)

    def import_stmt(self, node: ast.Import | ast.ImportFrom, ctx: _Ctx) -> None:
        names = tuple(
            ImportedName(a.name, a.asname, getattr(a, "lineno", node.lineno),
                         getattr(a, "col_offset", node.col_offset) + 1)
            for a in node.names
        )
        is_from = isinstance(node, ast.ImportFrom)
        stmt = ImportStmt(
            is_from=is_from,
            module=node.module if isinstance(node, ast.ImportFrom) else None,
            level=node.level if isinstance(node, ast.ImportFrom) else 0,
            names=names,
            line=node.lineno,
            col=node.col_offset + 1,
            pos=self.pos if ctx.import_time and not ctx.typing_only else None,
            typing_only=ctx.typing_only,
            guarded=ctx.guarded,
        )
        self.info.imports.append(stmt)
        if stmt.is_star:
            return  # the checker expands star imports once every module is indexed
        for alias in names:
            if alias.asname:
                bound = alias.asname
            elif is_from:
                bound = alias.name
            else:
                bound = alias.name.partition(".")[0]
            self.bind(bound, ctx, alias.line, defined=False)

    def all_mutation(self, value: ast.expr) -> None:
        """`__all__.extend([...])` / `__all__.append("x")` at module level."""
        if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute)):
            return
        owner = value.func.value
        if not (isinstance(owner, ast.Name) and owner.id == "__all__"):
            return
        if self.info.all_names is None or len(value.args) != 1:
            return
        if value.func.attr == "extend":
            extra = _literal_names(value.args[0])
        elif value.func.attr == "append":
            arg = value.args[0]
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                extra = [arg.value]
            else:
                extra = None
        else:
            return
        self.info.all_names = None if extra is None else self.info.all_names + extra


def add_binding(first: dict[str, tuple[int, int]], later: dict[str, list[tuple[int, int]]],
                name: str, binding: tuple[int, int]) -> None:
    """Record a (position, line) binding: the earliest in `first`, the others in `later`.
    Walk order is not execution order for `global` in a def (LATE), hence the comparison."""
    current = first.get(name)
    if current is None:
        first[name] = binding
    elif binding[0] < current[0]:
        first[name] = binding
        later.setdefault(name, []).append(current)
    else:
        later.setdefault(name, []).append(binding)


def _writes_globals(source: bytes) -> bool:
    """Whether a `globals()` in `source` may add names: any use but the plain reads vLLM's
    `__dir__` and `__getattr__` make (`globals().keys()`, `name in globals()`, ...)."""
    return any(not (_GLOBALS_READ_AFTER.match(source, m.end())
                    or _GLOBALS_READ_BEFORE.search(source, max(0, m.start() - 16), m.start()))
               for m in _GLOBALS.finditer(source))


def _is_all(targets: list[ast.expr]) -> bool:
    return any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets)


def _literal_names(value: ast.expr) -> list[str] | None:
    if isinstance(value, (ast.List, ast.Tuple)):
        names = []
        for element in value.elts:
            if not (isinstance(element, ast.Constant) and isinstance(element.value, str)):
                return None
            names.append(element.value)
        return names
    return None


def _is_type_checking(test: ast.expr) -> bool:
    if isinstance(test, ast.Name):
        return test.id == "TYPE_CHECKING"
    return isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"


def _is_main_guard(test: ast.expr) -> bool:
    return (
        isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name)
        and test.left.id == "__name__"
        and len(test.comparators) == 1
        and isinstance(test.comparators[0], ast.Constant)
        and test.comparators[0].value == "__main__"
    )


def _catches_import_error(handler: ast.ExceptHandler) -> bool:
    if handler.type is None:
        return True
    kinds = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    for kind in kinds:
        name = kind.id if isinstance(kind, ast.Name) else getattr(kind, "attr", None)
        if name in _IMPORT_ERRORS:
            return True
    return False
