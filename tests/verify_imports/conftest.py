"""Fixture trees for `vam verify-imports`: small packages written into tmp_path."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

Tree = Callable[[dict[str, str]], Path]


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Tree:
    """Write {relative path: source} under tmp_path (dedented) and chdir there, so findings
    carry short relative paths like `pkg/a.py`."""
    monkeypatch.chdir(tmp_path)

    def write(files: dict[str, str]) -> Path:
        for rel, text in files.items():
            path = tmp_path / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
        return tmp_path

    return write


@pytest.fixture(autouse=True)
def index_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Each test's own index cache (`verify-imports --against`): never the user's."""
    folder = tmp_path_factory.mktemp("vam-index")
    monkeypatch.setenv("VAM_INDEX_CACHE", str(folder))
    return folder
