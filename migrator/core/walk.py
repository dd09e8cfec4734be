"""The directory walk both tools share: which folders to enter and which files to yield.

Top-down, sorted by name. Skipped: `.gitignore`d paths (through pathspec, each `.gitignore`
applying below its own folder), `exclude` globs, version-control and cache folders, virtual
environments (a folder holding `pyvenv.cfg`), `*.egg-info`, and `build`/`dist` where they are
a Python project's build output. Symlinks met during the walk are never followed, and
anything that is not a regular file (a FIFO, a socket, a device) is never yielded: reading
one could block forever. Such files are noted in `skipped` instead.
"""

from __future__ import annotations

import fnmatch
import os
import re
import stat
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

import pathspec
from pathspec.pattern import RegexPattern
from pathspec.util import normalize_file

SKIPPED_DIRS = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        ".bzr",
        "__pycache__",
        "node_modules",
        ".tox",
        ".nox",
        ".venv",
        ".mypy_cache",
        ".ruff_cache",
        ".pytest_cache",
        ".hypothesis",
        ".eggs",
        "site-packages",
    }
)
# Build output of a Python project: skipped where they sit next to its pyproject.toml,
# setup.py or setup.cfg, unless they are packages themselves.
BUILD_DIRS = frozenset({"build", "dist"})
_PROJECT_FILES = ("pyproject.toml", "setup.py", "setup.cfg")

_NAMED_GROUP = re.compile(r"\(\?P<\w+>")


class _Gitignore:
    """One `.gitignore`. pathspec tries its patterns one by one for every path; one regex of
    all its ignoring patterns first tells the paths none of them matches (most paths), which
    nothing in the file can ignore, so pathspec decides only for the rest."""

    def __init__(self, lines: list[str]):
        self.spec = pathspec.PathSpec.from_lines("gitwildmatch", lines)
        regexes = [p for p in self.spec.patterns if isinstance(p, RegexPattern)]
        self.screen = (
            _any_of(p.regex for p in regexes if p.include and p.regex is not None)
            if len(regexes) == len(self.spec.patterns)
            else None
        )

    def match_file(self, rel: str) -> bool:
        if self.screen is not None and self.screen.search(normalize_file(rel)) is None:
            return False
        return self.spec.match_file(rel)


def _any_of(regexes: Iterable[re.Pattern[str]]) -> re.Pattern[str] | None:
    """One regex that matches where any of `regexes` does (each as `search` applies it);
    None when they cannot be joined (flags that differ, a syntax the join breaks)."""
    listed = list(regexes)
    if not listed:
        return re.compile(r"(?!)")
    if any(r.flags != listed[0].flags or "(?P=" in r.pattern for r in listed):
        return None
    # Named groups repeat from pattern to pattern; the join needs none of them.
    parts = (_NAMED_GROUP.sub("(?:", r.pattern) for r in listed)
    try:
        return re.compile("|".join(f"(?:{part})" for part in parts), listed[0].flags)
    except re.error:
        return None


_Specs = list[tuple[str, _Gitignore]]


_SPECIAL = (
    (stat.S_ISFIFO, "FIFO"),
    (stat.S_ISSOCK, "socket"),
    (stat.S_ISCHR, "character device"),
    (stat.S_ISBLK, "block device"),
    (stat.S_ISDIR, "directory"),
)


class NotRegularFile(OSError):
    """A path names a FIFO, socket, device or folder where a file was to be read."""


def file_type(mode: int) -> str:
    """What a `st_mode` names, in words: "FIFO", "socket", ..., "regular file"."""
    return next((name for test, name in _SPECIAL if test(mode)), "regular file")


def skip_reason(path: Path) -> str:
    """Why the walk passed over `path` (which it met but did not yield), for `-v`."""
    try:
        return f"not a regular file ({file_type(os.lstat(path).st_mode)})"
    except OSError as exc:
        return f"cannot stat: {exc.strerror or exc}"


def read_regular(path: Path) -> bytes:
    """The bytes of the regular file at `path`. Opened without blocking and checked on the
    open descriptor, so a FIFO or device (even one swapped in after the walk) is refused,
    never waited on.

    Raises:
        NotRegularFile: `path` is not a regular file (the message says what it is).
        OSError: it cannot be opened or read.
    """
    # Opening a FIFO for reading blocks until a writer comes, unless O_NONBLOCK. Plain
    # descriptor calls: a buffered file object costs more than reading most files.
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode):
            raise NotRegularFile(f"not a regular file ({file_type(status.st_mode)})")
        os.set_blocking(fd, True)
        chunks = []
        while chunk := os.read(fd, max(status.st_size + 1, _READ_SIZE)):  # until EOF
            chunks.append(chunk)
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)
    finally:
        os.close(fd)


def open_regular(path: Path) -> BinaryIO:
    """The regular file at `path`, open for reading (blocking), as `read_regular` opens it.

    Raises:
        NotRegularFile: `path` is not a regular file.
        OSError: it cannot be opened.
    """
    handle = open(path, "rb", opener=_nonblocking)  # noqa: SIM115 - the caller closes it
    try:
        mode = os.fstat(handle.fileno()).st_mode
        if not stat.S_ISREG(mode):
            raise NotRegularFile(f"not a regular file ({file_type(mode)})")
        os.set_blocking(handle.fileno(), True)
    except BaseException:
        handle.close()
        raise
    return handle


