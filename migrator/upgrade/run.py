"""`vam upgrade NAME==B`: what breaks at release B, the import moves written in dual-lane form,
the same checks on the result, and what is left for a person (DESIGN.md section 9).

The commands' own backends run in this process, in order: `verify-imports --against` (and
`verify-api --against` where this vam has it) on the code as it is; `migrate --to B
--keep-compat <baseline>` (plain migrate where this vam has no `--keep-compat`, said in
`notes`); both checks again on the migrated code, on disk after `write`, else on a copy in a
temporary folder with the new bytes laid over it.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import stat
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from migrator.core.discover import SourceFile
from migrator.core.findings import Finding
from migrator.core.modname import package_inits
from migrator.rewrite.engine import FileResult, Options
from migrator.rewrite.runner import Job, default_jobs, run
from migrator.upgrade import api, lines
from migrator.upgrade.lanes import live_only
from migrator.verify_imports import Dist, verify_against


@dataclass
class Check:
    """One pass of the checks: verify-imports findings (errors and warnings, less those on
    lines release B never runs) and verify-api findings (None: verify-api is not in this vam)."""

    imports: list[Any] = field(default_factory=list)
    api: list[Any] | None = None

    @property
    def import_errors(self) -> list[Any]:
        return [f for f in self.imports if f.is_error]


@dataclass
class Upgrade:
    """Everything one run found: `before`/`after` the checks, `results` migrate's per-file
    results (`new` set where a file changes), `notes` what the run could not do as asked.
    Every finding's line is one of its file as on disk after the run (`lines.py`)."""

    version: str
    baseline: str | None
    compat: str
    before: Check
    after: Check
    results: list[FileResult]
    notes: list[str] = field(default_factory=list)

    @property
    def changed(self) -> list[FileResult]:
        return [r for r in self.results if r.new is not None]

    @property
    def migrate_findings(self) -> list[Finding]:
        return [f for r in self.results for f in r.findings]


def dual_lane(options: Options, baseline: str | None, style: str) -> tuple[Options, str, str]:
    """(options with `keep_compat` set, how the moves are written, a note or ""): plain
    migrate when there is no baseline or this vam's migrate has no `--keep-compat`."""
    names = {f.name for f in dataclasses.fields(Options)}
    if baseline is None:
        return options, "plain", "no baseline version: import moves are written without a lane"
    if "keep_compat" not in names:
        return options, "plain", ("this vam's migrate has no --keep-compat: import moves are "
                                  "written in plain form, without the old lane")
    changes: dict[str, Any] = {"keep_compat": baseline}
    if "compat_style" in names:
        changes["compat_style"] = style
    return dataclasses.replace(options, **changes), style, ""


@dataclass(frozen=True)
class UpgradePlan:
    """One upgrade's inputs: the targets, the version the code is written for (`baseline`,
    None when unknown), the files migrate reads, the engine's options, and `job`, which
    builds migrate's job from options and whether to write (the command's `Setup.job`);
    `api` runs verify-api on paths (None: not checked)."""

    targets: tuple[Path, ...]
    baseline: str | None
    sources: list[SourceFile]
    options: Options
    job: Callable[[Options, bool], Job]
    api: api.Checker | None = None


def upgrade(plan: UpgradePlan, dist: Dist, version: str, *, write: bool, style: str = "if",
            jobs: int | None = None, reload: Callable[[], Dist] | None = None) -> Upgrade:
    """Check, migrate to `version` in dual-lane form, check again (see the module doc).
    `reload` gives `dist` afresh for the check after writing: a `Dist` keeps the bytes of
    the files it checked, so the same one would check the files as they were.

    Raises migrator.verify_imports.TargetError for a target verify-imports cannot read."""
    targets = [str(t) for t in plan.targets]
    helpers = plan.options.version_guards
    before = check(dist, targets, version, helpers, plan.baseline, Path.cwd(), plan.api)
    options, compat, note = dual_lane(plan.options, plan.baseline, style)
    results = list(run(plan.sources, plan.job(options, write), jobs or default_jobs()))
    # Every line the report names is one of the file as it is on disk afterwards (lines.py).
    if write:
        fresh = reload() if reload else dist
        after = check(fresh, targets, version, helpers, plan.baseline, Path.cwd(), plan.api)
        ahead = lines.maps(results, ahead=True)
        before, results = _moved(before, ahead), lines.forward(results, ahead)
    else:
        after = check_copy(dist, plan.targets, plan.sources, results, version, helpers,
                           plan.baseline, plan.api)
        after = _moved(after, lines.maps(results, ahead=False))
    notes = [note] if note else []
    if before.api is None:
        notes.append("verify-api was not run: signature and attribute breaks are not checked")
    return Upgrade(version, plan.baseline, compat, before, after, results, notes)


