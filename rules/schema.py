"""The move table: typed model, TOML loader and validation.

Stdlib only: the runtime shims read the same tables as the codemod, and must not pull in
libcst or click. Every error names the file, the step and the entry at fault.
"""

from __future__ import annotations

import keyword
import re
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

_COMPONENT = r"[A-Za-z_][A-Za-z0-9_]*"
_DOTTED_RE = re.compile(rf"^{_COMPONENT}(?:\.{_COMPONENT})*$")
_STAY_RE = re.compile(rf"^{_COMPONENT}(?:\.{_COMPONENT})*\*?$")
_VERSION_RE = re.compile(r"^(\d+(?:\.\d+)*)(?:(a|b|rc)(\d+))?(?:\.(post|dev)(\d+))?$")


class RulesError(ValueError):
    """A move table that cannot be used; the message names the entry at fault."""


@dataclass(frozen=True)
class ModuleMove:
    """`old` and every dotted name below it now live under `new`."""

    old: str
    new: str
    intermediate: bool = False
    submodules: tuple[str, ...] = ()
    where: str = ""


@dataclass(frozen=True)
class SymbolMove:
    """One name left module `old_module` (which stays) for `new_module`, maybe renamed."""

    old: str
    new: str
    where: str = ""

    @property
    def old_module(self) -> str:
        return self.old.rpartition(".")[0]

    @property
    def old_name(self) -> str:
        return self.old.rpartition(".")[2]

    @property
    def new_module(self) -> str:
        return self.new.rpartition(".")[0]

    @property
    def new_name(self) -> str:
        return self.new.rpartition(".")[2]


@dataclass(frozen=True)
class Removal:
    """`old` is gone with no replacement; references are reported, never rewritten."""

    old: str
    hint: str
    where: str = ""


@dataclass(frozen=True)
class Step:
    """The moves one release made, applied together and at most once per reference."""

    version: str
    removal: str | None
    summary: str
    modules: tuple[ModuleMove, ...] = ()
    symbols: tuple[SymbolMove, ...] = ()
    removed: tuple[Removal, ...] = ()
    stay: tuple[str, ...] = ()

    def moves(self) -> tuple[ModuleMove | SymbolMove, ...]:
        """Every rule with a target: module moves, then symbol moves."""
        return (*self.modules, *self.symbols)

    def olds(self) -> Iterator[tuple[str, ModuleMove | SymbolMove | Removal]]:
        rules: tuple[ModuleMove | SymbolMove | Removal, ...] = (*self.moves(), *self.removed)
        for rule in rules:
            yield rule.old, rule

    def stays(self, dotted: str) -> bool:
        """True if `dotted` is listed as staying put (exactly, or by a trailing `*`)."""
        for pattern in self.stay:
            if pattern.endswith("*"):
                if dotted.startswith(pattern[:-1]):
                    return True
            elif dotted == pattern:
                return True
        return False


@dataclass(frozen=True)
class Pack:
    """A versioned move table for one library."""

    name: str
    description: str
    packages: tuple[str, ...]
    steps: tuple[Step, ...]
    source: str = ""
    shims_env: str = ""
    extra: Mapping[str, Any] = field(default_factory=dict)

    def step(self, version: str) -> Step:
        for step in self.steps:
            if step.version == version:
                return step
        known = ", ".join(s.version for s in self.steps)
        raise RulesError(f"{self.name}: no step {version!r} (steps: {known})")

    @property
    def latest(self) -> str:
        return self.steps[-1].version


def version_key(version: str) -> tuple[Any, ...]:
    """Sort key for PEP 440-style versions (`0.14.0rc1` < `0.14.0` < `0.14.0.post1`).

    Raises:
        RulesError: `version` is not of the form N(.N)*[a|b|rcN][.postN|.devN].
    """
    match = _VERSION_RE.match(version)
    if not match:
        raise RulesError(f"malformed version {version!r}")
    release = tuple(int(p) for p in match.group(1).split("."))
    release = release + (0,) * (4 - len(release))
    pre = (match.group(2), int(match.group(3))) if match.group(2) else ("z", 0)
    if match.group(4) == "dev":
        post: tuple[int, int] = (-1, int(match.group(5)))
        if not match.group(2):
            pre = ("", 0)
    elif match.group(4) == "post":
        post = (1, int(match.group(5)))
    else:
        post = (0, 0)
    return (release, pre, post)


def is_dotted(name: object) -> bool:
    """True for `a.b.c` with identifier components that are not Python keywords."""
    if not isinstance(name, str) or not _DOTTED_RE.match(name):
        return False
    return not any(keyword.iskeyword(part) for part in name.split("."))


def load(path: str | Path) -> Pack:
    """Read and validate a move table from a TOML file.

    Raises:
        RulesError: unreadable file, bad TOML, or a table that fails validation.
    """
    path = Path(path)
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
    _only_keys(meta, {"name", "description", "packages", "shims-env"}, f"{source}: [pack]")
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
    )
    validate(pack)
    return pack


