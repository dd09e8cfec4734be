"""A release's modules and their top-level definitions, read with `ast` (never imported).

A definition that was lost or gained carries a digest of its normalised body (name,
docstring, formatting and line numbers left out, so a moved or renamed function keeps its
digest) and a sketch of its token trigrams for similarity between edited bodies.
"""

from __future__ import annotations

import ast
import hashlib
import zlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property

from migrator.infer.binding import forwarded_names, import_sources, is_type_checking
from migrator.infer.calls import Params, params_of, registrations

SKETCH = 256  # trigram hashes kept per body: bounds memory, exact below this size


@dataclass(eq=False)
class Definition:
    """A top-level `def`, `class` or assigned name; `kind` is "function", "class" or "variable".

    `node` is the statement (or, for a variable, the value) until `settle`; None for a
    definition whose body is never compared (its module did not change, or it stayed in its
    module): digest "" and an empty sketch then. Only lost and gained bodies are hashed.
    """

    name: str
    kind: str
    node: ast.AST | None = None
    # How it is called (see `calls`): kept after `settle`, since a renamed successor must
    # accept the old calls and a dataclass base's fields are part of its subclasses' calls.
    params: Params | None = None
    bases: tuple[str, ...] = ()

    @cached_property
    def _parts(self) -> list[ast.AST]:
        """What the body is compared by: no name, no docstring, no positions."""
        node = self.node
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            body = node.body
            first = body[0] if body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                if isinstance(first.value.value, str):
                    body = body[1:]  # the docstring is documentation, not behaviour
            if isinstance(node, ast.ClassDef):
                return [*node.bases, *node.keywords, *node.decorator_list, *body]
            returns = [node.returns] if node.returns is not None else []
            return [node.args, *node.decorator_list, *returns, *body]
        return [node] if node is not None else []

    @cached_property
    def digest(self) -> str:
        """A hash of the normalised body; "" when the body is unknown."""
        if self.node is None:
            return ""
        text = "\n".join(ast.dump(n, include_attributes=False) for n in self._parts)
        return hashlib.blake2b(text.encode("utf-8"), digest_size=10).hexdigest()

    @cached_property
    def _grams(self) -> set[int]:
        tokens = _tokens(self._parts)
        grams = ["\0".join(tokens[i : i + 3]) for i in range(max(len(tokens) - 2, 1))]
        return {zlib.crc32(g.encode("utf-8")) for g in grams if g}

    @cached_property
    def size(self) -> int:
        """How many distinct token trigrams the body has (0 when unknown)."""
        return len(self._grams)

    @cached_property
    def sketch(self) -> frozenset[int]:
        """The SKETCH smallest trigram hashes: a bounded stand-in for the whole set."""
        return frozenset(sorted(self._grams)[:SKETCH])

    def settle(self, keep: bool) -> None:
        """Compute what comparisons need when `keep`, then let the syntax tree go."""
        if self.node is not None:
            self.params, self.bases = params_of(self.node)
        if keep:
            for name in ("digest", "size", "sketch", "signature"):
                getattr(self, name)
        self.__dict__.pop("_grams", None)
        self.__dict__.pop("_parts", None)
        self.node = None

    @cached_property
    def signature(self) -> str:
        """`def name(args)`, `class name` or `name = value`, shortened, for hints."""
        node = self.node
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return f"def {self.name}({_short(ast.unparse(node.args))})"
        if isinstance(node, ast.ClassDef) or self.kind == "class":
            return f"class {self.name}"
        if node is not None:
            return f"{self.name} = {_short(ast.unparse(node))}"
        return self.name


@dataclass
class Module:
    """One module: `defs` binds by definition, `imported` by import (`sources`: from which
    module); `opaque` when a star import or a module `__getattr__` means any name may be
    present. `typing_only`: imported only under `if TYPE_CHECKING:`; `forwarded`: served by
    the module's `__getattr__` by name (a deprecation forwarder). Neither binds at run time."""

    dotted: str
    is_package: bool
    defs: dict[str, Definition] = field(default_factory=dict)
    imported: set[str] = field(default_factory=set)
    opaque: bool = False
    sources: dict[str, str] = field(default_factory=dict)
    typing_only: set[str] = field(default_factory=set)
    forwarded: set[str] = field(default_factory=set)
    # (name, module path) pairs this module registers (`calls.registrations`).
    registered: list[tuple[str, str]] = field(default_factory=list)

    def binds(self, name: str) -> bool:
        """Whether `name` is bound at run time (a forwarded name is not: it is a move)."""
        if name in self.defs or name in self.imported:
            return True
        return self.opaque and name not in self.forwarded and name not in self.typing_only

    def public(self) -> list[str]:
        return sorted(n for n in self.defs if not n.startswith("_"))


@dataclass
class Index:
    """Modules by dotted name, and the files that did not parse (skipped)."""

    modules: dict[str, Module] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)

    def has(self, dotted: str) -> bool:
        """A module, or a directory of modules (a namespace package), of that name."""
        if dotted in self.modules:
            return True
        prefix = dotted + "."
        return any(m.startswith(prefix) for m in self.modules)


def module_name(path: str) -> tuple[str, bool]:
    """`pkg/sub/mod.py` -> ("pkg.sub.mod", False); `pkg/sub/__init__.py` -> ("pkg.sub", True)."""
    parts = path[: -len(".py")].split("/")
    if parts[-1] == "__init__":
        return ".".join(parts[:-1]), True
    return ".".join(parts), False


