"""What the project does itself with upstream objects, over all its files, so that what it
provides for is not reported as a break:

- the attributes it sets on an upstream class's objects (`ctx.pad_size = x`,
  `setattr(ctx, "pad_size", x)`, `Cls.pad_size = x`, a subclass's own `self.runner = ...`):
  a read of one relies on the project, not on upstream (VAP008);
- the methods it calls on its own classes' objects (`self.m(...)` in the class, a project
  base or subclass; `obj.m(...)` of an object typed as an upstream base): an override of a
  method gone upstream is then the project's own API (VAP100);
- which upstream methods call a method on their own object (`self.m(...)`, `super().m(...)`,
  the target's `calls` summary): an override whose every upstream caller the project
  overrides too is never called by upstream with the new signature (VAP001-VAP004).

Built on a checker's first need: a run with nothing to excuse computes none of it.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING

from migrator.verify_api.overrides import OverrideCheck
from migrator.verify_api.project import SELF, FileFacts, Use

if TYPE_CHECKING:
    from migrator.verify_api.check import Checker, Kind


class ProjectUsage:
    """The project's own usage, for the checker `checker` over the files' `facts`."""

    def __init__(self, checker: Checker, facts: Sequence[FileFacts]) -> None:
        self.checker = checker
        self.facts = facts
        self.checks = {q: OverrideCheck(checker, c) for q, c in checker.classes.items()}
        self._mros: dict[str, set[str]] = {}

    @functools.cached_property
    def sets(self) -> dict[str, set[str]]:
        """{attribute: the classes (or modules) the project sets it on}."""
        found: dict[str, set[str]] = {}
        for check in self.checks.values():
            for qual in self.upstream(check):
                for attr in check.cls.attrs:
                    found.setdefault(attr, set()).add(qual)
        for file in self.facts:
            for use in file.writes:
                for qual in self.holders(use):
                    found.setdefault(use.chain[-1], set()).add(qual)
        return found

    def reads(self, name: str) -> set[str]:
        """The classes of the typed objects the project reads attribute `name` from."""
        found: set[str] = set()
        c = self.checker
        for use in (u for file in self.facts for u in file.uses if name in u.chain):
            kind = c.type_of(c.target, use.base)
            for attr in use.chain:
                if kind is None or kind[0] != "class":
                    break
                if attr == name:
                    found.add(kind[1])
                kind = c.next_kind(c.target, kind, attr)
        return found

    def upstream(self, check: OverrideCheck) -> list[str]:
        """The upstream classes (at the target) the project class of `check` derives from."""
        kinds = [self.checker.type_of(self.checker.target, b) for b in check.upstream]
        return [k[1] for k in kinds if k is not None]

    def holders(self, use: Use) -> list[str]:
        """The classes (or module) of the object a write's last attribute is set on."""
        c, target = self.checker, self.checker.target
        kinds: list[Kind | None]
        if use.base == SELF:
            check = self.checks.get(use.scope.rpartition(".")[0])
            if check is None:
                return []
            if len(use.chain) == 1:
                return self.upstream(check)
            first = use.chain[0]
            spelled = next((p.types[first] for p in check.chain if p.types.get(first)), "")
            kinds = [c.type_of(target, spelled)] if spelled else [
                c.next_kind(target, ("class", q), first) for q in self.upstream(check)]
            rest = use.chain[1:-1]
        else:
            kinds, rest = [c.type_of(target, use.base)], use.chain[:-1]
        found = []
        for kind in kinds:
            for attr in rest:
                kind = c.next_kind(target, kind, attr)
            if kind is not None:
                found.append(kind[1])
        return found

    def mro(self, qual: str) -> set[str]:
        if qual not in self._mros:
            self._mros[qual] = {o.qual for o in self.checker.target.mro(qual)[0]}
        return self._mros[qual]

    def related(self, one: str, other: str) -> bool:
        """Whether an object of one class may be an object of the other (one derives from the
        other)."""
        return one == other or one in self.mro(other) or other in self.mro(one)

    def sets_itself(self, kind: Kind, attr: str) -> bool:
        """Whether the project sets `attr` on objects of (a class related to) `kind`."""
        return any(self.related(kind[1], q) for q in self.sets.get(attr, ()))

    def calls_itself(self, check: OverrideCheck, name: str) -> bool:
        """Whether the project's code uses method `name` of the class of `check`: through
        `self` in the class, a project base or a project subclass (not in the method itself),
        or on an object typed as one of its upstream bases."""
        family = [c for c in self.checks.values()
                  if any(p is c.cls for p in check.chain) or any(p is check.cls for p in c.chain)]
        if any(u.chain[0] == name and u.scope != f"{f.cls.qual}.{name}"
               for f in family for u in f.cls.reads):
            return True
        return any(self.related(up, q) for up in self.upstream(check)
                   for q in self.reads(name))

    def unreached(self, check: OverrideCheck, name: str) -> bool:
        """Whether upstream calls method `name` on its own object only from methods that the
        project class (or a project base) overrides without calling up: then upstream never
        calls the project's `name`. False when upstream has no such call at all: it is
        called from elsewhere."""
        callers: set[str] = set()
        for _, new in check.pairs:
            if new is None or new[0] != "class":
                continue
            for cls in self.checker.target.mro(new[1])[0]:
                callers |= {m for m, called in cls.data.get("calls", {}).items()
                            if name in called}
        return bool(callers) and all(_replaced(check, m) for m in callers)


def _replaced(check: OverrideCheck, caller: str) -> bool:
    """Whether the project class of `check` or a project base overrides `caller` without
    calling `super().caller(...)` (which would run upstream's)."""
    for cls in check.chain:
        method = cls.methods.get(caller)
        if method is not None and not any(u.base == caller for u in method.supers):
            return True
    return False
