"""Render findings as text (`path:line:col: CODE message`), JSON or GitHub workflow commands."""

from __future__ import annotations

import json
from collections.abc import Sequence

from migrator.verify_imports.findings import ERROR, INFO, WARNING, Finding

FORMATS = ("text", "json", "github")

_GITHUB_LEVEL = {ERROR: "error", WARNING: "warning", INFO: "notice"}


def render(found: Sequence[Finding], fmt: str) -> str:
    """The report for `found` in `fmt` (one of FORMATS); "" for text/github with no findings."""
    if fmt == "json":
        return json.dumps([_as_json(f) for f in found], indent=2) + "\n"
    if fmt == "github":
        return "".join(_as_github(f) + "\n" for f in found)
    return "".join(f"{f.path}:{f.line}:{f.col}: {f.code} {f.message}\n" for f in found)


def _as_json(f: Finding) -> dict[str, object]:
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


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def _as_github(f: Finding) -> str:
    level = _GITHUB_LEVEL[f.severity]
    props = (f"file={_escape_property(f.path)},line={f.line},col={f.col},"
             f"title={_escape_property(f.code)}")
    return f"::{level} {props}::{_escape_data(f'{f.code} {f.message}')}"


def summary(found: Sequence[Finding], files: int, seconds: float, mode: str) -> str:
    """One line: counts by severity, files checked, wall time in seconds."""
    errors = sum(f.severity == ERROR for f in found)
    warnings = sum(f.severity == WARNING for f in found)
    skipped = sum(f.severity == INFO for f in found)
    parts = [f"{errors} error{'s' * (errors != 1)}", f"{warnings} warning{'s' * (warnings != 1)}"]
    if mode == "dynamic":
        parts.append(f"{skipped} skipped")
    noun = "module" if mode == "dynamic" else "file"
    return (f"vam verify-imports ({mode}): {', '.join(parts)} in {files} {noun}"
            f"{'s' * (files != 1)} ({seconds:.2f} s)")
