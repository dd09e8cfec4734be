"""A small package that owns a step, in a fresh git repository, and a runner for `vam`."""

from __future__ import annotations

import subprocess
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from migrator.cli import main

TABLE = """
[pack]
name = "pkg"
packages = ["pkg"]
shims-env = "PKG_SHIMS"

[[step]]
version = "1.0"
summary = "old became new.sub; util.moved left for new.tools as moved_fn"

[[step.module]]
old = "pkg.old"
new = "pkg.new.sub"

[[step.symbol]]
old = "pkg.util.moved"
new = "pkg.new.tools.moved_fn"

[[step]]
version = "2.0"
summary = "a later step the package does not have yet"

[[step.module]]
old = "pkg.new.sub.helper"
new = "pkg.new.sub.helpers"
"""

FILES = {
    "pkg/__init__.py": "",
    "pkg/old/__init__.py": '"""The old package."""\n',
    "pkg/old/conn.py": """\
        from . import helper
        from .helper import h
        from ..util import stays


        class Conn:
            def run(self):
                return h() + helper.h() + stays()
        """,
    "pkg/old/helper.py": "def h():\n    return 1\n",
    "pkg/old/data.json": '{"module": "pkg.old.conn"}\n',
    "pkg/util.py": """\
        import os
        import sys


        # Moves with its comment.
        def moved():
            return os.sep


        def stays():
            return len(sys.argv) + len(moved())
        """,
    "pkg/user.py": """\
        from pkg.old.conn import Conn
        from .old import helper

        TARGET = "pkg.old.conn.Conn"
        """,
    "tests/test_user.py": """\
        from unittest import mock


        def test_conn():
            with mock.patch("pkg.old.conn.Conn.run", return_value=3):
                pass
        """,
    "docs/guide.md": "See `pkg/old/conn.py` and `pkg.old.helper`.\n",
}


def git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(root), *args], capture_output=True, text=True, check=True
    ).stdout


def write_tree(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


@pytest.fixture
def table(tmp_path: Path) -> Path:
    path = tmp_path / "table.toml"
    path.write_text(TABLE)
    return path


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A committed git repository holding the package (ROOT)."""
    root = tmp_path / "repo"
    root.mkdir()
    write_tree(root, FILES)
    git(root, "init", "-q")
    git(root, "config", "user.email", "t@example.com")
    git(root, "config", "user.name", "t")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "initial")
    return root


def vam(*args: str) -> Result:
    return CliRunner().invoke(main, list(args), catch_exceptions=False)
