"""`vam verify-imports --against DIST` reads no line DIST's version never runs: the old lane
of a version guard (what `vam migrate --keep-compat` writes) is not broken at the target."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from migrator.cli import main
from migrator.core.guards import dead_lines
from migrator.verify_imports import load_dist, verify_against
from tests.verify_imports.conftest import Tree

# Release 2.0 of `lib`: `lib.old` moved to `lib.new`.
LIB_2 = {
    "lib-src/pyproject.toml": '[project]\nname = "lib"\nversion = "2.0"\n',
    "lib-src/lib/__init__.py": "",
    "lib-src/lib/new.py": "def thing():\n    return 1\n",
}

DUAL = """
    from unittest import mock

    from plugin.utils import vllm_version_is, vllm_version_lt

    if vllm_version_is("1.0"):
        from lib.old import thing
        TARGET = "lib.old.thing"
    else:
        from lib.new import thing
        TARGET = "lib.new.thing"
    if not vllm_version_lt("2.0"):
        from lib.new import thing as t2
    else:
        import lib.old
    OTHER = mock.patch("lib.old.thing" if vllm_version_is("1.0") else "lib.new.thing")
    from lib.old import broken
"""


def _codes(findings: list) -> list[tuple[int, str]]:
    return [(f.line, f.code) for f in findings]


def test_the_dead_lane_of_a_version_guard_is_not_reported(tree: Tree) -> None:
    root = tree({**LIB_2, "plugin/__init__.py": "", "plugin/utils.py": "", "plugin/m.py": DUAL})
    found = verify_against(load_dist(str(root / "lib-src")), ["plugin/m.py"]).findings
    # Only the unguarded import is broken at 2.0; of a one-line conditional expression,
    # the string in the dead branch is not read.
    assert _codes(found) == [(16, "VAI002")]


def test_without_a_version_or_guards_every_line_is_read(tree: Tree) -> None:
    root = tree({**LIB_2, "plugin/__init__.py": "", "plugin/utils.py": "", "plugin/m.py": DUAL})
    dist = load_dist(str(root / "lib-src"))
    everything = verify_against(dist, ["plugin/m.py"], ()).findings
    assert {f.line for f in everything} == {6, 7, 14, 15, 16}
    assert _codes(everything).count((15, "VAI001")) == 1
    dist.version = None
    assert {f.line for f in verify_against(dist, ["plugin/m.py"]).findings} == {6, 7, 14, 15, 16}


def test_the_cli_reads_the_configured_guards(tree: Tree) -> None:
    custom = DUAL.replace("vllm_version_is", "torch_version_is")
    tree({**LIB_2, "plugin/__init__.py": "", "plugin/utils.py": "", "plugin/m.py": custom})
    runner = CliRunner()
    args = ["verify-imports", "--against", "lib-src", "--format", "json", "plugin/m.py"]
    before = runner.invoke(main, args)
    # Unconfigured, `torch_version_is` is no guard: its old lane is read.
    assert '"line": 6' in before.stdout and before.exit_code == 1
    Path("pyproject.toml").write_text(
        '[tool.vam]\nversion-guards = ["torch_version_is", "vllm_version_lt"]\n')
    after = runner.invoke(main, args)
    assert '"line": 6' not in after.stdout and '"line": 16' in after.stdout, after.output
    Path("pyproject.toml").write_text('[tool.vam]\nversion-guards = "nope"\n')
    assert runner.invoke(main, args).exit_code == 2


def test_dead_lines_at_one_release() -> None:
    source = (b'if vllm_version_is("1.0"):\n    a = 1\nelse:\n    b = 2\n'
              b'if vllm_version_ge("3.0") and flag:\n    c = 3\n')
    helpers = ("vllm_version_is", "vllm_version_ge")
    assert dead_lines(source, helpers, "2.0") == {2, 6}
    assert dead_lines(source, helpers, "1.0") == {4, 6}
    assert dead_lines(source, helpers, None) == set()
    assert dead_lines(b"if (:\n", helpers, "1.0") == set()
