"""Writing a computed step to disk: renames (with `git mv` in a git work tree), then contents
(each file atomically), then new files, then folders the move emptied.

A failure part way (disk full, permission) stops at once and raises `ApplyError`, whose
`journal` lists what was done, in order, so the user can finish or undo it by hand.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from migrator.core.writer import atomic_write
from migrator.refactor import gitwork
from migrator.refactor.plan import Plan
from migrator.refactor.rewrite import Change


class ApplyError(OSError):
    """A write failed part way; `journal` says what had been done before it."""

    def __init__(self, message: str, journal: list[str]) -> None:
        super().__init__(message)
        self.journal = journal


def apply(plan: Plan, changes: list[Change], git: bool) -> list[str]:
    """Carry out `plan` with the contents `changes` under `plan.root`; `git` uses git for
    renames, removals and new files. Returns the journal (one line per operation).

    Raises:
        ApplyError: an operation failed; nothing after it was attempted.
    """
    root = plan.root
    journal: list[str] = []
    known = gitwork.tracked(root) if git else set()
    step = ""
    try:
        for move in plan.moves:
            step = f"move {move.src} -> {move.dst}"
            (root / move.dst).parent.mkdir(parents=True, exist_ok=True)
            if move.src in known:
                gitwork.move(root, move.src, move.dst)
            else:
                os.replace(root / move.src, root / move.dst)
            journal.append(f"moved {move.src} -> {move.dst}")
        for gone in plan.dropped:
            step = f"remove {gone}"
            if gone in known:
                gitwork.remove(root, gone)
            else:
                (root / gone).unlink()
            journal.append(f"removed {gone} (merged into its destination)")
        created: list[Path] = []
        for change in changes:
            step = f"write {change.path}"
            target = root / change.path
            if target.is_file():
                atomic_write(target, change.new)
                journal.append(f"wrote {change.path}")
            else:
                _create(target, change.new)
                created.append(change.path)
                journal.append(f"created {change.path}")
        if git and created:
            step = "git add of the new files"
            gitwork.add(root, created)
        _prune(root, plan)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise ApplyError(f"{step}: {reason}", journal) from None
    return journal


def _create(path: Path, data: bytes) -> None:
    """A new file, whole or not at all (temporary file in the same folder, then a rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".vam-tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _prune(root: Path, plan: Plan) -> None:
    """Remove folders the move emptied (bytecode caches in them count as empty): a folder
    left behind would still import, as a namespace package, under the old name."""
    folders = {(root / m.src).parent for m in plan.moves}
    folders |= {(root / d).parent for d in plan.dropped}
    for folder in sorted(folders, key=lambda f: len(f.parts), reverse=True):
        current = folder
        while current != root and current.is_dir():
            entries = [e for e in current.iterdir() if e.name != "__pycache__"]
            if entries:
                break
            shutil.rmtree(current / "__pycache__", ignore_errors=True)
            current.rmdir()
            current = current.parent
