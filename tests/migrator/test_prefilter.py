"""The byte tests before a file is parsed (`migrator.core.prefilter`): a file that cannot
hold a reference is not parsed, and every file that can still is - inside a package
(relative imports), and where a name is spelled in pieces."""

from __future__ import annotations

import os
import random
import re
import subprocess
import sys
from pathlib import Path

import pathspec
import pytest

from migrator.core import findings as F
from migrator.core.discover import SourceFile
from migrator.core.edits import NEWLINE, LineIndex
from migrator.core.prefilter import word_alternation
from migrator.core.walk import _Gitignore
from tests.migrator.conftest import REPO, engine, rewrite, vam

# Spells the table package and the common last components `metadata`, `state`, `backend`
# and `kv_transfer`, but no moved name whole: every name of the table that ends in one of
# them has another component this file never spells (`kv_pool`, `eplb`, `mooncake`, ...).
GENERIC = (
    "import vllm_ascend\n"
    "from vllm_ascend.utils import is_310p\n"
    "from .metadata import Metadata\n"
    "from vllm.distributed.kv_transfer import get_kv_transfer_group\n"
    "state = backend = None  # kv_transfer.metadata\n"
)


def _parsed(path: Path, root: Path) -> bool:
    result = engine(report_only=True).process(SourceFile(path, root, "python"))
    assert not result.findings, result.findings
    return result.parsed


