"""The checks of a project class that subclasses an upstream class: its overrides against the
upstream methods (VAP001-VAP004, VAP100), its `super()` calls (VAP005), the attributes it
reads from `self` that only upstream bases define (VAP008), and the abstract methods its
upstream bases gained (VAP009)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from migrator.verify_api import findings as F
from migrator.verify_api.findings import ApiFinding
from migrator.verify_api.project import Method, ProjectClass, Use
from migrator.verify_api.signature import (
    KWONLY,
    NAMED_OTHERWISE,
    POS,
    POSONLY,
    REQUIRED,
    Signature,
    describe,
    override_problems,
)

if TYPE_CHECKING:
    from migrator.verify_api.check import Checker, Kind
    from migrator.verify_api.upstream import Upstream


class OverrideCheck:
    """One project class whose bases (through project classes) reach an upstream class."""

    def __init__(self, checker: Checker, cls: ProjectClass) -> None:
        self.checker = checker
        self.cls = cls
        self.chain, self.upstream, self.closed = self._chains(cls)

    def _chains(self, cls: ProjectClass) -> tuple[list[ProjectClass], list[str], bool]:
        """The project classes of `cls`'s bases (itself first), the upstream bases they name,
        and whether every base was found (project or upstream)."""
        project, upstream, closed = [cls], [], True
        queue = list(cls.bases)
        while queue:
            base = queue.pop(0)
            if self.checker.target.provides(base):
                upstream.append(base)
            elif base in self.checker.classes:
                found = self.checker.classes[base]
                if found not in project:
                    project.append(found)
                    queue += found.bases
            elif base not in ("builtins.object", "object"):
                closed = False
        return project, upstream, closed

    def run(self) -> list[ApiFinding]:
        if not self.upstream:
            return []
        self.pairs = self.kinds()
        out: list[ApiFinding] = []
        for method in self.cls.methods.values():
            out += self.method(method)
        for use in self.cls.reads:
            out += self.read(use)
        return out + self.abstracts()

    def abstracts(self) -> list[ApiFinding]:
        """VAP009: the abstract methods an upstream base gained that no class of the chain
        defines. Only for a leaf of the project's classes that is not abstract itself: a
        project base may leave them to its subclasses."""
        c = self.checker
        if self.cls.qual in c.derived or any(b.rpartition(".")[2] in ("ABC", "ABCMeta")
                                             for p in self.chain for b in p.bases):
            return []
        out: list[ApiFinding] = []
        for old, new in self.pairs:
            if new is None or new[0] != "class":
                continue
            gained = c.target.abstract_methods(new[1])
            if c.baseline is not None:
                if old is None or old[0] != "class":
                    continue
                before = c.baseline.abstract_methods(old[1])
                gained = {m: o for m, o in gained.items() if m not in before}
            for name, owner in sorted(gained.items()):
                if self.defines(name) or any(name in p.methods for p in self.chain) or \
                        any(f.obj == f"{owner}.{name}" for f in out):
                    continue
                message = (f"{self.cls.qual} does not define {name}, abstract in {owner} at "
                           f"{c.at}: instantiating it raises TypeError")
                out.append(ApiFinding(self.cls.path, self.cls.line, 1, F.ABSTRACT_ADDED,
                                      message, f"{owner}.{name}", self.cls.qual))
        return out

    def kinds(self) -> list[tuple[Kind | None, Kind | None]]:
        """(baseline, target) view of each upstream base."""
        c = self.checker
        return [(c._kind(c.baseline, b), c._kind(c.target, b)) for b in self.upstream]

    def defines(self, attr: str, below: bool = False) -> bool:
        """Whether a project class of the chain (`below`: other than the class) defines it."""
        return any(attr in p.attrs for p in self.chain[1 if below else 0:])

    def upstream_method(self, name: str) -> tuple[tuple[str, Signature] | None,
                                                  tuple[str, Signature] | None, bool]:
        """(target, baseline) of the upstream method `name` up the first base that has it
        at either, and whether that base's class exists at the target."""
        c = self.checker
        for old, new in self.pairs:
            target = _method(c.target, new, name)
            base = _method(c.baseline, old, name)
            if target is not None or base is not None:
                return target, base, new is not None
        return None, None, False

    def method(self, method: Method) -> list[ApiFinding]:
        out = [f for use in method.supers for f in self.super_call(method, use)]
        if method.sig.kind == "property":
            return out
        target, base, exists = self.upstream_method(method.name)
        scope = f"{self.cls.qual}.{method.name}"
        if target is None:
            if base is not None and exists and self.checker.baseline is not None and \
                    not self.checker.usage.calls_itself(self, method.name):
                message = (f"{scope} overrides {base[0]}.{method.name}, which is gone at "
                           f"{self.checker.at}: nothing calls it there")
                out.append(self._at(method, F.OVERRIDES_NOTHING, message,
                                    f"{base[0]}.{method.name}"))
            return out
        if target[1].kind == "property" or (base is not None and base[1].kind == "property"):
            return out
        mine, up = method.sig.bound(), target[1].bound()
        problems = override_problems(mine, up)
        old = base[1].bound() if base is not None else None
        if self.checker.baseline is not None:
            problems = problems - override_problems(mine, old) if old is not None else set()
        if problems and self.checker.usage.unreached(self, method.name):
            return out  # upstream calls it only from methods the project replaces
        return out + self.classify(method, problems, target[0], up, old)

    def classify(self, method: Method, problems: set[tuple[str, str]], owner: str,
                 up: Signature, old: Signature | None) -> list[ApiFinding]:
        out = []
        at, what = self.checker.at, f"{owner}.{method.name}"
        head = f"{self.cls.qual}.{method.name} overrides {what}{describe(up)}"
        for kind, name in sorted(problems):
            param, was = up.named(name), old.named(name) if old is not None else None
            renamed = _renamed_from(name, up, old)
            if kind == REQUIRED and _took_place_of_keyword_only(method.sig.bound(), name, up,
                                                                old):
                continue  # the keyword-only finding of that parameter says it
            if kind == REQUIRED:
                code = F.PARAM_REMOVED
                text = f"it requires '{name}', which callers no longer pass at {at}"
            elif param is not None and param.kind == KWONLY and was is not None and \
                    was.kind in (POS, POSONLY):
                code, text = F.PARAM_KEYWORD_ONLY, f"'{name}' is keyword-only at {at}"
            elif renamed:
                code, text = F.PARAM_RENAMED, f"parameter '{renamed}' is '{name}' at {at}"
            elif kind == NAMED_OTHERWISE and was is not None:
                code = F.PARAM_RENAMED
                text = f"its parameter in the place of '{name}' has another name"
            elif method.name == "__init__" and param is not None and param.default:
                continue  # a subclass is mostly built by its own code, not upstream's
            else:
                added = f" (new since {self.checker.baseline.label})" if (
                    self.checker.baseline is not None and was is None) else ""
                code, text = F.PARAM_ADDED, f"it does not accept '{name}'{added}"
            out.append(self._at(method, code, f"{head}: {text}", f"{what}({name})"))
        return out

    def _at(self, method: Method, code: str, message: str, obj: str) -> ApiFinding:
        return ApiFinding(self.cls.path, method.line, method.col + 1, code, message, obj,
                          f"{self.cls.qual}.{method.name}")

    def super_call(self, method: Method, use: Use) -> list[ApiFinding]:
        if use.call is None or self.defines(use.base, below=True):
            return []
        target, base, _ = self.upstream_method(use.base)
        if target is None or target[1].kind == "property":
            return []
        found = self.checker.binds(target[1].bound(), base[1].bound() if base else None,
                                   use.call)
        if found is None:
            return []
        return [self.checker.call_finding(self.cls.path, use, f"super().{use.base}",
                                          f"{target[0]}.{use.base}", found, F.SUPER_CALL)]

    def read(self, use: Use) -> list[ApiFinding]:
        """`self.X...`: the project's own X continues with the type it gives X; otherwise X
        comes from an upstream base."""
        c, first = self.checker, use.chain[0]
        if self.defines(first):
            spelled = next((p.types[first] for p in self.chain if p.types.get(first)), "")
            if not spelled or len(use.chain) == 1:
                return []
            start = (c._kind(c.baseline, spelled), c._kind(c.target, spelled))
            return c.chain(self.cls.path, use, start, use.chain[1:])
        if not self.closed:
            return []  # a base outside the project and upstream may define it
        pairs = [(o, n) for o, n in self.pairs if n is not None]
        has = [p for p in pairs if c.target.attribute(p[1][1], first).found]
        had = [p for p in pairs if c.baseline is not None and p[0] is not None
               and c.baseline.attribute(p[0][1], first).found]
        if has or had:
            return c.chain(self.cls.path, use, (has or had)[0], use.chain)
        if c.baseline is None and pairs and len(pairs) == len(self.pairs):
            return c.chain(self.cls.path, use, pairs[0], use.chain)
        return []


def _method(index: Upstream | None, kind: Kind | None, name: str) -> tuple[str, Signature] | None:
    if index is None or kind is None or kind[0] != "class":
        return None
    return index.method(kind[1], name)


def _renamed_from(name: str, up: Signature, old: Signature | None) -> str:
    """The baseline name of the parameter `name` now fills, when it is a rename (same
    position, the old name gone), else ""."""
    if old is None or old.named(name) is not None:
        return ""
    slots, before = up.positional, old.positional
    index = next((i for i, p in enumerate(slots) if p.name == name), None)
    if index is None or index >= len(before):
        return ""
    previous = before[index].name
    return previous if up.named(previous) is None else ""


def _took_place_of_keyword_only(mine: Signature, name: str, up: Signature,
                                old: Signature | None) -> bool:
    """The override's parameter `name` sits where the baseline had a positional parameter
    that is keyword-only at the target."""
    index = next((i for i, p in enumerate(mine.positional) if p.name == name), None)
    if old is None or index is None or index >= len(old.positional):
        return False
    moved = up.named(old.positional[index].name)
    return moved is not None and moved.kind == KWONLY
