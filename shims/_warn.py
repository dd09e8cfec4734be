"""What a use of an old name does: warn once, raise, or nothing (per the pack's env var).

The warning is attributed to the user's line, found by walking out of the import machinery
and the shims themselves: `warnings.warn(stacklevel=...)` cannot do that, because the
number of importlib frames between the user and the shim differs per import form.
"""

from __future__ import annotations

import _thread
import opcode
import os
import sys
import warnings
from types import FrameType

from ._table import Entry

MODES = ("warn", "error", "ignore")

# Stdlib helpers that import by name on their caller's behalf: `mock.patch("old.x")`,
# `pkgutil.resolve_name`, pickle's pure-Python unpickler. Their caller is the user.
_HELPERS = frozenset({"pkgutil", "pickle", "unittest.mock"})

# Opcodes that read an attribute as a use of it (LOAD_METHOD exists up to 3.11).
_USE_OPCODES = frozenset(
    opcode.opmap[name]
    for name in ("IMPORT_FROM", "LOAD_ATTR", "LOAD_METHOD")
    if name in opcode.opmap
)

# This package's own name: "shims", or "pkg._vam_shims.shims" in the copy that `vam refactor`
# writes into a package. Its frames are never the user's.
_PACKAGE = __name__.rpartition(".")[0]

_warned: set[tuple[str, str]] = set()
_warned_lock = _thread.allocate_lock()


class MovedNameWarning(DeprecationWarning):
    """An old module path or name was used; it still works, through the shims.

    Attributes `old`, `new`, `version` (the step that moved it) and `removal` (the release
    that drops the shim, or None) carry the table row.
    """

    def __init__(self, message: str, entry: Entry) -> None:
        super().__init__(message)
        self.old = entry.old
        self.new = entry.new
        self.version = entry.version
        self.removal = entry.removal


class MovedNameError(ImportError):
    """Raised instead of `MovedNameWarning` when the pack's env var is `error`."""


class MovedAttributeError(AttributeError):
    """Raised instead of `MovedNameError` for an attribute probe in `error` mode.

    `hasattr`, `getattr(m, name, default)`, `inspect.getmembers` and `pydoc` only catch
    `AttributeError`: a PEP 562 `__getattr__` must raise it for a name it will not give.
    """


class ShimsConfigError(ValueError):
    """The shims' environment variable holds a value other than warn, error or ignore."""


def mode(env_var: str) -> str:
    """The action for uses of old names: "warn" (unset or empty too), "error" or "ignore".

    Raises:
        ShimsConfigError: any other value; the message names the variable and the choices.
    """
    raw = os.environ.get(env_var, "")
    value = raw.strip().lower()
    if value in ("", "warn"):
        return "warn"
    if value in MODES:
        return value
    raise ShimsConfigError(
        f"{env_var}={raw!r} is not valid: use 'warn' (the default), 'error' or 'ignore'"
    )


def message(entry: Entry, env_var: str) -> str:
    """The text of both the warning and the error: old, new, step, removal, the fix."""
    what = "path" if entry.kind == "module" else "name"
    removal = f"in {entry.removal}" if entry.removal else "in a future release"
    return (
        f"{entry.old} moved to {entry.new} in {entry.pack} {entry.version}; the old {what} "
        f"is deprecated and will be removed {removal}. Run `vam migrate` to update your code "
        f"({env_var}=error turns this into an ImportError, {env_var}=ignore silences it)."
    )


def report(entry: Entry, env_var: str, probe: bool = False) -> None:
    """Act on one use of `entry.old`.

    A `probe` (an attribute lookup that is neither an import nor `module.name` in code:
    `hasattr`, `getattr` with a default, `inspect`, `pydoc`) never warns and never marks the
    entry as warned; in error mode it raises `MovedAttributeError`, which probes answer as
    "no such attribute".

    Raises:
        MovedNameError: `env_var` is "error" (`MovedAttributeError` for a probe).
        ShimsConfigError: `env_var` holds an unknown value.
        MovedNameWarning: when warning filters turn it into an error (`-W error::...`);
            the entry is then not marked as warned, so the next use raises again.
    """
    action = mode(env_var)
    if action == "ignore" or (probe and action == "warn"):
        return
    if action == "error":
        if probe:
            raise MovedAttributeError(message(entry, env_var), name=entry.old.rpartition(".")[2])
        raise MovedNameError(message(entry, env_var), name=entry.old)
    key = (entry.old, entry.new)
    if key in _warned:
        return
    frame = _user_frame()
    scope = frame.f_globals
    warnings.warn_explicit(
        MovedNameWarning(message(entry, env_var), entry),
        MovedNameWarning,
        frame.f_code.co_filename,
        frame.f_lineno,
        module=scope.get("__name__", "<unknown>"),
        registry=scope.setdefault("__warningregistry__", {}),
        # No module_globals: with them the C implementation asks the frame's loader for
        # source and raises where it has none (`python -c` code, frozen modules).
    )
    with _warned_lock:
        _warned.add(key)


def is_probe(frame: FrameType) -> bool:
    """Whether the attribute lookup made by `frame` only asks if a name is there.

    A use is an import (`from m import name`, importlib on the caller's behalf), `m.name` in
    code (LOAD_ATTR, LOAD_METHOD) or a by-name helper (mock, pickle, pkgutil). Anything else
    reached the module's `__getattr__` through a call: `hasattr`, `getattr(m, name,
    default)`, or library code such as `inspect.getmembers` and `pydoc` walking `dir()`.
    """
    if _internal(frame.f_globals.get("__name__") or ""):
        return False
    code = frame.f_code.co_code
    return frame.f_lasti < 0 or code[frame.f_lasti] not in _USE_OPCODES


def _internal(module: str) -> bool:
    return (
        module in _HELPERS
        or module == "importlib"
        or module.startswith(("importlib.", "_frozen_importlib", _PACKAGE + "."))
        or module == _PACKAGE
    )


def _user_frame() -> FrameType:
    """The innermost frame outside importlib, the shims and by-name import helpers."""
    frame: FrameType | None = sys._getframe(1)
    last = sys._getframe(1)
    while frame is not None:
        if not _internal(frame.f_globals.get("__name__") or ""):
            return frame
        last = frame
        frame = frame.f_back
    return last