def test_a_file_outside_the_package_that_spells_only_generic_components_is_not_parsed(
    tmp_path: Path,
) -> None:
    app = tmp_path / "app"
    app.mkdir()
    (app / "__init__.py").write_text("")
    (app / "worker.py").write_text(GENERIC)
    assert not _parsed(app / "worker.py", tmp_path)
    # The summary counts what was parsed: nothing.
    result = vam("migrate", str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert "2 files scanned, 0 parsed, 0 changed" in result.stderr


def test_a_file_that_spells_a_moved_name_whole_is_parsed(tmp_path: Path) -> None:
    path = tmp_path / "worker.py"
    path.write_text(GENERIC + "from vllm_ascend.distributed.kvpool import backend\n")
    result = engine(report_only=True).process(SourceFile(path, tmp_path, "python"))
    assert result.parsed
    assert [f.code for f in result.findings] == [F.MOVED]


def _package(root: Path) -> Path:
    """vllm_ascend/distributed/x.py, which names moved modules by relative imports only."""
    folder = root / "vllm_ascend" / "distributed"
    (folder / "kvpool").mkdir(parents=True)
    for init in (root / "vllm_ascend", folder, folder / "kvpool"):
        (init / "__init__.py").write_text("")
    module = folder / "x.py"
    module.write_text("from . import communicator\nfrom .kvpool import backend\n")
    return module


def test_a_file_inside_the_package_with_relative_imports_is_checked(tmp_path: Path) -> None:
    module = _package(tmp_path)
    result = vam("check", str(tmp_path))
    assert result.returncode == 1, result.stderr
    assert result.stdout.count(f"{module}:") == 2


def test_relative_imports_are_checked_from_inside_the_package_too(tmp_path: Path) -> None:
    # The folders of a relative path are taken from the working directory.
    module = _package(tmp_path)
    result = vam("check", ".", cwd=module.parent)
    assert result.returncode == 1, result.stderr
    assert [line.split(": ")[1].split()[0] for line in result.stdout.splitlines()[:2]] == [
        "VAM001", "VAM001"]


@pytest.mark.parametrize("source", [
    # Split inside a component, across adjacent literals (also across a comment).
    'X = ("vllm_ascend.distri"\n     "buted.mooncake_connector")\n',
    'X = ("vllm_ascend.distri"  # the path\n     "buted.mooncake_connector")\n',
    # An escape or a line continuation inside a component.
    'X = "vllm_ascend.dis\\x74ributed.mooncake_connector"\n',
    'X = "vllm_ascend.distri\\\nbuted.mooncake_connector"\n',
])
def test_a_name_spelled_in_pieces_is_still_reported(tmp_path: Path, source: str) -> None:
    path = tmp_path / "spelled.py"
    path.write_text(source)
    result = engine(report_only=True).process(SourceFile(path, tmp_path, "python"))
    assert result.parsed
    assert [f.code for f in result.findings] == [F.NEEDS_HUMAN], result.findings


@pytest.mark.parametrize(("source", "needle"), [
    ("from vllm_ascend.distributed.utils import *\n", "star import"),
    ('m = f"vllm_ascend.distributed.{name}"\n', "format field"),
    ('m = "vllm_ascend.distributed.%s" % name\n', "format field"),
    ('m = "vllm_ascend.distributed.{}".format(name)\n', "format field"),
])
def test_forms_that_spell_no_last_component_pass_the_byte_tests(
    tmp_path: Path, source: str, needle: str
) -> None:
    path = tmp_path / "forms.py"
    path.write_text(source)
    result = engine(report_only=True).process(SourceFile(path, tmp_path, "python"))
    assert result.parsed
    assert [f.code for f in result.findings] == [F.NEEDS_HUMAN], result.findings
    assert needle in result.findings[0].message


def test_check_reports_what_migrate_reports_on_doctests_and_comments_without_libcst(
    tmp_path: Path,
) -> None:
    source = (
        'def f():\n'
        '    """\n'
        '    >>> from vllm_ascend.distributed.kvpool import backend\n'
        '    >>> from vllm_ascend.distributed import communicator, parallel_state\n'
        '    """\n'
        '# from vllm_ascend.distributed.mooncake_connector import MooncakeConnector\n'
        '# import vllm_ascend.distributed.kvpool.backend.backend as b\n'
    )
    _, migrated = rewrite(source)
    _, checked = rewrite(source, report_only=True)
    assert checked == migrated
    assert [f.line for f in checked] == [3, 4, 6, 7]
    probe = (
        "import runpy, sys\n"
        "sys.argv = ['vam', 'check', sys.argv[1]]\n"
        "try:\n    runpy.run_module('migrator', run_name='__main__')\n"
        "except SystemExit:\n    pass\n"
        "print('libcst' in sys.modules, file=sys.stderr)\n"
    )
    (tmp_path / "doc.py").write_text(source)
    done = subprocess.run([sys.executable, "-c", probe, str(tmp_path / "doc.py")],
                          capture_output=True, text=True, check=False, cwd=REPO)
    assert done.stdout.count("doc.py:") == 4, done.stdout
    assert done.stderr.strip().splitlines()[-1] == "False", done.stderr


def test_word_alternation_matches_exactly_its_words() -> None:
    randomly = random.Random(19)
    for _ in range(200):
        words = {"".join(randomly.choice("ab_.") for _ in range(randomly.randint(1, 5)))
                 for _ in range(randomly.randint(1, 12))}
        pattern = re.compile(word_alternation(words))
        for _ in range(60):
            probe = "".join(randomly.choice("ab_.") for _ in range(randomly.randint(1, 6)))
            assert (pattern.fullmatch(probe) is not None) == (probe in words), (words, probe)
    assert word_alternation([]) == ""


@pytest.mark.parametrize("text", ["", "a", "a\n", "a\nbc\n\nd", "\n\n", "a\r\nb\rc\n", "x\r"])
def test_line_index_agrees_with_the_newline_regex(text: str) -> None:
    assert LineIndex(text).starts == [0, *(m.end() for m in NEWLINE.finditer(text))]


def test_gitignore_screen_agrees_with_pathspec() -> None:
    lines = ["# comment", "*.log", "!keep.log", "build/", "/top.txt", "docs/**/out",
             "a?c", "[ab]x", "**/cache", "\\#hash", "sub/*.py", "!sub/ok.py", ""]
    ours = _Gitignore(lines)
    theirs = pathspec.PathSpec.from_lines("gitwildmatch", lines)
    assert ours.screen is not None
    names = ["x.log", "keep.log", "build", "top.txt", "out", "abc", "ax", "bx", "cache",
             "#hash", "ok.py", "no.py", "readme.md"]
    folders = ["", "sub", "docs", "docs/a/b", "build", "deep/sub"]
    for folder in folders:
        for name in names:
            for rel in (os.path.join(folder, name), os.path.join(folder, name) + "/"):
                assert ours.match_file(rel) == theirs.match_file(rel), rel
