"""The import hooks: one `sys.meta_path` finder per pack, and PEP 562 hooks on modules
that stay but lost names.

Module moves. The finder answers for `old[.sub...]` with a spec whose loader imports
`new[.sub...]` and hands back that very module object, so the import system stores it in
`sys.modules` under the old name too. Nothing is copied: `mock.patch("old.attr")` patches
the code that runs, pickles naming old classes load, `isinstance` holds, and the module
keeps its own `__name__` (new pickles record the new name).

Symbol moves. The old module is real and stays; it gets a module `__getattr__`/`__dir__`
that serve only the moved names. They are installed at `install()` on a module already
imported, and otherwise by the finder when the module is imported (or reloaded): the
finder wraps the real loader so the hooks are in place before the module's code runs and
re-checked after it (a module that defines its own `__getattr__` keeps it, chained).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable, Iterable
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import TYPE_CHECKING, Any, cast

from rules import Pack

from ._table import Entry, resolve, runtime_rules
from ._targets import Installed, StepFit, served
from ._warn import is_probe, report

if TYPE_CHECKING:  # importlib.abc costs milliseconds at import (importlib.resources)
    from importlib.abc import Loader


class ShimFinder:
    """Meta path finder for one pack's old names (installed first on `sys.meta_path`).

    It sees every import, so the common case (not an old name) is two hash lookups and one
    `str.startswith` over a tuple, with no allocation: about 0.15 us (benchmarks/bench_shims.py).
    """

    def __init__(self, pack: Pack, env_var: str, installed: Installed | None = None) -> None:
        """`installed` says which targets exist (default: look on `sys.path`); rows whose
        target is missing are not served (`fits` says, per step, which and why)."""
        self.pack = pack
        self.env_var = env_var
        kept, self.fits = served(pack, installed)
        self.modules, self.hosts = runtime_rules(kept)
        self._prefixes = tuple(self.modules)
        self._parents = _vanished_parents(self.modules, self.hosts)

    def fit(self, version: str) -> StepFit:
        """How much of step `version` this finder serves."""
        return next(f for f in self.fits if f.version == version)

    def __repr__(self) -> str:
        return f"<ShimFinder pack={self.pack.name!r} env={self.env_var!r}>"

    def resolve(self, fullname: str) -> str | None:
        """Where the old module path `fullname` lives now, or None if it did not move."""
        if not fullname.startswith(self._prefixes):
            return None
        hit = resolve(fullname, self.modules)
        return None if hit is None else hit[1]

    def find_spec(
        self, fullname: str, path: Any = None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if fullname in self.hosts:
            return self._host_spec(fullname, path, target)
        hit = resolve(fullname, self.modules) if fullname.startswith(self._prefixes) else None
        if hit is None:
            if fullname in self._parents:
                return self._parent_spec(fullname, path, target)
            return None
        entry, new_name = hit
        if new_name != entry.new and not _exists(new_name):
            # `old.sub.nope`: report the name the user wrote as missing, like Python would.
            return None
        loader = cast("Loader", _AliasLoader(entry, new_name, self.env_var))
        return ModuleSpec(fullname, loader, origin=f"alias of {new_name}")

    def forward(self, module: ModuleType) -> None:
        """Install (or refresh) the PEP 562 hooks for this pack's names moved off `module`."""
        moved = self.hosts.get(module.__name__, {})
        _forwarder(module).add(moved.values(), self.env_var)

    def _host_spec(self, fullname: str, path: Any, target: ModuleType | None) -> ModuleSpec | None:
        spec = self._real_spec(fullname, path, target)
        if spec is not None and spec.loader is not None and hasattr(spec.loader, "exec_module"):
            spec.loader = cast("Loader", _HostLoader(self, spec.loader))
        return spec

    def _parent_spec(self, fullname: str, path: Any, target: ModuleType | None) -> ModuleSpec:
        spec = self._real_spec(fullname, path, target)
        if spec is None:
            loader = cast("Loader", _EmptyPackageLoader())
            spec = ModuleSpec(fullname, loader, origin="shims", is_package=True)
            spec.submodule_search_locations = []
        return spec

    def _real_spec(self, fullname: str, path: Any, target: ModuleType | None) -> ModuleSpec | None:
        # Ask the finders behind this one, as the import system would have; never loops
        # back here.
        finders = sys.meta_path
        start = finders.index(self) + 1 if self in finders else 0
        for finder in finders[start:]:
            find = getattr(finder, "find_spec", None)
            spec = None if find is None else find(fullname, path, target)
            if spec is not None:
                return spec
        return None


