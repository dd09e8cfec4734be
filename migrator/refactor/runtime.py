"""The shim runtime `vam refactor` writes into the package it refactors: old import paths keep
working there with nothing of vam installed.

The runtime is a package, `_vam_shims/`, next to the owner's `__init__.py`:

- `shims/` and `rules/`: the text of vam's own `shims` and `rules` packages, module by module
  (both are stdlib-only), with the one absolute import between them (`from rules import ...`
  in `shims`) made relative. The same code as `shims.install` runs, not a second
  implementation; its warnings are attributed to the user's line the same way.
- `__init__.py`: generated: the step's rows (module and symbol moves of every step up to V:
  later steps describe layouts the package does not have yet) as Python literals, so no TOML
  is read at run time, and `install()`, which installs them with the pack's env var.

A copy, not a dependency: the refactored package is often installed where vam is not (vam is a
tool, kept in an environment of its own).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import rules
import shims
from rules import Pack, Step, version_key

RUNTIME = "_vam_shims"
_MARK = "vam refactor"
# The packages copied, and the one absolute import that must become relative in the copy.
_COPIED = {"shims": Path(shims.__file__).parent, "rules": Path(rules.__file__).parent}


class RuntimeCopyError(ValueError):
    """A module of `shims`/`rules` imports something the copy cannot carry (not stdlib)."""


def runtime_files(pack: Pack, version: str) -> dict[Path, str]:
    """The runtime package's files, keyed by path relative to the owner package's folder.

    Raises:
        RuntimeCopyError: `shims` or `rules` imports a module that is neither stdlib nor one of
            the two (the copy would not be self-contained).
    """
    header = (
        f"# vam: ignore-file\n# Written by `{_MARK} --step {version}` from vam's `{{name}}`: "
        "do not edit.\n"
    )
    files: dict[Path, str] = {Path(RUNTIME, "__init__.py"): init_text(pack, version)}
    for name, folder in _COPIED.items():
        for source in sorted(folder.glob("*.py")):
            text = _relative_imports(source.read_text(encoding="utf-8"), f"{name}/{source.name}")
            files[Path(RUNTIME, name, source.name)] = header.format(name=name) + text
    return files


def init_text(pack: Pack, version: str) -> str:
    """The runtime's `__init__.py`: the rows of `pack`'s steps up to `version`, and
    `install()`."""
    env = shims.default_env_var(pack)
    steps = [s for s in pack.steps if version_key(s.version) <= version_key(version)]
    rows = "".join(_step_literal(step) for step in steps)
    return (
        f'# vam: ignore-file\n"""Old import paths of {pack.name} up to step {version}, kept '
        f"working with a deprecation warning.\n\nWritten by `{_MARK} --step {version}` from "
        "the move table: do not edit. Stdlib only: `shims/` and\n`rules/` here are copies of "
        f"vam's own, so nothing of vam is needed at run time.\n{env}=error turns a use of an "
        f'old path into an ImportError, {env}=ignore silences the warning.\n"""\n\n'
        "from __future__ import annotations\n\n"
        "from .rules import ModuleMove, Pack, Step, SymbolMove\n"
        "from .shims import ShimFinder\n"
        "from .shims import install as _install\n\n"
        f"ENV_VAR = {env!r}\n\nPACK = Pack(\n    name={pack.name!r},\n"
        f"    description={pack.description!r},\n    packages={pack.packages!r},\n"
        f"    shims_env={pack.shims_env!r},\n    steps=(\n{rows}    ),\n)\n\n\n"
        "def install() -> ShimFinder:\n"
        '    """Install the shims for `PACK` (idempotent); the finder is first on '
        '`sys.meta_path`."""\n'
        "    return _install(PACK, env_var=ENV_VAR)\n"
    )


def _step_literal(step: Step) -> str:
    modules = "".join(f"                ModuleMove({m.old!r}, {m.new!r}),\n" for m in step.modules)
    symbols = "".join(f"                SymbolMove({s.old!r}, {s.new!r}),\n" for s in step.symbols)
    return (
        f"        Step(\n            version={step.version!r},\n"
        f"            removal={step.removal!r},\n            summary={step.summary!r},\n"
        f"            modules=(\n{modules}            ),\n"
        f"            symbols=(\n{symbols}            ),\n        ),\n"
    )


def _relative_imports(text: str, where: str) -> str:
    """`text` with each `from rules import ...` / `from rules.x import ...` spelled relative
    to the copy (`from ..rules import ...`); every other import must be stdlib or relative.

    Raises:
        RuntimeCopyError: an import the copy cannot carry.
    """
    lines = text.splitlines(keepends=True)
    # tomli: rules' TOML reader on 3.10, imported only when a table is read (the copy reads none).
    allowed = set(sys.stdlib_module_names) | {"__future__", "tomli"}
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            top = node.module.split(".")[0]
            if top in _COPIED and top != where.split("/")[0]:
                at = node.lineno - 1
                lines[at] = lines[at].replace(f"from {node.module} ", f"from ..{node.module} ", 1)
                continue
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        for name in names:
            if name.split(".")[0] not in allowed:
                raise RuntimeCopyError(f"{where}:{node.lineno}: imports {name}, not stdlib")
    return "".join(lines)


__all__ = ["RUNTIME", "RuntimeCopyError", "init_text", "runtime_files"]
