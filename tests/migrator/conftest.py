"""Helpers for the migrator tests: the engine in-process, and the CLI as a subprocess."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import rules
from migrator.core import findings as F
from migrator.core.resolver import Resolver
from migrator.rewrite.engine import Engine, Options

REPO = Path(__file__).resolve().parents[2]


def engine(pack: rules.Pack | None = None, **options: object) -> Engine:
    pack = pack or rules.load_pack("vllm_ascend")
    return Engine(Resolver(pack), Options(**options))  # type: ignore[arg-type]


def rewrite(source: str, package: str | None = None, pack: rules.Pack | None = None,
            **options: object) -> tuple[str, list[F.Finding]]:
    """Migrate one Python module's source in-process."""
    return engine(pack, **options).transform_python(source, package)


def vam(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None
        ) -> subprocess.CompletedProcess[str]:
    """Run the CLI as users do (`python -m migrator` is the same program as `vam`)."""
    return subprocess.run([sys.executable, "-m", "migrator", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, check=False)


@pytest.fixture
def pack() -> rules.Pack:
    return rules.load_pack("vllm_ascend")
