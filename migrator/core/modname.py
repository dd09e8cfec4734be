"""Path -> dotted module name, the one rule both tools use, and what a relative import names.

A Python file's module name is its stem below the chain of package folders above it (folders
whose name is an identifier and that hold an `__init__.py` file), as the import system finds
it from the folder above that chain (its sys.path root).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path


def is_package_dir(folder: Path) -> bool:
    """Whether `folder` is a link of the package chain: an identifier holding `__init__.py`."""
    return folder.name.isidentifier() and (folder / "__init__.py").is_file()


def package_inits(path: Path) -> list[Path]:
    """The `__init__.py` of each package folder above `path` (a file or a folder), nearest
    first: the files that give `path`'s modules their dotted names."""
    found = []
    folder = path.parent
    while is_package_dir(folder):
        found.append(folder / "__init__.py")
        folder = folder.parent
    return found


class ModuleNamer:
    """Names modules by walking up package folders; one stat per folder at most, so build one
    per run (it does not notice files created after it looked)."""

    def __init__(self) -> None:
        self._is_package_dir: dict[Path, bool] = {}

    def _package_dir(self, folder: Path) -> bool:
        known = self._is_package_dir.get(folder)
        if known is None:
            known = is_package_dir(folder)
            self._is_package_dir[folder] = known
        return known

    def module_of(self, file: Path) -> tuple[Path, str, bool]:
        """(sys.path root, dotted module name, whether `file` is a package `__init__`).

        The name may hold parts that are not identifiers (a file `my-script.py`, an
        `__init__.py` in a folder `my-pkg`, which still names that folder): callers that
        need an importable name check it.
        """
        stem = file.name.partition(".")[0]
        is_init = stem == "__init__"
        parts = [] if is_init else [stem]
        folder = file.parent
        while self._package_dir(folder):
            parts.append(folder.name)
            folder = folder.parent
        if not parts:
            parts = [file.parent.name]
            folder = file.parent.parent
        return folder, ".".join(reversed(parts)), is_init


def package_of(
    path: Path, root: Path, packages: Iterable[str], namer: ModuleNamer | None = None
) -> str | None:
    """The package relative imports in `path` are anchored at, or None for a top-level file
    (or one whose module name is not importable).

    When the package folders above `path` do not reach one of the table's top-level
    `packages` (namespace packages, a tree unpacked without `__init__` files), the path
    below `root` is used from the first component naming such a package.
    """
    path = path.absolute()
    _, name, is_init = (namer or ModuleNamer()).module_of(path)
    parts = name.split(".")
    tops = set(packages)
    if parts[0] not in tops:
        try:
            rel = path.relative_to(root.absolute()).with_suffix("").parts
        except ValueError:
            rel = ()
        for index, part in enumerate(rel):
            if part in tops:
                parts = [p for p in rel[index:] if p != "__init__"]
                break
    if not parts or not all(p.isidentifier() for p in parts):
        return None
    return ".".join(parts if is_init else parts[:-1]) or None


class RelativeImportError(ValueError):
    """A relative import that Python itself would reject (message as Python words it)."""


def resolve_relative(package: str, level: int, module: str | None) -> str:
    """The absolute module `from <level dots><module> import ...` names in a file of
    `package` (`a.b` for `a/b/c.py` and for `a/b/__init__.py`), as importlib resolves it.

    `level` 0 gives `module` itself ("" for None).

    Raises:
        RelativeImportError: `package` is "" (no parent package), or `level` climbs above
            its top-level package.
    """
    if level == 0:
        return module or ""
    if not package:
        raise RelativeImportError("attempted relative import with no known parent package")
    bits = package.rsplit(".", level - 1)
    if len(bits) < level:
        raise RelativeImportError("attempted relative import beyond top-level package")
    return f"{bits[0]}.{module}" if module else bits[0]
