"""Fixtures for `vam verify-api`: two releases of a small fake `vllm` written as source trees
in tmp, a plugin project beside them, and a private index cache."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from migrator.cli import main

Tree = Callable[[dict[str, str]], Path]


def write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return root


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Tree:
    """Write {relative path: source} under tmp_path and chdir there."""
    monkeypatch.chdir(tmp_path)
    return lambda files: write(tmp_path, files)


@pytest.fixture(autouse=True)
def index_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path_factory.mktemp("vam-index")
    monkeypatch.setenv("VAM_INDEX_CACHE", str(folder))
    return folder


def invoke(*args: str) -> Result:
    return CliRunner().invoke(main, ["verify-api", *args])
