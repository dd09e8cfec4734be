"""Dynamic mode: import every module in a fresh interpreter of its own, with a timeout.

Each child runs `_CHILD` below: it puts the package's root first on sys.path, imports the
module, and prints one JSON line after a marker, so output the module itself prints does not
matter. A missing third-party module named in the optional list (also when it is the cause or
context of what the import finally raised) makes the module "skipped", not failed.
"""

from __future__ import annotations

import functools
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from migrator.verify_imports import findings as codes
from migrator.verify_imports.findings import ImportFinding

DEFAULT_OPTIONAL = ("torch_npu", "mooncake", "memcache_hybrid", "ucm")
DEFAULT_TIMEOUT_S = 60.0

_MARKER = "@@vam-verify-imports@@"

# Runs in the child. Kept free of anything but the stdlib; argv: root, module, marker.
_CHILD = r"""
import importlib, json, sys, traceback
root, module, marker = sys.argv[1], sys.argv[2], sys.argv[3]
sys.path.insert(0, root)
result = {"ok": True}
try:
    importlib.import_module(module)
except BaseException as exc:
    missing = []
    seen = exc
    while seen is not None and len(missing) < 20:
        name = getattr(seen, "name", None)
        if isinstance(seen, ModuleNotFoundError) and name:
            missing.append(name)
        seen = seen.__cause__ or seen.__context__
    frames = [(f.filename, f.lineno) for f in traceback.extract_tb(exc.__traceback__)]
    text = str(exc).strip().splitlines()
    result = {"ok": False, "type": type(exc).__name__, "message": text[0] if text else "",
              "missing": missing, "frames": frames}
sys.stdout.flush()
sys.stdout.write("\n" + marker + json.dumps(result) + "\n")
sys.stdout.flush()
"""


@dataclass(frozen=True)
class DynamicTarget:
    """A module to import: dotted `name`, the sys.path `root` to import it from, its file."""

    name: str
    root: Path
    path: Path


@dataclass(frozen=True)
class ImportOutcome:
    """What importing one module did: `status` is ok, failed, timeout or skipped."""

    target: DynamicTarget
    status: str
    detail: str = ""
    line: int = 1
    raised_at: str = ""  # "path:line" of the innermost first-party frame, when there is one
    missing: str = ""  # the optional module that was missing, for skipped


def run_imports(
    targets: Sequence[DynamicTarget],
    *,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    optional: Iterable[str] = DEFAULT_OPTIONAL,
    python: str = sys.executable,
    jobs: int | None = None,
) -> list[ImportOutcome]:
    """Import each target in its own `python` subprocess, `jobs` at a time (default: CPUs).

    A child that runs past `timeout_s` seconds is killed with its process group. Outcomes come
    back in the order of `targets`.
    """
    optional_tops = frozenset(o.partition(".")[0] for o in optional)
    workers = max(1, min(jobs or os.cpu_count() or 1, len(targets) or 1))
    run_one = functools.partial(_import_one, timeout_s=timeout_s, optional=optional_tops,
                                python=python)
    # Threads only wait on child processes, so the GIL is no bottleneck here.
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(run_one, targets))


def _import_one(target: DynamicTarget, timeout_s: float, optional: frozenset[str],
                python: str) -> ImportOutcome:
    command = [python, "-c", _CHILD, str(target.root), target.name, _MARKER]
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    try:
        child = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, env=env, start_new_session=True)
    except OSError as exc:
        return ImportOutcome(target, "failed", f"cannot start {python}: {exc.strerror}")
    try:
        out, err = child.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill_group(child)
        child.communicate()
        return ImportOutcome(target, "timeout", f"import did not finish within {timeout_s:g} s")
    result = _result_line(out)
    if result is None:
        last = err.decode(errors="replace").strip().splitlines()
        why = last[-1] if last else "no output"
        return ImportOutcome(target, "failed",
                             f"interpreter exited with code {child.returncode}: {why}")
    if result["ok"]:
        return ImportOutcome(target, "ok")
    for name in result["missing"]:
        if name.partition(".")[0] in optional:
            return ImportOutcome(target, "skipped",
                                 f"optional dependency '{name}' is not installed", missing=name)
    line, raised_at = _locate(target, result["frames"])
    detail = f"{result['type']}: {result['message']}" if result["message"] else result["type"]
    return ImportOutcome(target, "failed", detail, line, raised_at)


def _kill_group(child: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        child.kill()


def _result_line(out: bytes) -> dict | None:
    text = out.decode(errors="replace")
    at = text.rfind(_MARKER)
    if at < 0:
        return None
    try:
        parsed = json.loads(text[at + len(_MARKER):].splitlines()[0])
    except (ValueError, IndexError):
        return None
    return parsed if isinstance(parsed, dict) else None


def _locate(target: DynamicTarget, frames: list[list]) -> tuple[int, str]:
    """The line in the module's own file that started the failure, and where it was raised
    (the innermost frame inside the package root)."""
    own = str(target.path)
    root = str(target.root) + os.sep
    line = 0
    raised_at = ""
    for filename, lineno in frames:
        if filename == own and not line:  # the outermost frame: module level
            line = lineno or 1
        if filename.startswith(root):
            raised_at = f"{filename}:{lineno}"
    return line or 1, raised_at


def outcome_findings(
    outcomes: Iterable[ImportOutcome], show: Callable[[Path], str]
) -> list[ImportFinding]:
    """Findings for everything but clean imports: VAI201 failed, VAI202 timeout, VAI203 skipped."""
    result = []
    for outcome in outcomes:
        target = outcome.target
        path = show(target.path)
        if outcome.status == "failed":
            where = ""
            if outcome.raised_at:
                file, _, line = outcome.raised_at.rpartition(":")
                where = f" (raised at {show(Path(file))}:{line})"
            message = f"importing '{target.name}' failed: {outcome.detail}{where}"
            result.append(ImportFinding(path, outcome.line, 1, codes.IMPORT_RAISED, message,
                                        target.name))
        elif outcome.status == "timeout":
            result.append(ImportFinding(path, 1, 1, codes.IMPORT_TIMEOUT,
                                        f"importing '{target.name}' timed out: {outcome.detail}",
                                        target.name))
        elif outcome.status == "skipped":
            result.append(ImportFinding(path, 1, 1, codes.OPTIONAL_SKIPPED,
                                        f"skipped '{target.name}': {outcome.detail}", target.name,
                                        outcome.missing))
    return result