def _parse_step(raw: Any, index: int, source: str) -> Step:
    where = f"{source}: step[{index}]"
    if not isinstance(raw, Mapping):
        raise RulesError(f"{where}: must be a table")
    _only_keys(raw, {"version", "removal", "summary", "module", "symbol", "removed", "stay"}, where)
    version = _str(raw, "version", where)
    if not _VERSION_RE.match(version):
        raise RulesError(f"{where}: malformed version {version!r}")
    where = f"{source}: step {version}"
    removal = raw.get("removal")
    if removal is not None and not (isinstance(removal, str) and _VERSION_RE.match(removal)):
        raise RulesError(f"{where}: malformed removal version {removal!r}")
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
        if not isinstance(item, str) or not _STAY_RE.match(item):
            raise RulesError(f"{where}: stay.names[{i}]: malformed dotted name {item!r}")
    return Step(
        version=version,
        removal=removal,
        summary=str(raw.get("summary", "")),
        modules=modules,
        symbols=symbols,
        removed=removed,
        stay=tuple(stay),
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
    if not is_dotted(value):
        raise RulesError(f"{where}: `{key}` is not a dotted name: {value!r}")
    return str(value)


def _under(name: str, prefix: str) -> bool:
    """True if `name` is `prefix` or lies below it, by whole components."""
    return name == prefix or name.startswith(prefix + ".")


def validate(pack: Pack) -> None:
    """Reject tables the resolver cannot apply safely.

    Per step: an `old` listed twice (duplicate) or with two targets (conflicting); an `old`
    that is also some rule's `new`; a `new` that a module move of the same step would
    rewrite again; a cycle of moves; a symbol whose module is itself moved; a symbol with no
    module (`old = "pkg"`); an `old` outside the pack's `packages` (it would never be found);
    a stay-put name that a rule would rewrite; a removal version not after the step. Across
    steps: versions strictly increasing.

    Raises:
        RulesError: naming the first entry at fault.
    """
    previous: str | None = None
    for step in pack.steps:
        if previous is not None and version_key(step.version) <= version_key(previous):
            raise RulesError(
                f"{pack.source}: step {step.version} must come after step {previous} "
                "(steps are ordered by version)"
            )
        previous = step.version
        if step.removal is not None and version_key(step.removal) <= version_key(step.version):
            raise RulesError(
                f"{pack.source}: step {step.version}: removal {step.removal} must come after "
                "the step's own version"
            )
        for old, rule in step.olds():
            if old.partition(".")[0] not in pack.packages:
                raise RulesError(
                    f"{rule.where}: old {old!r} is outside the pack's packages "
                    f"({', '.join(pack.packages)}): references to it would never be found"
                )
        _validate_step(step)


def _validate_step(step: Step) -> None:
    seen: dict[str, ModuleMove | SymbolMove | Removal] = {}
    for old, rule in step.olds():
        if old in seen:
            first = seen[old]
            same = type(first) is type(rule) and getattr(first, "new", None) == getattr(
                rule, "new", None
            )
            what = "duplicate" if same else "conflicting"
            first_at = first.where.split(": ", 1)[-1]  # same file: name the entry only
            raise RulesError(f"{rule.where}: {what} old {old!r} (first at {first_at})")
        seen[old] = rule
        if isinstance(rule, SymbolMove) and "." not in old:
            raise RulesError(f"{rule.where}: a symbol move needs `module.name`, got {old!r}")
        if isinstance(rule, SymbolMove) and "." not in rule.new:
            raise RulesError(f"{rule.where}: a symbol move needs `module.name`, got {rule.new!r}")
        if isinstance(rule, (ModuleMove, SymbolMove)) and rule.new == old:
            raise RulesError(f"{rule.where}: old and new are the same")

    moves: dict[str, str] = {m.old: m.new for m in step.moves()}
    for start in moves:
        path = [start]
        node = moves[start]
        while node in moves and node not in path:
            path.append(node)
            node = moves[node]
        if node == start:
            cycle = " -> ".join([*path, start])
            raise RulesError(f"{seen[start].where}: cycle in step {step.version}: {cycle}")

    for rule in step.moves():
        if rule.new in seen:
            raise RulesError(
                f"{rule.where}: new {rule.new!r} is also an old in this step "
                f"({seen[rule.new].where}); split it into two steps"
            )
        for module in step.modules:
            if _under(rule.new, module.old):
                raise RulesError(
                    f"{rule.where}: new {rule.new!r} lies under old {module.old!r} "
                    f"({module.where}) and would be rewritten again"
                )
    for symbol in step.symbols:
        for module in step.modules:
            if _under(symbol.old, module.old):
                raise RulesError(
                    f"{symbol.where}: conflicting old: its module is moved by {module.where}"
                )
    for name in step.stay:
        probe = name.rstrip("*")
        for old, rule in step.olds():
            captured = _under(probe, old) if not isinstance(rule, SymbolMove) else probe == old
            if captured and not name.endswith("*"):
                raise RulesError(
                    f"step {step.version}: stay-put name {name!r} "
                    f"would be rewritten by {rule.where}"
                )
            if name.endswith("*") and old.startswith(probe):
                raise RulesError(
                    f"step {step.version}: stay-put pattern {name!r} overlaps {rule.where}"
                )