def build_indexes(
    old_files: Mapping[str, bytes],
    new_files: Mapping[str, bytes],
    packages: Iterable[str],
    tick: Callable[[], None] = lambda: None,
) -> tuple[Index, Index]:
    """Index both releases' files of `packages`; `tick` is called once per file (progress).

    A file with the same path and bytes in both is parsed once and shared, names only:
    it neither lost nor gained anything, so its bodies are never compared (the costly
    part of indexing a release of hundreds of modules).
    """
    wanted = set(packages)
    old, new = Index(), Index()
    for path in sorted(set(old_files) | set(new_files)):
        if path.split("/")[0] not in wanted:
            continue
        dotted, is_package = module_name(path)
        if not all(part.isidentifier() for part in dotted.split(".")):
            continue
        data_old, data_new = old_files.get(path), new_files.get(path)
        if data_old is not None and data_old == data_new:
            tick()
            tick()
            module = _parse(data_old, dotted, is_package, bodies=False)
            _add(old, path, module)
            _add(new, path, module)
            continue
        pair = []
        for index, data in ((old, data_old), (new, data_new)):
            if data is not None:
                tick()
                pair.append(_add(index, path, _parse(data, dotted, is_package, bodies=True)))
        _settle(*pair)
    return old, new


def _settle(first: Module | None = None, second: Module | None = None) -> None:
    """Keep the bodies of the definitions that only one side of a module has."""
    for this, other in ((first, second), (second, first)):
        if this is not None:
            for name, definition in this.defs.items():
                definition.settle(keep=other is None or name not in other.defs)


def _add(index: Index, path: str, module: Module | None) -> Module | None:
    if module is None:
        index.skipped.append(path)
    else:
        index.modules[module.dotted] = module
    return module


def parse_definitions(data: bytes, dotted: str, is_package: bool = False) -> Module | None:
    """One module from its bytes, or None when it does not parse."""
    module = _parse(data, dotted, is_package, bodies=True)
    _settle(module)
    return module


def _parse(data: bytes, dotted: str, is_package: bool, bodies: bool) -> Module | None:
    try:
        tree = ast.parse(data)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    module = Module(dotted, is_package)
    _collect(tree.body, module, bodies)
    module.typing_only -= module.imported | set(module.defs)
    module.forwarded = forwarded_names(tree.body) - module.imported - set(module.defs)
    package = dotted.split(".")[0]
    if f"{package}.".encode() in data:  # cheap: most modules spell no path of their own
        module.registered = registrations(tree, package)
    return module


def _collect(body: list[ast.stmt], module: Module, bodies: bool, typing: bool = False) -> None:
    for node in body:
        if typing:  # under `if TYPE_CHECKING:`: names for type checkers only
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                module.typing_only |= set(import_sources(node, module.dotted, module.is_package))
            elif isinstance(node, (ast.If, ast.Try)):
                for inner in (node.body, *(h.body for h in getattr(node, "handlers", []))):
                    _collect(inner, module, bodies, typing)
                _collect(node.orelse, module, bodies, typing)
            continue
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            module.defs[node.name] = _define(node.name, node, None, bodies)
            if node.name == "__getattr__":
                module.opaque = True
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name) and node.value is not None:
                    module.defs[target.id] = _define(target.id, node, node.value, bodies)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                if alias.name == "*":
                    module.opaque = True
                else:
                    module.imported.add((alias.asname or alias.name).split(".")[0])
            module.sources.update(import_sources(node, module.dotted, module.is_package))
        elif isinstance(node, (ast.If, ast.Try)):
            # `try: import x except ImportError:` binds names; `if TYPE_CHECKING:` does not.
            checking = isinstance(node, ast.If) and is_type_checking(node.test)
            _collect(node.body, module, bodies, typing or checking)
            for handler in getattr(node, "handlers", []):
                _collect(handler.body, module, bodies)
            _collect(node.orelse, module, bodies)


def _define(name: str, node: ast.AST, value: ast.AST | None, bodies: bool) -> Definition:
    """`node` is the def/class statement or the assignment; `value` the assigned value."""
    kind = "variable"
    if isinstance(node, ast.ClassDef):
        kind = "class"
    elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        kind = "function"
    if not bodies:
        return Definition(name, kind)
    return Definition(name, kind, value if kind == "variable" else node)


def _short(text: str, limit: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _tokens(nodes: list[ast.AST]) -> list[str]:
    out: list[str] = []
    for root in nodes:
        for node in ast.walk(root):
            out.append(type(node).__name__)
            if isinstance(node, ast.Name):
                out.append(node.id)
            elif isinstance(node, ast.Attribute):
                out.append(node.attr)
            elif isinstance(node, ast.arg):
                out.append(node.arg)
            elif isinstance(node, ast.Constant):
                out.append(repr(node.value)[:200])
    return out


def similarity(a: Definition, b: Definition) -> float:
    """Jaccard similarity of the two bodies' token trigrams, 0.0 to 1.0 (bottom-k estimate:
    exact for bodies under SKETCH trigrams)."""
    if not a.sketch or not b.sketch:
        return 0.0
    union = sorted(a.sketch | b.sketch)[:SKETCH]
    both = sum(1 for h in union if h in a.sketch and h in b.sketch)
    return both / len(union)
