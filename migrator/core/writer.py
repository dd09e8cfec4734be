"""Bytes on disk: atomic replacement that keeps the file's mode and owner, or a clear refusal."""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO


class WriteRefused(OSError):
    """The file may not be written (read-only); the original is untouched."""


def atomic_write(path: Path, data: bytes) -> None:
    """Replace `path` with `data`; see `atomic_fill`."""
    atomic_fill(path, lambda handle: handle.write(data))


def atomic_fill(path: Path, fill: Callable[[BinaryIO], object]) -> None:
    """Replace `path` with what `fill` writes to the open file it is handed (a temporary
    file, then renamed over `path` in the same directory).

    A reader (or a run killed with SIGKILL) sees either the old or the new content, never a
    mix. Permission bits are copied from the original, and so are its owner and group where
    this process may set them (root may; anyone else keeps the file only if it owns it).

    Raises:
        WriteRefused: this process may not write the file (`os.access`, so as for any other
            write: a mode-0444 file is read-only to its owner, not to root; an immutable
            file to everyone). Checked first, because a rename into a writable folder would
            replace it anyway. The message gives the reason the kernel gives.
        OSError: the temporary file cannot be created or renamed, or `fill` raised it (the
            original is then untouched and the temporary file removed).
    """
    info = path.stat()
    if not os.access(path, os.W_OK):
        raise WriteRefused(_refusal(path, info))
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".vam-tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            fill(handle)
            handle.flush()
            os.fsync(handle.fileno())
            _keep_owner(handle.fileno(), info)
        os.chmod(tmp, stat.S_IMODE(info.st_mode))
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def _refusal(path: Path, info: os.stat_result) -> str:
    """Why `path` may not be written, from the errno an open for writing gets (it changes
    nothing): the mode is named only when the mode is the reason (EACCES), since an immutable
    file (`chattr +i`, EPERM) or a read-only mount (EROFS) refuses whatever its mode says."""
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
    except OSError as exc:
        if exc.errno == errno.EPERM:
            return "immutable or append-only file, operation not permitted (EPERM)"
        if exc.errno not in (errno.EACCES, None):
            return f"{exc.strerror} ({errno.errorcode.get(exc.errno, exc.errno)})"
    return f"read-only file (mode {stat.filemode(info.st_mode)})"


def _keep_owner(fd: int, info: os.stat_result) -> None:
    """Give the temporary file the original's uid/gid; EPERM (not root, not our file, or a
    group we are not in) leaves ours, as any editor's save would."""
    if (info.st_uid, info.st_gid) == (os.geteuid(), os.getegid()):
        return
    try:
        os.fchown(fd, info.st_uid, info.st_gid)
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.EINVAL):
            raise
