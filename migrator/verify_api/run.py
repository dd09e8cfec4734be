"""`vam verify-api`: read the project, open the target and the baseline release, judge every
use. The baseline is found as migrate finds `--from` (DESIGN.md section 9), for the upstream
distribution: `--from` (a version or a DIST), the project's pins, the installed release, the
pack's default; it is opened as a DIST (`NAME==VERSION` is fetched into the sdist cache)."""

from __future__ import annotations

import ast
import dataclasses
import functools
import os
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from migrator.core.baseline import CONFIG, FLAG, PACK, find_baseline
from migrator.core.collector import collector_paused
from migrator.core.config import Config
from migrator.core.discover import iter_files
from migrator.core.dists import no_package, resolve, stated_name
from migrator.core.guards import decide
from migrator.core.modname import ModuleNamer
from migrator.core.pins import distribution_names
from migrator.core.settings import DEFAULT_VERSION_GUARDS
from migrator.core.sources import InputError
from migrator.core.walk import read_regular
from migrator.verify_api import factcache
from migrator.verify_api.check import Checker
from migrator.verify_api.findings import UNPARSED, ApiFinding
from migrator.verify_api.project import FileFacts, Live, read_file
from migrator.verify_api.upstream import Upstream
from rules import Pack, RulesError, version_key

_LOCAL = re.compile(r"\+.*$")
_SOURCES = {FLAG: "(--from)", CONFIG: "([tool.vam] from)", PACK: "(the pack's default-from)"}


@dataclass
class ApiResult:
    """What a run found: `findings` sorted, `checked` files read, `seconds` wall time,
    `notes` the stderr lines that say which releases were compared."""

    findings: list[ApiFinding]
    checked: int
    seconds: float
    target: str
    baseline: str | None
    notes: list[str] = field(default_factory=list)
    parsed: int = 0  # upstream modules parsed (not read from the index cache)

    @property
    def has_errors(self) -> bool:
        return any(f.is_error for f in self.findings)


@dataclass(frozen=True)
class ApiRequest:
    """One run: `paths` to check, the `target` DIST, `given_from` (`--from`: a version or a
    DIST), `upstream` packages named on the command line, the `pack` and `config` in force."""

    paths: tuple[str, ...]
    target: str
    pack: Pack
    config: Config
    given_from: str | None = None
    upstream: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    guards: tuple[str, ...] = DEFAULT_VERSION_GUARDS
    cache: bool = True
    # `given_from` was found by the caller (a pin, the installed release), not typed: when it
    # cannot be opened the run goes on without a baseline, as for one found here.
    from_found: bool = False

    @property
    def typed_from(self) -> str | None:
        """`--from` as the user typed it, else None: one that cannot be opened is an error."""
        return None if self.from_found else self.given_from


def verify_api(request: ApiRequest) -> ApiResult:
    """Run the check.

    Raises InputError (the target cannot be read), RulesError (a bad version), or
    FileNotFoundError (a path that does not exist)."""
    with collector_paused():
        return _verify(request)


def _verify(request: ApiRequest) -> ApiResult:
    started = time.perf_counter()
    notes: list[str] = []
    _same_distribution(request)
    ref = resolve(request.target)
    probe = Upstream.load(ref, frozenset(request.upstream), request.cache)
    if not probe.shipped:
        raise no_package(ref.label, ref.path)
    packages = _packages(request, probe, notes)
    target = dataclasses.replace(probe, packages=packages)
    baseline = _baseline(request, packages, target, notes)
    live = functools.partial(decide, helpers=request.guards, version=target.version)
    entry = factcache.key(str(Path.cwd()), *request.paths, *sorted(packages),
                          target.version or target.label, *request.guards) if request.cache \
        else ""
    unparsed: list[ApiFinding] = []
    facts = collect(request.paths, request.exclude, packages, live, entry, unparsed)
    classes = {c.qual: c for f in facts for c in f.classes}
    checker = Checker(target, baseline, classes, facts)
    found = sorted({finding for f in facts for finding in checker.file(f)} | set(unparsed))
    parsed = target.parsed + (baseline.parsed if baseline else 0)
    target.save()
    if baseline is not None:
        baseline.save()
    return ApiResult(found, len(facts) + len(unparsed), time.perf_counter() - started, target.label,
                     baseline.label if baseline else None, notes, parsed)


def _packages(request: ApiRequest, target: Upstream, notes: list[str]) -> frozenset[str]:
    """`--upstream`, else the pack's packages the target ships, else all it ships."""
    if request.upstream:
        if not set(request.upstream) & target.shipped:
            raise InputError(f"--upstream {', '.join(request.upstream)}: {target.label} ships "
                             f"no such package (it ships {', '.join(sorted(target.shipped))})")
        return frozenset(request.upstream)
    mine = frozenset(request.pack.packages) & target.packages
    if mine:
        return mine
    notes.append(f"vam: upstream packages: {', '.join(sorted(target.packages))} (those "
                 f"{target.label} ships; the {request.pack.name} pack names none of them)")
    return target.packages


