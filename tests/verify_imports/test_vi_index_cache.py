"""issue 19: `verify-imports --against` keeps a distribution's index on disk, keyed by the
sha256 of what it was built from, so a second run does not parse the release again."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from migrator.core import indexcache
from migrator.verify_imports import against, verify_against
from migrator.verify_imports.against import load_dist
from tests.verify_imports.conftest import Tree
from tests.verify_imports.test_vi_against import LIB, PLUGIN, _sdist, _write


def _entries(cache: Path) -> list[Path]:
    return sorted(cache.glob("verify-imports-*.json"))


def _report(dist_spec: str) -> list[tuple[str, int, int, str, str, str]]:
    result = verify_against(load_dist(dist_spec), ["plugin"])
    return [(f.path, f.line, f.col, f.code, f.message, f.suggestion) for f in result.findings]


def _no_opening(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(path: Path) -> None:
        raise AssertionError(f"opened {path}: the cached index was not used")

    monkeypatch.setattr(against, "open_release", refuse)


def test_a_cache_hit_gives_the_cold_runs_findings(
    tree: Tree, tmp_path: Path, index_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tree({"plugin/__init__.py": "", "plugin/mod.py": PLUGIN})
    archive = _sdist(tmp_path)
    uncached = verify_against(load_dist(str(archive), cache=False), ["plugin"]).findings
    assert _entries(index_cache) == []
    cold = _report(str(archive))
    [entry] = _entries(index_cache)
    assert entry.name == f"verify-imports-{indexcache.file_key(archive)}.json"
    _no_opening(monkeypatch)  # a hit never opens the archive
    warm = _report(str(archive))
    assert warm == cold
    assert [(f.path, f.line, f.col, f.code, f.message, f.suggestion) for f in uncached] == cold
    assert load_dist(str(archive)).version == "1.0"


def test_a_copy_of_the_archive_hits_and_reports_its_own_paths(
    tree: Tree, tmp_path: Path, index_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tree({"plugin/__init__.py": "", "plugin/mod.py": PLUGIN})
    first = _sdist(tmp_path)
    cold = load_dist(str(first)).problems("lib.utils.cdiv")
    (tmp_path / "elsewhere").mkdir()
    copy = tmp_path / "elsewhere" / first.name
    copy.write_bytes(first.read_bytes())
    _no_opening(monkeypatch)
    warm = load_dist(str(copy)).problems("lib.utils.cdiv")
    assert [f.message.replace(str(copy), str(first)) for f in warm] == [f.message for f in cold]
    assert str(copy) in warm[0].message


def test_a_corrupt_entry_is_rebuilt_not_a_crash(
    tree: Tree, tmp_path: Path, index_cache: Path
) -> None:
    tree({"plugin/__init__.py": "", "plugin/mod.py": PLUGIN})
    archive = _sdist(tmp_path)
    cold = _report(str(archive))
    [entry] = _entries(index_cache)
    good = entry.read_text(encoding="utf-8")
    for broken in (good[: len(good) // 2], "\xff\x00 not json", "[]",
                   good.replace('"infos":{', '"infos":{"x.py":[1],', 1)):
        entry.write_text(broken, encoding="utf-8")
        assert _report(str(archive)) == cold
        assert json.loads(entry.read_text(encoding="utf-8"))["payload"]["modules"]


def test_an_entry_of_another_version_or_format_is_not_used(
    tmp_path: Path, index_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    indexcache.store("k", "abc", "tag1", {"x": 1})
    assert indexcache.load("k", "abc", "tag1") == {"x": 1}
    assert indexcache.load("k", "abc", "tag2") is None  # the indexer's code changed
    version = indexcache.__version__
    monkeypatch.setattr(indexcache, "__version__", "99.0")
    assert indexcache.load("k", "abc", "tag1") is None
    monkeypatch.setattr(indexcache, "__version__", version)
    monkeypatch.setattr(indexcache, "FORMAT", indexcache.FORMAT + 1)
    assert indexcache.load("k", "abc", "tag1") is None
    assert not list(index_cache.glob("*.tmp"))  # writes leave no temporary behind


def test_the_key_changes_when_the_archive_changes(tmp_path: Path, index_cache: Path) -> None:
    archive = _sdist(tmp_path)
    before = indexcache.file_key(archive)
    assert [f.code for f in load_dist(str(archive)).problems("lib.utils.math_utils.floor")] \
        == ["VAI001"]
    LIB["lib/utils/math_utils.py"] += "\ndef floor(a):\n    return a\n"
    try:
        archive = _sdist(tmp_path)  # the same file name, new bytes
    finally:
        LIB["lib/utils/math_utils.py"] = LIB["lib/utils/math_utils.py"].split("\ndef floor")[0]
    assert indexcache.file_key(archive) != before
    assert load_dist(str(archive)).problems("lib.utils.math_utils.floor") == []
    assert len(_entries(index_cache)) == 2


def test_a_source_tree_is_keyed_by_its_files(tmp_path: Path, index_cache: Path) -> None:
    _write(tmp_path / "lib-src", LIB)
    spec = str(tmp_path / "lib-src")
    assert [f.code for f in load_dist(spec).problems("lib.utils.math_utils.floor")] == ["VAI001"]
    assert [f.code for f in load_dist(spec).problems("lib.utils.math_utils.floor")] == ["VAI001"]
    assert len(_entries(index_cache)) == 1
    with (tmp_path / "lib-src/lib/utils/math_utils.py").open("a") as stream:
        stream.write("def floor(a):\n    return a\n")
    assert load_dist(spec).problems("lib.utils.math_utils.floor") == []
    assert len(_entries(index_cache)) == 2


def test_a_cache_that_cannot_be_written_costs_only_speed(
    tree: Tree, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tree({"plugin/__init__.py": "", "plugin/mod.py": PLUGIN})
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    monkeypatch.setenv("VAM_INDEX_CACHE", str(blocker / "cache"))
    archive = _sdist(tmp_path)
    assert _report(str(archive)) == _report(str(archive))


def test_where_the_cache_lives(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("VAM_INDEX_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert indexcache.cache_dir() == tmp_path / "xdg" / "vam-index"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert indexcache.cache_dir() == Path(os.path.expanduser("~")) / ".cache" / "vam-index"


def test_old_entries_are_pruned(index_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(indexcache, "MAX_ENTRIES", 3)
    for number in range(5):
        indexcache.store("k", f"key{number}", "t", number)
        os.utime(index_cache / f"k-key{number}.json", (1000 + number, 1000 + number))
    indexcache.store("other", "key0", "t", 0)  # another kind keeps its own
    assert sorted(p.name for p in index_cache.glob("k-*.json")) == [
        "k-key2.json", "k-key3.json", "k-key4.json"]
    assert indexcache.load("other", "key0", "t") == 0
