"""Symbol moves: public names that left a module which stays, and renames.

A name is lost when NEW's module neither defines nor imports it (a re-export counts as
still present). Its destination, in order: the one NEW module that gained a definition of
that name; else the one gained definition with an identical body (a rename); else, in
the same module, the gained definition of the same kind with the most similar body. With
several candidates nothing is guessed: the entry is emitted commented out; with more
than MAX_CANDIDATES it is reported as removed, naming where the name is still defined.
"""

from __future__ import annotations

from collections import defaultdict

from migrator.infer.candidate import MAX_CANDIDATES, Candidate, listing
from migrator.infer.index import Definition, Index, Module, similarity

RENAME_SIMILARITY = 0.6  # Jaccard of token trigrams; edited-but-same functions score higher
MIN_BODY_SHINGLES = 6  # bodies smaller than this (`pass`, `return None`) match anything


class Gains:
    """Every definition NEW gained, by name and by body digest, as (module, Definition)."""

    def __init__(self, old: Index, new: Index) -> None:
        self.by_name: dict[str, list[tuple[str, Definition]]] = defaultdict(list)
        self.by_digest: dict[str, list[tuple[str, Definition]]] = defaultdict(list)
        self.kept: dict[str, list[tuple[str, Definition]]] = defaultdict(list)
        for dotted in sorted(new.modules):
            previous = old.modules.get(dotted)
            for name, definition in sorted(new.modules[dotted].defs.items()):
                if previous is not None and name in previous.defs:
                    self.kept[name].append((dotted, definition))
                    continue
                self.by_name[name].append((dotted, definition))
                if _distinctive(definition):
                    self.by_digest[definition.digest].append((dotted, definition))


def _distinctive(definition: Definition) -> bool:
    return definition.kind != "variable" and definition.size >= MIN_BODY_SHINGLES


def symbol_moves(old: Index, new: Index) -> list[Candidate]:
    """Symbol moves, renames and symbol removals for modules present in both releases."""
    gains = Gains(old, new)
    findings = []
    for dotted in sorted(old.modules):
        now = new.modules.get(dotted)
        if now is None:
            continue
        before = old.modules[dotted]
        for name in before.public():
            if not now.binds(name):
                findings.append(_place(before, before.defs[name], now, old, gains))
    return findings


def _place(before: Module, lost: Definition, now: Module, old: Index, gains: Gains) -> Candidate:
    old_name = f"{before.dotted}.{lost.name}"
    named = [(m, d) for m, d in gains.by_name.get(lost.name, []) if m != before.dotted]
    if lost.kind == "variable":
        # A constant's name proves little (`logger` is everywhere): every module that
        # defines it is a candidate, not only those that gained it.
        named += [(m, d) for m, d in gains.kept.get(lost.name, []) if m != before.dotted]
    if 0 < len(named) <= MAX_CANDIDATES:
        return _by_name(old_name, lost, named)
    same_body = [
        (m, d)
        for m, d in gains.by_digest.get(lost.digest, [])
        if d.kind == lost.kind and _distinctive(lost)
    ]
    if same_body:
        return _choose(old_name, same_body, "renamed: identical body", lost)
    renamed = _similar(lost, now, old)
    if renamed is not None:
        definition, score, runner_up = renamed
        return Candidate(
            "symbol",
            old_name,
            f"{now.dotted}.{definition.name}",
            f"score={score:.2f} body similarity (next best {runner_up:.2f}); renamed in place: "
            f"{lost.name} -> {definition.name}",
        )
    still = sorted({m for m, _ in (*named, *gains.kept.get(lost.name, []))})
    elsewhere = f"; a `{lost.name}` is still defined in {listing(still)}" if still else ""
    return Candidate(
        "removed",
        old_name,
        evidence="no NEW module gained a definition with this name, this body, or a similar "
        "body here",
        hint=f"`{lost.signature}` was removed in this release{elsewhere}",
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


def _similar(lost: Definition, now: Module, old: Index) -> tuple[Definition, float, float] | None:
    """The gained definition of `now` most like `lost`, when it clearly stands out."""
    previous = old.modules.get(now.dotted)
    gained = [
        d
        for name, d in sorted(now.defs.items())
        if d.kind == lost.kind and (previous is None or name not in previous.defs)
    ]
    return best_similar(lost, gained)


def best_similar(
    lost: Definition, gained: list[Definition]
) -> tuple[Definition, float, float] | None:
    """(best, its score, the runner-up's score) when best >= RENAME_SIMILARITY and unique."""
    scored = sorted(((similarity(lost, d), d.name, d) for d in gained), key=lambda t: (-t[0], t[1]))
    if not scored or scored[0][0] < RENAME_SIMILARITY:
        return None
    runner_up = scored[1][0] if len(scored) > 1 else 0.0
    if runner_up == scored[0][0]:
        return None
    return scored[0][2], scored[0][0], runner_up


def renames_in_moved(old: Index, new: Index, moves: list[Candidate]) -> list[Candidate]:
    """Renames inside moved modules, emitted commented out: a [[step.symbol]] may not start
    from a module that a [[step.module]] moves, so the table cannot express them."""
    findings = []
    for move in moves:
        if move.kind != "module" or not move.active or move.intermediate:
            continue
        pairs = [(move.old, move.new)]
        pairs += [(f"{move.old}.{s}", f"{move.new}.{s}") for s in move.submodules]
        for source, target in pairs:
            before, after = old.modules.get(source), new.modules.get(target)
            if before is None or after is None:
                continue
            gained = [d for n, d in sorted(after.defs.items()) if n not in before.defs]
            for name in before.public():
                if after.binds(name):
                    continue
                lost = before.defs[name]
                hit = best_similar(lost, [d for d in gained if d.kind == lost.kind])
                if hit is not None:
                    findings.append(
                        Candidate(
                            "symbol",
                            f"{source}.{name}",
                            f"{target}.{hit[0].name}",
                            f"score={hit[1]:.2f} body similarity; renamed inside moved module "
                            f"{source} -> {target}",
                            blocked="the format cannot express a rename inside a moved module",
                        )
                    )
    return findings
