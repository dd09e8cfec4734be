"""`vam refactor` on a small package in a git repository: files, history, imports, shims,
verify-imports, and the refusals."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from migrator.verify_imports import verify_static
from tests.refactor.conftest import git, vam, write_tree

REPO_ROOT = Path(__file__).resolve().parents[2]


def _refactor(table: Path, root: Path, *extra: str):  # type: ignore[no-untyped-def]
    return vam("refactor", "--rules", str(table), "--step", "1.0", *extra, str(root))


def _python(root: Path, code: str) -> subprocess.CompletedProcess[str]:
    """A fresh interpreter that sees ROOT and this repository's `shims` and `rules`."""
    env = {**os.environ, "PYTHONPATH": f"{root}{os.pathsep}{REPO_ROOT}"}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, cwd=root, check=False)


def test_files_move_with_their_history(repo: Path, table: Path) -> None:
    result = _refactor(table, repo)
    assert result.exit_code == 0, result.output
    assert not (repo / "pkg/old").exists()
    for name in ("__init__.py", "conn.py", "helper.py", "data.json"):
        assert (repo / "pkg/new/sub" / name).is_file()
    assert (repo / "pkg/new/__init__.py").read_text() == ""
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "refactor")
    log = git(repo, "log", "--follow", "--format=%s", "--", "pkg/new/sub/conn.py")
    assert log.split() == ["refactor", "initial"]


def test_imports_follow_and_anchors_are_right(repo: Path, table: Path) -> None:
    assert _refactor(table, repo).exit_code == 0
    conn = (repo / "pkg/new/sub/conn.py").read_text()
    # moved file: relative imports computed from its new package, minimal dots
    assert conn.startswith(
        "from . import helper\nfrom .helper import h\nfrom ...util import stays\n"
    )
    user = (repo / "pkg/user.py").read_text()
    # a file that stays keeps its anchor
    assert "from pkg.new.sub.conn import Conn\nfrom .new.sub import helper\n" in user
    assert 'TARGET = "pkg.new.sub.conn.Conn"' in user
    assert "pkg.new.sub.conn.Conn.run" in (repo / "tests/test_user.py").read_text()
    assert (repo / "docs/guide.md").read_text() == (
        "See `pkg/new/sub/conn.py` and `pkg.new.sub.helper`.\n"
    )
    assert "pkg.new.sub.conn" in (repo / "pkg/new/sub/data.json").read_text()


def test_symbol_moves_with_its_imports(repo: Path, table: Path) -> None:
    assert _refactor(table, repo).exit_code == 0
    tools = (repo / "pkg/new/tools.py").read_text()
    assert tools == "import os\n\n\n# Moves with its comment.\ndef moved_fn():\n    return os.sep\n"
    util = (repo / "pkg/util.py").read_text()
    assert "def moved" not in util and "import os" not in util
    assert "from pkg.new.tools import moved_fn as moved\n" in util


def test_result_imports_new_and_old_paths(repo: Path, table: Path) -> None:
    assert _refactor(table, repo).exit_code == 0
    assert not verify_static([str(repo / "pkg")]).findings
    probe = _python(repo, (
        "import warnings; warnings.simplefilter('ignore')\n"
        "import pkg.new.sub.conn as new, pkg.old.conn as old\n"
        "assert old is new and old.Conn().run() > 2\n"
        "from pkg.util import moved\n"
        "from pkg.new.tools import moved_fn\n"
        "assert moved is moved_fn\n"
        "print('ok')\n"
    ))
    assert probe.stdout.strip() == "ok", probe.stderr
    # the rows in the package stop at the step: the later step's target does not exist
    carried = (repo / "pkg/_vam_shims/__init__.py").read_text()
    assert "version='1.0'" in carried and "'2.0'" not in carried
    assert "pkg.new.sub.helpers" not in carried


def test_second_run_changes_nothing(repo: Path, table: Path) -> None:
    assert _refactor(table, repo).exit_code == 0
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "refactor")
    again = _refactor(table, repo)
    assert again.exit_code == 0 and "already carried out" in again.output
    assert git(repo, "status", "--porcelain") == ""


