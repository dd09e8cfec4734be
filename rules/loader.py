"""Reads a move table from TOML into the typed model; every error names the entry at fault."""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

from .schema import (
    STAY_RE,
    VERSION_RE,
    ModuleMove,
    Pack,
    Removal,
    RulesError,
    Step,
    SymbolMove,
    is_dotted,
)
from .validation import validate


def _toml() -> ModuleType:
    """The TOML reader, imported on first use: the copy of `rules` that `vam refactor` writes
    into a package (with the shims, see migrator/refactor/runtime.py) never reads TOML, and must
    import on 3.10, where tomli is not stdlib."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - exercised on 3.10 only
        import tomli as tomllib
    return tomllib


def load(path: str | Path) -> Pack:
    """Read and validate a move table from a TOML file.

    Raises:
        RulesError: unreadable file, bad TOML, or a table that fails validation.
    """
    path = Path(path)
    tomllib = _toml()
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RulesError(f"{path}: no such rules file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise RulesError(f"{path}: cannot read rules file: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise RulesError(f"{path}: invalid TOML: {exc}") from None
    return parse(raw, source=str(path))


def parse(raw: Mapping[str, Any], source: str = "<table>") -> Pack:
    """Build a `Pack` from decoded TOML and validate it (see `validate`)."""
    _only_keys(raw, {"pack", "step"}, source)
    meta = raw.get("pack")
    if not isinstance(meta, Mapping):
        raise RulesError(f"{source}: missing [pack] table")
    _only_keys(
        meta,
        {
            "name",
            "description",
            "packages",
            "shims-env",
            "shims-from",
            "default-from",
            "version-helper",
        },
        f"{source}: [pack]",
    )
    name = _str(meta, "name", f"{source}: [pack]")
    steps_raw = raw.get("step")
    if not isinstance(steps_raw, list) or not steps_raw:
        raise RulesError(f"{source}: pack {name!r} has no [[step]]")
    steps = tuple(_parse_step(s, i, source) for i, s in enumerate(steps_raw))
    packages = meta.get("packages")
    if packages is None:
        packages = sorted({old.split(".")[0] for step in steps for old, _ in step.olds()})
    if not isinstance(packages, list) or not all(is_dotted(p) and "." not in p for p in packages):
        raise RulesError(f"{source}: [pack] packages must be a list of top-level package names")
    pack = Pack(
        name=name,
        description=str(meta.get("description", "")),
        packages=tuple(packages),
        steps=steps,
        source=source,
        shims_env=str(meta.get("shims-env", "")),
        shims_from=_pack_version(meta, "shims-from", source),
        default_from=_pack_version(meta, "default-from", source),
        version_helper=_helper_module(meta, source),
    )
    validate(pack)
    return pack


def _helper_module(meta: Mapping[str, Any], source: str) -> str:
    """`[pack] version-helper`: the module that defines the version helper; "" when absent."""
    value = meta.get("version-helper", "")
    if not isinstance(value, str) or (value and not is_dotted(value)):
        raise RulesError(f"{source}: [pack] version-helper must be a dotted module name, "
                         f"got {value!r}")
    return value


def _pack_version(meta: Mapping[str, Any], key: str, source: str) -> str:
    """An optional `[pack]` version (`shims-from`, `default-from`); "" when absent."""
    value = meta.get(key, "")
    if not isinstance(value, str) or (value and not VERSION_RE.match(value)):
        raise RulesError(f"{source}: [pack] malformed {key} version {value!r}")
    return value


def _parse_step(raw: Any, index: int, source: str) -> Step:
    where = f"{source}: step[{index}]"
    if not isinstance(raw, Mapping):
        raise RulesError(f"{where}: must be a table")
    _only_keys(
        raw,
        {"version", "first-release", "removal", "summary", "module", "symbol", "removed", "stay"},
        where,
    )
    version = _str(raw, "version", where)
    if not VERSION_RE.match(version):
        raise RulesError(f"{where}: malformed version {version!r}")
    where = f"{source}: step {version}"
    removal = raw.get("removal")
    if removal is not None and not (isinstance(removal, str) and VERSION_RE.match(removal)):
        raise RulesError(f"{where}: malformed removal version {removal!r}")
    first = raw.get("first-release", "")
    if first != "" and not (isinstance(first, str) and VERSION_RE.match(first)):
        raise RulesError(f"{where}: malformed first-release version {first!r}")
    modules = tuple(
        ModuleMove(
            old=_name(entry, "old", w),
            new=_name(entry, "new", w),
            intermediate=_bool(entry, "intermediate", w),
            submodules=tuple(_submodules(entry, w)),
            where=w,
        )
        for w, entry in _entries(
            raw, "module", {"old", "new", "intermediate", "submodules", "note"}, where
        )
    )
    symbols = tuple(
        SymbolMove(old=_name(entry, "old", w), new=_name(entry, "new", w), where=w)
        for w, entry in _entries(raw, "symbol", {"old", "new", "note"}, where)
    )
    removed = tuple(
        Removal(old=_name(entry, "old", w), hint=_str(entry, "hint", w), where=w)
        for w, entry in _entries(raw, "removed", {"old", "hint"}, where)
    )
    stay_raw = raw.get("stay", {})
    if not isinstance(stay_raw, Mapping):
        raise RulesError(f"{where}: [step.stay] must be a table with `names`")
    _only_keys(stay_raw, {"names"}, f"{where}: stay")
    stay = stay_raw.get("names", [])
    if not isinstance(stay, list):
        raise RulesError(f"{where}: stay.names must be a list")
    for i, item in enumerate(stay):
        if not isinstance(item, str) or not STAY_RE.match(item):
            raise RulesError(f"{where}: stay.names[{i}]: malformed dotted name {item!r}")
    return Step(
        version=version,
        removal=removal,
        summary=str(raw.get("summary", "")),
        modules=modules,
        symbols=symbols,
        removed=removed,
        stay=tuple(stay),
        first_release=first,
    )


def _entries(
    raw: Mapping[str, Any], key: str, allowed: set[str], where: str
) -> Iterator[tuple[str, Mapping[str, Any]]]:
    items = raw.get(key, [])
    if not isinstance(items, list):
        raise RulesError(f"{where}: `{key}` must be an array of tables ([[step.{key}]])")
    for i, entry in enumerate(items):
        w = f"{where}: {key}[{i}]"
        if not isinstance(entry, Mapping):
            raise RulesError(f"{w}: must be a table")
        old = entry.get("old")
        if isinstance(old, str):
            w = f"{w} ({old})"
        _only_keys(entry, allowed, w)
        yield w, entry


def _submodules(entry: Mapping[str, Any], where: str) -> list[str]:
    subs = entry.get("submodules", [])
    if not isinstance(subs, list) or not all(is_dotted(s) for s in subs):
        raise RulesError(f"{where}: submodules must be a list of dotted names")
    return subs


def _only_keys(raw: Mapping[str, Any], allowed: set[str], where: str) -> None:
    unknown = sorted(set(raw) - allowed)
    if unknown:
        raise RulesError(
            f"{where}: unknown key {unknown[0]!r} (valid keys: {', '.join(sorted(allowed))})"
        )


def _str(raw: Mapping[str, Any], key: str, where: str) -> str:
    value = raw.get(key)
    if not isinstance(value, str) or not value:
        raise RulesError(f"{where}: `{key}` must be a non-empty string")
    return value


def _bool(raw: Mapping[str, Any], key: str, where: str) -> bool:
    value = raw.get(key, False)
    if not isinstance(value, bool):
        raise RulesError(f"{where}: `{key}` must be true or false")
    return value


def _name(raw: Mapping[str, Any], key: str, where: str) -> str:
    value = raw.get(key)
    if value is None:
        raise RulesError(f"{where}: `{key}` is missing")
    if not is_dotted(value):
        raise RulesError(f"{where}: `{key}` is not a dotted name: {value!r}")
    return str(value)
