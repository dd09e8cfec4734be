"""Inputs: sdists, wheels, git revisions; bad inputs; unparsable files; determinism."""

from __future__ import annotations

import io
import subprocess
import tarfile
import zipfile
from collections.abc import Mapping
from pathlib import Path

import pytest

from tests.infer.helpers import PKG_INFO, infer, pairs, release, table

FUNC = "def moved(a, b):\n    out = [a, b]\n    out.sort()\n    return out[0] + out[1]\n"
OLD = {"pkg/__init__.py": "", "pkg/old.py": FUNC}
NEW = {"pkg/__init__.py": "", "pkg/io/__init__.py": "", "pkg/io/new.py": FUNC}


def _sdist(path: Path, top: str, files: dict[str, str]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for rel, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"{top}/{rel}" if top else rel)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_sdists_and_wheels_read_with_their_versions(tmp_path: Path) -> None:
    old = _sdist(
        tmp_path / "pkg-1.0.tar.gz", "pkg-1.0", {"PKG-INFO": PKG_INFO.format(version="1.0"), **OLD}
    )
    new = tmp_path / "pkg-2.0rc1-py3-none-any.whl"
    with zipfile.ZipFile(new, "w") as wheel:
        wheel.writestr("pkg-2.0rc1.dist-info/METADATA", PKG_INFO.format(version="2.0rc1"))
        for rel, text in NEW.items():
            wheel.writestr(rel, text)
    data = table(infer(old, new))
    assert pairs(data, "module") == {("pkg.old", "pkg.io.new")}
    assert data["step"][0]["version"] == "2.0rc1"


def test_same_input_same_bytes(tmp_path: Path) -> None:
    old, new = release(tmp_path / "o", OLD), release(tmp_path / "n", NEW)
    first, second = infer(old, new), infer(old, new)
    assert first.exit_code == 0 and first.stdout == second.stdout
    assert "# evidence: score=1/1 definitions found (moved)" in first.stdout


def test_output_file_and_unparsable_files_are_skipped_not_fatal(tmp_path: Path) -> None:
    old = release(tmp_path / "o", {**OLD, "pkg/broken.py": "def (:\n"})
    new = release(tmp_path / "n", {**NEW, "pkg/broken.py": "def ):\n"})
    out = tmp_path / "step.toml"
    result = infer(old, new, "-o", out)
    assert result.exit_code == 0, result.stderr
    assert result.stdout == ""
    assert "[[step.module]]" in out.read_text()
    assert f"vam: skipped, does not parse: {old}: pkg/broken.py" in result.stderr


@pytest.mark.parametrize(
    "case, message",
    [
        ("missing", "no such file or directory"),
        ("not-sdist", "not an sdist"),
        ("no-common", "no top-level package in common"),
        ("bad-package", "no top-level package 'other'"),
    ],
)
def test_bad_input_exits_2_with_one_line(tmp_path: Path, case: str, message: str) -> None:
    old, new = release(tmp_path / "o", OLD), release(tmp_path / "n", NEW)
    args: list[str | Path] = [old, new]
    if case == "missing":
        args = [tmp_path / "absent", new]
    elif case == "not-sdist":
        args = [_sdist(tmp_path / "x.tar.gz", "", {"pkg/__init__.py": ""}), new]
    elif case == "no-common":
        args = [old, release(tmp_path / "other", {"other/__init__.py": ""})]
    else:
        args = [old, new, "--package", "other"]
    result = infer(*args)
    assert result.exit_code == 2
    assert result.stderr.startswith("vam: error: ") and message in result.stderr
    assert len(result.stderr.splitlines()) == 1
    assert result.stdout == ""


def _git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
        check=True,
        capture_output=True,
    )


def _commit(repo: Path, files: Mapping[str, str | None], tag: str | None = None) -> None:
    for rel, text in files.items():
        path = repo / rel
        if text is None:
            path.unlink()
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "step")
    if tag:
        _git(repo, "tag", tag)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """v1.0: pkg/old.py; in between: pkg/tmp/mid.py; v2.0: pkg/io/new.py."""
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    _commit(repo, OLD, "v1.0")
    _commit(repo, {"pkg/old.py": None, "pkg/tmp/__init__.py": "", "pkg/tmp/mid.py": FUNC})
    _commit(repo, {"pkg/tmp/__init__.py": None, "pkg/tmp/mid.py": None, **NEW}, "v2.0")
    return repo


def test_git_revisions_with_an_intermediate_path(repo: Path) -> None:
    result = infer("--git", repo, "v1.0", "v2.0")
    data = table(result)
    modules = data["step"][0]["module"]
    assert {"old": "pkg.old", "new": "pkg.io.new"} in modules
    assert {"old": "pkg.tmp.mid", "new": "pkg.io.new", "intermediate": True} in modules
    assert data["step"][0]["version"] == "2.0"  # from the tag: no metadata file in the repo


def test_git_revision_that_does_not_exist_exits_2(repo: Path) -> None:
    result = infer("--git", repo, "v1.0", "v9.9")
    assert result.exit_code == 2
    assert result.stderr == f"vam: error: {repo}: no commit 'v9.9'\n"


def test_default_packages_leave_out_tests_docs_and_examples(tmp_path: Path) -> None:
    """issue 19: an sdist ships `tests` (and such) beside its own package; by default only the
    distribution's own packages are compared, and `--package tests` still asks for them."""
    helper = "def helper(xs):\n    total = 0\n    for x in xs:\n        total += x * 3\n"
    helper += "    return total\n"
    extra = {"tests/__init__.py": "", "docs/__init__.py": "", "examples/__init__.py": "",
             "benchmarks/__init__.py": ""}
    old = release(tmp_path / "old", {**OLD, **extra, "tests/test_x.py": helper})
    new = release(tmp_path / "new", {**NEW, **extra, "tests/test_y.py": helper}, version="2.0")
    data = table(infer(old, new))
    assert data["pack"]["packages"] == ["pkg"]
    assert pairs(data, "module") == {("pkg.old", "pkg.io.new")}
    asked = table(infer(old, new, "--package", "pkg", "--package", "tests"))
    assert asked["pack"]["packages"] == ["pkg", "tests"]
    assert ("tests.test_x", "tests.test_y") in pairs(asked, "module")


def test_requirements_read_from_the_sdist_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                ) -> None:
    """issue 19: `rules infer` takes NAME==VERSION as `verify-imports --against` does (here
    from a pre-filled cache; the index is unreachable, so nothing is fetched)."""
    cache = tmp_path / "cache"
    cache.mkdir()
    _sdist(cache / "pkg-1.0.tar.gz", "pkg-1.0", {"PKG-INFO": PKG_INFO.format(version="1.0"), **OLD})
    _sdist(cache / "pkg-2.0.tar.gz", "pkg-2.0", {"PKG-INFO": PKG_INFO.format(version="2.0"), **NEW})
    monkeypatch.setenv("VAM_SDIST_CACHE", str(cache))
    monkeypatch.setenv("PIP_INDEX_URL", "file:///nonexistent")
    data = table(infer("pkg==1.0", "pkg==2.0"))
    assert data["step"][0]["version"] == "2.0"
    assert pairs(data, "module") == {("pkg.old", "pkg.io.new")}
    missing = infer("pkg==1.0", "pkg==3.0")
    assert missing.exit_code == 2
    assert "nonexistent" in missing.stderr
