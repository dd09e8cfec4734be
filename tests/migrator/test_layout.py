"""The shape of the source tree, read with `ast`: one owner per public class name, bounded
module, function and class sizes, and a kernel (`migrator/core`) that imports no command."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from tests.migrator.conftest import REPO

SOURCE_PACKAGES = ("migrator", "rules", "shims", "vllm_ascend")
SIZED_PACKAGES = SOURCE_PACKAGES
# The folder each package lies in: the tool's at the root, the subsystem in its own project.
HOMES = {"vllm_ascend": REPO / "subsystem"}
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60
MAX_CLASS_LINES = 250
CORE = "migrator.core"
# What the kernel may import from this repository: itself, the table model, and the
# package root (`migrator.__version__`).
CORE_MAY_IMPORT = (CORE, "rules")


def _modules(*packages: str) -> Iterator[tuple[str, Path, ast.Module]]:
    for package in packages:
        home = HOMES.get(package, REPO)
        assert (home / package / "__init__.py").is_file(), f"{package} is not under {home}"
        for path in sorted((home / package).rglob("*.py")):
            dotted = ".".join(path.relative_to(home).with_suffix("").parts)
            yield dotted.removesuffix(".__init__"), path, ast.parse(path.read_bytes())


def _lines(node: ast.stmt) -> int:
    assert node.end_lineno is not None
    return node.end_lineno - node.lineno + 1


def test_public_class_names_are_unique() -> None:
    owners: dict[str, list[str]] = {}
    for dotted, _, tree in _modules(*SOURCE_PACKAGES):
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                owners.setdefault(node.name, []).append(dotted)
    shared = {name: where for name, where in owners.items() if len(where) > 1}
    assert not shared, shared


def test_no_module_is_over_the_limit() -> None:
    long = {
        str(path.relative_to(REPO)): count
        for _, path, _ in _modules(*SOURCE_PACKAGES)
        if (count := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert not long, long


def test_no_function_or_class_is_over_the_limit() -> None:
    long: dict[str, int] = {}
    for dotted, _, tree in _modules(*SIZED_PACKAGES):
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                limit = MAX_FUNCTION_LINES
            elif isinstance(node, ast.ClassDef):
                limit = MAX_CLASS_LINES
            else:
                continue
            if _lines(node) > limit:
                long[f"{dotted}:{node.lineno} {node.name}"] = _lines(node)
    assert not long, long


def _imported(dotted: str, path: Path, tree: ast.Module) -> Iterator[tuple[int, str]]:
    """(line, module) of every import in `tree`, relative ones made absolute; for `from M
    import N`, `M.N` when that names a module of the repository, else `M`."""
    package = dotted if path.name == "__init__.py" else dotted.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1]
            module = ".".join([*base, node.module] if node.module else base)
            if not node.level:
                module = node.module or ""
            for alias in node.names:
                sub = f"{module}.{alias.name}"
                is_module = (REPO / sub.replace(".", "/")).is_dir() or (
                    REPO / (sub.replace(".", "/") + ".py")
                ).is_file()
                yield node.lineno, sub if is_module else module


def _first_party(module: str) -> bool:
    return module.partition(".")[0] in SOURCE_PACKAGES


def _allowed_in_core(module: str) -> bool:
    return module == "migrator" or any(
        module == allowed or module.startswith(allowed + ".") for allowed in CORE_MAY_IMPORT
    )


def test_core_imports_nothing_above_it() -> None:
    outside = [
        f"{dotted}:{line} imports {module}"
        for dotted, path, tree in _modules("migrator/core")
        for line, module in _imported(dotted, path, tree)
        if _first_party(module) and not _allowed_in_core(module)
    ]
    assert not outside, outside


def test_the_import_check_sees_a_command_import_in_core() -> None:
    # The check above would pass vacuously if `_imported` missed relative or `from` imports.
    tree = ast.parse(
        "from ..rewrite import text\nfrom migrator import cli\nimport migrator.infer.index\n"
        "from . import codes\n"
    )
    found = [m for _, m in _imported(CORE + ".sample", REPO / "migrator/core/sample.py", tree)]
    assert found == ["migrator.rewrite.text", "migrator.cli", "migrator.infer.index",
                     "migrator.core.codes"]
    assert [_allowed_in_core(m) for m in found] == [False, False, False, True]
