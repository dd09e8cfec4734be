"""Keeping the old paths alive in the refactored package: the lines in its `__init__.py` that
install the shim runtime written next to it (`_vam_shims/`, see `runtime.py`).

The package that installs is the deepest package holding every `old` of the step (its
`__init__` runs before any old path below it is looked up, whoever imports it; an entry point
would run only where some host, such as vLLM's plugin loader, chooses to run it). The runtime
is self-contained (stdlib only): the package needs nothing of vam at run time.
"""

from __future__ import annotations

import ast

from migrator.core.placement import PROLOGUE, insertion
from migrator.refactor.runtime import RUNTIME
from rules import Step

MARK = "vam refactor"


def owner_package(step: Step) -> str:
    """The deepest package that holds every old name the step moves (`vllm_ascend.distributed`
    for step 0.14.0): the parent of each moved module, each module that loses a symbol."""
    bases = [m.old.rpartition(".")[0].split(".") for m in step.modules]
    bases += [s.old_module.split(".") for s in step.symbols]
    if not bases:
        return ""
    common = bases[0]
    for parts in bases[1:]:
        n = 0
        while n < min(len(common), len(parts)) and common[n] == parts[n]:
            n += 1
        common = common[:n]
    return ".".join(common)


def install_block(version: str) -> str:
    """The lines that install the shim runtime next to the `__init__.py`."""
    return (
        f"# {MARK} --step {version}: old import paths keep working (runtime in {RUNTIME}/)\n"
        f"from .{RUNTIME} import install as _vam_install_shims\n"
        "\n"
        "_vam_install_shims()\n"
        "del _vam_install_shims\n"
    )


def has_install(text: str) -> bool:
    return f"from .{RUNTIME} import" in text and MARK in text


def add_install(text: str, version: str) -> str:
    """`text` (an `__init__.py`) with the install block after its docstring, `__future__`
    imports and leading comments, before any other statement: the old paths must work
    before the package's own imports run, which may use them.

    Raises:
        SyntaxError: `text` does not parse.
    """
    if has_install(text):
        return text
    after = insertion(text, PROLOGUE, ast.parse(text).body).line
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    before = "".join(lines[:after])
    rest = "".join(lines[after:])
    gap_before = "\n" if before.strip() else ""
    gap_after = "\n" if rest.strip() else ""
    return before + gap_before + install_block(version) + gap_after + rest.lstrip("\n")


__all__ = ["add_install", "has_install", "install_block", "owner_package"]
