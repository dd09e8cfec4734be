"""Helpers shared by the verify-imports tests (tests.verify_imports.vi_helpers)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from migrator.verify_imports import ImportFinding, verify_static


def static(*targets: str) -> list[ImportFinding]:
    return verify_static(list(targets)).findings


def codes(found: list[ImportFinding]) -> list[tuple[str, int, int, str]]:
    """(path, line, col, code) of each finding, the shape most assertions compare."""
    return [(f.path, f.line, f.col, f.code) for f in found]


def python_import(root: Path, module: str) -> subprocess.CompletedProcess[str]:
    """Import `module` from `root` in a fresh interpreter: the ground truth static mode models."""
    env = dict(os.environ, PYTHONPATH=str(root), PYTHONDONTWRITEBYTECODE="1")
    return subprocess.run([sys.executable, "-c", f"import {module}"], cwd=root, env=env,
                          capture_output=True, text=True, timeout=60)
