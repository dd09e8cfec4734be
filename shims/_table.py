"""The runtime view of a move table: which old names exist now, and where each one went.

The codemod composes steps from the user's source version; at run time there is only one
layout, the newest, so the steps collapse into one map: a later step's rule wins over an
earlier one with the same `old`, and an earlier rule whose `old` is a real name again in a
later layout (a later `new`, or a name below a later module move's `new`) is dropped.
Stdlib only.
"""

from __future__ import annotations

from dataclasses import dataclass

from rules import ModuleMove, Pack, SymbolMove, is_under


@dataclass(frozen=True)
class Entry:
    """One table row as the shims apply it.

    `kind` is "module" (`old` and every dotted name below it alias `new`) or "symbol"
    (`old` is `module.name` on a module that stays; `new` is `module.name` too).
    """

    old: str
    new: str
    kind: str
    pack: str
    version: str
    removal: str | None


def runtime_rules(pack: Pack) -> tuple[dict[str, Entry], dict[str, dict[str, Entry]]]:
    """Collapse `pack`'s steps into the two maps the finder needs.

    Returns:
        `(modules, hosts)`: `modules` maps each old module path to its entry; `hosts` maps
        each module that stays but lost names to `{old name: entry}`. A host that a later
        step moved is keyed by the module it lives in now, since the old name aliases it.
    """
    entries: dict[str, Entry] = {}
    for step in pack.steps:
        rules: tuple[ModuleMove | SymbolMove, ...] = (*step.modules, *step.symbols)
        for rule in rules:
            whole = isinstance(rule, ModuleMove)
            for old in list(entries):
                if old == rule.new or (whole and is_under(old, rule.new)):
                    del entries[old]
        for rule in rules:
            kind = "module" if isinstance(rule, ModuleMove) else "symbol"
            entries[rule.old] = Entry(
                rule.old, rule.new, kind, pack.name, step.version, step.removal
            )

    modules = {old: e for old, e in entries.items() if e.kind == "module"}
    hosts: dict[str, dict[str, Entry]] = {}
    for entry in entries.values():
        if entry.kind == "symbol":
            module, _, name = entry.old.rpartition(".")
            hosts.setdefault(_current_module(module, modules), {})[name] = entry
    return modules, hosts


def resolve(name: str, modules: dict[str, Entry]) -> tuple[Entry, str] | None:
    """The entry whose `old` is the longest whole-component prefix of `name`, and where
    `name` lives now (one hop; the import of that name may hop again)."""
    probe = name
    while True:
        entry = modules.get(probe)
        if entry is not None:
            return entry, entry.new + name[len(probe) :]
        probe, dot, _ = probe.rpartition(".")
        if not dot:
            return None


def _current_module(name: str, modules: dict[str, Entry]) -> str:
    # Bounded: each hop follows a distinct rule, and a table has finitely many.
    for _ in range(len(modules) + 1):
        hit = resolve(name, modules)
        if hit is None:
            return name
        name = hit[1]
    return name
