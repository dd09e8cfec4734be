"""`vam check -` and `vam migrate -`: one file read from standard input, as editors and
ruff/black integrations pass it.

`--stdin-filename PATH` names it: the name decides the file kind (Python, notebook, text)
and, relative to the current folder, the package that relative imports are anchored at;
findings name that path. Nothing is read from or written to PATH itself.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from migrator.cli.options import UsageFailure
from migrator.core.discover import SourceFile, kind_of
from migrator.rewrite.engine import FileResult
from migrator.rewrite.runner import Job, run_bytes

_F = TypeVar("_F", bound=Callable[..., Any])

STDIN = "-"


def stdin_filename(f: _F) -> _F:
    """`--stdin-filename PATH` (parameter `stdin_filename`)."""
    return click.option(
        "--stdin-filename",
        metavar="PATH",
        help="With PATH `-`: the name of the file read from stdin (its kind, its package for "
        "relative imports, and the path findings name).",
    )(f)


def wants_stdin(paths: tuple[str, ...], filename: str | None) -> bool:
    """Whether the run reads stdin; UsageFailure when `-` is mixed with paths, or a
    `--stdin-filename` comes without `-`."""
    if STDIN not in paths:
        if filename is not None:
            raise UsageFailure("--stdin-filename needs the path '-' (read from stdin)")
        return False
    if len(paths) > 1:
        raise UsageFailure("'-' (read from stdin) cannot be combined with other paths")
    return True


def process_stdin(filename: str | None, job: Job) -> tuple[bytes, FileResult]:
    """(bytes read, result): all of stdin through the pipeline as the file `filename`;
    without one, as Python (ruff's default) named `-`."""
    path = Path(filename or STDIN)
    data = sys.stdin.buffer.read()
    # The current folder is the root, so `pkg/mod.py` anchors relative imports at `pkg`.
    return data, run_bytes(SourceFile(path, Path("."), _kind(filename, data)), data, job)


def _kind(filename: str | None, data: bytes) -> str:
    # The named file need not exist: its name decides, then the shebang of what was read.
    if filename is not None and Path(filename).suffix:
        return kind_of(Path(filename))
    first = data.split(b"\n", 1)[0]
    return "python" if filename is None or (first.startswith(b"#!") and b"python" in first) \
        else "text"
