"""The hooks of `.pre-commit-hooks.yaml`, run by pre-commit itself against a real git repo.

`pre-commit try-repo` clones this repository, builds its own virtual environment and pip
installs vam into it (from PyPI and the configured indexes), so this test exercises the
packaging, the hook definitions and the CLI together. The repository is snapshotted first
(every file git tracks or would track, committed into a scratch repo) so uncommitted work
is what gets tested, not the last commit.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
OLD = "vllm_ascend.distributed.mooncake_connector"
NEW = "vllm_ascend.distributed.kv_transfer.kv_p2p.mooncake_connector"

STALE = f"""\
from {OLD} import MooncakeConnector

from plugin.helpers import helpr

CONNECTOR = MooncakeConnector
"""
MIGRATED = STALE.replace(OLD, NEW)
FIXED = MIGRATED.replace("helpr", "helper")


def _git(cwd: Path, *args: str) -> str:
    result = subprocess.run(
        ["git", *args], cwd=cwd, capture_output=True, text=True, check=True, env=_env()
    )
    return result.stdout


def _env(pre_commit_home: Path | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        GIT_CONFIG_GLOBAL=os.devnull,  # no user or system settings leak into the repos
        GIT_CONFIG_NOSYSTEM="1",
        GIT_AUTHOR_NAME="vam test",
        GIT_AUTHOR_EMAIL="vam@example.invalid",
        GIT_COMMITTER_NAME="vam test",
        GIT_COMMITTER_EMAIL="vam@example.invalid",
    )
    if pre_commit_home is not None:  # outside the user repo: nothing untracked appears
        env["PRE_COMMIT_HOME"] = str(pre_commit_home)
    return env


def _snapshot(dest: Path) -> Path:
    """This repository's working tree (tracked and untracked, not ignored) as a new repo."""
    files = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    for name in filter(None, files):
        source = REPO / os.fsdecode(name)
        if source.is_file():  # deleted but not yet committed files are listed too
            target = dest / os.fsdecode(name)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    _git(dest, "init", "-q")
    _git(dest, "add", "-A")
    _git(dest, "commit", "-q", "-m", "snapshot")
    return dest


def _pre_commit(cwd: Path, repo: Path, *hook: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pre_commit", "try-repo", str(repo), *hook, "--verbose"],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
        env=_env(cwd.parent / "pre-commit-home"),
        timeout=900,
    )


@pytest.fixture
def hooks_repo(tmp_path: Path) -> Path:
    if not (REPO / ".git").exists():
        pytest.skip("needs the vam git checkout")  # e.g. tests run from an unpacked sdist
    return _snapshot(tmp_path / "vam")


@pytest.fixture
def user_repo(tmp_path: Path) -> Path:
    """A downstream repo with a stale import and a first-party import mistake, staged."""
    root = tmp_path / "user"
    (root / "plugin").mkdir(parents=True)
    _git(root, "init", "-q")
    (root / "plugin" / "__init__.py").write_text("")
    (root / "plugin" / "helpers.py").write_text("def helper():\n    return 1\n")
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "initial")
    (root / "plugin" / "connector.py").write_text(STALE)
    _git(root, "add", "-A")
    return root


def _listed_hooks() -> list[str]:
    text = (REPO / ".pre-commit-hooks.yaml").read_text(encoding="utf-8")
    return [line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("- id:")]


def test_hooks_reject_then_fix_a_stale_reference(hooks_repo: Path, user_repo: Path) -> None:
    connector = user_repo / "plugin" / "connector.py"
    assert {"vam-check", "vam-migrate"} <= set(_listed_hooks())

    check = _pre_commit(user_repo, hooks_repo, "vam-check")
    assert check.returncode == 1, check.stdout + check.stderr
    assert f"plugin/connector.py:1:1: VAM001 '{OLD}' moved to '{NEW}' (0.14.0)" in check.stdout, (
        check.stdout
    )
    assert connector.read_text() == STALE  # a check never writes

    migrate = _pre_commit(user_repo, hooks_repo, "vam-migrate")
    # pre-commit fails a hook that modified files: the user reviews and stages the fix.
    assert migrate.returncode == 1, migrate.stdout + migrate.stderr
    assert "files were modified by this hook" in migrate.stdout, migrate.stdout
    assert connector.read_text() == MIGRATED

    _git(user_repo, "add", "-A")
    again = _pre_commit(user_repo, hooks_repo, "vam-check")
    assert again.returncode == 0, again.stdout + again.stderr
    assert "vam check (stale references to moved modules)" in again.stdout
    assert "Passed" in again.stdout


def test_verify_imports_hook_rejects_a_missing_first_party_name(
    hooks_repo: Path, user_repo: Path
) -> None:
    if "vam-verify-imports" not in _listed_hooks():
        pytest.skip(".pre-commit-hooks.yaml lists no vam-verify-imports hook")
    connector = user_repo / "plugin" / "connector.py"

    failing = _pre_commit(user_repo, hooks_repo, "vam-verify-imports")
    assert failing.returncode == 1, failing.stdout + failing.stderr
    assert "plugin/connector.py:3:28: VAI001 cannot import name 'helpr'" in failing.stdout

    connector.write_text(FIXED)
    _git(user_repo, "add", "-A")
    # Every hook of the repo at once: all three pass on the fixed, migrated file.
    passing = _pre_commit(user_repo, hooks_repo)
    assert passing.returncode == 0, passing.stdout + passing.stderr
    assert passing.stdout.count("Passed") == len(_listed_hooks()), passing.stdout
    assert connector.read_text() == FIXED
