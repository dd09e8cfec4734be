"""Draft the `vllm` pack (rules/vllm.toml) from vLLM's sdists, scoped to what plugins import.

    .venv/bin/python benchmarks/vllm_pack.py > /tmp/vllm-draft.toml
    .venv/bin/python benchmarks/vllm_pack.py --pair 0.25.1 0.26.0 > /tmp/vllm-0.26.0.toml

The first drafts every step of VERSIONS; `--pair OLD NEW` drafts one window (any two releases,
not only neighbours), so the pack can be drafted and reviewed step by step.

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

import hashlib
import json
import sys
import time
from collections.abc import Iterable
from pathlib import Path

from migrator.core.dists import cache_dir, fetch
from migrator.core.modname import RelativeImportError, resolve_relative
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

# Every vLLM release with an sdist on PyPI from 0.11.0 on. 0.15.0 and 0.15.1 shipped platform
# wheels only (compiled code, no sdist or pure-Python wheel), so 0.16.0's step spans them.
VERSIONS = ("0.11.0", "0.11.1", "0.11.2", "0.12.0", "0.13.0", "0.14.0", "0.14.1", "0.16.0",
            "0.17.0", "0.17.1", "0.18.0", "0.18.1", "0.19.0", "0.19.1", "0.20.0", "0.20.1",
            "0.20.2", "0.21.0", "0.22.0", "0.22.1", "0.23.0", "0.24.0", "0.25.0", "0.25.1",
            "0.26.0", "0.27.0", "0.27.1", "0.28.0", "0.29.0", "0.30.0", "0.31.0", "0.32.0",
            "0.33.0")
CENSUS_FORMAT = 1
# The census of what plugins import: every vllm-ascend release 0.11.0 ... 0.30.0rc2 on PyPI.
ASCEND = ("0.11.0", "0.11.0rc0", "0.11.0rc1", "0.11.0rc2", "0.11.0rc3", "0.12.0rc1", "0.13.0",
          "0.13.0rc1", "0.13.0rc2", "0.13.0rc3", "0.14.0rc1", "0.15.0rc1", "0.16.0rc1",
          "0.17.0rc1", "0.18.0", "0.18.0rc1", "0.19.1rc1", "0.20.2rc1", "0.21.0rc1", "0.22.1rc1",
          "0.23.0", "0.23.0.post1", "0.23.0rc1", "0.24.0rc1", "0.25.1rc1", "0.26.0rc1",
          "0.27.1rc1", "0.28.0rc1", "0.29.0rc1", "0.30.0rc1", "0.30.0rc2")


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
    # A relative import resolves against the importing module's package (itself for a package).
    mod = old.project.modules.get(module)
    package = module if mod is not None and mod.is_package else module.rpartition(".")[0]
    for stmt in info.imports if info else []:
        for alias in stmt.names:
            if stmt.is_from and (alias.asname or alias.name) == name:
                try:
                    origin = resolve_relative(package, stmt.level, stmt.module)
                except RelativeImportError:
                    continue
                return f"{origin}.{alias.name}"
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
    """`name==version` from the cache (fetched when missing), or `version` as a path to a
    tree, sdist or wheel: 0.15.x exist only as platform wheels, which `fetch` refuses."""
    path = Path(version)
    source = open_release(path if path.exists() else fetch(name, version))
    source.label = f"{name}=={source.version or version}"
    return source


def census(versions: Iterable[str] = ASCEND) -> set[str]:
    """`references` of the vllm-ascend `versions`, kept next to the sdists (JSON, keyed by the
    versions; bump CENSUS_FORMAT when `references` changes) so that drafting one window at a
    time reads them once."""
    key = hashlib.sha256(repr((sorted(versions), CENSUS_FORMAT)).encode())
    stored = cache_dir() / f"vllm-pack-census-{key.hexdigest()[:16]}.json"
    if stored.exists():
        return set(json.loads(stored.read_text()))
    refs = references(_release("vllm-ascend", v) for v in versions)
    stored.parent.mkdir(parents=True, exist_ok=True)
    stored.write_text(json.dumps(sorted(refs)))
    return refs


def _windows(argv: list[str]) -> list[tuple[str, str]]:
    if not argv:
        return list(zip(VERSIONS, VERSIONS[1:], strict=False))
    if len(argv) == 3 and argv[0] == "--pair":
        return [(argv[1], argv[2])]
    raise SystemExit("usage: vllm_pack.py [--pair OLD NEW]  (a version, or a path to a tree, "
                     "sdist or wheel)")


def main() -> None:
    windows = _windows(sys.argv[1:])
    refs = census()
    print(f"# {len(refs)} vllm.* references in vllm-ascend {ASCEND[0]} ... {ASCEND[-1]}")
    for old_v, new_v in windows:
        started = time.perf_counter()
        old_src, new_src = _release("vllm", old_v), _release("vllm", new_v)
        findings, forwarded = step(old_src, new_src, refs)
        header = Header("vllm", ("vllm",), old_src.version or old_v, new_src.version or new_v, None)
        text = render(header, findings)
        print(text[text.index("[[step]]"):] if "[[step]]" in text else f"# {new_v}: nothing\n")
        if forwarded:
            print(f"# still served by a deprecation __getattr__: {', '.join(forwarded)}\n")
        print(f"step {old_v} -> {new_v}: {len(findings)} rows, "
              f"{time.perf_counter() - started:.1f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
