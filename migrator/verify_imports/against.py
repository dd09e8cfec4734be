"""`vam verify-imports --against DIST`: do a project's imports of a third-party distribution
resolve in a given release of it?

The distribution's packages are indexed exactly as a first-party package is (a `Layout` and
a `Project`, parsed on demand), only from the file map of `migrator.core.sources` (a tree, an
sdist or a wheel, read in place) instead of a walk of the disk. Every import in the checked
files whose top-level package belongs to the distribution, and every string that is a dotted
path into it (mock.patch targets), then goes through the same checker as first-party imports.
`Dist.problems` answers the same question for one dotted path, for callers that decide what
to keep (version-guarded branches).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from migrator.core import indexcache
from migrator.core.dists import DistRef, index_key, no_package, open_ref, resolve
from migrator.core.guards import dead_lines, dead_spans, within
from migrator.core.settings import DEFAULT_VERSION_GUARDS
from migrator.core.sources import Source, open_release
from migrator.verify_imports import distindex
from migrator.verify_imports.checker import check_dotted, check_file, unsuppressed
from migrator.verify_imports.discovery import NAMESPACE, SOURCE, Layout, ModuleFile, discover
from migrator.verify_imports.findings import ImportFinding
from migrator.verify_imports.moves import MoveTables
from migrator.verify_imports.project import Project
from migrator.verify_imports.run import VerifyResult, collector_paused, display_path
from migrator.verify_imports.strings import dotted_strings
from migrator.verify_imports.trylanes import dead_fallbacks

# Top-level folders an sdist carries that no installed distribution provides.
NOT_SHIPPED = frozenset({"tests", "test", "testing", "benchmarks", "examples", "docs", "tools",
                         "scripts"})


@dataclass
class Dist:
    """One release of a distribution, indexed: `label` (`vllm==0.13.0` or the path given),
    `version` as the release states it, `project` its packages as a `Project`."""

    label: str
    version: str | None
    project: Project

    def __post_init__(self) -> None:
        self.project.moves = MoveTables(self.packages, self.version)

    @property
    def packages(self) -> frozenset[str]:
        return self.project.first_party

    def problems(self, dotted: str) -> list[ImportFinding]:
        """What is wrong with the dotted path `dotted` (a module, or a module then a name) in
        this release: [] when it resolves; warnings only (VAI104 deprecated, VAI100 unknown)
        when it resolves at run time; errors (VAI001/VAI002) when importing it fails."""
        probe = ModuleFile("__vam_probe__", Path("<reference>"), SOURCE, False)
        return check_dotted(self.project, probe, dotted, 1, 1, str)


def dist_from_source(source: Source) -> Dist:
    """Index the packages of `source` (never `tests`, `examples`, ...: see NOT_SHIPPED)."""
    base = source.root or Path(source.label)
    layout = Layout()
    files: dict[Path, bytes] = {}
    for rel, data in sorted(source.files.items()):
        parts = rel[: -len(".py")].split("/")
        if parts[0] in NOT_SHIPPED or not all(p.isidentifier() for p in parts):
            continue
        path = base / rel
        files[path] = data
        layout.roots.setdefault(parts[0], base)
        _add_module(layout.modules, parts, path)
    return Dist(source.label, source.version, Project(layout, files))


def _add_module(modules: dict[str, ModuleFile], parts: list[str], path: Path) -> None:
    """Register one file, and its folders as namespace packages until an `__init__.py` says
    otherwise; a package beats a module file of the same name, which beats a namespace folder
    (the import system's order)."""
    is_package = parts[-1] == "__init__"
    if is_package:
        parts = parts[:-1]
    for end in range(1, len(parts)):
        folder = ".".join(parts[:end])
        if folder not in modules:
            modules[folder] = ModuleFile(folder, path.parents[len(parts) - end - 1 + is_package],
                                         NAMESPACE, True)
    name = ".".join(parts)
    current = modules.get(name)
    if is_package or current is None or current.kind == NAMESPACE:
        modules[name] = ModuleFile(name, path, SOURCE, is_package)


def load_dist(spec: str, index_url: str | None = None, cache: bool = True) -> Dist:
    """`dist_from_source` of a DIST spec (see `migrator.core.dists.resolve`), every module
    indexed, the index kept in `migrator.core.indexcache` (`cache=False`: neither read nor
    written). An sdist or wheel is keyed by the sha256 of its bytes and a git revision by its
    commit: on a hit, never opened; a source tree is read, keyed by the sha256 of its files,
    and parsed only on a miss. A hit gives the same findings as a miss.

    Raises migrator.core.sources.InputError (DistError) when it cannot be read or fetched,
    or ships no Python package."""
    ref = resolve(spec, index_url)
    dist = _indexed(ref, cache)
    if not dist.packages:
        raise no_package(ref.label, ref.path)
    return dist


def _indexed(ref: DistRef, cache: bool) -> Dist:
    source = _open(ref) if ref.is_tree else None
    base = source.root if source is not None and source.root else Path(ref.label)
    key = index_key(ref, source) if cache else ""
    tag = indexcache.code_tag(distindex.CODE)
    if key:
        stored = indexcache.load(distindex.KIND, key, tag)
        try:
            layout, infos, getattrs, version = distindex.decode(stored, base)
        except ValueError:
            pass  # no entry, or one this code cannot read: built again and stored over it
        else:
            return Dist(ref.label, version, Project(layout, {}, infos, getattrs))
    if source is None:
        source = _open(ref)
    dist = dist_from_source(source)
    infos, getattrs = dist.project.indexed()
    if key:
        payload = distindex.encode(dist.project.layout, infos, getattrs, base, dist.version)
        indexcache.store(distindex.KIND, key, tag, payload)
    return dist


def _open(ref: DistRef) -> Source:
    """`open_ref`, with `open_release` looked up here (the cache tests replace it to prove a
    hit opens nothing)."""
    if ref.commit:
        return open_ref(ref)
    source = open_release(ref.path)
    source.label = ref.label
    return source


def verify_against(dist: Dist, targets: Sequence[str],
                   guards: tuple[str, ...] = DEFAULT_VERSION_GUARDS) -> VerifyResult:
    """Check every import of `dist`'s packages in `targets` (absolute and `from` imports, and
    dotted-path strings) against `dist`; pragmas (`# vam: ignore`) apply. When `dist` states
    its version, nothing is reported on lines that version never runs: a branch of a
    version guard (a call of one of `guards`, `[tool.vam] version-guards`) dead there, such
    as the old lane `vam migrate --keep-compat` writes (`migrator.core.guards`); nor in the
    `except ImportError` fallback of a `try` whose imports all resolve there (`trylanes`).

    Raises TargetError for a target that does not exist or is not Python."""
    started = time.perf_counter()
    layouts = discover(targets)
    cwd = Path.cwd()

    def show(path: Path) -> str:
        return display_path(path, cwd)

    found: list[ImportFinding] = []
    project = dist.project
    with collector_paused():
        for layout in layouts:
            for target in layout.targets:
                source = project.source(target.path)
                # A string's own branch counts: `"a.X" if guard else "b.X"` is one line.
                spans = dead_spans(source, guards, dist.version)
                strings = [f for text, line, col in dotted_strings(source, project.first_party)
                           if not within(spans, line, col - 1)
                           for f in check_dotted(project, target, text, line, col, show)]
                mine = check_file(project, target, show) + unsuppressed(source, strings)
                dead = dead_lines(source, guards, dist.version) if mine else set()
                fallbacks = dead_fallbacks(project, target) if mine else []
                found += [f for f in mine
                          if f.line not in dead and not within(fallbacks, f.line, f.col - 1)]
    checked = sum(len(layout.targets) for layout in layouts)
    return VerifyResult(sorted(set(found)), checked, time.perf_counter() - started)
