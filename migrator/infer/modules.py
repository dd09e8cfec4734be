"""Module moves: where each module that left OLD landed in NEW, by its definitions.

A gone module is placed in the NEW module that gained most of its top-level definitions
(by name or by identical body); file names only break ties. A gone package whose modules
all landed under one new parent with the same relative names collapses into ONE rule.
Empty modules (`__init__.py` files) are never placed on their own: only a package
collapse moves them, so they are never paired at random.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, replace

from migrator.infer.candidate import MAX_CANDIDATES, Candidate, listing
from migrator.infer.index import Definition, Index, Module
from migrator.infer.renames import Gains

THRESHOLD = 0.5  # a module moved if at least half of its definitions are found in one place


@dataclass(frozen=True)
class Placement:
    """Where a module's definitions went: `score` = found / defined, `matched` the names."""

    target: str
    score: float
    matched: tuple[str, ...]
    by_body: tuple[str, ...]
    same_name: bool
    coverage: float

    def rank(self) -> tuple[float, bool, float]:
        return (round(self.score, 6), self.same_name, round(self.coverage, 6))


class Destinations:
    """The definitions NEW modules gained (all of them for modules born in NEW)."""

    def __init__(self, modules: Iterable[Module], before: Index | None) -> None:
        self.gained: dict[str, int] = {}
        self.by_name: dict[str, set[str]] = defaultdict(set)
        self.by_digest: dict[str, set[str]] = defaultdict(set)
        for module in modules:
            previous = before.modules.get(module.dotted) if before else None
            count = 0
            for name, definition in module.defs.items():
                if previous is not None and name in previous.defs:
                    continue
                count += 1
                self.by_name[name].add(module.dotted)
                if definition.kind != "variable" and definition.digest:
                    self.by_digest[definition.digest].add(module.dotted)
            self.gained[module.dotted] = count

    def place(self, module: Module, gains: Gains | None = None) -> list[Placement]:
        """Targets holding at least THRESHOLD of `module`'s definitions, best first; none
        when more than MAX_CANDIDATES tie for first (its names are everywhere: no evidence).
        With `gains`, a definition found nowhere by name or body counts where it was
        renamed (`Gains.anywhere`)."""
        considered = _considered(module)
        if not considered:
            return []
        found: dict[str, set[str]] = defaultdict(set)
        bodies: dict[str, set[str]] = defaultdict(set)
        for name, definition in considered.items():
            for target in self.by_name.get(name, ()):
                found[target].add(name)
            if definition.kind != "variable":
                for target in self.by_digest.get(definition.digest, ()):
                    if name not in found[target]:
                        bodies[target].add(name)
                    found[target].add(name)
            if gains is not None and not any(name in names for names in found.values()):
                hit = gains.anywhere(module.dotted, definition)
                if hit is not None:
                    found[hit[0]].add(name)
                    bodies[hit[0]].add(f"{name} -> {hit[1].name}")
        basename = module.dotted.rpartition(".")[2]
        out = []
        for target, names in found.items():
            score = len(names) / len(considered)
            if score >= THRESHOLD and target != module.dotted:
                out.append(
                    Placement(
                        target=target,
                        score=score,
                        matched=tuple(sorted(names)),
                        by_body=tuple(sorted(bodies[target])),
                        same_name=target.rpartition(".")[2] == basename,
                        coverage=len(names) / max(self.gained[target], 1),
                    )
                )
        out.sort(key=lambda p: (tuple(-x for x in p.rank()), p.target))
        tied = [p for p in out if p.rank() == out[0].rank()]
        return [] if len(tied) > MAX_CANDIDATES else out


def _considered(module: Module) -> dict[str, Definition]:
    """The definitions a module is placed by: its functions and classes, or, in a module
    of constants only, its variables (`logger = init_logger(__name__)` is everywhere)."""
    plain = {n: d for n, d in module.defs.items() if not n.startswith("__")}  # not __all__
    code = {n: d for n, d in plain.items() if d.kind != "variable"}
    return code or plain


