"""The first-party modules of a layout, parsed on demand: what each module binds, star imports
expanded transitively, and the reverse maps behind "did you mean" suggestions."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from migrator.core.forwarding import Getattr, read_getattr
from migrator.core.modname import RelativeImportError, resolve_relative
from migrator.verify_imports.discovery import EXTENSION, NAMESPACE, Layout, ModuleFile
from migrator.verify_imports.index import ImportStmt, ModuleInfo, add_binding, index_source
from migrator.verify_imports.unpackaged import Unpackaged, find_unpackaged

if TYPE_CHECKING:
    from migrator.verify_imports.moves import MoveTables

# Attributes every module has without binding them.
IMPLICIT_NAMES = frozenset({
    "__name__", "__doc__", "__file__", "__spec__", "__loader__", "__package__", "__builtins__",
    "__cached__", "__dict__",
})
# How many star imports deep a namespace is followed (`a` star-imports `b`, which star-imports
# `c`, ...); past it the module counts as open, as a cycle is cut: a chain that deep is no
# package's layout, and following it further would only run into the recursion limit.
MAX_STAR_DEPTH = 32


@dataclass
class Namespace:
    """A module's run-time namespace as far as static analysis can tell.

    `bindings`: name -> (position, line) of its first binding, star-imported names included at
    the position of their star import. `open_reason` says why names beyond these may exist
    (a star import from a third-party module, `globals()` writes), or is "".
    """

    bindings: dict[str, tuple[int, int]] = field(default_factory=dict)
    rebinds: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    typing_names: set[str] = field(default_factory=set)
    open_reason: str = ""


def resolve_from_module(stmt: ImportStmt, module: str, is_package: bool) -> str:
    """The absolute module a `from` statement in `module` names (importlib's _resolve_name).

    Raises:
        RelativeImportError: the relative import Python would reject, with its message.
    """
    package = module if is_package else module.rpartition(".")[0]
    return resolve_relative(package, stmt.level, stmt.module)


class Project:
    """Parsed first-party modules of one `Layout`; each file is read and parsed at most once.

    `files` holds the modules' bytes when they come from an archive rather than the disk (a
    built distribution: what it holds is what ships, so no folder counts as left out).
    `infos` and `getattrs` are indexes read back from a cache (see `indexed`): the files
    they cover are never read or parsed. `moves`, when set, says where the move tables took a
    missing path (named before any guess by name)."""

    def __init__(self, layout: Layout, files: Mapping[Path, bytes] | None = None,
                 infos: Mapping[Path, ModuleInfo] | None = None,
                 getattrs: Mapping[str, Getattr | None] | None = None) -> None:
        self.layout = layout
        self.modules = layout.modules
        self.first_party = frozenset(layout.roots)
        self.unpackaged = Unpackaged() if files is not None else find_unpackaged(layout)
        self._infos: dict[Path, ModuleInfo] = dict(infos or {})
        self._sources: dict[Path, bytes] = dict(files or {})
        self._getattrs: dict[str, Getattr | None] = dict(getattrs or {})
        self.moves: MoveTables | None = None
        self._namespaces: dict[str, Namespace] = {}
        self._expanding: set[str] = set()
        self._defined_in: dict[str, list[str]] | None = None
        self._bound_in: dict[str, list[str]] = {}
        self._by_last: dict[str, list[str]] = {}

    # -- parsing ------------------------------------------------------------------------------

    def source(self, path: Path) -> bytes:
        data = self._sources.get(path)
        if data is None:
            try:
                data = path.read_bytes()
            except OSError:
                data = b""
            self._sources[path] = data
        return data

    def info_of_file(self, path: Path) -> ModuleInfo:
        info = self._infos.get(path)
        if info is None:
            info = index_source(self.source(path), str(path))
            self._infos[path] = info
        return info

    def info(self, module: str) -> ModuleInfo | None:
        """The index of a first-party module with source (None for extension/namespace/absent)."""
        mod = self.modules.get(module)
        if mod is None or mod.kind in (EXTENSION, NAMESPACE):
            return None
        return self.info_of_file(mod.path)

    def is_first_party(self, dotted: str) -> bool:
        return dotted.partition(".")[0] in self.first_party

    def getattr_of(self, module: str) -> Getattr | None:
        """What `module`'s module-level `__getattr__` serves (see forwarding.py); None when it
        has none or it cannot be read."""
        if module not in self._getattrs:
            info = self.info(module)
            mod = self.modules[module]
            found = None
            if info is not None and info.has_getattr:
                found = read_getattr(self.source(mod.path), module, mod.is_package,
                                     self.modules.__contains__)
            self._getattrs[module] = found
        return self._getattrs[module]

    def indexed(self) -> tuple[dict[Path, ModuleInfo], dict[str, Getattr | None]]:
        """Every module parsed now, not on demand: ({file: index} of each module with source,
        {module: what its `__getattr__` serves} of each module that binds one), what a
        `Project` built with `infos`/`getattrs` needs to answer as this one does."""
        for name in self.modules:
            info = self.info(name)
            if info is not None and info.has_getattr:
                self.getattr_of(name)
        return dict(self._infos), dict(self._getattrs)

    # -- namespaces ---------------------------------------------------------------------------

    def namespace(self, module: str) -> Namespace:
        """The names `module` binds, star imports expanded transitively (cycles cut)."""
        cached = self._namespaces.get(module)
        if cached is not None:
            return cached
        mod = self.modules[module]
        info = self.info(module)
        ns = Namespace()
        if info is None or info.syntax_error:
            ns.open_reason = _opaque_reason(mod)
            self._namespaces[module] = ns
            return ns
        ns.bindings = dict(info.bindings)
        ns.rebinds = {name: list(later) for name, later in info.rebinds.items()}
        ns.typing_names = set(info.typing_names)
        if info.dynamic_globals:
            ns.open_reason = "writes globals() or sys.modules[__name__] at run time"
        self._expanding.add(module)
        for stmt in info.imports:
            if stmt.is_star:
                self._expand_star(module, mod, stmt, ns)
        self._expanding.discard(module)
        # Inside a star-import cycle this is what is bound so far, as at run time.
        self._namespaces[module] = ns
        return ns

    def _expand_star(self, module: str, mod: ModuleFile, stmt: ImportStmt, ns: Namespace) -> None:
        try:
            source = resolve_from_module(stmt, module, mod.is_package)
        except RelativeImportError:
            return
        if not self.is_first_party(source):
            if not stmt.typing_only:
                ns.open_reason = ns.open_reason or f"star-imports third-party '{source}'"
            return
        if source not in self.modules or source in self._expanding:
            return  # a missing module is reported where it is imported; a cycle adds nothing new
        if len(self._expanding) > MAX_STAR_DEPTH:  # `source` would be one import deeper
            if not stmt.typing_only:
                ns.open_reason = ns.open_reason or \
                    f"star-imports '{source}' more than {MAX_STAR_DEPTH} star imports deep"
            return
        exported = self.namespace(source)
        source_info = self.info(source)
        if exported.open_reason and not stmt.typing_only:
            reason = f"star-imports '{source}', which {exported.open_reason}"
            ns.open_reason = ns.open_reason or reason
        if source_info is not None and source_info.all_names is not None:
            names = list(source_info.all_names)
        else:
            names = [n for n in exported.bindings if not n.startswith("_")]
        line = stmt.line
        pos = stmt.pos if stmt.pos is not None else 0
        for name in names:
            if stmt.typing_only:
                if name not in ns.bindings:
                    ns.typing_names.add(name)
            else:
                add_binding(ns.bindings, ns.rebinds, name, (pos, line))
                ns.typing_names.discard(name)

    # -- suggestions --------------------------------------------------------------------------

    def _build_reverse_maps(self) -> dict[str, list[str]]:
        defined: dict[str, list[str]] = {}
        for name in self.modules:
            self._by_last.setdefault(name.rpartition(".")[2], []).append(name)
            info = self.info(name)
            if info is None:
                continue
            for bound in info.bindings:
                target = defined if bound in info.defined else self._bound_in
                target.setdefault(bound, []).append(name)
        self._defined_in = defined
        return defined

    def suggest_name(self, module: str, name: str, importer: str = "") -> str:
        """Where `name` really lives in the first-party package ("" when nowhere): the closest
        module that defines it, else a submodule of that name, else a module re-exporting it."""
        defined = self._defined_in if self._defined_in is not None else self._build_reverse_maps()
        for candidates, as_module in (
            (defined.get(name, []), False),
            (self._by_last.get(name, []), True),
            (self._bound_in.get(name, []), False),
        ):
            others = [c for c in candidates if c not in (module, importer, f"{module}.{name}")]
            if others:
                best = _closest(module, others)
                return best if as_module else f"{best}.{name}"
        return ""

    def suggest_module(self, missing: str, names: tuple[str, ...] = (), importer: str = "") -> str:
        """An existing module for a missing one: same last component, else one defining every
        imported name (never `importer`, whose own fallback definitions do not count)."""
        defined = self._defined_in if self._defined_in is not None else self._build_reverse_maps()
        last = missing.rpartition(".")[2]
        same_last = [m for m in self._by_last.get(last, []) if m != missing]
        if same_last:
            return _closest(missing, same_last)
        wanted = [n for n in names if n != "*"]
        if wanted:
            holders = set(defined.get(wanted[0], []))
            for name in wanted[1:]:
                holders &= set(defined.get(name, []))
            holders.discard(importer)
            if holders:
                return _closest(missing, sorted(holders))
        return ""


def _closest(anchor: str, candidates: list[str]) -> str:
    """The candidate sharing the longest dotted prefix with `anchor`, then the shallowest."""
    anchor_parts = anchor.split(".")

    def key(candidate: str) -> tuple[int, int, str]:
        parts = candidate.split(".")
        shared = 0
        for a, b in zip(anchor_parts, parts, strict=False):
            if a != b:
                break
            shared += 1
        return (-shared, len(parts), candidate)

    return min(candidates, key=key)


def _opaque_reason(mod: ModuleFile) -> str:
    if mod.kind == EXTENSION:
        return "is a compiled extension"
    if mod.kind == NAMESPACE:
        return ""
    return "does not parse"
