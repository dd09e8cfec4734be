"""Rejects move tables the resolver cannot apply safely, naming the entry at fault."""

from __future__ import annotations

from .schema import ModuleMove, Pack, Removal, RulesError, Step, SymbolMove, version_key


def _under(name: str, prefix: str) -> bool:
    """True if `name` is `prefix` or lies below it, by whole components."""
    return name == prefix or name.startswith(prefix + ".")


def validate(pack: Pack) -> None:
    """Reject tables the resolver cannot apply safely.

    Per step: an `old` listed twice (duplicate) or with two targets (conflicting); an `old`
    that is also some rule's `new`; a `new` that a module move of the same step would
    rewrite again; a cycle of moves; a symbol whose module is itself moved; a symbol with no
    module (`old = "pkg"`); an `old` outside the pack's `packages` (it would never be found);
    a stay-put name that a rule would rewrite; a removal version not after the step. Across
    steps: versions strictly increasing.

    Raises:
        RulesError: naming the first entry at fault.
    """
    previous: str | None = None
    for step in pack.steps:
        if previous is not None and version_key(step.version) <= version_key(previous):
            raise RulesError(
                f"{pack.source}: step {step.version} must come after step {previous} "
                "(steps are ordered by version)"
            )
        previous = step.version
        if step.removal is not None and version_key(step.removal) <= version_key(step.version):
            raise RulesError(
                f"{pack.source}: step {step.version}: removal {step.removal} must come after "
                "the step's own version"
            )
        for old, rule in step.olds():
            if old.partition(".")[0] not in pack.packages:
                raise RulesError(
                    f"{rule.where}: old {old!r} is outside the pack's packages "
                    f"({', '.join(pack.packages)}): references to it would never be found"
                )
        _validate_step(step)


def _validate_step(step: Step) -> None:
    seen: dict[str, ModuleMove | SymbolMove | Removal] = {}
    for old, rule in step.olds():
        if old in seen:
            first = seen[old]
            same = type(first) is type(rule) and getattr(first, "new", None) == getattr(
                rule, "new", None
            )
            what = "duplicate" if same else "conflicting"
            first_at = first.where.split(": ", 1)[-1]  # same file: name the entry only
            raise RulesError(f"{rule.where}: {what} old {old!r} (first at {first_at})")
        seen[old] = rule
        if isinstance(rule, SymbolMove) and "." not in old:
            raise RulesError(f"{rule.where}: a symbol move needs `module.name`, got {old!r}")
        if isinstance(rule, SymbolMove) and "." not in rule.new:
            raise RulesError(f"{rule.where}: a symbol move needs `module.name`, got {rule.new!r}")
        if isinstance(rule, (ModuleMove, SymbolMove)) and rule.new == old:
            raise RulesError(f"{rule.where}: old and new are the same")

    moves: dict[str, str] = {m.old: m.new for m in step.moves()}
    for start in moves:
        path = [start]
        node = moves[start]
        while node in moves and node not in path:
            path.append(node)
            node = moves[node]
        if node == start:
            cycle = " -> ".join([*path, start])
            raise RulesError(f"{seen[start].where}: cycle in step {step.version}: {cycle}")

    for rule in step.moves():
        if rule.new in seen:
            raise RulesError(
                f"{rule.where}: new {rule.new!r} is also an old in this step "
                f"({seen[rule.new].where}); split it into two steps"
            )
        for module in step.modules:
            if _under(rule.new, module.old):
                raise RulesError(
                    f"{rule.where}: new {rule.new!r} lies under old {module.old!r} "
                    f"({module.where}) and would be rewritten again"
                )
    for symbol in step.symbols:
        for module in step.modules:
            if _under(symbol.old, module.old):
                raise RulesError(
                    f"{symbol.where}: conflicting old: its module is moved by {module.where}"
                )
    for name in step.stay:
        probe = name.rstrip("*")
        for old, rule in step.olds():
            captured = _under(probe, old) if not isinstance(rule, SymbolMove) else probe == old
            if captured and not name.endswith("*"):
                raise RulesError(
                    f"step {step.version}: stay-put name {name!r} "
                    f"would be rewritten by {rule.where}"
                )
            if name.endswith("*") and old.startswith(probe):
                raise RulesError(
                    f"step {step.version}: stay-put pattern {name!r} overlaps {rule.where}"
                )
