"""Fixture packages for the shims tests, written into tmp_path, and a fresh-interpreter runner.

Import state is process-wide (sys.modules, sys.meta_path, the warned-once set), so every
behaviour is observed in a new interpreter running a script file written next to the
fixture package: warnings then carry that file's name and line numbers.

Two fixture kinds:
- `ACME`: a small hand-written table and package covering each rule kind once;
- `write_new_layout`/`write_old_layout`: a package generated from any `rules.Pack` (the
  bundled vllm_ascend table included), in the layout after the moves (every `new`, every
  stay-put module) or before them (every `old`, for pickles made by old code).
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import rules

REPO = Path(__file__).resolve().parents[2]

# Variables that would change what a probe sees, whatever the developer's shell holds.
_SCRUB = ("VLLM_ASCEND_SHIMS", "ACME_SHIMS", "PYTHONWARNINGS", "PYTHONPATH", "PYTHONSTARTUP")


@dataclass
class Tree:
    """A directory of fixture packages; scripts run from it in fresh interpreters."""

    root: Path
    _scripts: int = 0

    def write(self, files: dict[str, str]) -> Path:
        for rel, text in files.items():
            path = self.root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
        return self.root

    def script(self, code: str) -> Path:
        self._scripts += 1
        path = self.root / f"user_{self._scripts}.py"
        path.write_text(textwrap.dedent(code).lstrip("\n"), encoding="utf-8")
        return path

    def run(
        self,
        code: str,
        *,
        env: dict[str, str] | None = None,
        flags: tuple[str, ...] = (),
        check: bool = True,
        timeout: float = 300,
    ) -> subprocess.CompletedProcess[str]:
        """Run `code` as a script file in a fresh interpreter with cwd = root.

        `check`: a non-zero exit fails the test, showing the script's stderr.
        """
        return self.run_file(self.script(code), env=env, flags=flags, check=check, timeout=timeout)

    def run_file(
        self,
        path: Path,
        *,
        env: dict[str, str] | None = None,
        flags: tuple[str, ...] = (),
        check: bool = True,
        timeout: float = 300,
    ) -> subprocess.CompletedProcess[str]:
        """Run the script at `path` (see `run`)."""
        proc = subprocess.run(
            [sys.executable, *flags, str(path)],
            cwd=self.root,
            env=clean_env(env),
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check and proc.returncode != 0:
            raise AssertionError(
                f"{path.name} exited {proc.returncode}\n--- stdout\n{proc.stdout}"
                f"\n--- stderr\n{proc.stderr}"
            )
        return proc


def clean_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _SCRUB}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.update(extra or {})
    return env


def line_of(path: Path, marker: str) -> int:
    """1-based number of the line of `path` holding `marker`."""
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if marker in line:
            return number
    raise AssertionError(f"{marker!r} not in {path}")


# -- the small hand-written package -----------------------------------------------------------

ACME_TABLE = """
[pack]
name = "acme"
packages = ["acme"]
shims-env = "ACME_SHIMS"

[[step]]
version = "2.0"
removal = "3.0"

[[step.module]]
old = "acme.oldpkg"
new = "acme.core.newpkg"
submodules = ["sub", "deep", "deep.leaf"]

[[step.module]]
old = "acme.flat"
new = "acme.core.flat_impl"

[[step.module]]
old = "acme.core.interim"
new = "acme.core.newpkg.sub"
intermediate = true

[[step.symbol]]
old = "acme.utils.moved"
new = "acme.core.helpers.moved"

[[step.symbol]]
old = "acme.utils.renamed_old"
new = "acme.core.helpers.renamed_new"

[[step.symbol]]
old = "acme.hook"
new = "acme.core.hook"

[step.stay]
names = ["acme.utils", "acme.utils.kept"]
"""


def module_body(name: str) -> str:
    """What every fixture module holds: a picklable class, a function and a caller of it
    through the module's globals (what `mock.patch` on the module must reach)."""
    return textwrap.dedent(
        f"""
        NAME = {name!r}


        class Thing:
            def __init__(self, value=0):
                self.value = value


        def func():
            return NAME


        def call_func():
            return func()
        """
    )


ACME: dict[str, str] = {
    "acme/rules.toml": ACME_TABLE,
    "acme/__init__.py": """
        import os

        import shims

        shims.install(os.path.join(os.path.dirname(__file__), "rules.toml"))
    """,
    "acme/utils.py": """
        def kept():
            return "kept"
    """,
    "acme/oldpkg_extra.py": module_body("acme.oldpkg_extra"),
    "acme/core/__init__.py": """
        def hook():
            return "hook"
    """,
    "acme/core/helpers.py": """
        def moved():
            return "moved"


        def renamed_new():
            return "renamed"
    """,
    "acme/core/flat_impl.py": module_body("acme.core.flat_impl"),
    "acme/core/newpkg/__init__.py": module_body("acme.core.newpkg"),
    "acme/core/newpkg/sub.py": module_body("acme.core.newpkg.sub"),
    "acme/core/newpkg/deep/__init__.py": module_body("acme.core.newpkg.deep"),
    "acme/core/newpkg/deep/leaf.py": module_body("acme.core.newpkg.deep.leaf"),
}


