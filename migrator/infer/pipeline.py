"""Two releases -> an inferred, validated and checked move table step.

The steps: choose the packages, index both releases, match (module moves, then symbol
moves), keep what touches `under`, render the TOML, then parse it back with the rules
loader and check every name against both trees (`check_against`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from migrator.core.sources import InputError, Source, on_disk
from migrator.core.tables import check_against
from migrator.infer.candidate import Candidate
from migrator.infer.emit import Header, render
from migrator.infer.gitsource import Interim
from migrator.infer.index import Module, build_indexes, module_name, parse_definitions
from migrator.infer.modules import interim_moves, module_moves
from migrator.infer.renames import Gains
from migrator.infer.symbols import moved_names, symbol_moves
from migrator.verify_imports.treenames import TreeNames
from rules import RulesError, is_under, parse
from rules.schema import VERSION_RE

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib


@dataclass
class Inference:
    """The table's text, its findings, files skipped as unparsable, and check failures."""

    text: str
    findings: list[Candidate]
    skipped: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


# Top-level packages an sdist or tree ships beside the distribution's own (its test suite,
# docs, examples): compared only when asked for by name, since their churn is no API move
# and indexing them costs time (vllm-ascend's `tests`: most of 140 rules and 78 s).
NOT_DISTRIBUTION = frozenset({"tests", "test", "benchmarks", "examples", "docs"})


def choose_packages(old: Source, new: Source, wanted: Sequence[str]) -> tuple[str, ...]:
    """The packages to compare: `wanted`, else every top-level package in both except
    `NOT_DISTRIBUTION` (tests, docs, ...).

    Raises:
        InputError: a wanted package missing from a release, or no package in common.
    """
    both = old.packages() & new.packages() - NOT_DISTRIBUTION
    for package in wanted:
        for source in (old, new):
            if package not in source.packages():
                raise InputError(f"{source.label}: no top-level package {package!r}")
    if not wanted and not both:
        raise InputError(f"{old.label} and {new.label} have no top-level package in common")
    return tuple(sorted(set(wanted) or both))


def file_count(source: Source, packages: Sequence[str]) -> int:
    """How many files indexing `source` reads (the progress bar's length)."""
    return sum(1 for path in source.files if path.split("/")[0] in packages)


def step_version(new: Source, version: str | None) -> str:
    """`version`, else NEW's own, without a local part (`+g1234`).

    Raises:
        InputError: no version known, or not of the form the rules loader accepts.
    """
    chosen = version or new.version
    if not chosen:
        raise InputError(f"{new.label}: cannot tell its version; pass --version")
    chosen = chosen.split("+")[0]
    if not VERSION_RE.match(chosen):
        raise InputError(f"malformed version {chosen!r} (want N.N[.N][rcN|aN|bN][.postN|.devN])")
    return chosen


def infer(
    old: Source,
    new: Source,
    packages: Sequence[str],
    version: str,
    scope: str | None = None,
    interims: Sequence[Interim] = (),
    tick: Callable[[], None] = lambda: None,
) -> Inference:
    """Infer one step from OLD to NEW; `scope` keeps moves out of, into or inside it.

    Raises:
        InputError: `scope` names no module of either release.
    """
    old_index, new_index = build_indexes(old.files, new.files, packages, tick)
    if scope and not (old_index.has(scope) or new_index.has(scope)):
        raise InputError(f"--under {scope}: no such module or package in either release")
    gains = Gains(old_index, new_index, old.packages() | new.packages() | set(packages))
    moves = module_moves(old_index, new_index, gains)
    findings = [
        *moves,
        *symbol_moves(old_index, new_index, gains),
        *moved_names(old_index, new_index, moves, gains),
        *interim_moves(_interim_modules(interims, packages), new_index),
    ]
    if scope:
        # A row below a module whose move touches the scope belongs to that move.
        moved = [f.old for f in moves if f.kind == "module" and f.active and _touches(f, scope)]
        findings = [
            f for f in findings if _touches(f, scope) or any(is_under(f.old, m) for m in moved)
        ]
    header = Header(
        name=packages[0] if len(packages) == 1 else "inferred",
        packages=tuple(packages),
        old_version=old.version or Path(old.label).name,
        new_version=version,
        under=scope,
    )
    text = render(header, findings)
    skipped = [f"{old.label}: {p}" for p in old_index.skipped]
    skipped += [f"{new.label}: {p}" for p in new_index.skipped]
    return Inference(text, findings, skipped, check(text, old, new))


def _interim_modules(interims: Sequence[Interim], packages: Sequence[str]) -> dict[str, Module]:
    out = {}
    for interim in interims:
        if interim.path.split("/")[0] not in packages:
            continue
        dotted, is_package = module_name(interim.path)
        module = parse_definitions(interim.data, dotted, is_package)
        if module is not None:
            out[dotted] = module
    return out


def _touches(finding: Candidate, scope: str) -> bool:
    if is_under(finding.old, scope):
        return True
    targets = (finding.new, *finding.candidates) if finding.kind != "removed" else ()
    return any(t and is_under(t, scope) for t in targets)


def check(text: str, old: Source, new: Source) -> list[str]:
    """Parse the table back (loader + validation) and check its names against both trees."""
    try:
        pack = parse(tomllib.loads(text), source="<inferred>")
    except (RulesError, tomllib.TOMLDecodeError) as exc:
        return [str(exc)]
    with on_disk(old) as old_root, on_disk(new) as new_root:
        return check_against(pack.steps[0], old_root, new_root, TreeNames())
