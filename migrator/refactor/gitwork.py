"""The git work tree a refactor runs in: is it one, is it clean, and moves that keep history.

Every call runs `git` with `-C ROOT`; paths given and returned are relative to ROOT.
"""

from __future__ import annotations

import subprocess
from pathlib import Path


class GitError(OSError):
    """A git command failed; the message holds its stderr."""


def _git(root: Path, *args: str) -> str:
    try:
        done = subprocess.run(
            ["git", "-C", str(root), *args], capture_output=True, text=True, check=False
        )
    except FileNotFoundError as exc:  # git is not installed: not a work tree we can use
        raise GitError(f"git: {exc}") from None
    if done.returncode:
        raise GitError(f"git {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout


def is_work_tree(root: Path) -> bool:
    """True when `root` lies inside a git work tree (and git runs)."""
    try:
        return _git(root, "rev-parse", "--is-inside-work-tree").strip() == "true"
    except GitError:
        return False


def dirty(root: Path) -> list[str]:
    """`git status --porcelain` lines for changes below `root` (untracked files included)."""
    return [line for line in _git(root, "status", "--porcelain", "--", ".").splitlines() if line]


def tracked(root: Path) -> set[Path]:
    """Files below `root` that git tracks."""
    out = _git(root, "ls-files", "-z", "--", ".")
    return {Path(name) for name in out.split("\0") if name}


def move(root: Path, src: Path, dst: Path) -> None:
    """`git mv -f` (so `git log --follow` finds the file's history at `dst`)."""
    _git(root, "mv", "-f", "--", str(src), str(dst))


def remove(root: Path, path: Path) -> None:
    _git(root, "rm", "-q", "-f", "--", str(path))


def add(root: Path, paths: list[Path]) -> None:
    if paths:
        _git(root, "add", "--", *map(str, paths))