def best(placements: list[Placement]) -> Placement | None:
    """The single best placement, or None when there is none or the top ones tie."""
    if not placements:
        return None
    if len(placements) > 1 and placements[0].rank() == placements[1].rank():
        return None
    return placements[0]


def module_moves(old: Index, new: Index, gains: Gains | None = None) -> list[Candidate]:
    """Module moves, package collapses, merges and module removals from OLD to NEW; with
    `gains`, renamed definitions count where they landed."""
    gone = sorted(m for m in old.modules if not new.has(m))
    dest = Destinations(new.modules.values(), old)
    placed = {m: dest.place(old.modules[m], gains) for m in gone}
    findings, covered = _collapses(old, new, gone, placed)
    registry = _registered(old, new)
    for dotted in gone:
        if dotted in covered:
            continue
        found = registry.get(dotted) or _single(old.modules[dotted], placed[dotted])
        if found.kind == "removed":
            found = _flattened(old.modules[dotted], old, new) or found
        findings.append(found)
    return _mark_merges(findings)


def _flattened(module: Module, old: Index, new: Index) -> Candidate | None:
    """`pkg.store.engine` -> a NEW module `pkg.store_engine` (its package's name joined to
    its own, born in NEW) when the two share a definition's or an import's name."""
    package, _, name = module.dotted.rpartition(".")
    grand, _, last = package.rpartition(".")
    if not grand:
        return None
    target = f"{grand}.{last}_{name}"
    after = new.modules.get(target)
    if after is None or target in old.modules or not module.defs:
        return None
    shared = sorted(set(module.defs) & set(after.defs) | module.imported & after.imported)
    if not shared:
        return None
    why = (
        f"flattened: its package's name joined to its own, born in NEW, sharing "
        f"{listing(shared)}; no single NEW module gained half of its definitions"
    )
    return Candidate("module", module.dotted, target, why)


def _registered(old: Index, new: Index) -> dict[str, Candidate]:
    """Gone modules that both releases register under the same name (a connector factory's
    entry), NEW at another path: the project's own word for where the module went."""
    before = {k: p for m in old.modules.values() for k, p in m.registered}
    after: dict[str, set[str]] = defaultdict(set)
    for module in new.modules.values():
        for key, path in module.registered:
            after[key].add(path)
    found: dict[str, set[tuple[str, str]]] = defaultdict(set)
    for key, path in before.items():
        if path in old.modules and not new.has(path) and len(after.get(key, ())) == 1:
            target = next(iter(after[key]))
            if target in new.modules and target not in old.modules:
                found[path].add((target, key))
    out = {}
    for path, hits in found.items():
        if len({t for t, _ in hits}) == 1:
            target = next(iter(hits))[0]
            names = ", ".join(sorted(k for _, k in hits))
            why = f"registered as {names} in both releases, at {path} then at {target}"
            out[path] = Candidate("module", path, target, why)
    return out


def _collapses(
    old: Index, new: Index, gone: list[str], placed: dict[str, list[Placement]]
) -> tuple[list[Candidate], set[str]]:
    findings: list[Candidate] = []
    covered: set[str] = set()
    gone_set = set(gone)
    packages = [m for m in gone if old.modules[m].is_package]
    packages.sort(key=lambda m: (m.count("."), m))  # outermost first: it covers the inner
    for package in packages:
        if package in covered:
            continue
        children = sorted(m for m in old.modules if m.startswith(package + "."))
        if not children or not all(c in gone_set for c in children):
            continue
        parent, renamed = _common_parent(package, children, placed, old, new)
        if parent is None:
            continue
        kept = [c for c in children if c not in renamed]
        rels = [c[len(package) + 1 :] for c in kept]
        found = [p for c in (package, *kept) if (p := best(placed[c])) is not None]
        defined = sum(len(_considered(old.modules[c])) for c in (package, *kept))
        matched = sum(len(p.matched) for p in found)
        evidence = (
            f"score={matched}/{defined} definitions; package collapse: "
            f"{'all ' if not renamed else ''}{len(kept)} modules of {package} are under "
            f"{parent} with the same relative names ({listing(rels)})"
        )
        if renamed:
            evidence += f"; {listing([c[len(package) + 1 :] for c in renamed])} renamed there"
        findings.append(Candidate("module", package, parent, evidence, submodules=tuple(rels)))
        covered.update((package, *kept))
    return findings, covered