def _moved(found: Check, maps: lines.Lines) -> Check:
    return Check(lines.moved(found.imports, maps),
                 None if found.api is None else lines.moved(found.api, maps))


def check(dist: Dist, targets: Sequence[str], version: str, helpers: tuple[str, ...],
          baseline: str | None, root: Path, run_api: api.Checker | None = None) -> Check:
    """Both checks on `targets` as they are on disk (paths below `root` read relative)."""
    # Against a distribution the checker also reads the project's own relative imports; a
    # broken one is not the upgrade's business (verify-imports' static mode reports it).
    imports = [f for f in verify_against(dist, targets, helpers).findings
               if f.module.partition(".")[0] in dist.packages]
    found = None if run_api is None else list(run_api(targets, baseline).findings)
    return Check(live_only(imports, helpers, version, root),
                 None if found is None else live_only(found, helpers, version, root))


def check_copy(dist: Dist, targets: Sequence[Path], sources: Sequence[SourceFile],
               results: list[FileResult], version: str, helpers: tuple[str, ...],
               baseline: str | None, run_api: api.Checker | None = None) -> Check:
    """`check` on a copy of `targets` with the migrated bytes laid over it; findings name
    the original files. The copy holds the files migrate read (`sources`: the targets less
    excludes and `.gitignore`d paths; regular files only) and the `__init__.py` of the
    package folders above them, nothing else: no data file, no FIFO."""
    cwd = Path.cwd()
    with tempfile.TemporaryDirectory(prefix="vam-upgrade-") as folder:
        top = Path(folder)
        copies = [str(_mirror(top, target.resolve())) for target in targets]
        for path in _to_copy(targets, sources):
            _copy(top, path)
        for copy in copies:  # a target with nothing to check is still a folder to check
            if not Path(copy).exists():
                Path(copy).mkdir(parents=True)
        for result in results:
            if result.new is not None and result.edits is None:
                _mirror(top, Path(result.path).resolve()).write_bytes(result.new)
        found = check(dist, copies, version, helpers, baseline, top, run_api)
    back = _back(top, cwd)
    return Check([back(f) for f in found.imports],
                 None if found.api is None else [back(f) for f in found.api])


def _to_copy(targets: Sequence[Path], sources: Sequence[SourceFile]) -> list[Path]:
    """The real paths of the files the copy holds: each source, and the `__init__.py` of
    each package folder above a target or a source (a file of `pkg/sub/` keeps its name
    `pkg.sub.file` in the copy)."""
    files = dict.fromkeys(s.path.resolve() for s in sources)
    folders: set[Path] = set()
    for path in [t.resolve() for t in targets] + list(files):
        if path.parent in folders:
            continue
        folders.add(path.parent)
        files.update(dict.fromkeys(package_inits(path)))
    return list(files)


def _copy(top: Path, real: Path) -> None:
    """Copy the file `real` below `top`, if it is a regular file (a FIFO is never opened)."""
    try:
        if not stat.S_ISREG(real.stat().st_mode):
            return
    except OSError:
        return
    copy = _mirror(top, real)
    if not copy.exists():
        copy.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(real, copy)


def _is_instance(finding: Any) -> bool:
    return dataclasses.is_dataclass(finding) and not isinstance(finding, type)


def _mirror(top: Path, real: Path) -> Path:
    return top / real.relative_to(real.anchor)


def _back(top: Path, cwd: Path) -> Any:
    """Maps a finding on the copy to the same finding on the original file, shown relative
    to `cwd` when below it (as the commands show paths)."""
    prefixes = {str(top) + os.sep, str(top.resolve()) + os.sep}
    here = str(cwd) + os.sep

    def restore(finding: Any) -> Any:
        # verify-imports names files absolutely, verify-api relative to the working folder.
        path = os.path.normpath(os.path.join(cwd, finding.path))
        for prefix in prefixes:
            if path.startswith(prefix) and _is_instance(finding):
                shown = os.sep + path[len(prefix):]
                return dataclasses.replace(finding, path=shown.removeprefix(here))
        return finding

    return restore
