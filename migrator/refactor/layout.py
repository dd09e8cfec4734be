"""Where a dotted module lives below a source root, and where a moved one will live.

Module `a.b.c` is the file `a/b/c.py` or the package folder `a/b/c/` (with `__init__.py`).
Nothing here writes; the functions only look at the disk as it is before the move.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

# Never moved along with a package: caches and editor droppings are regenerated.
_SKIPPED = frozenset({"__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache"})


def module_path(root: Path, dotted: str) -> Path | None:
    """The file (`a/b/c.py`) or package folder (`a/b/c/`) of `dotted` below `root`, or None
    when neither exists (a package folder counts only with its `__init__.py`)."""
    base = root.joinpath(*dotted.split("."))
    if (base / "__init__.py").is_file():
        return base
    module = base.with_name(base.name + ".py")
    return module if module.is_file() else None


def package_files(folder: Path) -> Iterator[Path]:
    """Every regular file below package `folder`, sorted, caches left out (data files move
    with their package)."""
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder).parts
        if any(part in _SKIPPED for part in rel) or path.suffix in (".pyc", ".pyo"):
            continue
        if path.is_file() and not path.is_symlink():
            yield path


def module_file(root: Path, dotted: str, packages: set[str]) -> Path:
    """The source file module `dotted` will have: `a/b/c/__init__.py` when `a.b.c` is (or
    will be) a package (it is in `packages`, or its folder holds an `__init__.py`), else
    `a/b/c.py`."""
    base = root.joinpath(*dotted.split("."))
    if dotted in packages or (base / "__init__.py").is_file():
        return base / "__init__.py"
    return base.with_name(base.name + ".py")


def dotted_of(root: Path, path: Path) -> str:
    """The dotted module name of source file `path` below `root` (`a/b/__init__.py` is
    `a.b`)."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts and parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def package_of_file(root: Path, path: Path) -> str:
    """The package a relative import in `path` (below `root`) is anchored at."""
    dotted = dotted_of(root, path)
    return dotted if path.name == "__init__.py" else dotted.rpartition(".")[0]
