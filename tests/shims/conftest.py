"""Fixtures for the shims tests (helpers live in shims_helpers.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from shims_helpers import ACME, Tree, write_vllm_ascend_layout

import rules


@pytest.fixture
def tree(tmp_path: Path) -> Tree:
    """An empty fixture directory."""
    return Tree(tmp_path)


@pytest.fixture
def acme(tmp_path: Path) -> Tree:
    """The small hand-written `acme` package with its table (see shims_helpers.ACME)."""
    tree = Tree(tmp_path)
    tree.write(ACME)
    return tree


@pytest.fixture(scope="module")
def va_layout(tmp_path_factory: pytest.TempPathFactory) -> tuple[Tree, rules.Pack]:
    """A `vllm_ascend` package generated from the bundled table, in the 0.14 layout, with
    the repository's real `vllm_ascend/distributed/__init__.py` installing the shims."""
    root = tmp_path_factory.mktemp("va_new")
    pack = write_vllm_ascend_layout(root)
    return Tree(root), pack
