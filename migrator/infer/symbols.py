"""Symbol moves: public names that left a module which stays or moved, and renames.

A name is lost when the module it is in now (the same module, or where its module moved)
neither defines nor imports it (a re-export counts as still present). Its destination, in
order: the one NEW module that gained a definition of that name; else the one gained
definition with an identical body (a rename); else a rename (`renames`: a similar body or
a close name, accepting the old calls). With several candidates nothing is guessed: the
entry is emitted commented out; with more than MAX_CANDIDATES it is reported as removed,
naming where the name is still defined. Inside a moved module the same rows are written:
a `[[step.symbol]]` or `[[step.removed]]` below a `[[step.module]]` wins for its name.
"""

from __future__ import annotations

from dataclasses import replace

from migrator.infer.candidate import MAX_CANDIDATES, Candidate, listing
from migrator.infer.index import Definition, Index, Module, similarity
from migrator.infer.renames import (
    MIN_BODY_SHINGLES,
    RENAME_SIMILARITY,
    Gains,
    Hit,
    best_similar,
    distinctive,
    gained_in,
    in_module,
)

__all__ = [
    "MIN_BODY_SHINGLES",
    "RENAME_SIMILARITY",
    "Gains",
    "best_similar",
    "moved_names",
    "renames_in_moved",
    "symbol_moves",
]


def symbol_moves(old: Index, new: Index, gains: Gains | None = None) -> list[Candidate]:
    """Symbol moves, renames and symbol removals for modules present in both releases."""
    gains = gains or Gains(old, new)
    findings = []
    for dotted in sorted(old.modules):
        now = new.modules.get(dotted)
        if now is None:
            continue
        findings += lost_names(old.modules[dotted], now, gains)
    return findings


def lost_names(before: Module, now: Module, gains: Gains) -> list[Candidate]:
    """A row for each public name of `before` that `now` (the same module, or where it
    moved) does not bind at run time, and a note for each that it re-exports from a
    third-party package (its home there is not resolved)."""
    findings = []
    for name in before.public():
        if name not in now.defs and name in now.imported:
            origin = now.sources.get(name, "").split(".")[0]
            if origin and origin not in gains.first_party:
                findings.append(_third_party(before, name, now, origin))
            continue
        if now.binds(name):
            continue
        found = place(before, before.defs[name], now, gains)
        if name in now.forwarded:
            why = f"served by a deprecation forwarder (`{now.dotted}.__getattr__`): rewrite now"
            found = replace(found, evidence=f"{found.evidence}; {why}")
        elif name in now.typing_only:
            why = "re-exported only under `if TYPE_CHECKING:`, gone at run time"
            found = replace(found, evidence=f"{found.evidence}; {why}")
        findings.append(found)
    return findings


def _third_party(before: Module, name: str, now: Module, origin: str) -> Candidate:
    source = now.sources[name]
    return Candidate(
        "symbol",
        f"{before.dotted}.{name}",
        evidence=f"{now.dotted} imports it from {source}, a package in neither release",
        blocked=f"re-exported from third-party {origin}, not resolved",
    )


def moved_names(
    old: Index, new: Index, moves: list[Candidate], gains: Gains | None = None
) -> list[Candidate]:
    """Renames, moves elsewhere and removals of the names inside moved modules (the module
    row moves the rest); for a removed module, the names NEW still has elsewhere."""
    gains = gains or Gains(old, new)
    findings = []
    for move in moves:
        if not move.active or move.intermediate or move.kind not in ("module", "removed"):
            continue
        pairs = [(move.old, move.new)]
        pairs += [(f"{move.old}.{s}", f"{move.new}.{s}") for s in move.submodules]
        for source, target in pairs:
            before = old.modules.get(source)
            if before is None:
                continue
            after = new.modules.get(target) if move.kind == "module" else None
            if move.kind == "module" and after is None:
                continue
            if after is not None:
                findings += lost_names(before, after, gains)
                continue
            for name in before.public():
                findings += _survivor(before, before.defs[name], gains)
    return findings


