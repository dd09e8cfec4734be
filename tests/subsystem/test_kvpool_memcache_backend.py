"""MemcacheBackend against a real MemCache MetaService on loopback (started here).

What runs without an NPU (see /work/notes/memcache.md for the investigation): the MetaService,
and a client-only store, which is what the pool's scheduler side uses for lookups. A worker's
store (the memory-contributing local service) needs the Ascend driver, CANN and an NPU; its
put/get test tries for real and skips with the library's own error when that fails.

Every MemCache client runs in a child process: the binding keeps one process-wide client, a
failed `init` leaves it unusable, and `register_buffer` on a client-only store crashes.
One MetaService per host (it takes a lock file), so this module starts exactly one.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("memcache_hybrid")
torch = pytest.importorskip("torch")

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))
from harness import ServiceProcess, free_port, wait_for_port  # noqa: E402

from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.backend.backend import (  # noqa: E402
    BackendError,
)
from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.backend.memcache_backend import (  # noqa: E402
    MemcacheBackend,
)

LOCK_MESSAGE = "process lock file is locked"
NO_NPU_MARKER = "hybm_init"

_META = """
import sys
import memcache_hybrid as mh
cfg = mh.MetaConfig()
cfg.meta_service_url = "tcp://127.0.0.1:{meta}"
cfg.config_store_url = "tcp://127.0.0.1:{store}"
cfg.metrics_url = "http://127.0.0.1:{metrics}"
cfg.log_path = {log_dir!r}
cfg.log_output_target = "screen"
cfg.log_level = "info"
print("setup", mh.MetaService.setup(cfg), flush=True)
sys.exit(mh.MetaService.main())
"""


class MetaService:
    def __init__(self, log_dir: Path) -> None:
        self.meta, self.store, self.metrics = free_port(), free_port(), free_port()
        code = _META.format(
            meta=self.meta, store=self.store, metrics=self.metrics, log_dir=str(log_dir)
        )
        self.service = ServiceProcess(
            [sys.executable, "-c", code], log_path=log_dir / "metaservice.log"
        )

    def config(self, **extra: Any) -> dict[str, Any]:
        return {
            "meta_service_url": f"tcp://127.0.0.1:{self.meta}",
            "config_store_url": f"tcp://127.0.0.1:{self.store}",
            "protocol": "host_tcp",
            "dram_size": "64MB",
            "world_size": 4,
            "client_timeout_s": 5,
            **extra,
        }


@pytest.fixture(scope="module")
def metaservice(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MetaService]:
    meta = MetaService(tmp_path_factory.mktemp("memcache"))
    meta.service.start()
    try:
        deadline = time.monotonic() + 30
        while True:
            proc = meta.service.proc
            assert proc is not None
            if proc.poll() is not None:
                log = meta.service.log_tail()
                if LOCK_MESSAGE in log:
                    pytest.skip("another MemCache MetaService runs on this host (one per host)")
                pytest.fail(f"MetaService exited: {log}")
            try:
                wait_for_port("127.0.0.1", meta.meta, 0.5)
                break
            except TimeoutError:
                assert time.monotonic() < deadline, meta.service.log_tail()
        yield meta
    finally:
        meta.service.close(timeout_s=15)


def run_client(code: str, timeout_s: float = 120) -> tuple[dict[str, Any], str]:
    """Run `code` in a fresh interpreter; it prints one JSON line last. Returns it and stderr."""
    prologue = (
        "import json, sys\n"
        "from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.backend import "
        "memcache_backend as mb\n"
        "from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.backend.backend import "
        "BackendError\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", prologue + textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    assert proc.returncode == 0 and lines, (
        f"client failed ({proc.returncode}): {proc.stderr[-3000:]}"
    )
    result: dict[str, Any] = json.loads(lines[-1])
    return result, proc.stdout + proc.stderr


def test_lookup_only_client_answers_exists(metaservice: MetaService) -> None:
    result, _ = run_client(
        f"""
        b = mb.MemcacheBackend(None, {metaservice.config()!r}, lookup_only=True)
        out = {{"exists": b.exists(["kvpool/a", "kvpool/b"]), "empty": b.exists([])}}
        try:
            b.register_buffer([1], [4096])
        except BackendError as exc:
            out["register"] = str(exc)
        b.close()
        b.close()  # idempotent
        print(json.dumps(out))
        """
    )
    assert result["exists"] == [0, 0] and result["empty"] == []
    # Refused here: the binding would crash the process (SIGSEGV) on a client-only store.
    assert "needs a worker store" in result["register"]


def test_a_closed_metaservice_port_fails_fast_naming_the_url() -> None:
    port = free_port()
    config = {"meta_service_url": f"tcp://127.0.0.1:{port}", "config_store_url": "tcp://h:1"}
    started = time.monotonic()
    with pytest.raises(BackendError) as info:
        MemcacheBackend(None, config, lookup_only=True)
    assert time.monotonic() - started < 10
    assert f"meta_service_url=tcp://127.0.0.1:{port}: cannot connect" in str(info.value)


def test_worker_store_put_get_round_trip(metaservice: MetaService) -> None:
    result, output = run_client(
        f"""
        import torch
        try:
            b = mb.MemcacheBackend(None, {metaservice.config()!r})
        except BackendError as exc:
            print(json.dumps({{"error": str(exc)}}))
            raise SystemExit(0)
        src = torch.arange(4096, dtype=torch.int32)
        dst = torch.zeros_like(src)
        b.register_buffer([src.data_ptr(), dst.data_ptr()], [src.nbytes, dst.nbytes])
        out = {{"put": b.put(["kvpool/x"], [[src.data_ptr()]], [[src.nbytes]])}}
        out["exists"] = b.exists(["kvpool/x"])
        out["get"] = b.get(["kvpool/x"], [[dst.data_ptr()]], [[dst.nbytes]])
        out["equal"] = bool(torch.equal(src, dst))
        b.close()
        print(json.dumps(out))
        """
    )
    if "error" in result:
        # The one allowed kind of skip: the machine has no NPU. The reason quotes the store's
        # own error and our BackendError.
        cause = next((line.strip() for line in output.splitlines() if NO_NPU_MARKER in line), "?")
        assert "needs the Ascend driver, CANN and an NPU" in result["error"]
        pytest.skip(
            "MemCache local service needs the Ascend driver, CANN and an NPU; on this host: "
            f"{result['error']} / {cause}"
        )
    assert result == {"put": [0], "exists": [1], "get": [16384], "equal": True}
