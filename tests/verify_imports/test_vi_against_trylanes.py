"""`vam verify-imports --against` reads no `except ImportError` fallback of a `try` whose
imports all resolve at the target: that lane (what `vam migrate --compat-style try` writes)
never runs there. A failing or undecidable body leaves its handler checked."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from migrator.cli import main
from migrator.upgrade.run import check
from migrator.verify_imports import load_dist, verify_against
from tests.verify_imports.conftest import Tree

# Release 2.0 of `lib`: `lib.old` moved to `lib.new`.
LIB_2 = {
    "lib-src/pyproject.toml": '[project]\nname = "lib"\nversion = "2.0"\n',
    "lib-src/lib/__init__.py": "",
    "lib-src/lib/new.py": "def thing():\n    return 1\n",
}

LANES = """
    try:
        from lib.new import thing
    except ImportError:
        from lib.old import thing
    try:
        import lib.new
        HAS_NEW = True
    except (ImportError, AttributeError):
        import lib.old
    try:
        from lib.new import thing as t2
    except ModuleNotFoundError:
        from lib.old import thing as t2
    try:
        from lib.new import thing as t3
    except ValueError:
        from lib.old import thing as t3
"""

# The target lacks the name on both paths: the body fails, so the handler runs and is read.
BOTH_MISSING = """
    try:
        from lib.new import gone
    except ImportError:
        from lib.old import gone
"""

# Not only imports in the body (a call may raise ImportError), or an import of another
# package: undecided, the handler is read as before.
UNDECIDED = """
    import setup_hook

    try:
        from lib.new import thing
        setup_hook.run()
    except ImportError:
        from lib.old import thing
    try:
        from lib.new import thing as t2
        from . import sibling
    except ImportError:
        from lib.old import thing as t2
    try:
        pass
    except ImportError:
        from lib.old import thing as t3
"""


def _codes(findings: list) -> list[tuple[int, str]]:
    return [(f.line, f.code) for f in findings]


def _files(name: str, text: str) -> dict[str, str]:
    return {**LIB_2, "plugin/__init__.py": "", "plugin/sibling.py": "", f"plugin/{name}": text}


def test_the_fallback_of_a_resolving_try_is_not_reported(tree: Tree) -> None:
    root = tree(_files("m.py", LANES))
    found = verify_against(load_dist(str(root / "lib-src")), ["plugin/m.py"]).findings
    # Only the handler that does not catch ImportError is read: ValueError is no lane.
    assert _codes(found) == [(17, "VAI002")]


def test_the_fallback_of_a_failing_try_is_reported(tree: Tree) -> None:
    root = tree(_files("m.py", BOTH_MISSING))
    found = verify_against(load_dist(str(root / "lib-src")), ["plugin/m.py"]).findings
    assert _codes(found) == [(2, "VAI102"), (4, "VAI002")]
    assert [f.is_error for f in found] == [False, True]


def test_an_undecided_body_leaves_its_fallback_reported(tree: Tree) -> None:
    root = tree(_files("m.py", UNDECIDED))
    found = verify_against(load_dist(str(root / "lib-src")), ["plugin/m.py"]).findings
    assert [(line, code) for line, code in _codes(found) if code == "VAI002"] == [
        (7, "VAI002"), (12, "VAI002"), (16, "VAI002")]


def test_the_cli_exits_clean_on_a_resolving_lane(tree: Tree) -> None:
    tree(_files("m.py", LANES.split("    try:\n        from lib.new import thing as t3")[0]))
    result = CliRunner().invoke(main, ["verify-imports", "--against", "lib-src", "plugin/m.py"])
    assert result.exit_code == 0, result.output
    tree(_files("m.py", BOTH_MISSING))
    result = CliRunner().invoke(main, ["verify-imports", "--against", "lib-src", "plugin/m.py"])
    assert result.exit_code == 1 and "plugin/m.py:4:" in result.output


def test_the_upgrade_check_counts_no_dead_fallback(tree: Tree) -> None:
    root = tree({**_files("m.py", LANES), "plugin/n.py": BOTH_MISSING})
    found = check(load_dist(str(root / "lib-src")), ["plugin"], "2.0", ("vllm_version_is",),
                  None, Path.cwd())
    assert [(Path(f.path).name, f.line) for f in found.import_errors] == [
        ("m.py", 17), ("n.py", 4)]
