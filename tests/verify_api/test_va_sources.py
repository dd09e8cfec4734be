"""Where the releases come from: a commit of a local git clone (`REPO@REV`, for
`verify-api` and `verify-imports --against`), the index cache, and a real sdist pair."""

from __future__ import annotations

import subprocess
import tarfile
from pathlib import Path

import pytest

from migrator.core import dists, indexcache
from migrator.core.config import Config
from migrator.core.dists import cache_dir
from migrator.verify_api import ApiRequest, upstream, verify_api
from migrator.verify_imports import verify_against
from migrator.verify_imports.against import load_dist
from rules import load_pack
from tests.verify_api.conftest import Tree, invoke, write
from tests.verify_api.releases import NEW, OLD, PLUGIN


def _git(repo: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "HOME": str(repo), "PATH": "/usr/bin:/bin"}
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                          check=True, env=env)
    return done.stdout.strip()


def _commit(repo: Path, files: dict[str, str], tag: str) -> str:
    for rel in list(_git(repo, "ls-files").splitlines()):
        (repo / rel).unlink()
    write(repo, {k: v for k, v in files.items() if k != "PKG-INFO"})
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", tag)
    _git(repo, "tag", tag)
    return _git(repo, "rev-parse", "HEAD")


@pytest.fixture
def clone(tree: Tree) -> Path:
    """A vLLM-like repository: v0.30.0 then v0.33.0, the work tree left at an unrelated
    state (nothing may be read from it)."""
    root = tree(PLUGIN)
    repo = root / "vllm-src"
    repo.mkdir()
    _git(repo, "init", "-q")
    _commit(repo, OLD, "v0.30.0")
    _commit(repo, NEW, "v0.33.0")
    (repo / "vllm" / "utils.py").write_text("garbage = (\n")  # never read: not committed
    return repo


def test_verify_api_against_two_commits_of_a_clone(clone: Path) -> None:
    result = invoke("--against", f"{clone}@v0.33.0", "--from", f"{clone}@v0.30.0",
                    "--upstream", "vllm", "-q", "plugin")
    assert result.exit_code == 1
    codes = [line.split()[1] for line in result.stdout.splitlines()]
    assert len(codes) == 15 and codes.count("VAP008") == 4
    # a guard decided by the version the tag states: the 0.30.0 lane is not read
    assert "plugin/sched.py:11:" not in result.stdout


def test_verify_imports_against_a_commit(clone: Path) -> None:
    write(clone.parent, {"imp/__init__.py": "from vllm.sched import Scheduler\n"})
    (clone / "vllm" / "utils.py").unlink()
    _git(clone, "checkout", "-q", "--", "vllm/utils.py")
    _git(clone, "rm", "-q", "vllm/sched.py")
    _git(clone, "commit", "-qm", "drop the scheduler")
    assert verify_against(load_dist(f"{clone}@v0.33.0"), ["imp"]).findings == []
    [gone] = verify_against(load_dist(f"{clone}@HEAD"), ["imp"]).findings
    assert (gone.path, gone.line, gone.code) == ("imp/__init__.py", 1, "VAI002")
    result = invoke("--against", f"{clone}@nope", "plugin")
    assert result.exit_code == 2 and "no commit 'nope'" in result.stderr


def test_a_commit_is_keyed_by_its_sha(clone: Path, index_cache: Path) -> None:
    sha = _git(clone, "rev-parse", "v0.33.0")
    by_tag, by_sha = dists.resolve(f"{clone}@v0.33.0"), dists.resolve(f"{clone}@{sha[:10]}")
    assert by_tag.commit == by_sha.commit == sha
    # The tag also states the version (guards are decided by it): it keys apart from the sha.
    assert dists.index_key(by_tag) == indexcache.files_key({}, "git", sha, "0.33.0")
    assert dists.index_key(by_sha) == indexcache.files_key({}, "git", sha, "")
    request = ApiRequest(("plugin",), f"{clone}@v0.33.0", load_pack("vllm"), Config(),
                         f"{clone}@v0.30.0", ("vllm",))
    assert verify_api(request).parsed > 0
    assert (index_cache / f"verify-api-{dists.index_key(by_tag)}.json").is_file()
    assert verify_api(request).parsed == 0


def test_a_warm_run_opens_no_release(tree: Tree, index_cache: Path,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    root = tree(PLUGIN)
    archives = []
    for name, files in (("0.30.0", OLD), ("0.33.0", NEW)):
        write(root / "src" / f"vllm-{name}", files)
        archive = root / f"vllm-{name}.tar.gz"
        with tarfile.open(archive, "w:gz") as tar:
            tar.add(root / "src" / f"vllm-{name}", arcname=f"vllm-{name}")
        archives.append(str(archive))
    request = ApiRequest(("plugin",), archives[1], load_pack("vllm"), Config(), archives[0],
                         ("vllm",))
    cold = verify_api(request)
    assert cold.parsed > 0 and len(cold.findings) == 15

    def refuse(ref: object) -> None:
        raise AssertionError(f"opened {ref}: the index cache was not used")

    monkeypatch.setattr(upstream, "open_ref", refuse)
    warm = verify_api(request)
    assert warm.parsed == 0
    assert warm.findings == cold.findings


_SDISTS = [cache_dir() / n for n in ("vllm_ascend-0.30.0rc2", "vllm-0.30.0.tar.gz",
                                     "vllm-0.33.0.tar.gz")]


@pytest.mark.skipif(not all(p.exists() for p in _SDISTS), reason="sdists not cached")
def test_real_vllm_ascend_file_against_vllm_0_33(monkeypatch: pytest.MonkeyPatch) -> None:
    """vllm-ascend 0.30.0rc2 (built against vLLM 0.30.0) against 0.33.0: its attention
    backend's override of `get_supported_kernel_block_sizes`, which 0.33.0 calls with
    `kv_cache_spec`."""
    monkeypatch.chdir(_SDISTS[0])
    request = ApiRequest(("vllm_ascend/attention/attention_v1.py",), str(_SDISTS[2]),
                         load_pack("vllm"), Config(), str(_SDISTS[1]), ("vllm",))
    found = verify_api(request).findings
    assert [(f.code, f.obj) for f in found] == [
        ("VAP001", "vllm.v1.attention.backend.AttentionBackend.get_supported_kernel_block_sizes"
                   "(kv_cache_spec)")]
