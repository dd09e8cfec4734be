"""Acceptance: the bundled 0.14.0 step, inferred from the real 0.13.0 and 0.14.0rc1 sdists."""

from __future__ import annotations

import sys
import urllib.error
from pathlib import Path

import pytest

from rules import load_pack
from tests.infer.helpers import infer, pairs, table

REPO = Path(__file__).resolve().parents[2]


def _sdist(version: str) -> Path:
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        from sdists import sdist  # fetched from the configured index, cached outside the repo
    finally:
        sys.path.remove(str(REPO / "benchmarks"))
    try:
        return sdist(version)
    except (urllib.error.URLError, OSError) as exc:
        pytest.skip(f"the package index is unreachable, cannot fetch vllm-ascend {version}: {exc}")


def test_infers_the_bundled_0_14_step_exactly() -> None:
    old, new = _sdist("0.13.0"), _sdist("0.14.0rc1")
    result = infer(old, new, "--package", "vllm_ascend", "--under", "vllm_ascend.distributed")
    data = table(result)
    bundled = load_pack("vllm_ascend").step("0.14.0")
    assert pairs(data, "module") == {(m.old, m.new) for m in bundled.modules if not m.intermediate}
    assert pairs(data, "symbol") == {(s.old, s.new) for s in bundled.symbols}
    collapsed = {m["old"]: m.get("submodules") for m in data["step"][0]["module"]}
    assert collapsed["vllm_ascend.distributed.cpu_offload_manager"] == [
        "cpu_kv_cache_manager",
        "metadata",
    ]
    assert result.stderr == ""
