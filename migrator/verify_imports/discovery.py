"""Turn command-line targets into a first-party layout: which files to check, which modules exist.

A target is a package directory, a plain directory (every Python file under it), a single file
(what pre-commit passes) or an importable package name. Whatever the target, the whole top-level
package it belongs to is indexed, found by walking up through `__init__.py` files, so checking
one file gives the same findings for that file as checking the whole tree.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

SOURCE = "source"
STUB = "stub"
EXTENSION = "extension"
NAMESPACE = "namespace"

_CHECKED_SUFFIXES = (".py", ".pyi")
_EXTENSION_SUFFIXES = (".so", ".pyd")
_SKIP_DIRS = frozenset({"__pycache__", "node_modules", "site-packages", "build", "dist"})


class TargetError(Exception):
    """A target that is neither a Python file, a directory nor an importable package."""


@dataclass(frozen=True)
class ModuleFile:
    """A first-party module: dotted `name`, the file that defines it (the directory for a
    namespace package), `kind` (source, stub, extension, namespace) and whether it is a package."""

    name: str
    path: Path
    kind: str
    is_package: bool


@dataclass
class Layout:
    """Every module of the first-party top-level packages under one sys.path root, and the
    files to check there.

    `roots` maps each first-party top-level name to that root directory. `targets` are the
    files to report on, each with the module name it has under the root.
    """

    modules: dict[str, ModuleFile] = field(default_factory=dict)
    roots: dict[str, Path] = field(default_factory=dict)
    targets: list[ModuleFile] = field(default_factory=list)


def discover(targets: Sequence[str], generated: Sequence[str] = ()) -> list[Layout]:
    """Resolve `targets` and index the first-party packages they belong to: one `Layout` per
    sys.path root, since `pkg` under one root and `pkg` under another (a test fixture copy,
    say) are different packages.

    `generated` names modules the build creates (a compiled extension, a `_build_info.py`
    written by setup.py): they count as existing, with names that cannot be checked.

    Raises TargetError (one line, for the CLI's exit 2) for a target that does not exist or is
    not Python.
    """
    layouts: dict[Path, Layout] = {}
    namer = _Namer()
    seen: set[Path] = set()
    for target in targets:
        for path in _files_of(_locate(target)):
            resolved = path.resolve()
            if resolved in seen:
                continue
            seen.add(resolved)
            root, name, is_package = namer.module_of(resolved)
            layout = layouts.setdefault(root, Layout())
            layout.roots.setdefault(name.partition(".")[0], root)
            kind = STUB if resolved.suffix == ".pyi" else SOURCE
            layout.targets.append(ModuleFile(name, resolved, kind, is_package))
    for layout in layouts.values():
        for top, root in layout.roots.items():
            _index_top(root, top, layout.modules)
        for name in generated:
            top = name.partition(".")[0]
            if top in layout.roots and name not in layout.modules:
                path = layout.roots[top].joinpath(*name.split("."))
                layout.modules[name] = ModuleFile(name, path, EXTENSION, False)
        layout.targets.sort(key=lambda m: str(m.path))
    return [layouts[root] for root in sorted(layouts)]


def _locate(target: str) -> Path:
    path = Path(target)
    if path.exists():
        if path.is_file() and path.suffix not in _CHECKED_SUFFIXES:
            raise TargetError(f"not a Python file: {target}")
        return path
    if all(part.isidentifier() for part in target.split(".")):
        found = _find_package(target)
        if found is not None:
            return found
    raise TargetError(f"no such file, directory or importable package: {target}")


def _find_package(dotted: str) -> Path | None:
    """Locate an installed package without importing it (find_spec of a top-level name runs no
    package code; submodules are then looked up on disk)."""
    top, _, rest = dotted.partition(".")
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    if spec.submodule_search_locations:
        base = Path(next(iter(spec.submodule_search_locations)))
    elif spec.origin and not rest:
        return Path(spec.origin)
    else:
        return None
    if not rest:
        return base
    below = base.joinpath(*rest.split("."))
    for candidate in (below, below.with_suffix(".py")):
        if candidate.exists():
            return candidate
    return None


def _files_of(path: Path) -> Iterator[Path]:
    if path.is_file():
        yield path
        return
    for dirpath, dirnames, filenames in os.walk(path):
        dirnames[:] = sorted(d for d in dirnames if not _skipped_dir(Path(dirpath), d))
        for filename in sorted(filenames):
            if filename.endswith(_CHECKED_SUFFIXES):
                yield Path(dirpath, filename)


def _skipped_dir(parent: Path, name: str) -> bool:
    if name.startswith(".") or name in _SKIP_DIRS or name.endswith(".egg-info"):
        return True
    return (parent / name / "pyvenv.cfg").exists()  # a virtual environment


class _Namer:
    """Module names by walking up `__init__.py` files, with one stat per directory at most."""

    def __init__(self) -> None:
        self._is_package_dir: dict[Path, bool] = {}

    def _package_dir(self, directory: Path) -> bool:
        known = self._is_package_dir.get(directory)
        if known is None:
            known = directory.name.isidentifier() and (directory / "__init__.py").is_file()
            self._is_package_dir[directory] = known
        return known

    def module_of(self, file: Path) -> tuple[Path, str, bool]:
        """(sys.path root, dotted module name, is a package `__init__`) for a Python file."""
        stem = file.name.partition(".")[0]
        is_package = stem == "__init__"
        parts = [] if is_package else [stem]
        directory = file.parent
        while self._package_dir(directory):
            parts.append(directory.name)
            directory = directory.parent
        if not parts:  # an `__init__.py` in a directory that is not a package name
            parts = [file.parent.name]
            directory = file.parent.parent
        return directory, ".".join(reversed(parts)), is_package


def _index_top(root: Path, top: str, modules: dict[str, ModuleFile]) -> None:
    package_dir = root / top
    if package_dir.is_dir():
        _index_dir(package_dir, top, modules)
        return
    for suffix, kind in ((".py", SOURCE), (".pyi", STUB)):
        if (root / (top + suffix)).is_file():
            modules[top] = ModuleFile(top, root / (top + suffix), kind, False)
            return


def _index_dir(directory: Path, name: str, modules: dict[str, ModuleFile]) -> None:
    """Index a package directory the way the import system's FileFinder would see it: a
    regular package beats a module file, which beats a stub, an extension, a namespace dir."""
    init = directory / "__init__.py"
    if init.is_file():
        modules[name] = ModuleFile(name, init, SOURCE, True)
    else:
        modules[name] = ModuleFile(name, directory, NAMESPACE, True)
    found: dict[str, tuple[int, Path, str]] = {}
    subdirs: list[str] = []
    with os.scandir(directory) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                if entry.name.isidentifier() and not _skipped_dir(directory, entry.name):
                    subdirs.append(entry.name)
                continue
            stem, dot, suffix = entry.name.partition(".")
            if not stem.isidentifier() or stem == "__init__" or not dot:
                continue
            if suffix == "py":
                rank, kind = 1, SOURCE
            elif suffix == "pyi":
                rank, kind = 2, STUB
            elif entry.name.endswith(_EXTENSION_SUFFIXES):
                rank, kind = 3, EXTENSION
            else:
                continue
            if stem not in found or rank < found[stem][0]:
                found[stem] = (rank, Path(entry.path), kind)
    for sub in sorted(subdirs):
        if (directory / sub / "__init__.py").is_file() or sub not in found:
            _index_dir(directory / sub, f"{name}.{sub}", modules)
            found.pop(sub, None)
    for stem, (_, path, kind) in sorted(found.items()):
        modules[f"{name}.{stem}"] = ModuleFile(f"{name}.{stem}", path, kind, False)
