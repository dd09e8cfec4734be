"""Directories the built wheel leaves out (VAI005): a folder without `__init__.py` inside a
regular package.

From the source tree such a folder imports fine (the import system makes it a PEP 420
namespace package), but setuptools' `find_packages()` only descends into folders holding an
`__init__.py`, so the folder and everything below it are missing once the wheel is installed.
Whether the project ships namespace folders anyway is read, never run, from the nearest
pyproject.toml / setup.cfg / setup.py above the sys.path root: `find_namespace_packages(`,
`packages = find_namespace:`, `[tool.setuptools.packages.find]` (whose `namespaces` defaults
to true) or a `[project]` table left to setuptools' auto-discovery (which finds them too).
"""

from __future__ import annotations

import configparser
import sys
from dataclasses import dataclass, field
from pathlib import Path

from migrator.verify_imports.discovery import NAMESPACE, SOURCE, Layout, ModuleFile

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

_PROJECT_FILES = ("pyproject.toml", "setup.cfg", "setup.py")
_NO_CONFIG = "find_packages()"


@dataclass(frozen=True)
class Unpackaged:
    """The namespace folders nested in a regular package that the wheel leaves out:
    {dotted name: ModuleFile (the folder)}, outermost ones only, and `finder`, what leaves them
    out ("setup.py's find_packages()"), for messages. Empty when the packaging ships them."""

    dirs: dict[str, ModuleFile] = field(default_factory=dict)
    finder: str = ""

    def outermost(self, dotted: str) -> str:
        """The left-out folder `dotted` lies in, or is ("" when none)."""
        if not self.dirs:
            return ""
        parts = dotted.split(".")
        for end in range(2, len(parts) + 1):
            prefix = ".".join(parts[:end])
            if prefix in self.dirs:
                return prefix
        return ""


def find_unpackaged(layout: Layout) -> Unpackaged:
    """The folders of `layout` a setuptools wheel would miss (packaging config read lazily:
    only when such a folder exists)."""
    modules = layout.modules
    nested = {}
    for name, mod in modules.items():
        parent = modules.get(name.rpartition(".")[0])
        if mod.kind == NAMESPACE and parent is not None and parent.kind == SOURCE \
                and parent.is_package:
            nested[name] = mod
    if not nested:
        return Unpackaged()
    finder = skipping_finder(next(iter(layout.roots.values())))
    return Unpackaged(nested, finder) if finder else Unpackaged()


def skipping_finder(root: Path) -> str:
    """What leaves namespace folders out of the wheel of the project above sys.path `root`
    ("setup.py's find_packages()", ...), or "" when its packaging config ships them."""
    project = _project_dir(root)
    if project is None:
        return _NO_CONFIG
    setup_py = _read(project / "setup.py")
    if "find_namespace_packages(" in setup_py:
        return ""
    if "find_packages(" in setup_py:
        return "setup.py's find_packages()"
    cfg_packages = _setup_cfg_packages(project / "setup.cfg")
    if cfg_packages == "find_namespace:":
        return ""
    if cfg_packages == "find:":
        return "setup.cfg's packages = find:"
    pyproject = _toml(project / "pyproject.toml")
    setuptools_table = _table(_table(pyproject, "tool"), "setuptools")
    packages = setuptools_table.get("packages")
    if isinstance(packages, dict) and isinstance(packages.get("find"), dict):
        if packages["find"].get("namespaces", True) is False:
            return "pyproject.toml's namespaces = false"
        return ""
    auto_discovery = ("project" in pyproject and packages is None and cfg_packages is None
                      and "packages" not in setup_py)
    return "" if auto_discovery else _NO_CONFIG


def _project_dir(root: Path) -> Path | None:
    """The nearest folder at or above `root` holding packaging config; None past a repo root."""
    for directory in (root, *root.parents):
        if any((directory / name).is_file() for name in _PROJECT_FILES):
            return directory
        if (directory / ".git").exists():
            return None
    return None


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def _setup_cfg_packages(path: Path) -> str | None:
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(_read(path))
    except configparser.Error:
        return None
    value = parser.get("options", "packages", fallback=None)
    return value.strip() if value is not None else None


def _toml(path: Path) -> dict[str, object]:
    try:
        return tomllib.loads(_read(path))
    except tomllib.TOMLDecodeError:
        return {}


def _table(data: dict[str, object], key: str) -> dict[str, object]:
    value = data.get(key)
    return value if isinstance(value, dict) else {}
