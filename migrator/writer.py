"""Bytes on disk: atomic replacement that keeps the file's mode, or a clear refusal."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path


class WriteRefused(OSError):
    """The file may not be written (read-only); the original is untouched."""


def atomic_write(path: Path, data: bytes) -> None:
    """Replace `path` with `data` through a temporary file and a rename in the same directory.

    A reader (or a run killed with SIGKILL) sees either the old or the new content, never a
    mix. Permission bits are copied from the original.

    Raises:
        WriteRefused: this process may not write the file (`os.access`, so as for any other
            write: a mode-0444 file is read-only to its owner, not to root). Checked first,
            because a rename into a writable folder would replace it anyway.
        OSError: the temporary file cannot be created or renamed.
    """
    info = path.stat()
    if not os.access(path, os.W_OK):
        raise WriteRefused(f"read-only file (mode {stat.filemode(info.st_mode)})")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".vam-tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, stat.S_IMODE(info.st_mode))
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