# -- packages generated from a table ------------------------------------------------------------


@dataclass(frozen=True)
class OldPath:
    """One old name a table promises to keep working, and where it lives now."""

    old: str
    new: str
    kind: str  # "module" or "symbol"


def old_paths(pack: rules.Pack) -> list[OldPath]:
    """Every old name of `pack`: module moves, their listed submodules, symbol moves."""
    found: list[OldPath] = []
    for step in pack.steps:
        for move in step.modules:
            found.append(OldPath(move.old, move.new, "module"))
            for sub in move.submodules:
                found.append(OldPath(f"{move.old}.{sub}", f"{move.new}.{sub}", "module"))
        for symbol in step.symbols:
            found.append(OldPath(symbol.old, symbol.new, "symbol"))
    return found


def _with_packages(modules: set[str]) -> dict[str, bool]:
    """{module: is_package} for `modules` and all their ancestors."""
    names = set(modules)
    for name in modules:
        parts = name.split(".")
        names.update(".".join(parts[:i]) for i in range(1, len(parts)))
    return {n: any(m.startswith(n + ".") for m in names) for n in names}


def _file(name: str, package: bool) -> str:
    base = name.replace(".", "/")
    return f"{base}/__init__.py" if package else f"{base}.py"


def _stay_attributes(step: rules.Step, hosts: set[str]) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for name in step.stay:
        parent, _, leaf = name.rpartition(".")
        if not name.endswith("*") and parent in hosts:
            found.setdefault(parent, []).append(leaf)
    return found


def write_new_layout(
    root: Path, pack: rules.Pack, installer: str, installer_source: str
) -> dict[str, bool]:
    """Write the package as it is after `pack`'s moves (one step tables).

    Every module defines `module_body`; each moved symbol is a function in its new module
    and each stay-put attribute a function in its module; leaf modules import the moved
    helpers from their new home (as real connectors do), so import order matters (S9).
    `installer` (a package) gets `installer_source` and nothing else.
    """
    (step,) = pack.steps
    hosts = {s.old_module for s in step.symbols}
    modules = {installer, *hosts}
    for move in step.modules:
        modules.add(move.new)
        modules.update(f"{move.new}.{sub}" for sub in move.submodules)
    for symbol in step.symbols:
        modules.add(symbol.new_module)
    for name in step.stay:
        parent = name.rpartition(".")[0]
        if not name.endswith("*") and parent not in hosts:
            modules.add(name)
    layout = _with_packages(modules)
    stays = _stay_attributes(step, hosts)
    helpers = [s for s in step.symbols if not layout[s.new_module]]
    files: dict[str, str] = {}
    for name, package in sorted(layout.items()):
        if name == installer:
            files[_file(name, package)] = installer_source
            continue
        parts = [module_body(name)]
        for symbol in step.symbols:
            if symbol.new_module == name:
                parts.append(f"\n\ndef {symbol.new_name}(*args):\n    return ({name!r}, args)\n")
        for leaf in stays.get(name, []):
            parts.append(f"\n\ndef {leaf}(*args):\n    return ({name!r}, args)\n")
        if not package and helpers and name not in {s.new_module for s in helpers}:
            dep = helpers[0]
            parts.insert(0, f"from {dep.new_module} import {dep.new_name} as _helper\n")
        files[_file(name, package)] = "".join(parts)
    Tree(root).write(files)
    return layout


def write_old_layout(root: Path, pack: rules.Pack) -> dict[str, bool]:
    """Write the package as it was before `pack`'s moves: every old module path exists
    with `module_body`, and each moved symbol is a function in its old module."""
    (step,) = pack.steps
    modules: set[str] = set()
    for move in step.modules:
        modules.add(move.old)
        modules.update(f"{move.old}.{sub}" for sub in move.submodules)
    modules.update(s.old_module for s in step.symbols)
    layout = _with_packages(modules)
    files: dict[str, str] = {}
    for name, package in sorted(layout.items()):
        parts = [module_body(name)]
        for symbol in step.symbols:
            if symbol.old_module == name:
                parts.append(f"\n\ndef {symbol.old_name}(*args):\n    return ({name!r}, args)\n")
        files[_file(name, package)] = "".join(parts)
    Tree(root).write(files)
    return layout


def bundled_014() -> rules.Pack:
    """The bundled table cut to its 0.14.0 step: the layout of the repository's own
    `vllm_ascend/` (the later steps' targets are not in it, so the shims skip them)."""
    pack = rules.load_pack("vllm_ascend")
    return dataclasses.replace(pack, steps=(pack.step("0.14.0"),))


def write_vllm_ascend_layout(root: Path) -> rules.Pack:
    """The bundled table's 0.14 layout, with the repository's own
    `vllm_ascend/distributed/__init__.py` (which installs the whole bundled table) as the
    installer. Returns the 0.14.0 part of the table (`bundled_014`)."""
    pack = bundled_014()
    init = REPO / "subsystem" / "vllm_ascend" / "distributed" / "__init__.py"
    source = init.read_text(encoding="utf-8")
    write_new_layout(root, pack, "vllm_ascend.distributed", source)
    return pack