def _survivor(before: Module, lost: Definition, gains: Gains) -> list[Candidate]:
    """A name of a removed module that one NEW module defines with the identical body (not
    a bare literal: `MSG = b"done"` in two modules is no move)."""
    if lost.size < MIN_BODY_SHINGLES:
        return []
    same = [
        m
        for m, d in (*gains.by_name.get(lost.name, []), *gains.kept.get(lost.name, []))
        if d.digest == lost.digest
    ]
    if len(same) != 1:
        return []
    evidence = (
        f"score=1.00 identical body; the one NEW module that defines `{lost.name}` "
        f"(its module {before.dotted} was removed)"
    )
    return [Candidate("symbol", f"{before.dotted}.{lost.name}", f"{same[0]}.{lost.name}", evidence)]


# The name this module had before: `renames_in_moved` now writes every row, not only renames.
renames_in_moved = moved_names


def place(before: Module, lost: Definition, now: Module | None, gains: Gains) -> Candidate:
    """Where `lost` (a public name of OLD module `before`) is in NEW; `now` is the NEW
    module it would be in had it not left (None: its module was removed)."""
    old_name = f"{before.dotted}.{lost.name}"
    here = now.dotted if now is not None else before.dotted
    named = [(m, d) for m, d in gains.by_name.get(lost.name, []) if m != here]
    if lost.kind == "variable":
        # A constant's name proves little (`logger` is everywhere): every module that
        # defines it is a candidate, not only those that gained it.
        named += [(m, d) for m, d in gains.kept.get(lost.name, []) if m != here]
    if 0 < len(named) <= MAX_CANDIDATES:
        return _by_name(old_name, lost, named)
    same_body = [
        (m, d)
        for m, d in gains.by_digest.get(lost.digest, [])
        if d.kind == lost.kind and distinctive(lost)
    ]
    if same_body:
        return _choose(old_name, same_body, "renamed: identical body", lost)
    renamed = _renamed(before, lost, now, gains)
    if renamed is not None:
        return _rename(old_name, lost, renamed, here)
    still = sorted({m for m, _ in (*named, *gains.kept.get(lost.name, []))})
    elsewhere = f"; a `{lost.name}` is still defined in {listing(still)}" if still else ""
    return Candidate(
        "removed",
        old_name,
        evidence="no NEW module gained a definition with this name, this body, a similar "
        "body or a close name that accepts the same calls",
        hint=f"`{lost.signature}` was removed in this release{elsewhere}",
    )


def _renamed(before: Module, lost: Definition, now: Module | None, gains: Gains) -> Hit | None:
    if now is not None:
        since = before if now.dotted != before.dotted else None
        hit = in_module(before.dotted, lost, now, gained_in(now, gains.old, since), gains)
        if hit is not None:
            return hit
    return gains.anywhere(before.dotted, lost)


def _rename(old_name: str, lost: Definition, hit: Hit, here: str) -> Candidate:
    module, found, score, runner_up = hit
    where = "in place" if module == here else f"into {module}"
    if score < 0:
        why = f"close name, same calls; renamed {where}"
    else:
        why = f"score={score:.2f} body similarity (next best {runner_up:.2f}); renamed {where}"
    return Candidate(
        "symbol", old_name, f"{module}.{found.name}", f"{why}: {lost.name} -> {found.name}"
    )


def _by_name(old_name: str, lost: Definition, named: list[tuple[str, Definition]]) -> Candidate:
    if len(named) == 1:
        module, definition = named[0]
        same = "identical body" if definition.digest == lost.digest else "body changed"
        score = 1.0 if definition.digest == lost.digest else similarity(lost, definition)
        return Candidate(
            "symbol",
            old_name,
            f"{module}.{lost.name}",
            f"score={score:.2f} {same}; matched by name: the only NEW module that gained "
            f"`{lost.name}`",
        )
    identical = [(m, d) for m, d in named if d.digest == lost.digest]
    if len(identical) == 1:
        why = f"defined in {len(named)} modules; identical body"
        return _choose(old_name, identical, why, lost)
    return _choose(old_name, named, "matched by name", lost)


def _choose(
    old_name: str, hits: list[tuple[str, Definition]], why: str, lost: Definition
) -> Candidate:
    targets = tuple(f"{m}.{d.name}" for m, d in hits)
    if len(targets) == 1:
        return Candidate("symbol", old_name, targets[0], f"score=1.00 {why}")
    return Candidate(
        "symbol",
        old_name,
        evidence=f"{why}: `{lost.name}` is defined in {len(targets)} candidate modules",
        blocked="ambiguous target",
        candidates=targets,
    )
