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
    for dotted in gone:
        if dotted not in covered:
            findings.append(_single(old.modules[dotted], placed[dotted]))
    return _mark_merges(findings)


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
        parent = _common_parent(package, children, placed, old, new)
        if parent is None:
            continue
        rels = [c[len(package) + 1 :] for c in children]
        found = [p for c in (package, *children) if (p := best(placed[c])) is not None]
        defined = sum(len(_considered(old.modules[c])) for c in (package, *children))
        matched = sum(len(p.matched) for p in found)
        evidence = (
            f"score={matched}/{defined} definitions; package collapse: all {len(children)} "
            f"modules of {package} are under {parent} with the same relative names "
            f"({listing(rels)})"
        )
        findings.append(Candidate("module", package, parent, evidence, submodules=tuple(rels)))
        covered.update((package, *children))
    return findings, covered


def _common_parent(
    package: str, children: list[str], placed: dict[str, list[Placement]], old: Index, new: Index
) -> str | None:
    """The one NEW parent that every child's placement agrees on, if all children exist there."""
    parents: set[str] = set()
    for child in (package, *children):
        rel = child[len(package) :]  # "" for the package itself, ".sub" for a child
        choice = best(placed[child])
        if choice is None:
            if placed[child]:
                return None  # ambiguous: never guess
            continue
        if rel and not choice.target.endswith(rel):
            return None
        parents.add(choice.target[: len(choice.target) - len(rel)])
    if len(parents) != 1:
        return None
    parent = parents.pop()
    for child in children:
        target = parent + child[len(package) :]
        if target not in new.modules or target in old.modules:
            return None
    return parent


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
