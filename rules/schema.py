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
# PEP 440 (public and local versions, any spelling the PEP normalises): epoch, release,
# pre-release, post-release (`.post1`, `-1`), dev release, local label.
VERSION_RE = re.compile(
    r"""^v?
    (?:(?P<epoch>\d+)!)?
    (?P<release>\d+(?:\.\d+)*)
    (?:[-_.]?(?P<pre_l>alpha|a|beta|b|preview|pre|c|rc)[-_.]?(?P<pre_n>\d+)?)?
    (?:-(?P<post_n1>\d+)|[-_.]?(?P<post_l>post|rev|r)[-_.]?(?P<post_n2>\d+)?)?
    (?:[-_.]?(?P<dev_l>dev)[-_.]?(?P<dev_n>\d+)?)?
    (?:\+(?P<local>[a-z0-9]+(?:[-_.][a-z0-9]+)*))?
    $""",
    re.VERBOSE | re.IGNORECASE,
)
_PRE_RANK = {"a": 0, "alpha": 0, "b": 1, "beta": 1, "c": 2, "rc": 2, "pre": 2, "preview": 2}


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
    # `first-release`: the first release that shipped the step's change, when that is an rc
    # before `version` (the step is named 0.14.0, but 0.14.0rc1 shipped it); "" when `version`.
    first_release: str = ""

    @property
    def release(self) -> str:
        """The first release that has this step's change: what `--from`, `--to` and a
        release pin are compared with (`first_release`, else `version`)."""
        return self.first_release or self.version

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
    # `[pack] shims-from`: the runtime shims serve only the steps after this version.
    shims_from: str = ""
    # `[pack] default-from`: the baseline (`--from`) of a run that names none and whose project
    # pins no release; "" applies every step.
    default_from: str = ""
    # `[pack] version-helper`: the module plugins of this library import their version helper
    # from (`vam migrate --keep-compat` adds that import); "" when the pack names none.
    version_helper: str = ""

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
    """Sort key ordering PEP 440 versions as `packaging.version.Version` does
    (`0.14.0.dev1` < `0.14.0rc1` < `0.14.0` == `0.14` < `0.14.0.post1` < `0.14.0+local`).

    Hand-written because rules/ and shims/ are stdlib-only (the shims read the tables).

    Raises:
        RulesError: `version` is not a PEP 440 version.
    """
    match = VERSION_RE.match(version)
    if not match:
        raise RulesError(f"malformed version {version!r}")
    part = match.group
    release = tuple(int(p) for p in part("release").split("."))
    while len(release) > 1 and release[-1] == 0:
        release = release[:-1]  # 1.0 == 1.0.0
    has_post = part("post_n1") is not None or part("post_l") is not None
    has_dev = part("dev_l") is not None
    # Each part is (rank, ...) with the same shape throughout, so tuples always compare.
    if part("pre_l"):
        pre: tuple[int, int, int] = (1, _PRE_RANK[part("pre_l").lower()], int(part("pre_n") or 0))
    elif has_dev and not has_post:
        pre = (0, 0, 0)  # 1.0.dev1 sorts before 1.0a1
    else:
        pre = (2, 0, 0)
    post = (1, int(part("post_n1") or part("post_n2") or 0)) if has_post else (0, 0)
    dev = (0, int(part("dev_n") or 0)) if has_dev else (1, 0)
    local: tuple[tuple[int, int, str], ...] = ()
    if part("local"):
        # Numeric segments sort after alphanumeric ones, and compare as numbers.
        local = tuple(
            (1, int(seg), "") if seg.isdigit() else (0, 0, seg.lower())
            for seg in re.split(r"[-_.]", part("local"))
        )
    return (int(part("epoch") or 0), release, pre, post, dev, (bool(local), local))


def is_dotted(name: object) -> bool:
    """True for `a.b.c` with identifier components that are not Python keywords."""
    if not isinstance(name, str) or not _DOTTED_RE.match(name):
        return False
    return not any(keyword.iskeyword(part) for part in name.split("."))


def is_under(name: str, prefix: str) -> bool:
    """True if dotted `name` is `prefix` or lies below it, by whole components (`a.b.c` and
    `a.b` are under `a.b`; `a.bc` is not)."""
    return name == prefix or name.startswith(prefix + ".")
