"""What a project's code asks of an upstream package, read from each file's `ast`.

Per file: the classes it defines (bases as dotted names, methods with their signatures and
`super().m(...)` calls, the attributes each class sets itself), the calls of upstream
callables it makes, and the attribute chains it reads from objects whose upstream type is
known statically (a parameter or variable annotation, `x = Upstream(...)`, `x = f()` of an
upstream function with a return annotation, `self` in a class). Nothing is resolved against
a release here; `check` does that for the baseline and the target.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import cast

from migrator.core.modname import RelativeImportError, resolve_relative
from migrator.verify_api.guards import catches_probe, probes
from migrator.verify_api.nodes import statements, walk
from migrator.verify_api.signature import Signature, annotated_class, of_function
from migrator.verify_api.targets import bound as _bound
from migrator.verify_api.targets import path as _path

Live = Callable[[ast.expr], "bool | None"]
_TRY_STAR = (ast.TryStar,) if hasattr(ast, "TryStar") else ()
SELF = "self"
CALLED = "()"  # a type `()dotted`: what calling the upstream `dotted` returns


@dataclass(frozen=True)
class Call:
    """How a call passes arguments: `positional` count and `keywords` (no splats)."""

    positional: int
    keywords: tuple[str, ...]


@dataclass(frozen=True)
class Use:
    """One thing the project takes from upstream at `line:col` of a file, in `scope` (the
    qualified project function or class). `base` is an upstream dotted callable (`chain`
    empty, `call` set), a type (`dotted`, `()dotted`, or SELF) whose `chain` of attributes is
    read, the last one called when `call` is set."""

    line: int
    col: int
    scope: str
    base: str
    chain: tuple[str, ...] = ()
    call: Call | None = None


@dataclass
class Method:
    name: str
    sig: Signature
    line: int
    col: int
    supers: list[Use] = field(default_factory=list)  # base: the method name super() calls


@dataclass
class ProjectClass:
    """A class of the project: `bases` dotted as the file spells them (project or upstream),
    `attrs` what the class itself defines, `types` what it says of its own attributes."""

    qual: str
    path: str
    line: int
    bases: list[str]
    methods: dict[str, Method] = field(default_factory=dict)
    attrs: set[str] = field(default_factory=set)
    types: dict[str, str] = field(default_factory=dict)
    reads: list[Use] = field(default_factory=list)  # self.X... chains


@dataclass
class FileFacts:
    path: str
    module: str
    classes: list[ProjectClass] = field(default_factory=list)
    uses: list[Use] = field(default_factory=list)
    # What the project sets itself (`x.A = ...`, `setattr(x, "A", ...)`, `C.A = ...`): the
    # chain from `base` ends with the attribute set.
    writes: list[Use] = field(default_factory=list)


def read_file(source: bytes, path: str, module: str, is_package: bool,
              upstream: frozenset[str], live: Live = lambda test: None) -> FileFacts | None:
    """The facts of one file (None when it does not parse): `upstream` the top-level packages
    whose names count; `live(test)` whether an `if` runs at the target (None: unknown), so
    that a branch dead there is not read (`guards.decide`). Code that only probes (under
    `hasattr`, or in a `try` that catches AttributeError/TypeError) is not read either."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    facts = FileFacts(path, module)
    names = _imports(tree, module if is_package else module.rpartition(".")[0])
    # Only a walrus binds a name inside an expression: without one, statements suffice.
    reader = _Reader(facts, names, upstream, live, walk if b":=" in source else statements)
    reader.block(tree.body, module, {}, None)
    return facts