def test_no_shims_leaves_init_alone(repo: Path, table: Path) -> None:
    assert _refactor(table, repo, "--no-shims").exit_code == 0
    assert (repo / "pkg/__init__.py").read_text() == ""
    assert not (repo / "pkg/_vam_moves.toml").exists()
    assert not (repo / "pkg/_vam_shims").exists()


def test_dry_run_and_diff_write_nothing(repo: Path, table: Path) -> None:
    plan = _refactor(table, repo, "--dry-run")
    assert plan.exit_code == 0
    assert "move     pkg/old/conn.py -> pkg/new/sub/conn.py" in plan.output
    assert "create   pkg/new/__init__.py" in plan.output
    patch = _refactor(table, repo, "--diff")
    assert "rename from pkg/old/conn.py\nrename to pkg/new/sub/conn.py\n" in patch.output
    assert "+from ...util import stays" in patch.output
    assert git(repo, "status", "--porcelain") == ""
    # the patch is one git can apply
    (repo.parent / "step.patch").write_text(patch.output.split("\n4 file(s)")[0])
    git(repo, "apply", "--check", str(repo.parent / "step.patch"))


def test_plain_folder_uses_plain_renames(tmp_path: Path, table: Path) -> None:
    from tests.refactor.conftest import FILES

    root = tmp_path / "plain"
    write_tree(root, FILES)
    assert _refactor(table, root).exit_code == 0
    assert (root / "pkg/new/sub/conn.py").is_file() and not (root / "pkg/old").exists()


def test_nothing_of_the_step(tmp_path: Path, table: Path) -> None:
    write_tree(tmp_path / "other", {"pkg/__init__.py": "", "pkg/x.py": "X = 1\n"})
    result = _refactor(table, tmp_path / "other")
    assert result.exit_code == 2
    assert "nothing of step 1.0 lives under" in result.output


def test_conflicting_destination_writes_nothing(repo: Path, table: Path) -> None:
    write_tree(repo, {"pkg/new/__init__.py": "", "pkg/new/sub/__init__.py": "",
                      "pkg/new/sub/conn.py": "OTHER = 1\n"})
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "half")
    result = _refactor(table, repo)
    assert result.exit_code == 2
    assert str(repo / "pkg/new/sub/conn.py") in result.output
    assert str(repo / "pkg/old/conn.py") in result.output
    assert git(repo, "status", "--porcelain") == ""


def test_dirty_tree_needs_allow_dirty(repo: Path, table: Path) -> None:
    (repo / "pkg/user.py").write_text("# edited\n")
    refused = _refactor(table, repo)
    assert refused.exit_code == 2 and "--allow-dirty" in refused.output
    assert (repo / "pkg/old/conn.py").is_file()
    assert _refactor(table, repo, "--allow-dirty").exit_code == 0


def test_file_that_does_not_parse_is_not_moved(repo: Path, table: Path) -> None:
    (repo / "pkg/old/helper.py").write_text("def h(:\n")
    git(repo, "commit", "-q", "-am", "broken")
    result = _refactor(table, repo)
    assert result.exit_code == 2
    assert "helper.py:1: cannot parse" in result.output
    assert git(repo, "status", "--porcelain") == "" and (repo / "pkg/old").is_dir()


def test_merge_of_two_packages(tmp_path: Path) -> None:
    table = tmp_path / "merge.toml"
    table.write_text(
        '[pack]\nname = "m"\npackages = ["m"]\n[[step]]\nversion = "1.0"\nsummary = "merge"\n'
        '[[step.module]]\nold = "m.a"\nnew = "m.both"\n'
        '[[step.module]]\nold = "m.b"\nnew = "m.both"\n'
    )
    root = tmp_path / "tree"
    write_tree(root, {"m/__init__.py": "", "m/a/__init__.py": "", "m/a/x.py": "X = 1\n",
                      "m/b/__init__.py": '"""B."""\n', "m/b/y.py": "from ..a.x import X\n"})
    result = vam("refactor", "--rules", str(table), "--step", "1.0", str(root))
    assert result.exit_code == 0, result.output
    assert (root / "m/both/__init__.py").read_text() == '"""B."""\n'
    assert (root / "m/both/y.py").read_text() == "from .x import X\n"
    assert not (root / "m/a").exists() and not (root / "m/b").exists()
