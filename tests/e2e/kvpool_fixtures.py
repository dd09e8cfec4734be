"""The `master` fixture of the KV pool tests: one real `mooncake_master` per test module.

A test module declares it with `master = module_master()`; the master starts on free loopback
ports the first time a test of that module asks for it and stops after the module's last test,
its logs in a fresh temporary folder. Clients the tests open must close before then (a client
whose master is gone takes seconds to destroy), which module-scoped client fixtures declared
after it do.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kvpool_master import MooncakeMaster

__all__ = ["module_master"]


def module_master() -> Callable[..., Any]:
    """A module-scoped pytest fixture named `master` that yields a running `MooncakeMaster`."""

    @pytest.fixture(scope="module", name="master")
    def _master(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MooncakeMaster]:
        m = MooncakeMaster(tmp_path_factory.mktemp("mooncake")).start()
        yield m
        m.stop()

    return _master