def _baseline(request: ApiRequest, packages: frozenset[str], target: Upstream,
              notes: list[str]) -> Upstream | None:
    spec, where = _baseline_spec(request, packages)
    if spec is None:
        notes.append(f"vam: no baseline release ({where}): uses are compared against "
                     f"{target.label} alone")
        return None
    typed = request.typed_from
    try:
        ref = resolve(spec)
        found = Upstream.load(ref, packages, request.cache)
        if typed and not found.shipped:
            raise no_package(ref.label, ref.path)
    except InputError as exc:
        if typed:
            raise InputError(_unusable(typed, spec, exc)) from None
        notes.append(f"vam: cannot open the baseline {spec} ({exc}): uses are compared "
                     f"against {target.label} alone")
        return None
    notes.append(f"vam: baseline {found.label}{where}")
    return found


def _unusable(typed: str, spec: str, exc: InputError) -> str:
    """Why the baseline the user typed (`--from typed`, opened as `spec`) is refused."""
    if _is_version(typed):
        return f"--from {typed}: cannot open {spec}: {exc}"
    if "==" in typed or "@" in typed or Path(typed).exists():
        return f"--from {typed}: {exc}"
    return f"--from {typed}: neither a version nor a DIST ({exc})"


def _same_distribution(request: ApiRequest) -> None:
    """A typed `--from` that states another distribution than the target (both known) is
    refused: the comparison would be between two different projects."""
    typed = request.typed_from
    if not typed or _is_version(typed):
        return
    baseline, target = stated_name(typed), stated_name(request.target)
    if baseline and target and baseline != target:
        raise InputError(f"--from {typed} is a release of {baseline}, not of {target} "
                         f"(--against {request.target}): give a release of {target}")


def _baseline_spec(request: ApiRequest, packages: frozenset[str]) -> tuple[str | None, str]:
    """(the baseline DIST, where it came from) for the upstream `packages`.
"""
    names = distribution_names(tuple(sorted(packages)))
    given = request.given_from
    if given and not _is_version(given):
        return given, ""
    config = request.config
    pack = request.pack
    if not set(pack.packages) & packages:
        # `[tool.vam] from` and the pack's default speak of the pack's package, not this one.
        config = dataclasses.replace(config, from_version=None)
        pack = dataclasses.replace(pack, packages=tuple(sorted(packages)), default_from="")
    start = Path(request.paths[0]) if request.paths else Path(".")
    found = find_baseline(given, config, pack, start, None)
    if found.version is None:
        return None, "no --from, pin or installed release"
    version = _LOCAL.sub("", found.version)  # `0.32.0+cpu` is on no index
    detail = found.note.removeprefix(f"vam: --from {found.version} ") or _SOURCES.get(
        found.source, "")
    return f"{names[0]}=={version}", f" {detail}" if detail else ""


def _is_version(text: str) -> bool:
    if os.sep in text or "@" in text or "==" in text or Path(text).exists():
        return False
    try:
        version_key(text)
    except RulesError:
        return False
    return True


def collect(paths: Sequence[str], exclude: Sequence[str], packages: frozenset[str],
            live: Live | None = None, cache_key: str = "",
            unparsed: list[ApiFinding] | None = None) -> list[FileFacts]:
    """The facts of every Python file below `paths`; a file that does not parse is left
    out, and a VAP900 finding for it added to `unparsed` (when given). With `cache_key`,
    the facts of unchanged files come from `factcache`.

    Raises FileNotFoundError for a path that does not exist."""
    namer = ModuleNamer()
    cwd = Path.cwd()
    out: list[FileFacts] = []
    targets = [Path(p) for p in paths] or [Path(".")]
    stored = factcache.load(cache_key) if cache_key else {}
    kept: dict[str, Any] = {}
    for source in iter_files(targets, exclude, ("*.py",)):
        if source.kind != "python" or source.path.suffix != ".py":
            continue
        _, module, is_init = namer.module_of(source.path.absolute())
        try:
            data = read_regular(source.path)
        except OSError:
            continue
        shown = os.path.relpath(source.path, cwd) if source.path.is_absolute() else str(
            source.path)
        sha = factcache.digest(data)
        facts = _cached(stored.get(shown), sha, module, is_init, shown)
        if facts is None:
            facts = read_file(data, shown, module, is_init, packages, live or _unknown)
        if facts is not None:
            out.append(facts)
            kept[shown] = [sha, module, is_init, factcache.encode(facts)]
        elif unparsed is not None:
            unparsed.append(_unparsed(data, shown))
    if cache_key and kept != stored:
        factcache.store(cache_key, kept)
    return out


def _unparsed(data: bytes, shown: str) -> ApiFinding:
    """The VAP900 finding of a file that does not parse, at the error's position."""
    try:
        ast.parse(data)
    except SyntaxError as exc:
        return ApiFinding(shown, exc.lineno or 0, exc.offset or 0, UNPARSED,
                          f"{shown} could not be parsed ({exc.msg}): its uses were not checked")
    except ValueError as exc:
        return ApiFinding(shown, 0, 0, UNPARSED,
                          f"{shown} could not be parsed ({exc}): its uses were not checked")
    return ApiFinding(shown, 0, 0, UNPARSED, f"{shown} could not be parsed")


def _cached(row: Any, sha: str, module: str, is_init: bool, shown: str) -> FileFacts | None:
    if not (isinstance(row, list) and len(row) == 4 and row[:3] == [sha, module, is_init]):
        return None
    try:
        return factcache.decode(row[3], shown)
    except ValueError:
        return None


def _unknown(test: object) -> None:
    return None
