"""Turn command-line targets into a first-party layout: which files to check, which modules exist.

A target is a package directory, a plain directory (every Python file under it), a single file
(what pre-commit passes) or an importable package name. Whatever the target, the whole top-level
package it belongs to is indexed, found by walking up through `__init__.py` files, so checking
one file gives the same findings for that file as checking the whole tree. Directories are walked
by `migrator.core.walk`, as `vam migrate` walks them (`.gitignore`, tool folders, build output).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from migrator.core.modname import ModuleNamer
from migrator.core.walk import glob_regex, skipped_dir, walk

SOURCE = "source"
STUB = "stub"
EXTENSION = "extension"
NAMESPACE = "namespace"

_CHECKED_SUFFIXES = (".py", ".pyi")
_CHECKED = glob_regex(f"*{suffix}" for suffix in _CHECKED_SUFFIXES)
_EXTENSION_SUFFIXES = (".so", ".pyd")
_SPEC_TIMEOUT_S = 60.0  # asking another interpreter where a package lives (its startup only)


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


def discover(
    targets: Sequence[str], generated: Sequence[str] = (), skipped: list[Path] | None = None,
    python: str | None = None,
) -> list[Layout]:
    """Resolve `targets` and index the first-party packages they belong to: one `Layout` per
    sys.path root, since `pkg` under one root and `pkg` under another (a test fixture copy,
    say) are different packages.

    `generated` names modules the build creates (a compiled extension, a `_build_info.py`
    written by setup.py): they count as existing, with names that cannot be checked.

    Files met in a walk that are not regular files (FIFOs, sockets) are appended to `skipped`.
    A target given as a package name is located as the interpreter `python` sees it (default:
    the running one), without importing it.

    Raises TargetError (one line, for the CLI's exit 2) for a target that does not exist or is
    not Python.
    """
    layouts: dict[Path, Layout] = {}
    namer = ModuleNamer()
    seen: set[Path] = set()
    for target in targets:
        for path in _files_of(_locate(target, python), skipped):
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


def package_layout(root: Path, tops: Iterable[str]) -> Layout:
    """Every module of the top-level packages `tops` that lie in `root` (no targets): a
    release's tree, indexed for questions about what its modules bind."""
    layout = Layout()
    for top in tops:
        _index_top(root, top, layout.modules)
        if top in layout.modules:
            layout.roots[top] = root
    return layout


def _locate(target: str, python: str | None) -> Path:
    path = Path(target)
    if path.exists():
        if path.is_file() and path.suffix not in _CHECKED_SUFFIXES:
            raise TargetError(f"not a Python file: {target}")
        return path
    if all(part.isidentifier() for part in target.split(".")):
        found = _find_package(target, python)
        if found is not None:
            return found
    seen_by = f" (for {python})" if python else ""
    raise TargetError(f"no such file, directory or importable package{seen_by}: {target}")


def _find_package(dotted: str, python: str | None) -> Path | None:
    """Locate an installed package without importing it (find_spec of a top-level name runs no
    package code; submodules are then looked up on disk)."""
    top, _, rest = dotted.partition(".")
    found = _top_level_spec(top) if python is None else _top_level_spec_in(python, top)
    if found is None:
        return None
    locations, origin = found
    if locations:
        base = Path(locations[0])
    elif origin and not rest:
        return Path(origin)
    else:
        return None
    if not rest:
        return base
    below = base.joinpath(*rest.split("."))
    for candidate in (below, below.with_suffix(".py")):
        if candidate.exists():
            return candidate
    return None


def _top_level_spec(top: str) -> tuple[list[str], str | None] | None:
    """(submodule search locations, origin) of top-level module `top`; None when not found."""
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    return list(spec.submodule_search_locations or []), spec.origin


# Runs in the --python interpreter; prints _top_level_spec's answer as JSON.
_SPEC_QUERY = """
import importlib.util, json, sys
try:
    spec = importlib.util.find_spec(sys.argv[1])
except (ImportError, ValueError):
    spec = None
found = None if spec is None else [list(spec.submodule_search_locations or []), spec.origin]
print(json.dumps(found))
"""


def _top_level_spec_in(python: str, top: str) -> tuple[list[str], str | None] | None:
    """`_top_level_spec` as another interpreter sees it (its own sys.path and site-packages).

    Raises TargetError when `python` cannot be run or answers nonsense.
    """
    try:
        done = subprocess.run([python, "-c", _SPEC_QUERY, top], capture_output=True, text=True,
                              stdin=subprocess.DEVNULL, timeout=_SPEC_TIMEOUT_S)
        answer = json.loads(done.stdout.strip().splitlines()[-1]) if done.returncode == 0 else ()
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError) as exc:
        raise TargetError(f"cannot ask {python} where '{top}' is: {exc}") from None
    if answer is None:
        return None
    if not (isinstance(answer, list) and len(answer) == 2 and isinstance(answer[0], list)):
        last = done.stderr.strip().splitlines()[-1:] or ["no answer"]
        raise TargetError(f"cannot ask {python} where '{top}' is: {last[0]}")
    return [str(p) for p in answer[0]], answer[1] if isinstance(answer[1], str) else None


def _files_of(path: Path, skipped: list[Path] | None) -> Iterator[Path]:
    if path.is_file():
        yield path
    elif path.is_dir():
        for full, _ in walk(str(path), _CHECKED, skipped=skipped):
            yield Path(full)


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
                if entry.name.isidentifier() and not skipped_dir(entry.path):
                    subdirs.append(entry.name)
                continue
            stem, dot, suffix = entry.name.partition(".")
            if not stem.isidentifier() or stem == "__init__" or not dot:
                continue
            if not entry.is_file():  # a FIFO or socket named like a module: never read it
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
