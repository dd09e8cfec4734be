"""Render findings as text (`path:line:col: CODE message`), JSON, GitHub workflow commands or
SARIF 2.1.0, through the renderer `vam check` uses (migrator.core.render)."""

from __future__ import annotations

from collections.abc import Sequence

from migrator.core.render import FORMATS, Dialect
from migrator.core.render import render as render_as
from migrator.verify_imports.findings import CODE_TITLES, ERROR, INFO, WARNING, ImportFinding

__all__ = ["FORMATS", "VERIFY", "render", "summary"]


def _as_json(f: ImportFinding) -> dict[str, object]:
    return {
        "path": f.path,
        "line": f.line,
        "column": f.col,
        "code": f.code,
        "severity": f.severity,
        "message": f.message,
        "module": f.module,
        "name": f.name,
        "suggestion": f.suggestion,
    }


VERIFY = Dialect[ImportFinding](
    CODE_TITLES, lambda f: f.severity, _as_json, github_title=str, title_first=False
)


def render(found: Sequence[ImportFinding], fmt: str) -> str:
    """The report for `found` in `fmt` (one of FORMATS); "" for text/github with no findings."""
    return render_as(found, fmt, VERIFY)


def summary(found: Sequence[ImportFinding], files: int, seconds: float, mode: str) -> str:
    """One line: counts by severity, the files (modules when dynamic) with an error (left
    out when none has one), the files checked, wall time in seconds."""
    errors = sum(f.severity == ERROR for f in found)
    failing = len({f.path for f in found if f.severity == ERROR})
    warnings = sum(f.severity == WARNING for f in found)
    skipped = sum(f.severity == INFO for f in found)
    parts = [f"{errors} error{'s' * (errors != 1)}", f"{warnings} warning{'s' * (warnings != 1)}"]
    if mode == "dynamic":
        parts.append(f"{skipped} skipped")
    noun = "module" if mode == "dynamic" else "file"
    where = f" in {failing} {noun}{'s' * (failing != 1)}" if failing else ""
    return (f"vam verify-imports ({mode}): {', '.join(parts)}{where}; "
            f"{files} {noun}{'s' * (files != 1)} scanned ({seconds:.2f} s)")