def _imports(tree: ast.Module, package: str) -> dict[str, str]:
    """{local name: absolute dotted name} of every import in the file (last one wins)."""
    names: dict[str, str] = {}
    for node in statements(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                local = alias.asname or alias.name.split(".")[0]
                names[local] = alias.name if alias.asname else local
        elif isinstance(node, ast.ImportFrom):
            try:
                base = resolve_relative(package, node.level, node.module)
            except RelativeImportError:
                continue
            for alias in node.names:
                if alias.name != "*":
                    names[alias.asname or alias.name] = f"{base}.{alias.name}"
    return names


class _Reader:
    def __init__(self, facts: FileFacts, names: dict[str, str], upstream: frozenset[str],
                 live: Live, binders: Callable[[ast.AST], list[ast.AST]] = walk) -> None:
        self.facts = facts
        self.names = names
        self.upstream = upstream
        self.live = live
        self.binders = binders  # the nodes of a function that may bind a name

    def dotted(self, node: ast.expr) -> str:
        """The absolute dotted name `a.b.C` spells here ("" when it is not one)."""
        if isinstance(node, ast.Attribute):
            head = self.dotted(node.value)
            return f"{head}.{node.attr}" if head else ""
        if isinstance(node, ast.Name):
            return self.names.get(node.id, f"{self.facts.module}.{node.id}")
        return ""

    def is_upstream(self, dotted: str) -> bool:
        return dotted.split(".")[0] in self.upstream

    def annotation(self, node: ast.expr | None) -> str:
        """The upstream class an annotation names (`X`, `X | None`, `Optional[X]`, "X")."""
        named = annotated_class(node)
        found = self.dotted(named) if named is not None else ""
        return found if found and self.is_upstream(found) else ""

    def block(self, body: list[ast.stmt], scope: str, env: dict[str, str],
              cls: ProjectClass | None) -> None:
        """Read the statements of a module or function body (`cls`: the class of the method
        whose body it is); classes and functions recurse, branches dead at the target and
        probing blocks are passed over."""
        for node in body:
            if isinstance(node, ast.ClassDef):
                self.klass(node, f"{scope}.{node.name}")
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.function(node, f"{scope}.{node.name}", None)
            elif isinstance(node, ast.If):
                self.uses_in(node.test, scope, env, cls)
                decided = self.live(node.test)
                if decided is not False and not probes(node.test):
                    self.block(node.body, scope, env, cls)
                if decided is not True:
                    self.block(node.orelse, scope, env, cls)
            elif isinstance(node, ast.Try) or (_TRY_STAR and isinstance(node, _TRY_STAR)):
                node = cast(ast.Try, node)  # TryStar has the same fields
                if not catches_probe(node.handlers):
                    self.block(node.body, scope, env, cls)
                for handler in node.handlers:
                    self.block(handler.body, scope, env, cls)
                self.block(node.orelse + node.finalbody, scope, env, cls)
            elif isinstance(node, (ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith)):
                for head in _heads(node):
                    self.uses_in(head, scope, env, cls)
                self.block(node.body + getattr(node, "orelse", []), scope, env, cls)
            else:
                self.uses_in(node, scope, env, cls)

    def klass(self, node: ast.ClassDef, qual: str) -> None:
        spelled = [b.value if isinstance(b, ast.Subscript) else b for b in node.bases]
        cls = ProjectClass(qual, self.facts.path, node.lineno,
                           [d for b in spelled if (d := self.dotted(b))])
        self.facts.classes.append(cls)
        for item in node.body:
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                cls.attrs.add(item.name)
                method = Method(item.name, of_function(item), item.lineno, item.col_offset)
                cls.methods[item.name] = method
            elif isinstance(item, ast.ClassDef):
                cls.attrs.add(item.name)
            elif isinstance(item, (ast.Assign, ast.AnnAssign)):
                targets = item.targets if isinstance(item, ast.Assign) else [item.target]
                cls.attrs.update(t.id for t in targets if isinstance(t, ast.Name))
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name) and (
                        found := self.annotation(item.annotation)):
                    cls.types[item.target.id] = found
        for item in node.body:
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.function(item, f"{qual}.{item.name}", cls)
            elif isinstance(item, ast.ClassDef):
                self.klass(item, f"{qual}.{item.name}")
            else:
                self.uses_in(item, qual, {}, None)

    def function(self, node: ast.FunctionDef | ast.AsyncFunctionDef, scope: str,
                 cls: ProjectClass | None) -> None:
        env = _Env(self).of(node)
        if cls is not None and node.args.args and of_function(node).kind != "static":
            owner = node.args.args[0].arg
            env[owner] = SELF
            self.self_writes(node, owner, env, cls)
        else:
            cls = None
        self.block(node.body, scope, env, cls)

    def self_writes(self, node: ast.FunctionDef | ast.AsyncFunctionDef, owner: str,
                    env: dict[str, str], cls: ProjectClass) -> None:
        """`self.X = ...` in a method: X is the class's own; typed when the value is a typed
        name or an upstream call, or the assignment is annotated."""
        for child in statements(node):
            targets: list[ast.expr] = []
            value: ast.expr | None = None
            if isinstance(child, ast.Assign):
                targets = [e for t in child.targets
                           for e in (t.elts if isinstance(t, ast.Tuple) else [t])]
                value = child.value if len(child.targets) == 1 else None
            elif isinstance(child, (ast.AnnAssign, ast.AugAssign)):
                targets = [child.target]
            for target in targets:
                if not (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name)
                        and target.value.id == owner):
                    continue
                cls.attrs.add(target.attr)
                kind = ""
                if isinstance(child, ast.AnnAssign):
                    kind = self.annotation(child.annotation)
                elif isinstance(value, ast.Name) and env.get(value.id, SELF) != SELF:
                    kind = env[value.id]
                elif isinstance(value, ast.Call):
                    kind = _Env(self).value(value)
                if kind and cls.types.get(target.attr, kind) == kind:
                    cls.types[target.attr] = kind
                else:
                    cls.types[target.attr] = ""  # set to values of different types

    def uses_in(self, node: ast.AST, scope: str, env: dict[str, str],
                cls: ProjectClass | None) -> None:
        """Calls of upstream callables, attribute chains of typed names, super() calls."""
        inner: set[int] = set()
        nodes = [n for n in walk(node) if isinstance(n, (ast.Attribute, ast.Call))]
        for child in nodes:
            inner.add(id(child.value) if isinstance(child, ast.Attribute) else id(child.func))
        for child in nodes:
            if isinstance(child, ast.Call):
                self.call(child, scope, env, cls)
            elif isinstance(child, ast.Attribute) and id(child) not in inner:
                self.chain(child, scope, env, cls, None)

    def call(self, node: ast.Call, scope: str, env: dict[str, str],
             cls: ProjectClass | None) -> None:
        if any(isinstance(a, ast.Starred) for a in node.args) or any(
                k.arg is None for k in node.keywords):
            return  # splats: what binds is not known statically
        how = Call(len(node.args), tuple(str(k.arg) for k in node.keywords))
        func = node.func
        if isinstance(func, ast.Name) and func.id == "setattr" and len(node.args) == 3 and \
                isinstance(name := node.args[1], ast.Constant) and isinstance(name.value, str):
            self.written(node.args[0], name.value, node, scope, env)
        if (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Call)
                and isinstance(func.value.func, ast.Name) and func.value.func.id == "super"):
            if cls is not None and scope.rpartition(".")[0] == cls.qual:
                method = cls.methods.get(scope.rpartition(".")[2])
                if method is not None:
                    method.supers.append(Use(node.lineno, node.col_offset, scope, func.attr,
                                             call=how))
            return
        if isinstance(func, ast.Attribute) and _root(func) in env:
            self.chain(func, scope, env, cls, how)
            return
        dotted = self.dotted(func) if isinstance(func, (ast.Name, ast.Attribute)) else ""
        if dotted and self.is_upstream(dotted) and not (
                isinstance(func, ast.Name) and func.id not in self.names):
            self.facts.uses.append(Use(node.lineno, node.col_offset, scope, dotted, call=how))

    def chain(self, node: ast.Attribute, scope: str, env: dict[str, str],
              cls: ProjectClass | None, how: Call | None) -> None:
        attrs: list[str] = []
        current: ast.expr = node
        while isinstance(current, ast.Attribute):
            attrs.append(current.attr)
            current = current.value
        if isinstance(node.ctx, ast.Store) and not (len(attrs) == 1 and env.get(
                _root(node)) == SELF):  # `self.A = ...`: the class's own (`self_writes`)
            self.written(node.value, node.attr, node, scope, env)
        if not isinstance(current, ast.Name) or current.id not in env:
            return
        attrs.reverse()
        if isinstance(node.ctx, (ast.Store, ast.Del)):
            attrs.pop()  # setting an attribute asks nothing of the class
        if not attrs:
            return
        use = Use(node.lineno, node.col_offset, scope, env[current.id], tuple(attrs), how)
        if env[current.id] == SELF and cls is not None:
            cls.reads.append(use)
        elif env[current.id] != SELF:
            self.facts.uses.append(use)

    def written(self, holder: ast.expr, attr: str, node: ast.expr, scope: str,
                env: dict[str, str]) -> None:
        """The project sets `attr` on `holder`: a typed name's object (or one of its
        attributes'), or an upstream class or module named outright."""
        root, path = _root(holder), _path(holder)
        if root in env:
            base, chain = env[root], (*path, attr)
        elif root in self.names and self.is_upstream(dotted := self.dotted(holder)):
            base, chain = dotted, (attr,)
        else:
            return
        self.facts.writes.append(Use(node.lineno, node.col_offset, scope, base, chain))


