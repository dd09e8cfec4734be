"""One `vam verify-imports` run: discover targets, check statically or import dynamically.

Settings come from `[tool.vam.verify-imports]` in the nearest pyproject.toml (from the current
directory upwards): `optional` (third-party modules whose absence skips a module in dynamic
mode, added to the defaults), `generated` (first-party modules the build creates) and `timeout`
(seconds). Command-line values add to / override them.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from migrator.core.collector import collector_paused
from migrator.verify_imports.checker import check_file, folder_findings
from migrator.verify_imports.cycles import CycleChecker
from migrator.verify_imports.discovery import SOURCE, Layout, discover
from migrator.verify_imports.dynamic import (
    DEFAULT_OPTIONAL,
    DEFAULT_TIMEOUT_S,
    DynamicTarget,
    outcome_findings,
    run_imports,
)
from migrator.verify_imports.findings import ImportFinding
from migrator.verify_imports.project import Project

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib


class SettingsError(Exception):
    """A bad `[tool.vam.verify-imports]` table (one line, for the CLI's exit 2)."""


@dataclass(frozen=True)
class Settings:
    optional: tuple[str, ...] = DEFAULT_OPTIONAL
    generated: tuple[str, ...] = ()
    timeout_s: float = DEFAULT_TIMEOUT_S


@dataclass
class VerifyResult:
    """Sorted findings, how many files (static) or modules (dynamic) were looked at, seconds."""

    findings: list[ImportFinding] = field(default_factory=list)
    checked: int = 0
    seconds: float = 0.0

    @property
    def has_errors(self) -> bool:
        return any(f.is_error for f in self.findings)


def load_settings(start: Path | None = None) -> Settings:
    """Read `[tool.vam.verify-imports]` from the nearest pyproject.toml above `start` (cwd)."""
    here = (start or Path.cwd()).resolve()
    for directory in (here, *here.parents):
        candidate = directory / "pyproject.toml"
        if candidate.is_file():
            return _settings_from(candidate)
    return Settings()


def _settings_from(pyproject: Path) -> Settings:
    try:
        data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise SettingsError(f"{pyproject}: {exc}") from None
    table: object = data
    for key in ("tool", "vam", "verify-imports"):
        table = table.get(key, {}) if isinstance(table, dict) else None
    if not isinstance(table, dict):
        raise SettingsError(f"{pyproject}: [tool.vam.verify-imports] must be a table")
    unknown = sorted(set(table) - {"optional", "generated", "timeout"})
    if unknown:
        raise SettingsError(f"{pyproject}: unknown [tool.vam.verify-imports] key(s): "
                            f"{', '.join(unknown)} (valid: optional, generated, timeout)")
    lists = {}
    for key in ("optional", "generated"):
        value = table.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise SettingsError(f"{pyproject}: [tool.vam.verify-imports] {key} must be a list "
                                "of module names")
        lists[key] = tuple(value)
    timeout = table.get("timeout", DEFAULT_TIMEOUT_S)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
        raise SettingsError(f"{pyproject}: [tool.vam.verify-imports] timeout must be a positive "
                            "number of seconds")
    optional = tuple(dict.fromkeys((*DEFAULT_OPTIONAL, *lists["optional"])))
    return Settings(optional, lists["generated"], float(timeout))


def display_path(path: Path, cwd: Path | None = None) -> str:
    """`path` relative to `cwd` when it lies below it, else absolute (as ruff prints paths)."""
    base = str(cwd or Path.cwd())
    text = str(path)
    if text.startswith(base + os.sep):
        return text[len(base) + 1:]
    return text


def verify_static(targets: Sequence[str], generated: Sequence[str] = ()) -> VerifyResult:
    """Check every first-party import in `targets` without running anything; `generated`
    names first-party modules the build creates (they exist, their names are unknown).

    Raises TargetError for a target that does not exist or is not Python.
    """
    started = time.perf_counter()
    layouts = discover(targets, generated)
    cwd = Path.cwd()

    def show(path: Path) -> str:
        return display_path(path, cwd)

    found: list[ImportFinding] = []
    checked_paths = [target.path for layout in layouts for target in layout.targets]
    with collector_paused():
        for layout in layouts:
            project = Project(layout)
            for target in layout.targets:
                found += check_file(project, target, show)
            found += folder_findings(project, checked_paths, show)
            only = {target.path for target in layout.targets}
            found += CycleChecker(project).findings(show, only)
    checked = sum(len(layout.targets) for layout in layouts)
    return VerifyResult(sorted(set(found)), checked, time.perf_counter() - started)


def dynamic_targets(layout: Layout) -> list[DynamicTarget]:
    """The importable modules among the layout's files (never `__main__`, never a file that a
    same-named package or module shadows)."""
    result = []
    for target in layout.targets:
        parts = target.name.split(".")
        if target.kind != SOURCE or parts[-1] == "__main__":
            continue
        if not all(p.isidentifier() for p in parts):
            continue
        indexed = layout.modules.get(target.name)
        if indexed is not None and indexed.path != target.path:
            continue
        depth = len(parts) if target.is_package else len(parts) - 1
        result.append(DynamicTarget(target.name, target.path.parents[depth], target.path))
    return result


def verify_dynamic(
    targets: Sequence[str],
    *,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    optional: Sequence[str] = DEFAULT_OPTIONAL,
    python: str | None = None,
    jobs: int | None = None,
) -> VerifyResult:
    """Import each first-party module of `targets` in its own subprocess (see dynamic.py), run
    by `python` (default: this interpreter), which also locates targets given as package names.

    Raises TargetError for a target that does not exist, is not Python or `python` cannot find.
    """
    started = time.perf_counter()
    modules = [m for layout in discover(targets, python=python) for m in dynamic_targets(layout)]
    outcomes = run_imports(modules, timeout_s=timeout_s, optional=optional,
                           python=python or sys.executable, jobs=jobs)
    cwd = Path.cwd()
    found = outcome_findings(outcomes, lambda p: display_path(p, cwd))
    return VerifyResult(sorted(found), len(modules), time.perf_counter() - started)
