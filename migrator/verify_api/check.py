"""The project's uses of an upstream package, judged at the baseline and the target release:
a use is reported when it works at the baseline and fails at the target (or, with no
baseline, when it fails at the target)."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

from migrator.verify_api import findings as F
from migrator.verify_api.findings import ApiFinding
from migrator.verify_api.overrides import OverrideCheck
from migrator.verify_api.project import CALLED, Call, FileFacts, ProjectClass, Use
from migrator.verify_api.signature import MISSING, TOO_MANY, TWICE, Signature, bind, describe
from migrator.verify_api.upstream import Obj, Upstream
from migrator.verify_api.usage import ProjectUsage

# What a chain step stands on: ("class", qual) or ("module", name).
Kind = tuple[str, str]


@dataclass
class Checker:
    """Judges uses; `baseline` None compares against `target` alone; `facts` every file's,
    for what the project does itself (`usage`)."""

    target: Upstream
    baseline: Upstream | None
    classes: dict[str, ProjectClass]
    facts: Sequence[FileFacts] = ()

    @functools.cached_property
    def usage(self) -> ProjectUsage:
        return ProjectUsage(self, self.facts)

    @functools.cached_property
    def derived(self) -> frozenset[str]:
        """The project classes some project class derives from."""
        return frozenset(b for cls in self.classes.values() for b in cls.bases
                         if b in self.classes)

    @property
    def at(self) -> str:
        return self.target.label

    def type_of(self, index: Upstream, spelled: str) -> Kind | None:
        """What a type string (`dotted`, `()dotted`) is in `index`."""
        called = spelled.startswith(CALLED)
        obj = index.lookup(spelled.removeprefix(CALLED)) if spelled else None
        if obj is None:
            return None
        if called and obj.kind == "func":
            returns = Signature.from_json(obj.data).returns
            obj = index.lookup(returns) if returns else None
            called = False
        if obj is None or (called and obj.kind != "class"):
            return None
        return (obj.kind, obj.qual) if obj.kind in ("class", "module") else None

    def file(self, facts: FileFacts) -> list[ApiFinding]:
        out: list[ApiFinding] = []
        for use in facts.uses:
            if use.chain:
                start = (self._kind(self.baseline, use.base), self._kind(self.target, use.base))
                out += self.chain(facts.path, use, start, use.chain)
            elif use.call is not None:
                out += self.call(facts.path, use)
        for cls in facts.classes:
            out += OverrideCheck(self, cls).run()
        return out

    def _kind(self, index: Upstream | None, spelled: str) -> Kind | None:
        return None if index is None else self.type_of(index, spelled)

    def call(self, path: str, use: Use) -> list[ApiFinding]:
        assert use.call is not None
        target = self.target.lookup(use.base)
        base = self.baseline.lookup(use.base) if self.baseline else None
        problem = self.binds(target, base, use.call)
        if problem is None or target is None:
            return []
        return [self.call_finding(path, use, use.base, target.qual, problem)]

    def binds(self, target: Obj | Signature | None, base: Obj | Signature | None,
              call: Call) -> tuple[tuple[str, str], Signature] | None:
        """Why `call` fails at the target and not at the baseline, with the target's
        signature; None when it binds, or either signature is unknown."""
        sig = self._sig(self.target, target)
        if sig is None:
            return None
        problem = bind(sig, call.positional, call.keywords)
        if problem is None:
            return None
        if self.baseline is not None:
            old = self._sig(self.baseline, base)
            if old is None or bind(old, call.positional, call.keywords) is not None:
                return None
        return problem, sig

    @staticmethod
    def _sig(index: Upstream, obj: Obj | Signature | None) -> Signature | None:
        if isinstance(obj, Signature) or obj is None:
            return obj
        return index.callable(obj)

    def call_finding(self, path: str, use: Use, spelled: str, qual: str,
                     found: tuple[tuple[str, str], Signature], code: str = "") -> ApiFinding:
        (kind, detail), sig = found
        name = spelled.rsplit(".", 1)[-1]
        if kind == MISSING:
            what, code = f"leaves out {detail}, required", code or F.MISSING_ARGUMENT
        elif kind == TWICE:
            what, code = f"passes '{detail}' by position and by keyword", code or F.BAD_KEYWORD
        elif detail.isidentifier():
            what, code = f"passes keyword '{detail}', not taken", code or F.BAD_KEYWORD
        else:
            what, code = detail, code or F.BAD_KEYWORD
        message = f"{name}(...) {what} at {self.at}: {qual}{describe(sig)}"
        return ApiFinding(path, use.line, use.col + 1, code, message,
                          f"{qual}({kind if kind == TOO_MANY else detail})", use.scope)

    def chain(self, path: str, use: Use, start: tuple[Kind | None, Kind | None],
              chain: tuple[str, ...]) -> list[ApiFinding]:
        """Walk `chain` from the baseline's and the target's view of its start, reporting the
        first attribute the target lacks and, at the end, a call that no longer binds."""
        old, new = start
        for i, attr in enumerate(chain):
            if new is None or (self.baseline is not None and old is None):
                return []
            last = i == len(chain) - 1
            step = self.step(new, old, attr)
            if step == "missing" and self.usage.sets_itself(new, attr):
                return []  # the project sets it on such objects itself
            if step == "missing":
                where = f" (defined at {self.baseline.label})" if self.baseline else ""
                message = f"'{attr}' is not an attribute of {new[1]} at {self.at}{where}"
                return [ApiFinding(path, use.line, use.col + 1, F.MISSING_ATTRIBUTE, message,
                                   f"{new[1]}.{attr}", use.scope)]
            if step is None:
                return []
            if last and use.call is not None:
                return self.method_call(path, use, new, old, attr)
            old = self.next_kind(self.baseline, old, attr)
            new = self.next_kind(self.target, new, attr)
        return []

    def step(self, new: Kind, old: Kind | None, attr: str) -> str | None:
        """"ok" when the target has `attr`, "missing" when only the baseline had it (or,
        with no baseline, the target surely lacks it), None when that cannot be told."""
        if new[0] == "module":
            if self.target.lookup(f"{new[1]}.{attr}") is not None:
                return "ok"
            getattr_ = self.target.summary(new[1])["getattr"] if new[1] in self.target.modules \
                else True
            had = old is None or (self.baseline is not None
                                  and self.baseline.lookup(f"{old[1]}.{attr}") is not None)
            return "missing" if had and not getattr_ else None
        found = self.target.attribute(new[1], attr)
        if found.found:
            return "ok"
        if self.baseline is None:
            return "missing" if found.certain else None
        assert old is not None
        before = self.baseline.attribute(old[1], attr) if old[0] == "class" else None
        dynamic = any(c.data["dynamic"] for c in self.target.mro(new[1])[0]) or \
            self.target.opaque(new[1])
        return "missing" if before is not None and before.found and not dynamic else None

    def next_kind(self, index: Upstream | None, kind: Kind | None, attr: str) -> Kind | None:
        if index is None or kind is None:
            return None
        if kind[0] == "module":
            return self.type_of(index, f"{kind[1]}.{attr}")
        spelled = index.attr_type(kind[1], attr)
        return self.type_of(index, spelled) if spelled else None

    def method_call(self, path: str, use: Use, new: Kind, old: Kind | None,
                    attr: str) -> list[ApiFinding]:
        assert use.call is not None
        target, base = self._member(self.target, new, attr), self._member(self.baseline, old,
                                                                            attr)
        found = self.binds(target, base, use.call)
        if found is None:
            return []
        return [self.call_finding(path, use, attr, f"{new[1]}.{attr}", found)]

    @staticmethod
    def _member(index: Upstream | None, kind: Kind | None, attr: str) -> Obj | Signature | None:
        """What calling `kind.attr` binds to: a method bound to its instance, a module's
        function or class."""
        if index is None or kind is None:
            return None
        if kind[0] == "module":
            return index.lookup(f"{kind[1]}.{attr}")
        method = index.method(kind[1], attr)
        if method is None or method[1].kind == "property":
            return None
        return method[1].bound()