def _vanished_parents(modules: dict[str, Entry], hosts: dict[str, dict[str, Entry]]) -> set[str]:
    """Packages above old paths that the new layout need not have (`a.b` when only
    `a.b.c` had a row and `a.b` was deleted): an empty package stands in for one that is
    missing, so `a.b.c` can import. Never a top-level package, nor one above a new path or
    a host: those must exist, and a missing one is an error, not an empty stand-in."""

    def ancestors(name: str) -> set[str]:
        parts = name.split(".")
        return {".".join(parts[:i]) for i in range(2, len(parts))}

    present: set[str] = {*hosts}
    present.update(entry.new for entry in modules.values())
    present.update(e.new.rpartition(".")[0] for moved in hosts.values() for e in moved.values())
    for name in list(present):
        present |= ancestors(name)
    wanted: set[str] = set()
    for old in modules:
        wanted |= ancestors(old)
    return wanted - present - set(modules)


class _AliasLoader:
    """Loads an old module path as the module at its new path (the same object)."""

    def __init__(self, entry: Entry, new_name: str, env_var: str) -> None:
        self.entry = entry
        self.new_name = new_name
        self.env_var = env_var
        self._spec: ModuleSpec | None = None

    def create_module(self, spec: ModuleSpec) -> ModuleType:
        report(self.entry, self.env_var)
        module = importlib.import_module(self.new_name)
        self._spec = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        # The import system has just set `module.__spec__` to the alias spec; the module
        # is the new one and keeps its own (reload, pickle and pkgutil read it).
        module.__spec__ = self._spec


class _EmptyPackageLoader:
    """An empty package standing in for a parent of old paths that no longer exists."""

    def create_module(self, spec: ModuleSpec) -> None:
        return None  # the default module

    def exec_module(self, module: ModuleType) -> None:
        pass


class _HostLoader:
    """Wraps a stay-put module's real loader to put the PEP 562 hooks in place."""

    def __init__(self, finder: ShimFinder, loader: Any) -> None:
        self._finder = finder
        self._loader = loader

    def __getattr__(self, name: str) -> Any:
        # get_source, get_resource_reader, is_package...: the real loader answers.
        return getattr(self._loader, name)

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        create = getattr(self._loader, "create_module", None)
        return None if create is None else create(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._finder.forward(module)  # names are served while the module's code runs
        try:
            self._loader.exec_module(module)
        finally:
            # Leave the module as its real loader made it.
            if getattr(module, "__loader__", None) is self:
                module.__loader__ = self._loader
            spec = getattr(module, "__spec__", None)
            if spec is not None and spec.loader is self:
                spec.loader = self._loader
        self._finder.forward(module)  # its own code may have defined __getattr__


class _Forwarder:
    """The `__getattr__`/`__dir__` pair on one module: moved names go to their new home,
    anything else to the module's own hooks, if it has them, or AttributeError."""

    def __init__(
        self,
        module: ModuleType,
        own_getattr: Callable[[str], Any] | None,
        own_dir: Callable[[], Iterable[str]] | None,
    ) -> None:
        self._module = module
        self._own_getattr = own_getattr
        self._own_dir = own_dir
        self.moved: dict[str, tuple[Entry, str]] = {}

    def add(self, entries: Iterable[Entry], env_var: str) -> None:
        for entry in entries:
            self.moved[entry.old.rpartition(".")[2]] = (entry, env_var)

    def getattr(self, name: str) -> Any:
        hit = self.moved.get(name)
        if hit is None:
            if self._own_getattr is not None:
                return self._own_getattr(name)
            where = self._module.__name__
            raise AttributeError(f"module {where!r} has no attribute {name!r}", name=name)
        entry, env_var = hit
        report(entry, env_var, probe=is_probe(sys._getframe(1)))
        new_module, _, new_name = entry.new.rpartition(".")
        # Looked up on every use, never cached here: a reload of the new module, or a
        # mock.patch of the new name, is what the old name serves.
        module = sys.modules.get(new_module) or importlib.import_module(new_module)
        return getattr(module, new_name)

    def dir(self) -> list[str]:
        names = self._own_dir() if self._own_dir is not None else vars(self._module)
        return sorted({*names, *self.moved})


def _forwarder(module: ModuleType) -> _Forwarder:
    """The module's forwarder, installed now where its hooks are not (or no longer) ours."""
    namespace = vars(module)
    own_getattr = namespace.get("__getattr__")
    own_dir = namespace.get("__dir__")
    forwarder = _owner(own_getattr)
    displaced = _owner(own_dir)
    if forwarder is None:
        forwarder = _Forwarder(module, own_getattr, None)
        if displaced is not None:
            # The module's code replaced our __getattr__ (a reload): keep the names.
            forwarder.moved.update(displaced.moved)
        namespace["__getattr__"] = forwarder.getattr
    if displaced is not forwarder:
        forwarder._own_dir = own_dir if displaced is None else displaced._own_dir
        namespace["__dir__"] = forwarder.dir
    return forwarder


def _owner(hook: object) -> _Forwarder | None:
    owner = getattr(hook, "__self__", None)
    return owner if isinstance(owner, _Forwarder) else None


def _exists(module: str) -> bool:
    """Whether `module` can be imported (its parent packages are imported to find out,
    as the import system itself would)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False
