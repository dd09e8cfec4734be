"""A distribution's import index as JSON data, for `migrator.core.indexcache`.

What `verify-imports --against` needs of a release, once every module is parsed: its modules
(name, kind, path), the index of each module with source (`index.ModuleInfo`) and what each
module-level `__getattr__` serves (`forwarding.Getattr`). Paths are stored relative to the
folder holding the packages and put back below the folder of this run, so an entry written
for one copy of an archive serves another. `decode(encode(x))` gives back equal objects;
`decode` raises ValueError on anything else (the caller rebuilds).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from migrator.core.forwarding import Getattr, Served
from migrator.verify_imports.discovery import Layout, ModuleFile
from migrator.verify_imports.index import ImportedName, ImportStmt, ModuleInfo

KIND = "verify-imports"
# Modules whose code decides what an entry holds: a change to any of them is a new tag.
CODE = (*(Path(__file__).parent / name for name in (
    "distindex.py", "index.py", "against.py", "discovery.py", "project.py")),
    Path(__file__).parents[1] / "core" / "forwarding.py")


def encode(layout: Layout, infos: dict[Path, ModuleInfo], getattrs: dict[str, Getattr | None],
           base: Path, version: str | None) -> dict[str, Any]:
    """JSON data for a release indexed below `base` (`Project.indexed()` gives the maps)."""
    def rel(path: Path) -> str:
        return path.relative_to(base).as_posix()

    return {
        "version": version,
        "roots": sorted(layout.roots),
        "modules": [[m.name, rel(m.path), m.kind, m.is_package] for m in layout.modules.values()],
        "infos": {rel(path): _info_data(info) for path, info in infos.items()},
        "getattrs": {name: None if found is None else _getattr_data(found)
                     for name, found in getattrs.items()},
    }


def decode(data: Any, base: Path) -> tuple[Layout, dict[Path, ModuleInfo],
                                            dict[str, Getattr | None], str | None]:
    """(layout, infos, getattrs, version) from `encode`'s data, paths below `base`.

    Raises ValueError when `data` is not what `encode` writes."""
    try:
        layout = Layout()
        for root in data["roots"]:
            layout.roots[str(root)] = base
        for name, rel, kind, is_package in data["modules"]:
            layout.modules[name] = ModuleFile(name, base / rel, kind, bool(is_package))
        infos = {base / rel: _info(item) for rel, item in data["infos"].items()}
        getattrs = {name: None if item is None else _getattr(item)
                    for name, item in data["getattrs"].items()}
        version = data["version"]
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        raise ValueError(f"not a verify-imports index: {exc!r}") from None
    if version is not None and not isinstance(version, str):
        raise ValueError("not a verify-imports index: bad version")
    return layout, infos, getattrs, version


def _info_data(info: ModuleInfo) -> list[Any]:
    return [
        {name: list(binding) for name, binding in info.bindings.items()},
        {name: [list(b) for b in later] for name, later in info.rebinds.items()},
        sorted(info.typing_names),
        sorted(info.defined),
        [_import_data(stmt) for stmt in info.imports],
        info.all_names,
        info.has_getattr,
        info.dynamic_globals,
        None if info.syntax_error is None else list(info.syntax_error),
    ]


def _info(item: list[Any]) -> ModuleInfo:
    bindings, rebinds, typing_names, defined, imports, all_names, has_getattr, dynamic, error = item
    return ModuleInfo(
        bindings={name: (pos, line) for name, (pos, line) in bindings.items()},
        rebinds={name: [(pos, line) for pos, line in later] for name, later in rebinds.items()},
        typing_names=set(typing_names),
        defined=set(defined),
        imports=[_import(stmt) for stmt in imports],
        all_names=None if all_names is None else [str(n) for n in all_names],
        has_getattr=bool(has_getattr),
        dynamic_globals=bool(dynamic),
        syntax_error=None if error is None else (error[0], error[1], error[2]),
    )


def _import_data(stmt: ImportStmt) -> list[Any]:
    return [stmt.is_from, stmt.module, stmt.level,
            [[a.name, a.asname, a.line, a.col] for a in stmt.names],
            stmt.line, stmt.col, stmt.pos, stmt.typing_only, stmt.guarded]


def _import(item: list[Any]) -> ImportStmt:
    is_from, module, level, names, line, col, pos, typing_only, guarded = item
    return ImportStmt(bool(is_from), module, level,
                      tuple(ImportedName(n, a, ln, c) for n, a, ln, c in names),
                      line, col, pos, bool(typing_only), bool(guarded))


def _getattr_data(found: Getattr) -> dict[str, Any]:
    return {"served": [[s.name, s.target, s.deprecated] for s in found.served.values()],
            "closed": found.closed}


def _getattr(item: dict[str, Any]) -> Getattr:
    served = {name: Served(name, target, bool(deprecated))
              for name, target, deprecated in item["served"]}
    return Getattr(served, bool(item["closed"]))
