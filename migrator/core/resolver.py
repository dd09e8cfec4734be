"""What maps to what: applies the steps of a move table to one dotted name.

The resolver knows nothing of files or syntax. Given `vllm_ascend.distributed.kvpool.backend`
it answers with the new name and the rules that fired, composing the active steps in order
(from the user's `--from` version to `--to`). Within a step the name is settled (validation
keeps that to one rule, except below a moved package); across steps nothing is closed.

A name that some step up to `--to` wrote (it lies at or below a `new` of step S) was written
for S or a later release, whatever `--from` says: the steps before S are not applied to it. Releases
reuse names (0.27.1rc1 re-created `ascend_store.metadata`, a path 0.14.0 had moved away), so
without this floor the code `vam migrate` writes would be rewritten or reported again by the
next `vam check`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from migrator.core.prefilter import Prefilter, word_alternation
from rules import ModuleMove, Pack, Removal, RulesError, Step, SymbolMove, version_key


@dataclass(frozen=True)
class Hit:
    """One rule that fired on a name: `old` (a prefix of the name) became `new` in `step`."""

    old: str
    new: str
    step: str
    kind: str  # "module" | "symbol"


@dataclass(frozen=True)
class Resolution:
    """The fate of one dotted name: rewritten (`new`), removed (`removed`), or both empty."""

    name: str
    new: str
    hits: tuple[Hit, ...] = ()
    removed: Removal | None = None
    removed_step: str = ""

    @property
    def changed(self) -> bool:
        return self.new != self.name

    @property
    def first(self) -> Hit:
        return self.hits[0]


class Resolver:
    """Applies the steps of `pack` whose first release (`Step.release`: 0.14.0rc1 for the
    step named 0.14.0) lies in (from_version, to_version].

    `written_to` (default `to_version`) bounds the steps whose `new` sets a name's written-for
    floor: a resolver for the steps before a baseline still knows that a name a later step
    wrote is of that later era.

    Raises:
        RulesError: an unknown `from_version`/`to_version` ordering (from after to).
    """

    def __init__(
        self,
        pack: Pack,
        from_version: str | None = None,
        to_version: str | None = None,
        *,
        written_to: str | None = None,
    ):
        self.pack = pack
        self.from_version = from_version
        self.to_version = to_version
        low = version_key(from_version) if from_version else None
        high = version_key(to_version) if to_version else None
        if low is not None and high is not None and low > high:
            raise RulesError(f"--from {from_version} is after --to {to_version}")
        self.steps: tuple[Step, ...] = tuple(
            s
            for s in pack.steps
            if (low is None or version_key(s.release) > low)
            and (high is None or version_key(s.release) <= high)
        )
        self._modules = [{m.old: m for m in s.modules} for s in self.steps]
        self._symbols = [{m.old: m for m in s.symbols} for s in self.steps]
        self._removed = [{r.old: r for r in s.removed} for s in self.steps]
        self._keys = [version_key(s.release) for s in self.steps]  # parsed once, not per name
        self._written: dict[str, tuple[Any, ...]] = {}
        written_to = written_to or to_version
        high = version_key(written_to) if written_to else None
        # Only the steps up to `--to`: code taken to 0.14.0 that spells a path 0.27.1rc1
        # re-created is code of the 0.14 era (an intermediate path), not of 0.27.1rc1.
        for step in pack.steps:
            if high is not None and version_key(step.release) > high:
                continue
            for new in [m.new for m in step.modules] + [m.new for m in step.symbols]:
                key = version_key(step.release)
                self._written[new] = max(self._written.get(new, key), key)
        self.packages: tuple[str, ...] = pack.packages
        self.resolve = lru_cache(maxsize=65536)(self._resolve)
        self.resolve_module = lru_cache(maxsize=65536)(self._resolve_module)

    # -- queries -------------------------------------------------------------------------

    def leaf_names(self) -> set[str]:
        """Last components of every `old`: any reference to a moved name must contain one."""
        return {old.rpartition(".")[2] for step in self.steps for old, _ in step.olds()}

    def symbol_sources(self) -> set[str]:
        """Modules that stay but lost names (a star import from them needs a human)."""
        return {m.old_module for step in self.steps for m in step.symbols}

    def moved_children(self, parent: str) -> dict[str, str]:
        """Names directly below `parent` that some active rule moves, old child -> full old."""
        out: dict[str, str] = {}
        for step in self.steps:
            for old, _ in step.olds():
                head, _, tail = old.rpartition(".")
                if head == parent:
                    out[tail] = old
        return out

    def trigger_pattern(self) -> bytes:
        """A bytes regex that matches every file that may hold a reference.

        A reference to a moved or removed name always spells its last component (absolute,
        relative, dotted, attribute chain or file path), so files without any of them are
        never parsed. Two forms spell none, and are matched on their own
        (`special_pattern`). The last components are one trie-shaped alternation
        (`word_alternation`): its cost does not grow with the number of names.
        """
        words = word_alternation(self.leaf_names())
        alternatives = [rf"\b(?:{words})\b"] if words else []
        special = self.special_pattern()
        if special is not None:
            alternatives.append(special.decode())
        return "|".join(alternatives).encode() or rb"(?!)"

    def special_pattern(self) -> bytes | None:
        """A bytes regex of the two references that spell no last component: a star import
        from a module that lost names, and a string completed at run time below a parent
        (`f"pkg.{name}"`, `"pkg.%s" % name`, `"pkg.{}".format(name)`); None when the steps
        have neither."""
        alternatives = []
        stars = word_alternation(m.rpartition(".")[2] for m in self.symbol_sources())
        if stars:
            alternatives.append(rf"\b(?:{stars})[\s\\]+import[\s\\(]+\*")
        parents = word_alternation(
            old.rpartition(".")[0].rpartition(".")[2]
            for step in self.steps
            for old, _ in step.olds()
            if "." in old
        )
        if parents:
            alternatives.append(rf"\b(?:{parents})\.(?:\{{|%)")
        return "|".join(alternatives).encode() if alternatives else None

    def prefilter(self) -> Prefilter:
        """The byte tests a file must pass to be decoded and parsed (`migrator.core.prefilter`)."""
        olds = (old for step in self.steps for old, _ in step.olds())
        return Prefilter(olds, self.symbol_sources())

    def is_ours(self, dotted: str) -> bool:
        return dotted.partition(".")[0] in self.packages

    # -- resolution ------------------------------------------------------------------------

    def _resolve(self, name: str) -> Resolution:
        """Resolve a dotted name that may continue past a module into attributes."""
        return self._walk(name, symbols=True)

    def _resolve_module(self, name: str) -> Resolution:
        """Resolve a name known to denote a module or package (imports, file paths)."""
        return self._walk(name, symbols=False)

    def written_for(self, name: str) -> tuple[Any, ...] | None:
        """The version key of the newest step whose `new` holds `name` (at or below it), or
        None: the earliest release the name can have been written for."""
        found: tuple[Any, ...] | None = None
        probe = name
        while probe:
            key = self._written.get(probe)
            if key is not None and (found is None or key > found):
                found = key
            probe = probe.rpartition(".")[0]
        return found

    def _walk(self, name: str, symbols: bool) -> Resolution:
        current = name
        hits: list[Hit] = []
        floor = self.written_for(name)
        for index, step in enumerate(self.steps):
            if floor is not None and self._keys[index] < floor:
                continue  # the name was written by a later step: this one is behind it
            # Validation rules out cycles and targets that a rule would take again, so only a
            # name below a moved package can land on another old of the same step
            # (`kvpool.metadata` -> `ascend_store.metadata`, an intermediate old). Settling it
            # here, inside the step, is what keeps a second run a no-op.
            for _ in range(len(self._modules[index]) + len(self._symbols[index]) + 1):
                rule = self._apply(current, index, symbols)
                if isinstance(rule, Removal):
                    return Resolution(name, name, tuple(hits), rule, step.version)
                if rule is None:
                    break
                kind = "module" if isinstance(rule, ModuleMove) else "symbol"
                hits.append(Hit(rule.old, rule.new, step.version, kind))
                current = rule.new + current[len(rule.old) :]
        return Resolution(name, current, tuple(hits))

    def _apply(
        self, name: str, index: int, symbols: bool
    ) -> ModuleMove | SymbolMove | Removal | None:
        """The rule of step `index` with the longest `old` that `name` starts with: a rename
        inside a moved module (a symbol row) beats the module's row, a module kept inside
        a removed package (a module row) beats the removal, and so on."""
        found: list[ModuleMove | SymbolMove | Removal] = [
            rule
            for rule in (
                _longest(name, self._removed[index]),
                _longest(name, self._modules[index]),
                _longest(name, self._symbols[index]) if symbols else None,
            )
            if rule is not None
        ]
        # Olds are unique within a step, so the longest is unambiguous.
        return max(found, key=lambda rule: len(rule.old), default=None)


def _longest(name: str, table: dict[str, ModuleMove] | dict[str, SymbolMove] | dict[str, Removal]):  # type: ignore[no-untyped-def]
    """The rule whose `old` is the longest whole-component prefix of `name`, if any."""
    if not table:
        return None
    probe = name
    while True:
        rule = table.get(probe)
        if rule is not None:
            return rule
        cut = probe.rfind(".")
        if cut < 0:
            return None
        probe = probe[:cut]