def _heads(node: ast.stmt) -> list[ast.expr]:
    """The expressions a loop or `with` evaluates before its body."""
    if isinstance(node, (ast.With, ast.AsyncWith)):
        return [i.context_expr for i in node.items]
    if isinstance(node, ast.While):
        return [node.test]
    if isinstance(node, (ast.For, ast.AsyncFor)):
        return [node.iter]
    return []


def _root(node: ast.expr) -> str:
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else ""


class _Env:
    """The names of one function whose upstream type is known: annotated parameters, and
    locals every assignment of which gives the same type."""

    def __init__(self, reader: _Reader) -> None:
        self.reader = reader

    def of(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, str]:
        args = node.args
        env: dict[str, str] = {}
        for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs]:
            found = self.reader.annotation(arg.annotation)
            if found:
                env[arg.arg] = found
        seen: dict[str, str] = {}
        for child in self.reader.binders(node):
            for name, kind in self.bindings(child):
                seen[name] = kind if seen.get(name, kind) == kind else ""
        for name, kind in seen.items():
            if name in env and kind != env[name]:
                del env[name]  # a typed parameter rebound to something else
            elif kind and name not in env:
                env[name] = kind
        return env

    def bindings(self, node: ast.AST) -> list[tuple[str, str]]:
        """(name, type or "") of each simple name `node` binds."""
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            return [(node.target.id, self.reader.annotation(node.annotation))]
        if isinstance(node, ast.Assign):
            kind = self.value(node.value)
            return [(t.id, kind) for t in node.targets if isinstance(t, ast.Name)] + [
                (n, "") for t in node.targets if not isinstance(t, ast.Name) for n in _bound(t)]
        if isinstance(node, (ast.For, ast.AsyncFor, ast.With, ast.AsyncWith, ast.NamedExpr,
                             ast.AugAssign)):
            targets = [i.optional_vars for i in node.items if i.optional_vars] if isinstance(
                node, (ast.With, ast.AsyncWith)) else [node.target]
            return [(n, "") for t in targets for n in _bound(t)]
        return []

    def value(self, node: ast.expr) -> str:
        if isinstance(node, ast.Call) and isinstance(node.func, (ast.Name, ast.Attribute)):
            dotted = self.reader.dotted(node.func)
            if dotted and self.reader.is_upstream(dotted):
                return CALLED + dotted
        return ""
