"""`kv_transfer.utils.mooncake_transfer_engine`: the process-wide Mooncake TransferEngine.

Each test runs its scenario in a fresh interpreter (the engine is one per process), against
the real `mooncake.engine` over TCP on loopback.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("mooncake.engine")

REPO = Path(__file__).resolve().parents[2]


def run(code: str, timeout_s: float = 120) -> Any:
    """Run `code` in a fresh interpreter; it prints one JSON line last, which is returned."""
    # An engine started in this process (other tests) set Mooncake's timeouts here.
    env = {k: v for k, v in os.environ.items() if not k.startswith("MC_TCP_")}
    paths = [str(REPO), str(REPO / "subsystem")]
    env.update(MC_LOG_LEVEL="ERROR", PYTHONPATH=os.pathsep.join(paths))
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


PRELUDE = """
import json, torch
from vllm_ascend.distributed.kv_transfer.utils import mooncake_transfer_engine as m
"""


def test_one_engine_per_process_and_a_different_spec_is_refused() -> None:
    out = run(
        PRELUDE
        + """
a = m.get_transfer_engine("127.0.0.1", "tcp")
b = m.get_transfer_engine("127.0.0.1", "tcp")
try:
    m.get_transfer_engine("127.0.0.1", "rdma", "mlx5_0")
    refused = ""
except m.TransferEngineError as exc:
    refused = str(exc)
print(json.dumps({"same": a is b, "session": a.session_id, "refused": refused}))
"""
    )
    assert out["same"]
    assert out["session"].startswith("127.0.0.1:") and int(out["session"].split(":")[1]) > 0
    assert "already runs a transfer engine" in out["refused"] and "rdma" in out["refused"]


def test_registration_is_idempotent_overlaps_are_errors() -> None:
    out = run(
        PRELUDE
        + """
te = m.get_transfer_engine()
buf = torch.zeros(1 << 20, dtype=torch.uint8)
p = buf.data_ptr()
te.register_memory(p, 1 << 20)
te.register_memory(p, 1 << 20)  # same region again: no-op
errors = []
for args in ((p + 4096, 4096), (p, 0)):
    try:
        te.register_memory(*args)
    except m.TransferEngineError as exc:
        errors.append(str(exc))
regions = te.registered_regions()
te.unregister_memory(p)
te.unregister_memory(p)  # unknown: no-op
print(json.dumps({"regions": len(regions), "errors": errors, "left": len(te.registered_regions())}))
"""
    )
    assert out["regions"] == 1 and out["left"] == 0
    assert "overlaps registered" in out["errors"][0]
    assert "cannot register 0 bytes" in out["errors"][1]


def test_transfer_failures_raise_instead_of_returning_codes() -> None:
    out = run(
        PRELUDE
        + """
te = m.get_transfer_engine()
buf = torch.zeros(4096, dtype=torch.uint8)
te.register_memory(buf.data_ptr(), 4096)
try:
    te.batch_read("127.0.0.1:1", [buf.data_ptr()], [4096], [4096])
    error = ""
except m.TransferError as exc:
    error, status = str(exc), exc.status
te.batch_read("127.0.0.1:1", [], [], [])  # nothing to do: no call at all
try:
    te.batch_write("x", [1], [2, 3], [4])
    shape = ""
except ValueError as exc:
    shape = str(exc)
# A read from this process's own session works (loopback).
src = torch.arange(4096, dtype=torch.int32).to(torch.uint8)
te.register_memory(src.data_ptr(), 4096)
te.batch_read(te.session_id, [buf.data_ptr()], [src.data_ptr()], [4096])
copied = bool(torch.equal(buf, src))
print(json.dumps({"error": error, "status": status, "shape": shape, "copied": copied}))
"""
    )
    assert "failed (status" in out["error"] and out["status"] < 0
    assert "differ in length" in out["shape"]
    assert out["copied"]


def test_bad_metadata_server_is_refused_before_mooncake_can_abort() -> None:
    # Mooncake aborts the process on an unknown metadata scheme; we refuse it first.
    out = run(
        PRELUDE
        + """
try:
    m.get_transfer_engine(metadata_server="foo://x")
    error = ""
except m.TransferEngineError as exc:
    error = str(exc)
print(json.dumps({"error": error}))
"""
    )
    assert "metadata_server 'foo://x' is not supported" in out["error"]


def test_missing_mooncake_is_a_clear_import_error() -> None:
    out = run(
        """
import json, sys
sys.modules["mooncake.engine"] = None  # as if the package were not installed
from vllm_ascend.distributed.kv_transfer.utils import mooncake_transfer_engine as m
try:
    m.get_transfer_engine()
    error, kind = "", ""
except ImportError as exc:
    error, kind = str(exc), type(exc).__name__
print(json.dumps({"error": error, "kind": kind}))
"""
    )
    assert out["kind"] == "MooncakeNotInstalledError"
    assert "pip install mooncake-transfer-engine-non-cuda" in out["error"]
    assert "libibverbs1 librdmacm1" in out["error"]


def test_tcp_timeouts_are_set_unless_the_environment_has_them() -> None:
    out = run(
        """
import json, os
os.environ["MC_TCP_STATUS_TIMEOUT_SEC"] = "7"
from vllm_ascend.distributed.kv_transfer.utils import mooncake_transfer_engine as m
m.get_transfer_engine(tcp_timeout_s=15)
print(json.dumps({k: os.environ.get(k) for k in m.TCP_TIMEOUT_ENV_VARS}))
"""
    )
    assert out == {"MC_TCP_PROGRESS_TIMEOUT_SEC": "15", "MC_TCP_STATUS_TIMEOUT_SEC": "7"}
