"""Runtime compatibility shims: old import paths keep working, with a deprecation warning.

Driven by a `rules` move table (the same one `vam migrate` applies to source code). Stdlib
only: never imports `migrator`, libcst or click, and imports nothing for an old path until
that path is used.

Usage, in the package that owns the table (its ``__init__.py``, before anything else)::

    import shims as _shims

    _shims.install("vllm_ascend")          # a bundled pack; or a TOML path, or a rules.Pack

What the old names then do, for each row of the pack's steps:

- module moves (``old`` -> ``new``): ``import old``, ``import old.sub as m``,
  ``from old import X``, ``from parent import old_leaf``, ``importlib.import_module("old")``,
  pickles naming ``old.sub.Class`` and ``mock.patch("old.sub.attr")`` all work, and the
  old name is the *same module object* as the new one (``sys.modules[old] is
  sys.modules[new]``): patching through the old path changes what the new code sees.
- symbol moves (``mod.name`` -> ``new_mod.name``): ``mod`` stays a real module; a PEP 562
  ``__getattr__``/``__dir__`` serves the moved names only (looked up on each use), lists
  them in ``dir(mod)``, and leaves other missing names an ``AttributeError``.
- each use of an old name goes through the env var named by the pack (``[pack]
  shims-env``, ``VLLM_ASCEND_SHIMS`` for the bundled pack): unset/``warn`` emits one
  `MovedNameWarning` (a `DeprecationWarning`) per table row per process, attributed to the
  user's importing line and naming old, new, the step version, the removal version and
  ``vam migrate``; ``error`` raises `MovedNameError` (an `ImportError`) with the same
  message; ``ignore`` is silent; anything else raises `ShimsConfigError` at `install()`.

Steps: a table may hold a library's whole history, but the installed package has one layout.
A row is served only when its target is installed (the new module's file is there; for a
symbol, its module's source names it: file probes, no imports, see ``shims._targets``), so the
later steps of a table never break an older package (the repository's ``vllm_ascend/`` is the
0.14 layout: only step 0.14.0 applies). Of the rows served, a later step's row wins over an
earlier one with the same ``old``, an earlier row whose ``old`` is a real name again later is
dropped, and a name moved twice chains (one warning per row it passes through).

``installed()`` lists the finders; ``ShimFinder.resolve(old)`` says where a module path
went. ``python -W error::DeprecationWarning`` (or, in code,
``warnings.filterwarnings("error", category=shims.MovedNameWarning)``) makes the first use
raise at the user's import line. ``vam shims check`` probes every old name of a table in
fresh interpreters.
"""

from __future__ import annotations

import _thread
import os
import re
import sys

from rules import Pack, load_pack

from ._hooks import ShimFinder
from ._warn import (
    MovedAttributeError,
    MovedNameError,
    MovedNameWarning,
    ShimsConfigError,
    message,
    mode,
)

__all__ = [
    "MovedAttributeError",
    "MovedNameError",
    "MovedNameWarning",
    "ShimFinder",
    "ShimsConfigError",
    "default_env_var",
    "install",
    "installed",
    "message",
    "mode",
]

_install_lock = _thread.allocate_lock()

# Shown in tracebacks and usable in filters as `-W error::shims.MovedNameWarning`.
for _cls in (MovedAttributeError, MovedNameError, MovedNameWarning, ShimsConfigError, ShimFinder):
    _cls.__module__ = __name__
del _cls


def default_env_var(pack: Pack) -> str:
    """The env var that controls `pack`'s shims: `[pack] shims-env`, else `<NAME>_SHIMS`."""
    return pack.shims_env or re.sub(r"\W", "_", pack.name).upper() + "_SHIMS"


def install(pack: str | os.PathLike[str] | Pack, *, env_var: str | None = None) -> ShimFinder:
    """Install the shims for `pack`'s old names; idempotent.

    Args:
        pack: a bundled pack name (``"vllm_ascend"``), a TOML file path, or a loaded
            `rules.Pack`.
        env_var: the variable read on each use (warn/error/ignore); default
            `default_env_var(pack)`.

    Returns:
        The pack's finder, first on `sys.meta_path`. Installing the same pack again returns
        the finder already there; a changed table or env var replaces it.

    Raises:
        rules.RulesError: unknown pack name, unreadable or invalid table.
        ShimsConfigError: the env var holds a value other than warn, error or ignore.
    """
    if not isinstance(pack, Pack):
        pack = load_pack(os.fspath(pack))
    env = env_var or default_env_var(pack)
    mode(env)  # a typo in the variable fails here, at import time, not at first use
    with _install_lock:
        finder = _take_over(pack, env)
        # Modules that lost names and are already imported (the package installing the
        # shims is often one of them) get their hooks now; the finder does the rest.
        for name in finder.hosts:
            module = sys.modules.get(name)
            if module is not None:
                finder.forward(module)
    return finder


def installed() -> list[ShimFinder]:
    """The shim finders on `sys.meta_path`, in lookup order."""
    return [f for f in sys.meta_path if isinstance(f, ShimFinder)]


def _take_over(pack: Pack, env: str) -> ShimFinder:
    for finder in installed():
        if finder.pack.name != pack.name:
            continue
        if finder.pack == pack and finder.env_var == env:
            return finder
        sys.meta_path.remove(finder)
    finder = ShimFinder(pack, env)
    sys.meta_path.insert(0, finder)
    return finder
