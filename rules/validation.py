"""Rejects move tables the resolver cannot apply safely, naming the entry at fault."""

from __future__ import annotations

from .schema import ModuleMove, Pack, Removal, RulesError, Step, SymbolMove, is_under, version_key


def _entry(where: str) -> str:
    """`step 1.0: module[0] (a.b)` from a full `where`: the file is named once per message."""
    return where.split(": ", 1)[-1]


def validate(pack: Pack) -> None:
    """Reject tables the resolver cannot apply safely.

    Per step: an `old` listed twice (duplicate) or with two targets (conflicting); an `old`
    that is also some rule's `new`; a `new` that a rule of the same step would rewrite again
    or report as removed (see `_check_target`); a symbol row that repeats what its module's
    move does; a cycle of moves; a symbol with no module (`old = "pkg"`); an `old` outside
    the pack's `packages` (it would never be found); a stay-put name that a rule would
    rewrite; a removal version not after the step; a `[pack] default-from` not before the
    last step. Across steps: versions strictly
    increasing. Allowed: several olds with one `new` (a merge), and rows below another
    row's `old` (the longest `old` wins for a name).

    Raises:
        RulesError: naming the first entry at fault.
    """
    if pack.default_from and version_key(pack.default_from) >= version_key(pack.latest):
        raise RulesError(
            f"{pack.source}: [pack] default-from {pack.default_from} is not before the last step "
            f"{pack.latest}: a run without --from would apply no step"
        )
    previous: str | None = None
    for step in pack.steps:
        if previous is not None and version_key(step.version) <= version_key(previous):
            raise RulesError(
                f"{pack.source}: step {step.version} must come after step {previous} "
                "(steps are ordered by version)"
            )
        _check_first_release(pack, step, previous)
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
        _check_target(step, rule)
    for symbol in step.symbols:
        for module in step.modules:
            if (
                is_under(symbol.old, module.old)
                and symbol.new == module.new + symbol.old[len(module.old) :]
            ):
                raise RulesError(
                    f"{symbol.where}: redundant: {_entry(module.where)} already moves it to "
                    f"{symbol.new!r}"
                )
    for name in step.stay:
        probe = name.rstrip("*")
        for old, rule in step.olds():
            captured = is_under(probe, old) if not isinstance(rule, SymbolMove) else probe == old
            if captured and not name.endswith("*"):
                raise RulesError(
                    f"step {step.version}: stay-put name {name!r} "
                    f"would be rewritten by {rule.where}"
                )
            if name.endswith("*") and old.startswith(probe):
                raise RulesError(
                    f"step {step.version}: stay-put pattern {name!r} overlaps {rule.where}"
                )


def _check_target(step: Step, rule: ModuleMove | SymbolMove) -> None:
    """Reject a `new` that another rule of the step would take again.

    Two shapes are allowed on purpose: a rename inside a moved module (a symbol row below a
    module row's `old`, whose `new` lies elsewhere: the longer row wins for that name), and a
    module that became a package of the same name (`m.X` -> `m.sub.X`: the symbol's `new`
    lies under its own module, which no row moves, so nothing fires on it again).
    """
    if isinstance(rule, SymbolMove) and is_under(rule.new, rule.old):
        raise RulesError(
            f"{rule.where}: new {rule.new!r} lies under old {rule.old!r} "
            "and would be rewritten again"
        )
    for module in step.modules:
        if not is_under(rule.new, module.old):
            continue
        if module is rule:
            raise RulesError(
                f"{rule.where}: new {rule.new!r} lies under old {module.old!r} and would be "
                "rewritten again; a module that became a package of the same name keeps its "
                "path: move the names that left it with [[step.symbol]] rows "
                f"({module.old}.Name -> {rule.new}.Name)"
            )
        raise RulesError(
            f"{rule.where}: new {rule.new!r} lies under old {module.old!r} "
            f"({_entry(module.where)}) and would be rewritten again"
        )
    for removed in step.removed:
        if is_under(rule.new, removed.old):
            raise RulesError(
                f"{rule.where}: new {rule.new!r} lies under {removed.old!r}, removed by "
                f"{_entry(removed.where)}"
            )


def _check_first_release(pack: Pack, step: Step, previous: str | None) -> None:
    """A step's `first-release` lies in (previous step's version, the step's version]: the
    steps stay in the same order whichever of the two each comparison uses."""
    if not step.first_release:
        return
    key = version_key(step.first_release)
    if key > version_key(step.version):
        raise RulesError(
            f"{pack.source}: step {step.version}: first-release {step.first_release} must not "
            "come after the step's own version"
        )
    if previous is not None and key <= version_key(previous):
        raise RulesError(
            f"{pack.source}: step {step.version}: first-release {step.first_release} must come "
            f"after the previous step {previous}"
        )
