"""Draft the `vllm` pack (rules/vllm.toml) from vLLM's sdists, scoped to what plugins import.

    .venv/bin/python benchmarks/vllm_pack.py > /tmp/vllm-draft.toml

For each release pair: `vam rules infer`'s matchers (migrator.infer), kept only where a rule's
`old` covers a `vllm.*` reference of vllm-ascend (imports and dotted strings, from the
sdists named in ASCEND). Then every such reference that resolves in OLD but not in NEW (or
only through a deprecation `__getattr__`) and that no inferred rule covers gets a row of its
own, found with `vam verify-imports --against`'s index: the new home a deprecation forwarder
names, else where OLD re-exported it from, else the one NEW module that gained a definition
of that name. infer reads a module with a `__getattr__` as binding every name, and only
follows definitions, never re-exports: that is how it misses vllm.utils' split (0.11.1) and
the emptied vllm/attention/__init__.py (0.12.0). The draft is reviewed by hand before it
becomes rules/vllm.toml; ambiguous entries come out commented, with their candidates.
Sdists are fetched into ~/.cache/vam-sdists (migrator.core.dists), never into the repository.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable

from migrator.core.dists import fetch
from migrator.core.sources import Source, open_release
from migrator.infer.candidate import Candidate
from migrator.infer.emit import Header, render
from migrator.infer.index import build_indexes
from migrator.infer.modules import module_moves
from migrator.infer.symbols import Gains, renames_in_moved, symbol_moves
from migrator.verify_imports import findings as codes
from migrator.verify_imports.against import Dist, dist_from_source
from migrator.verify_imports.index import index_source
from migrator.verify_imports.strings import dotted_strings
from rules import is_under as under

VERSIONS = ("0.11.0", "0.11.1", "0.11.2", "0.12.0", "0.13.0")
ASCEND = ("0.11.0", "0.13.0")


def references(sources: Iterable[Source], from_modules: bool = True) -> set[str]:
    """Every `vllm.*` dotted name the sources import or write as a string (with the module
    of each `from M import x` as well, unless `from_modules` is false)."""
    found: set[str] = set()
    for source in sources:
        for path, data in source.files.items():
            for stmt in index_source(data, path).imports:
                if stmt.level:
                    continue
                if not stmt.is_from:
                    found.update(a.name for a in stmt.names)
                elif stmt.module:
                    if from_modules or stmt.is_star:
                        found.add(stmt.module)
                    found.update(f"{stmt.module}.{a.name}" for a in stmt.names if a.name != "*")
            found.update(text for text, _, _ in dotted_strings(data, frozenset({"vllm"})))
    return {r for r in found if under(r, "vllm")}


def _errors(dist: Dist, dotted: str) -> list[codes.ImportFinding]:
    return [f for f in dist.problems(dotted) if f.is_error]


def _reexported_from(old: Dist, module: str, name: str) -> str:
    info = old.project.info(module)
    for stmt in info.imports if info else []:
        for alias in stmt.names:
            if stmt.is_from and stmt.level == 0 and (alias.asname or alias.name) == name:
                return f"{stmt.module}.{alias.name}"
    return ""


def placed(ref: str, old: Dist, new: Dist, gains: Gains) -> Candidate | None:
    """A row for reference `ref` that OLD resolves and NEW does not (or only with VAI104)."""
    before = old.problems(ref)
    if "." not in ref or any(f.is_error or f.code == codes.DEPRECATED_NAME for f in before):
        return None  # broken already, or moved by the step that deprecated it
    problems = new.problems(ref)
    deprecated = [f for f in problems if f.code == codes.DEPRECATED_NAME and f.suggestion]
    if not deprecated and not any(f.is_error for f in problems):
        return None
    module, _, name = ref.rpartition(".")
    if module not in old.project.modules:
        return None  # a module reference: module rows come from infer
    if deprecated:
        home = deprecated[0].suggestion
        return Candidate("symbol", ref, home, f"served in {new.label} only by {module}'s "
                       f"deprecation __getattr__, which forwards it to {home}")
    origin = _reexported_from(old, module, name)
    if origin and not _errors(new, origin):
        return Candidate("symbol", ref, origin, f"{module} re-exported it from "
                       f"{origin.rpartition('.')[0]} in {old.label}; it still lives there")
    homes = sorted({m for m, _ in gains.by_name.get(name, []) if m != module})
    near = [m for m in homes if under(m, module.rpartition(".")[0] or module)]
    if len(homes) == 1 or len(near) == 1:
        home = homes[0] if len(homes) == 1 else near[0]
        why = "the one NEW module that gained it" if len(homes) == 1 else \
            f"the one of {len(homes)} modules that gained it next to {module}"
        return Candidate("symbol", ref, f"{home}.{name}", f"matched by name: {why}")
    if homes:
        return Candidate("symbol", ref, "", "several NEW modules gained it",
                       blocked="ambiguous target", candidates=tuple(f"{m}.{name}" for m in homes))
    return Candidate("removed", ref, evidence=f"no module of {new.label} gained '{name}'",
                   hint=f"removed in {new.label}; no replacement found")


def step(old_src: Source, new_src: Source, refs: set[str]) -> tuple[list[Candidate], list[str]]:
    """The findings of one step, scoped to `refs`, and the names a forwarder still serves."""
    old_index, new_index = build_indexes(old_src.files, new_src.files, ["vllm"], lambda: None)
    moves = module_moves(old_index, new_index)
    inferred = [*moves, *symbol_moves(old_index, new_index),
                *renames_in_moved(old_index, new_index, moves)]
    kept = [f for f in inferred if any(under(r, f.old) for r in refs)]
    covered = [f.old for f in kept]
    old, new = dist_from_source(old_src), dist_from_source(new_src)
    gains = Gains(old_index, new_index)
    extra = []
    for ref in sorted(refs):
        if any(under(ref, c) for c in covered):
            continue
        row = placed(ref, old, new, gains)
        if row is not None:
            extra.append(row)
            covered.append(ref)
    forwarded = [f.old for f in extra if f.evidence.startswith("served in")]
    return kept + extra, forwarded


def _release(name: str, version: str) -> Source:
    source = open_release(fetch(name, version))
    source.label = f"{name}=={version}"
    return source


def main() -> None:
    refs = references(_release("vllm-ascend", v) for v in ASCEND)
    sources = [_release("vllm", v) for v in VERSIONS]
    print(f"# {len(refs)} vllm.* references in vllm-ascend {', '.join(ASCEND)}")
    for old_src, new_src in zip(sources, sources[1:], strict=False):
        findings, forwarded = step(old_src, new_src, refs)
        header = Header("vllm", ("vllm",), old_src.version or "", new_src.version or "", None)
        text = render(header, findings)
        print(text[text.index("[[step]]"):])
        if forwarded:
            print(f"# still served by a deprecation __getattr__: {', '.join(forwarded)}\n")
        print(f"step {new_src.version}: {len(findings)} rows", file=sys.stderr)


if __name__ == "__main__":
    main()
