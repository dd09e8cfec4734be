"""Keeping the old paths alive in the refactored package: the table it carries and the lines
in its `__init__.py` that install the shims from it.

The package that installs is the deepest package holding every `old` of the step (its
`__init__` runs before any old path below it is looked up, whoever imports it; an entry point
would run only where some host, such as vLLM's plugin loader, chooses to run it). The table is
the pack's TOML cut after step V (later steps describe layouts the package does not have yet),
copied next to that `__init__.py`. The install is guarded: `shims` ships in vam's wheel, and a
package installed without vam still imports, only without the old paths.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from migrator.core.placement import PROLOGUE, insertion
from rules import Pack, RulesError, Step, load_pack, version_key

TABLE_NAME = "_vam_moves.toml"
MARK = "vam refactor"
_STEP_HEADER = re.compile(r"^\[\[step\]\][ \t]*(?:#.*)?$", re.M)
_VERSION = re.compile(r"""^version\s*=\s*["']([^"']+)["']""", re.M)


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


def table_text(pack: Pack, version: str) -> str:
    """The pack's TOML up to and including step `version` (comments kept), marked so that
    `vam migrate` leaves it alone.

    Raises:
        RulesError: the pack has no TOML file, or the cut table does not load.
    """
    if not pack.source or not Path(pack.source).is_file():
        raise RulesError(f"{pack.name}: no TOML file to copy the table from")
    text = Path(pack.source).read_text(encoding="utf-8")
    cut = len(text)
    for header in _STEP_HEADER.finditer(text):
        found = _VERSION.search(text, header.end())
        if found and version_key(found.group(1)) > version_key(version):
            cut = header.start()
            break
    head = (
        f"# vam: ignore-file\n# Written by `{MARK} --step {version}`: the move table up to step "
        f"{version},\n# read by the shims installed in __init__.py. Keep it while old paths must "
        "work.\n"
    )
    return head + text[:cut].rstrip() + "\n"


def check_table(path: Path) -> None:
    """Load the written table back (validation included).

    Raises:
        RulesError: it does not load.
    """
    load_pack(str(path))


def install_block(version: str) -> str:
    """The lines that install the shims from the table next to the `__init__.py`."""
    return (
        f"try:  # {MARK} --step {version}: old import paths keep working (needs vam's `shims`)\n"
        f'    __import__("shims").install(__path__[0] + "/{TABLE_NAME}")\n'
        "except ImportError:  # vam not installed: the old paths are gone, nothing else changes\n"
        "    pass\n"
    )


def has_install(text: str) -> bool:
    return TABLE_NAME in text and MARK in text


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


__all__ = [
    "TABLE_NAME",
    "RulesError",
    "add_install",
    "check_table",
    "has_install",
    "install_block",
    "owner_package",
    "table_text",
]