def _common_parent(
    package: str, children: list[str], placed: dict[str, list[Placement]], old: Index, new: Index
) -> tuple[str | None, list[str]]:
    """The one NEW parent that every child's placement agrees on, if all children exist
    there, and the children that landed under it with another name (their own rows). A
    package with renamed children collapses only when every NEW module under the parent is
    where one of its modules went: a row must not claim NEW modules as homes of old paths."""
    parents: set[str] = set()
    targets: dict[str, str] = {}
    for child in (package, *children):
        rel = child[len(package) :]  # "" for the package itself, ".sub" for a child
        choice = best(placed[child])
        if choice is None:
            if placed[child]:
                return None, []  # ambiguous: never guess
            continue
        targets[child] = choice.target
        if not rel or choice.target.endswith(rel):
            parents.add(choice.target[: len(choice.target) - len(rel)])
    if len(parents) != 1:
        return None, []
    parent = parents.pop()
    renamed = [c for c in children if c in targets and targets[c] != parent + c[len(package) :]]
    for child in children:
        target = targets.get(child, parent + child[len(package) :])
        inside = target == parent or target.startswith(parent + ".")
        if target not in new.modules or target in old.modules or not inside:
            return None, []
    if renamed:
        homes = {parent, *targets.values()}
        under = [m for m in new.modules if m.startswith(parent + ".")]
        if any(m not in homes for m in under) or len(renamed) * 2 >= len(children):
            return None, []
    return parent, renamed


def _single(module: Module, placements: list[Placement]) -> Candidate:
    if not placements:
        names = module.public() or sorted(_considered(module))
        what = f"it defined {listing(names)}" if names else "it defined nothing"
        if not names and module.imported:
            what = f"it only imported {listing(sorted(module.imported))}"
        return Candidate(
            "removed",
            module.dotted,
            evidence="module gone; no single NEW module gained half of its definitions",
            hint=f"module removed in this release ({what})",
        )
    choice = best(placements)
    if choice is None:
        tied = tuple(p.target for p in placements if p.rank() == placements[0].rank())
        return Candidate(
            "module",
            module.dotted,
            evidence=f"score={placements[0].score:.2f} in each of {len(tied)} modules",
            blocked="ambiguous target",
            candidates=tied,
        )
    return Candidate("module", module.dotted, choice.target, evidence=_why(module, choice))


def _why(module: Module, choice: Placement) -> str:
    total = len(_considered(module))
    why = f"score={len(choice.matched)}/{total} definitions found ({listing(list(choice.matched))})"
    if choice.by_body:
        why += f"; by identical or similar body: {listing(list(choice.by_body))}"
    if choice.same_name:
        why += "; same module name"
    return why


def _mark_merges(findings: list[Candidate]) -> list[Candidate]:
    """Note in the evidence when two OLD modules landed in the same NEW module."""
    by_target: dict[str, list[str]] = defaultdict(list)
    for f in findings:
        if f.kind == "module" and f.active:
            by_target[f.new].append(f.old)
    out = []
    for f in findings:
        others = [o for o in by_target.get(f.new, []) if o != f.old] if f.active else []
        if f.kind == "module" and others:
            f = replace(f, evidence=f"{f.evidence}; merged with {listing(others)}")
        out.append(f)
    return out


def interim_moves(interims: dict[str, Module], new: Index) -> list[Candidate]:
    """Intermediate paths (never released) -> where their definitions are in NEW."""
    dest = Destinations(new.modules.values(), None)
    findings = []
    for dotted in sorted(interims):
        module = interims[dotted]
        if not module.defs:
            continue  # an empty file: nothing to place it by
        f = _single(module, dest.place(module))
        if f.kind == "module":
            findings.append(
                replace(f, evidence=f"intermediate path; {f.evidence}", intermediate=True)
            )
    return findings
