"""The core `vam migrate`/`vam check` and `vam verify-imports` share: one directory walk (skip
rules, non-regular files), one module-naming rule, and each file read once per run."""

from __future__ import annotations

import builtins
import importlib.util
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from migrator.cli import main
from migrator.core.discover import iter_files
from migrator.core.modname import ModuleNamer, RelativeImportError, package_of, resolve_relative
from rules import is_under

OLD = "vllm_ascend.distributed.mooncake_connector"
NEW = "vllm_ascend.distributed.kv_transfer.kv_p2p.mooncake_connector"

needs_fifo = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")


def _vam(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    # A read of a FIFO blocks until a writer comes, which none will: the timeout turns a
    # hang into a failure instead of a stuck test run.
    return subprocess.run([sys.executable, "-m", "migrator", *args], cwd=cwd, timeout=120,
                          capture_output=True, text=True, check=False)


@needs_fifo
def test_fifos_in_a_walked_tree_are_skipped_and_noted(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "a.py").write_text(f"import {OLD}\n")
    os.mkfifo(tmp_path / "pkg" / "pipe.py")
    os.mkfifo(tmp_path / "deploy.yaml")
    os.mkfifo(tmp_path / ".gitignore")

    skipped: list[Path] = []
    found = [s.path for s in iter_files([tmp_path], skipped=skipped)]
    assert found == [tmp_path / "pkg" / "__init__.py", tmp_path / "pkg" / "a.py"]
    assert skipped == [tmp_path / "deploy.yaml", tmp_path / "pkg" / "pipe.py"]

    migrated = _vam("migrate", ".", cwd=tmp_path)
    assert migrated.returncode == 0, migrated.stderr
    assert (tmp_path / "pkg" / "a.py").read_text() == f"import {NEW}\n"
    verified = _vam("verify-imports", "pkg", cwd=tmp_path)
    assert verified.returncode == 0, verified.stdout + verified.stderr


# Each file fails both tools: a string naming a moved module (`vam check`) and an import of a
# name its own module does not bind (`vam verify-imports`, VAI001).
_BUILD_TREE = {"build/lib/out.py": "out", "dist/stage/out.py": "out",
               "pkg/build/mod.py": "pkg.build.mod", "tools/dist/mod.py": "mod", "src/mod.py": "mod"}


def _build_tree(root: Path) -> None:
    (root / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    for rel, module in _BUILD_TREE.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"from {module} import nope\nCONNECTOR = '{OLD}'\n")
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "build" / "__init__.py").write_text("")


def test_build_output_is_skipped_alike_by_both_tools(tmp_path: Path) -> None:
    """`build`/`dist` next to pyproject.toml and not a package is build output, for both tools;
    a package named `build`, or a `dist` folder deeper down, is source."""
    _build_tree(tmp_path)
    checked = _vam("check", "--format", "json", ".", cwd=tmp_path)
    verified = _vam("verify-imports", "--format", "json", ".", cwd=tmp_path)
    by_check = {f["path"] for f in json.loads(checked.stdout)}
    by_verify = {f["path"] for f in json.loads(verified.stdout)}
    expected = {"pkg/build/mod.py", "tools/dist/mod.py", "src/mod.py"}
    assert {os.path.relpath(p, tmp_path) if os.path.isabs(p) else os.path.normpath(p)
            for p in by_check} == expected
    assert by_verify == expected


def test_a_file_is_read_once_with_diff(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "a.py").write_text(f"# -*- coding: latin-1 -*-\nimport {OLD}\n")
    (tmp_path / "pkg" / "b.py").write_text("import os\n")
    (tmp_path / "guide.md").write_text(f"Use `{OLD}`.\n")
    (tmp_path / "deploy.yaml").write_text(f"connector: {OLD}\n")
    sources = {str(p) for p in tmp_path.rglob("*") if p.is_file()}
    reads: list[str] = []
    real_open = io.open

    def counting_open(file, *args, **kwargs):  # type: ignore[no-untyped-def]
        if isinstance(file, (str, os.PathLike)) and os.path.abspath(file) in sources:
            reads.append(os.path.abspath(file))
        return real_open(file, *args, **kwargs)

    real_os_open = os.open

    def counting_os_open(path, *args, **kwargs):  # type: ignore[no-untyped-def]
        if isinstance(path, (str, os.PathLike)) and os.path.abspath(path) in sources:
            reads.append(os.path.abspath(path))
        return real_os_open(path, *args, **kwargs)

    monkeypatch.setattr(io, "open", counting_open)
    monkeypatch.setattr(builtins, "open", counting_open)
    # The engine reads with descriptor calls (`walk.read_regular`): they count too.
    monkeypatch.setattr(os, "open", counting_os_open)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["migrate", "--diff", "-j", "1", "."])
    assert result.exit_code == 0, result.output
    assert f"+import {NEW}" in result.stdout and f"+Use `{NEW}`." in result.stdout
    assert sorted(reads) == sorted(sources)


def test_one_module_naming_rule(tmp_path: Path) -> None:
    """Package folders are identifiers holding an `__init__.py`; above the chain is the root."""
    for rel in ("src/vllm_ascend/distributed/__init__.py", "src/vllm_ascend/__init__.py",
                "my-tools/vllm_ascend/run.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("")
    namer = ModuleNamer()
    mod = tmp_path / "src/vllm_ascend/distributed/conn.py"
    assert namer.module_of(mod) == (tmp_path / "src", "vllm_ascend.distributed.conn", False)
    init = tmp_path / "src/vllm_ascend/__init__.py"
    assert namer.module_of(init) == (tmp_path / "src", "vllm_ascend", True)
    packages = ("vllm_ascend",)
    assert package_of(mod, tmp_path, packages, namer) == "vllm_ascend.distributed"
    assert package_of(init, tmp_path, packages) == "vllm_ascend"
    # No `__init__.py` on the way up: the path below the root names the table's package.
    assert package_of(tmp_path / "my-tools/vllm_ascend/run.py", tmp_path, packages) == "vllm_ascend"
    assert package_of(tmp_path / "my-tools/run.py", tmp_path, packages) is None


@pytest.mark.parametrize(
    ("package", "level", "module"),
    [("a.b", 1, "c"), ("a.b", 2, "c"), ("a.b", 2, None), ("a.b", 1, None), ("a", 1, "x.y"),
     ("a.b", 3, "c"), ("a", 2, None), ("", 1, "c")],
)
def test_relative_imports_resolve_as_importlib_does(
    package: str, level: int, module: str | None
) -> None:
    """The one resolver behind the migrate engine, verify-imports and refactor agrees with
    importlib, the answer and the refusal alike."""
    name = "." * level + (module or "")
    try:
        expected: str | None = importlib.util.resolve_name(name, package)
    except ImportError:
        expected = None
    try:
        got: str | None = resolve_relative(package, level, module)
    except RelativeImportError:
        got = None
    assert got == expected
    assert resolve_relative(package, 0, module) == (module or "")


def test_under_means_whole_dotted_components() -> None:
    assert is_under("a.b", "a.b") and is_under("a.b.c", "a.b") and is_under("a.b.c.d", "a")
    assert not is_under("a.bc", "a.b") and not is_under("a", "a.b") and not is_under("b.a", "a")
