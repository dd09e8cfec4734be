"""Which files a run looks at, and what each file is (Python, notebook, or text).

Directories are walked top-down: `.gitignore` files (through pathspec), `--exclude` globs,
version-control and cache folders, virtual environments (any folder with `pyvenv.cfg`) and
build folders are skipped; symlinks met during the walk are never followed. A file named on
the command line is looked at unless an `exclude` glob matches it (pre-commit passes every
file by name).
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pathspec

SKIPPED_DIRS = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        ".bzr",
        "__pycache__",
        "node_modules",
        ".tox",
        ".nox",
        ".venv",
        ".mypy_cache",
        ".ruff_cache",
        ".pytest_cache",
        ".hypothesis",
        ".eggs",
        "site-packages",
    }
)
# Build output of a Python project: skipped where they sit next to its pyproject.toml,
# setup.py or setup.cfg, unless they are packages themselves.
BUILD_DIRS = frozenset({"build", "dist"})
_PROJECT_FILES = ("pyproject.toml", "setup.py", "setup.cfg")

DEFAULT_TEXT_GLOBS = (
    "*.py",
    "*.pyi",
    "*.ipynb",
    "*.md",
    "*.markdown",
    "*.rst",
    "*.txt",
    "*.yaml",
    "*.yml",
    "*.json",
    "*.jsonc",
    "*.toml",
    "*.ini",
    "*.cfg",
    "*.conf",
    "*.sh",
    "*.bash",
    "*.zsh",
    "*.env",
    "Dockerfile",
    "Dockerfile.*",
    "*.Dockerfile",
    "*.dockerfile",
    "Containerfile",
    "Makefile",
    "*.mk",
    "*.j2",
    "*.jinja",
    "*.tpl",
    "*.properties",
    "*.pyx",
    "*.pxd",
    "*.html",
    "*.xml",
    "*.tf",
    "*.bat",
    "*.ps1",
    "*.in",
    "*.service",
    "Jenkinsfile",
    "README",
)


@dataclass(frozen=True)
class SourceFile:
    """A file to process and the root it was found under (for relative imports)."""

    path: Path
    root: Path
    kind: str  # "python" | "notebook" | "text"


def kind_of(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix in (".py", ".pyi"):
        return "python"
    if suffix == ".ipynb":
        return "notebook"
    return "text"


def iter_files(
    paths: Iterable[Path],
    exclude: Iterable[str] = (),
    text_globs: Iterable[str] = DEFAULT_TEXT_GLOBS,
) -> Iterator[SourceFile]:
    """Every file to look at below `paths`, each once, in a stable order.

    Raises:
        FileNotFoundError: a path does not exist (a usage error for the CLI).
    """
    excluded = _glob_regex(exclude)
    wanted = _glob_regex(text_globs)
    seen: set[str] = set()
    for given in paths:
        if not given.exists() and not given.is_symlink():
            raise FileNotFoundError(str(given))
        if str(given) == "":
            raise FileNotFoundError("''")
        if given.is_symlink():
            # Named on the command line: follow it (writes then replace the target, not the
            # link). Symlinks met during a walk are never followed.
            given = Path(os.path.realpath(given))
        # The walk follows no symlink, so below the resolved root every path is real:
        # one realpath per root identifies files given twice (`.` and `./src`).
        real = os.path.realpath(given)
        if given.is_dir():
            for full, rel in _walk(str(given), excluded, wanted):
                key = os.path.join(real, rel)
                if key not in seen:
                    seen.add(key)
                    path = Path(full)
                    yield SourceFile(path, given, kind_of(path))
        elif given.is_file() and real not in seen and not _excluded_file(given, excluded):
            seen.add(real)
            yield SourceFile(given, given.parent, kind_of(given))


def _excluded_file(path: Path, excluded: re.Pattern[str] | None) -> bool:
    """An `exclude` glob matches a file named on the command line (as pre-commit names
    them), or one of the folders on its path, as it would have during a walk."""
    parts = Path(os.path.normpath(path)).parts
    return any(_hit(excluded, part, "/".join(parts[: i + 1])) for i, part in enumerate(parts))


def _glob_regex(patterns: Iterable[str]) -> re.Pattern[str] | None:
    """One regex for a list of fnmatch-style globs (case-sensitive), None for no globs."""
    patterns = list(patterns)
    if not patterns:
        return None
    return re.compile("|".join(f"(?:{fnmatch.translate(p)})" for p in patterns))


def _hit(regex: re.Pattern[str] | None, name: str, rel: str) -> bool:
    return regex is not None and (regex.match(name) is not None or regex.match(rel) is not None)


def _walk(
    root: str, excluded: re.Pattern[str] | None, wanted: re.Pattern[str] | None
) -> Iterator[tuple[str, str]]:
    """(path, path relative to `root`) of every wanted file, top-down, sorted by name."""
    specs: list[tuple[str, pathspec.PathSpec]] = []
    stack: list[tuple[str, str]] = [(root, "")]
    while stack:
        folder, rel_dir = stack.pop()
        try:
            with os.scandir(folder) as scan:
                entries = sorted(scan, key=lambda e: e.name)
        except OSError:
            continue
        specs = [(base, spec) for base, spec in specs if _within(rel_dir, base)]
        if any(e.name == ".gitignore" for e in entries):
            spec = _load_gitignore(Path(folder) / ".gitignore")
            if spec is not None:
                specs.append((rel_dir, spec))
        folders = []
        for entry in entries:
            if entry.is_symlink():
                continue
            rel = os.path.join(rel_dir, entry.name) if rel_dir else entry.name
            if entry.is_dir(follow_symlinks=False):
                if not _skip_folder(entry, rel, excluded, specs):
                    folders.append((entry.path, rel))
            elif _hit(wanted, entry.name, rel) and not _hit(excluded, entry.name, rel):
                if not _ignored(rel, specs):
                    yield entry.path, rel
        stack.extend(reversed(folders))


def _skip_folder(
    entry: os.DirEntry[str],
    rel: str,
    excluded: re.Pattern[str] | None,
    specs: list[tuple[str, pathspec.PathSpec]],
) -> bool:
    return (
        entry.name in SKIPPED_DIRS
        or (entry.name in BUILD_DIRS and _build_output(entry.path))
        or entry.name.endswith(".egg-info")
        or os.path.exists(os.path.join(entry.path, "pyvenv.cfg"))
        or _hit(excluded, entry.name, rel)
        or _ignored(rel + "/", specs)
    )


def _build_output(folder: str) -> bool:
    parent = os.path.dirname(folder)
    if os.path.exists(os.path.join(folder, "__init__.py")):
        return False
    return any(os.path.exists(os.path.join(parent, name)) for name in _PROJECT_FILES)


def _within(rel_dir: str, base: str) -> bool:
    return base == "" or rel_dir == base or rel_dir.startswith(base + os.sep)


def _ignored(rel: str, specs: list[tuple[str, pathspec.PathSpec]]) -> bool:
    for base, spec in specs:
        sub = rel[len(base) + 1 :] if base else rel
        if spec.match_file(sub):
            return True
    return False


def _load_gitignore(path: Path) -> pathspec.PathSpec | None:
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    return pathspec.PathSpec.from_lines("gitwildmatch", lines)


def module_name(path: Path, root: Path, packages: Iterable[str]) -> tuple[str | None, bool]:
    """The dotted module name of a Python file, and whether it is a package `__init__`.

    Walks up through folders that hold an `__init__.py`. When that does not reach one of the
    table's top-level `packages` (namespace packages, a tree unpacked without `__init__`
    files), the path below `root` is used from the first component naming such a package.
    """
    path = path.absolute()
    is_init = path.stem == "__init__"
    parts: list[str] = [] if is_init else [path.stem]
    folder = path.parent
    while (folder / "__init__.py").exists() and folder != folder.parent:
        parts.insert(0, folder.name)
        folder = folder.parent
    tops = set(packages)
    if parts and parts[0] not in tops:
        try:
            rel = path.relative_to(root.absolute()).with_suffix("").parts
        except ValueError:
            rel = ()
        for index, part in enumerate(rel):
            if part in tops:
                parts = [p for p in rel[index:] if p != "__init__"]
                break
    if not parts:
        return None, is_init
    if not all(p.isidentifier() for p in parts):
        return None, is_init
    return ".".join(parts), is_init


def package_of(path: Path, root: Path, packages: Iterable[str]) -> str | None:
    """The package relative imports in `path` are anchored at, or None for a top-level file."""
    name, is_init = module_name(path, root, packages)
    if name is None:
        return None
    if is_init:
        return name
    head, _, _ = name.rpartition(".")
    return head or None