_READ_SIZE = 1 << 16


def _nonblocking(path: str, flags: int) -> int:
    # Opening a FIFO for reading blocks until a writer comes, unless O_NONBLOCK.
    return os.open(path, flags | os.O_NONBLOCK)


def glob_problem(pattern: str) -> str | None:
    """What is wrong with a user's glob, or None: empty, or a `[` that no `]` closes (fnmatch
    would silently match a literal `[`, which is never what was meant)."""
    if not pattern:
        return "empty glob"
    index = 0
    while index < len(pattern):
        if pattern[index] == "[":
            close = index + 1
            if close < len(pattern) and pattern[close] in "!^":
                close += 1
            if close < len(pattern) and pattern[close] == "]":
                close += 1  # a `]` first in a class is a member, not its end
            end = pattern.find("]", close)
            if end < 0:
                return f"unclosed '[' at position {index + 1}"
            index = end
        index += 1
    return None


def glob_regex(patterns: Iterable[str]) -> re.Pattern[str] | None:
    """One regex for a list of fnmatch-style globs (case-sensitive), None for no globs."""
    patterns = list(patterns)
    if not patterns:
        return None
    return re.compile("|".join(f"(?:{fnmatch.translate(p)})" for p in patterns))


def hit(regex: re.Pattern[str] | None, name: str, rel: str) -> bool:
    """Whether `regex` matches a file's or folder's `name` or its path `rel` below the root."""
    return regex is not None and (regex.match(name) is not None or regex.match(rel) is not None)


def skipped_dir(folder: str) -> bool:
    """Whether the folder at path `folder` is never entered, whatever the globs say: tool and
    cache folders, virtual environments, egg-info and build output."""
    name = os.path.basename(folder)
    return (
        name in SKIPPED_DIRS
        or (name in BUILD_DIRS and _build_output(folder))
        or name.endswith(".egg-info")
        or os.path.exists(os.path.join(folder, "pyvenv.cfg"))
    )


def walk(
    root: str,
    wanted: re.Pattern[str] | None,
    excluded: re.Pattern[str] | None = None,
    skipped: list[Path] | None = None,
    also: Callable[[str, str], bool] | None = None,
) -> Iterator[tuple[str, str]]:
    """(path, path relative to `root`) of every regular file below `root` whose name or
    relative path `wanted` matches, or for which `also(path, name)` holds, top-down, sorted
    by name.

    Wanted files that are not regular files are appended to `skipped` when it is given.
    An unreadable folder is passed over silently.
    """
    specs: _Specs = []
    stack: list[tuple[str, str]] = [(root, "")]
    while stack:
        folder, rel_dir = stack.pop()
        try:
            with os.scandir(folder) as scan:
                entries = sorted(scan, key=lambda e: e.name)
        except OSError:
            continue
        specs = [(base, spec) for base, spec in specs if _within(rel_dir, base)]
        spec = _gitignore_of(entries)
        if spec is not None:
            specs.append((rel_dir, spec))
        folders = []
        for entry in entries:
            if entry.is_symlink():
                continue
            rel = os.path.join(rel_dir, entry.name) if rel_dir else entry.name
            if entry.is_dir(follow_symlinks=False):
                if not _skip_folder(entry.path, rel, excluded, specs):
                    folders.append((entry.path, rel))
            elif not hit(wanted, entry.name, rel) and not _also(entry, also):
                continue
            elif hit(excluded, entry.name, rel) or _ignored(rel, specs):
                continue
            elif entry.is_file(follow_symlinks=False):
                yield entry.path, rel
            elif skipped is not None:
                skipped.append(Path(entry.path))
        stack.extend(reversed(folders))


def _also(entry: os.DirEntry[str], also: Callable[[str, str], bool] | None) -> bool:
    if also is None or not entry.is_file(follow_symlinks=False):
        return False
    return also(entry.path, entry.name)


def _skip_folder(folder: str, rel: str, excluded: re.Pattern[str] | None, specs: _Specs) -> bool:
    return (
        skipped_dir(folder)
        or hit(excluded, os.path.basename(folder), rel)
        or _ignored(rel + "/", specs)
    )


def _build_output(folder: str) -> bool:
    parent = os.path.dirname(folder)
    if os.path.exists(os.path.join(folder, "__init__.py")):
        return False
    return any(os.path.exists(os.path.join(parent, name)) for name in _PROJECT_FILES)


def _within(rel_dir: str, base: str) -> bool:
    return base == "" or rel_dir == base or rel_dir.startswith(base + os.sep)


def _ignored(rel: str, specs: _Specs) -> bool:
    for base, spec in specs:
        sub = rel[len(base) + 1 :] if base else rel
        if spec.match_file(sub):
            return True
    return False


def _gitignore_of(entries: list[os.DirEntry[str]]) -> _Gitignore | None:
    """The folder's `.gitignore`; None when there is no such regular file or it
    cannot be read (a FIFO named `.gitignore` must not block the walk)."""
    for entry in entries:
        if entry.name == ".gitignore" and entry.is_file():  # a link to one counts
            try:
                with open(entry.path, encoding="utf-8", errors="replace") as handle:
                    lines = handle.read().splitlines()
            except OSError:
                return None
            return _Gitignore(lines)
    return None
