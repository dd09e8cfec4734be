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


# Steps whose rows differ from infer's by hand decisions commented in the pack (a name the
# side branch lacks but the main line has again; a path a later release re-created).
HAND_DECIDED = {"0.9.2rc1", "0.10.0rc1", "0.13.0"}
STEP_PAIRS = [
    ("0.7.3rc2", "0.7.3", "0.7.3"), ("0.9.1rc1", "0.9.1rc2", "0.9.1rc2"),
    ("0.10.1rc1", "0.10.2rc1", "0.10.2rc1"), ("0.11.0", "0.12.0rc1", "0.12.0rc1"),
    ("0.13.0rc1", "0.13.0rc2", "0.13.0rc2"), ("0.17.0rc1", "0.18.0rc1", "0.18.0rc1"),
    ("0.23.0.post1", "0.24.0rc1", "0.24.0rc1"), ("0.24.0rc1", "0.25.1rc1", "0.25.1rc1"),
    ("0.26.0rc1", "0.27.1rc1", "0.27.1rc1"), ("0.27.1rc1", "0.28.0rc1", "0.28.0rc1"),
    ("0.28.0rc1", "0.29.0rc1", "0.29.0rc1"), ("0.29.0rc1", "0.30.0rc1", "0.30.0rc1"),
]  # fmt: skip


@pytest.mark.parametrize(("old", "new", "version"), STEP_PAIRS)
def test_infer_writes_each_bundled_step(old: str, new: str, version: str) -> None:
    """Renames inside moved modules, packages moved with renamed classes, removals inside
    moved modules: every row of these steps, and nothing else, from the sdist pair alone."""
    assert version not in HAND_DECIDED
    result = infer(_sdist(old), _sdist(new), "--package", "vllm_ascend",
                   "--under", "vllm_ascend.distributed", "--version", version)
    step = table(result)["step"][0]
    got = {(kind, e["old"], e.get("new", "")) for kind in ("module", "symbol", "removed")
           for e in step.get(kind, [])}
    bundled = load_pack("vllm_ascend").step(version)
    want = {("module", m.old, m.new) for m in bundled.modules if not m.intermediate}
    want |= {("symbol", s.old, s.new) for s in bundled.symbols}
    want |= {("removed", r.old, "") for r in bundled.removed}
    assert got == want
