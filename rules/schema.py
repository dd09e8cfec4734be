"""The move table's typed model: steps of module moves, symbol moves, removals, stay-put names.

Stdlib only: the runtime shims read the same tables as the codemod, and must not pull in
libcst or click. `rules.loader` builds these from TOML; `rules.validation` checks them.
"""

from __future__ import annotations

import keyword
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

_COMPONENT = r"[A-Za-z_][A-Za-z0-9_]*"
_DOTTED_RE = re.compile(rf"^{_COMPONENT}(?:\.{_COMPONENT})*$")
STAY_RE = re.compile(rf"^{_COMPONENT}(?:\.{_COMPONENT})*\*?$")
VERSION_RE = re.compile(r"^(\d+(?:\.\d+)*)(?:(a|b|rc)(\d+))?(?:\.(post|dev)(\d+))?$")


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
    match = VERSION_RE.match(version)
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
