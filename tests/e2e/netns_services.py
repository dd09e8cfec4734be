"""Mooncake services and vLLM engines placed on the hosts of a `netns.Network`.

- `MooncakePool(network, log_dir, client_ttl_s)`: `mooncake_master` on host `master` (RPC
  `MASTER_RPC_PORT`, metrics `MASTER_METRICS_PORT`, both on the host's address) and a standalone
  `mooncake_client` on host `pool` holding the pool's `POOL_BYTES` (its service on
  `POOL_CLIENT_PORT`); a context manager, ready when the whole segment is mounted.
- `engine_on(host, ...)`: an `EngineProcess` (uniproc) whose interpreter runs on `host`.
- `start_all(engines)`: start engines side by side.
- `foreign_listeners(host, pids)`: what would break "nothing binds outside the namespaces".

Ports are fixed: every host has its own port space.
"""

from __future__ import annotations

import shutil
import sys
import threading
from pathlib import Path
from typing import Any

from harness import UNIPROC_ENV, UNIPROC_LLM_KWARGS, EngineProcess, ServiceProcess
from kvpool_master import master_binary
from netns import Host, Network

from tests.polling import wait_until

__all__ = [
    "MASTER_RPC_PORT",
    "POOL_BYTES",
    "MooncakePool",
    "client_binary",
    "engine_on",
    "foreign_listeners",
    "start_all",
]

MASTER_RPC_PORT = 50051
MASTER_METRICS_PORT = 9003
POOL_CLIENT_PORT = 50052
POOL_BYTES = 256 << 20
# Loopback and the wildcard stay inside a namespace; anything else must be the host's address.
_LOCAL_ADDRESSES = {"127.0.0.1", "::1", "0.0.0.0", "::", "*"}


def client_binary() -> str | None:
    """Path of `mooncake_client` beside this interpreter (or on PATH), None if absent."""
    here = str(Path(sys.executable).parent)
    return shutil.which("mooncake_client", path=here) or shutil.which("mooncake_client")


class MooncakePool:
    """The pool's services on hosts `master` and `pool` (see the module docstring).

    Raises (on `__enter__`):
        TimeoutError: the master does not listen within 60 s, or the segment is not mounted
            within 90 s.
    """

    def __init__(self, network: Network, log_dir: Path, client_ttl_s: int) -> None:
        self.network = network
        self.master_host, self.pool_host = network["master"], network["pool"]
        self.address = f"{self.master_host.address}:{MASTER_RPC_PORT}"
        master_argv = [
            str(master_binary()),
            f"--rpc_address={self.master_host.address}",
            f"--rpc_port={MASTER_RPC_PORT}",
            "--enable_http_metadata_server=false",
            f"--metrics_host={self.master_host.address}",
            f"--metrics_port={MASTER_METRICS_PORT}",
            f"--client_ttl={client_ttl_s}",
        ]
        client_argv = [
            str(client_binary()),
            f"--global_segment_size={POOL_BYTES >> 20}MB",
            f"--master_server_address={self.address}",
            "--metadata_server=P2PHANDSHAKE",
            f"--host={self.pool_host.address}",
            f"--port={POOL_CLIENT_PORT}",
        ]
        self.master = ServiceProcess(
            self.master_host.argv(master_argv), log_path=log_dir / "master.log"
        )
        self.client = ServiceProcess(
            self.pool_host.argv(client_argv), log_path=log_dir / "client.log"
        )

    def __enter__(self) -> MooncakePool:
        try:
            self.master.start()
            listening = (self.master_host.address, MASTER_RPC_PORT)
            wait_until(lambda: listening in self.master_host.listening(), 60, "master listening")
            self.client.start()
            wait_until(lambda: self.capacity() == POOL_BYTES, 90, "pool segment mounted")
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.client.close()
        self.master.close()

    def capacity(self) -> int:
        """Bytes mounted in the pool, from the master's metrics (fetched on its host)."""
        host = self.master_host
        text = host.http_get(f"http://{host.address}:{MASTER_METRICS_PORT}/metrics")
        for line in text.splitlines():
            if line.startswith("master_total_capacity_bytes "):
                return int(float(line.split()[1]))
        return 0


def engine_on(
    host: Host, model: Path, folder: Path, config: dict[str, Any], env: dict[str, str]
) -> EngineProcess:
    """An engine (not started, uniproc) that runs on `host`; `folder` gets its launcher."""
    return EngineProcess(
        model,
        kv_transfer_config=config,
        llm_kwargs=UNIPROC_LLM_KWARGS,
        # vLLM finds "its" address by routing to a public one; a host has no route out.
        env={**UNIPROC_ENV, "MC_LOG_LEVEL": "ERROR", "VLLM_HOST_IP": host.address, **env},
        python=host.python_wrapper(folder),
    )


def start_all(engines: list[EngineProcess]) -> None:
    """Start engines side by side (start-up is mostly waiting); close all if one fails."""
    errors: list[BaseException] = []

    def start(engine: EngineProcess) -> None:
        try:
            engine.start()
        except BaseException as exc:  # re-raised below
            errors.append(exc)

    threads = [threading.Thread(target=start, args=(e,)) for e in engines]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        for engine in engines:
            engine.close()
        raise errors[0]


def foreign_listeners(host: Host, pids: list[int | None]) -> list[str]:
    """What breaks "these processes run on `host` and listen only there": each pid not in its
    namespace and each listener on an address other than the host's, loopback or wildcard."""
    inside = {int(p) for p in host.run(["ip", "netns", "pids", host.name]).split()}
    problems = [f"pid {p} is not on host {host.role}" for p in pids if p not in inside]
    problems += [
        f"{host.role} listens on {address}:{port}"
        for address, port in host.listening()
        if address not in _LOCAL_ADDRESSES | {host.address}
    ]
    return problems
