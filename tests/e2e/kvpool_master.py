"""A real `mooncake_master` on loopback for the KV pool tests, benchmarks and examples.

Started on free ports with `--rpc_address=127.0.0.1` and no HTTP metadata server (clients use
`metadata_server="P2PHANDSHAKE"`), ready when its admin port's `/health` says so. It can be
killed (SIGKILL) and restarted on the same ports, as the fault tests need. Stdlib only apart
from the harness; the binary is the console script of `mooncake-transfer-engine`, found next to
the running interpreter.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from harness import ServiceProcess, free_port

__all__ = ["MooncakeMaster", "master_binary"]


def master_binary() -> str | None:
    """Path of `mooncake_master` beside this interpreter (or on PATH), None if absent."""
    here = os.path.dirname(sys.executable)
    return shutil.which("mooncake_master", path=here) or shutil.which("mooncake_master")


class MooncakeMaster:
    """One `mooncake_master` process.

    Args:
        log_dir: folder for the master's logs (one file per start).
        extra_args: more gflags (eviction watermarks, TTLs, ...).
    """

    def __init__(self, log_dir: str | os.PathLike[str], extra_args: list[str] | None = None):
        binary = master_binary()
        if binary is None:
            raise FileNotFoundError(
                "mooncake_master not found (pip install mooncake-transfer-engine-non-cuda)"
            )
        self.binary = binary
        self.log_dir = Path(log_dir)
        self.extra_args = list(extra_args or [])
        self.rpc_port = free_port()
        self.metrics_port = free_port()
        self.service: ServiceProcess | None = None
        self.starts = 0

    @property
    def address(self) -> str:
        """`"127.0.0.1:<rpc port>"`, the clients' `master_server_address`."""
        return f"127.0.0.1:{self.rpc_port}"

    def store_config(self, **overrides: Any) -> dict[str, Any]:
        """A `kv_connector_extra_config["mooncake"]` for this master (loopback, P2P handshake)."""
        return {
            "master_server_address": self.address,
            "local_hostname": "127.0.0.1",
            "metadata_server": "P2PHANDSHAKE",
            "protocol": "tcp",
            "global_segment_size": "32MB",
            "local_buffer_size": "4MB",
            **overrides,
        }

    def start(self, timeout_s: float = 60.0) -> MooncakeMaster:
        """Start (or restart, on the same ports) and wait until it serves."""
        self.starts += 1
        argv = [
            self.binary,
            "--rpc_address=127.0.0.1",
            f"--rpc_port={self.rpc_port}",
            "--enable_http_metadata_server=false",
            "--metrics_host=127.0.0.1",
            f"--metrics_port={self.metrics_port}",
            *self.extra_args,
        ]
        self.log_dir.mkdir(parents=True, exist_ok=True)
        log = self.log_dir / f"mooncake_master.{self.rpc_port}.{self.starts}.log"
        self.service = ServiceProcess(argv, log_path=log).start()
        deadline = time.monotonic() + timeout_s
        while not self.ready():
            proc = self.service.proc
            if proc is not None and proc.poll() is not None:
                raise RuntimeError(
                    f"mooncake_master exited ({proc.returncode}): {self.service.log_tail()}"
                )
            if time.monotonic() > deadline:
                raise TimeoutError(f"mooncake_master not ready after {timeout_s:g} s")
            time.sleep(0.1)
        return self

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(
                f"http://127.0.0.1:{self.metrics_port}/health", timeout=1.0
            ) as r:
                return bool(json.loads(r.read()).get("service_ready"))
        except (OSError, ValueError):
            return False

    def metrics(self) -> dict[str, float]:
        """The master's Prometheus gauges (`master_key_count`, `master_allocated_bytes`, ...)."""
        with urllib.request.urlopen(
            f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5
        ) as r:
            text = r.read().decode()
        out: dict[str, float] = {}
        for line in text.splitlines():
            if line and not line.startswith("#") and "{" not in line:
                name, _, value = line.partition(" ")
                try:
                    out[name] = float(value.split()[0])
                except (ValueError, IndexError):
                    continue
        return out

    def key_count(self) -> int:
        return int(self.metrics().get("master_key_count", 0))

    def capacity_bytes(self) -> int:
        return int(self.metrics().get("master_total_capacity_bytes", 0))

    def wait_capacity(self, at_least_bytes: int, timeout_s: float = 60.0) -> int:
        """Wait until clients have mounted at least this many bytes (after a restart)."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                capacity = self.capacity_bytes()
            except OSError:
                capacity = 0
            if capacity >= at_least_bytes:
                return capacity
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"pool capacity {capacity} < {at_least_bytes} after {timeout_s:g} s"
                )
            time.sleep(0.2)

    def kill(self) -> None:
        """SIGKILL: the master vanishes with every object's metadata."""
        if self.service is not None and self.service.proc is not None:
            os.killpg(self.service.proc.pid, signal.SIGKILL)
            self.service.proc.wait(10)
            self.service.proc = None

    def stop(self) -> None:
        if self.service is not None:
            self.service.close()
            self.service = None

    def log_tail(self) -> str:
        return self.service.log_tail() if self.service is not None else ""
