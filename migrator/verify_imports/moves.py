"""What the bundled move tables say about a path one release of a distribution lacks.

`verify-imports --against` names a path's new home from the table before any guess by name:
a guess picks a module that happens to share a name (the 0.11 store package
`vllm_ascend.distributed.mooncake` is not the P2P `kv_transfer.kv_p2p.mooncake`), while the
table follows the path release by release (rules/). The table's answer is the chain of steps
from the oldest release up to the one checked (`Resolver` with no `--from`, so a path a later
step wrote is not taken through the steps before it), or the step that removed the path.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from migrator.core.config import ConfigError, load_config
from migrator.core.resolver import Resolver
from rules import RulesError, bundled, load_pack


@dataclass(frozen=True)
class TableAnswer:
    """`old` became `new` through the releases `steps` ("" and the removing step with its
    `hint` when a step removed it)."""

    old: str
    new: str
    steps: tuple[str, ...]
    hint: str = ""

    @property
    def removed(self) -> bool:
        return not self.new

    def text(self) -> str:
        """The clause a finding's message ends with."""
        if self.removed:
            return f"'{self.old}' was removed in {self.steps[-1]} (move table): {self.hint}"
        return f"'{self.old}' moved to {self.new} in {_listed(self.steps)} (move table)"


class MoveTables:
    """The packs that cover some of `packages`, applied up to `version` (every step when
    None): those [tool.vam] rules configures for the current folder (one or several, tables
    from files included) first, then the bundled ones. Packs are read on the first question,
    so a clean run never reads them."""

    def __init__(self, packages: Iterable[str], version: str | None) -> None:
        self.packages = frozenset(packages)
        self.version = version
        self._resolvers: list[Resolver] | None = None

    def resolvers(self) -> list[Resolver]:
        if self._resolvers is None:
            self._resolvers = []
            for name in dict.fromkeys((*_configured(), *map(str, bundled().values()))):
                try:
                    pack = load_pack(name)
                    if self.packages & set(pack.packages):
                        self._resolvers.append(Resolver(pack, None, self.version))
                except RulesError:
                    continue  # a version the table cannot order, or a pack that fails to load
        return self._resolvers

    def answer(self, dotted: str, module: bool) -> TableAnswer | None:
        """What a table says of `dotted` (a module when `module`, else a module then a name)
        at `version`: moved (with every step of the chain), removed, or None (not in any
        table, or a table that leaves it where it is)."""
        for resolver in self.resolvers():
            if not resolver.is_ours(dotted):
                continue
            found = resolver.resolve_module(dotted) if module else resolver.resolve(dotted)
            steps = tuple(dict.fromkeys(hit.step for hit in found.hits))
            if found.removed is not None:
                return TableAnswer(dotted, "", (*steps, found.removed_step), found.removed.hint)
            if found.changed:
                return TableAnswer(dotted, found.new, steps)
        return None


def _configured() -> tuple[str, ...]:
    """The tables [tool.vam] rules names, as paths where bundled (so each is read once); none
    when the configuration cannot be read (the suggestions are a help, not the check)."""
    try:
        names = load_config(Path(".")).rules
    except ConfigError:
        return ()
    packs = bundled()
    return tuple(str(packs[n]) if n in packs else n for n in names)


def _listed(items: tuple[str, ...]) -> str:
    if len(items) < 2:
        return "".join(items)
    return f"{', '.join(items[:-1])} and {items[-1]}"
