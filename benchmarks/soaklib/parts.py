"""The soak's real parts, started here: `vllm serve` instances, the P/D proxy, the KV pool.

- `Server`: one `python -m vllm.entrypoints.openai.api_server` on a fixed loopback port (a
  restart comes back on the same port, so the proxy and the load keep their URLs), its engine on
  one OMP thread bound to one core, its own process group (signals reach the API server and its
  engine core together), one log file per start.
- `Proxy`: `examples/pd_proxy.py` in front of a prefill and a decode `Server`.
- `Pool`: network namespaces from `tests/e2e/netns.py` with `mooncake_master` on host `master`
  and the standalone `mooncake_client` holding the pool's memory on host `pool`
  (`tests/e2e/netns_services.MooncakePool`); this (root) namespace joins their switch with a veth
  of its own, so engines started here reach the master and the pool's segment, and
  `Network.cut("pool")` silences the pool host alone.

Each part has `processes()` (name -> pids, for resident-memory samples) and `logs()` (its log
files, for the log-line budget per fault).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

from harness import REPO_ROOT, ServiceProcess, engine_env, free_port
from netns import Network, _ip
from netns_services import POOL_BYTES, MooncakePool
from openai_server import serve_argv, wait_ready

from tests.polling import wait_until

__all__ = ["Pool", "Proxy", "Server", "group_pids"]

MAX_MODEL_LEN = 1024
START_TIMEOUT_S = 600.0
# The engine core runs its worker in its own process (`uni` executor, which vLLM's CPU platform
# keeps only with `VLLM_ENABLE_V1_MULTIPROCESSING=0`): two processes per server instead of
# three, so a restart imports vLLM twice, not three times. One OMP thread (the `mp` executor's
# core binding does not apply to `uni`).
SERVER_ENV = {
    "MC_LOG_LEVEL": "ERROR",
    "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
    "OMP_NUM_THREADS": "1",
}
ROOT_HOST = 254  # the last octet of this namespace's address on the pool's switch


def group_pids(pgid: int) -> list[int]:
    """Every live process of process group `pgid` (from /proc)."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            pids.append(int(entry))
    return pids


class _Restartable:
    """A `ServiceProcess` started again under a new log file each time."""

    name = "service"

    def __init__(self, logs: Path) -> None:
        self.log_dir = logs
        self.service: ServiceProcess | None = None
        self.starts = 0
        self.log_files: list[Path] = []

    def _spawn(self, argv: list[str], env: dict[str, str] | None = None) -> None:
        self.starts += 1
        log = self.log_dir / f"{self.name}.{self.starts}.log"
        self.log_files.append(log)
        self.service = ServiceProcess(argv, env=env, log_path=log).start()

    @property
    def pgid(self) -> int | None:
        proc = self.service.proc if self.service is not None else None
        return proc.pid if proc is not None and proc.poll() is None else None

    def signal(self, sig: signal.Signals) -> None:
        """Send `sig` to the whole process group (SIGKILL also reaps it)."""
        pgid = self.pgid
        if pgid is None:
            return
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        if sig == signal.SIGKILL and self.service is not None and self.service.proc is not None:
            self.service.proc.wait(30)

    def processes(self) -> dict[str, list[int]]:
        pgid = self.pgid
        return {f"{self.name}#{self.starts}": group_pids(pgid) if pgid else []}

    def logs(self) -> list[Path]:
        return list(self.log_files)

    def close(self) -> None:
        if self.service is not None:
            self.signal(signal.SIGCONT)  # a stopped process ignores SIGTERM until continued
            self.service.close()


class Server(_Restartable):
    """One `vllm serve` (see the module docstring).

    Args:
        name: its role in the logs and the report ("prefill", "pool", ...).
        model: the model folder.
        kv_config: its `--kv-transfer-config`, None for none.
        logs: the run's log folder.
        core: the CPU its engine's one OMP thread is bound to.
        blocks: its own KV cache size in 32-token blocks (`--num-gpu-blocks-override`).
    """

    def __init__(
        self,
        name: str,
        model: Path,
        kv_config: dict[str, Any] | None,
        logs: Path,
        *,
        core: str,
        blocks: int,
        env: dict[str, str] | None = None,
    ) -> None:
        super().__init__(logs)
        self.name = name
        self.kv_config = kv_config
        self.port = free_port()
        self.argv = serve_argv(model, self.port, kv_config, MAX_MODEL_LEN)
        self.argv += ["--num-gpu-blocks-override", str(blocks)]
        self.argv += ["--distributed-executor-backend", "uni"]
        self.env = engine_env({**SERVER_ENV, "VLLM_CPU_OMP_THREADS_BIND": core, **(env or {})})

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Server:
        """Start without waiting (`wait_ready` waits)."""
        self._spawn(self.argv, self.env)
        return self

    def wait_ready(self, timeout_s: float = START_TIMEOUT_S) -> None:
        assert self.service is not None
        wait_ready(self.url, self.service, timeout_s)

    def restart(self) -> None:
        """SIGKILL (if it runs) and start again on the same port; returns when it serves."""
        self.signal(signal.SIGKILL)
        self.start().wait_ready()


class Proxy(_Restartable):
    """`examples/pd_proxy.py` on a free port in front of `prefill` and `decode` (layerwise
    mode when `prefill_kv`, the prefill's side channel `HOST:PORT`, is given)."""

    name = "proxy"

    def __init__(
        self, prefill: Server, decode: Server, logs: Path, prefill_kv: str | None = None
    ) -> None:
        super().__init__(logs)
        self.port = free_port()
        self.argv = [
            sys.executable, str(REPO_ROOT / "examples" / "pd_proxy.py"), "--port", str(self.port),
            "--prefill", prefill.url, "--decode", decode.url,
        ]  # fmt: skip
        if prefill_kv is not None:
            self.name = "lw_proxy"
            self.argv += ["--layerwise", "--prefill-kv", prefill_kv]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Proxy:
        self._spawn(self.argv)
        assert self.service is not None
        wait_ready(self.url, self.service, 30)
        return self


class _PoolMember(_Restartable):
    """The master or the pool client of a `MooncakePool`, restartable under new log files."""

    def __init__(self, name: str, service: ServiceProcess, logs: Path) -> None:
        super().__init__(logs)
        self.name = name
        self.service = service
        self.starts = 1
        self.log_files = [service.log_path]

    def respawn(self) -> None:
        assert self.service is not None
        self._spawn(self.service.argv)


class Pool:
    """The KV pool on its hosts (see the module docstring); a context manager.

    Args:
        logs: the run's log folder.
        subnet: the switch's /24 (three octets), one no other run on this machine uses.
        client_ttl_s: the master forgets a silent client after this long.
    """

    def __init__(self, logs: Path, subnet: str, client_ttl_s: int) -> None:
        self.network = Network(["master", "pool"], subnet=subnet)
        self.logs_dir = logs
        self.client_ttl_s = client_ttl_s
        self.root_address = f"{subnet}.{ROOT_HOST}"
        self.root_link = f"vamsk{os.getpid()}"
        self.services: MooncakePool | None = None
        self.master: _PoolMember | None = None
        self.client: _PoolMember | None = None

    def __enter__(self) -> Pool:
        self.network.__enter__()
        try:
            self._join_root()
            self.services = MooncakePool(self.network, self.logs_dir, self.client_ttl_s)
            self.services.__enter__()
        except BaseException:
            self.network.close()
            raise
        self.master = _PoolMember("master", self.services.master, self.logs_dir)
        self.client = _PoolMember("pool_client", self.services.client, self.logs_dir)
        return self

    def __exit__(self, *exc: object) -> None:
        for member in (self.client, self.master):
            if member is not None:
                member.close()
        self.network.close()  # its switch namespace takes our veth's other end with it

    def _join_root(self) -> None:
        """A veth from here to the switch, this namespace at `<subnet>.254`."""
        switch, link = self.network.switch, self.root_link
        _ip("link", "add", link, "type", "veth", "peer", "name", "root0", "netns", switch)
        _ip("-n", switch, "link", "set", "root0", "master", "br0", "up")
        _ip("addr", "add", f"{self.root_address}/24", "dev", link)
        _ip("link", "set", link, "up")

    @property
    def address(self) -> str:
        assert self.services is not None
        return self.services.address

    def store_config(self) -> dict[str, Any]:
        """`kv_connector_extra_config["mooncake"]` of an engine here: no memory of its own."""
        return {
            "master_server_address": self.address,
            "local_hostname": self.root_address,
            "metadata_server": "P2PHANDSHAKE",
            "protocol": "tcp",
            "global_segment_size": 0,
            "local_buffer_size": "4MB",
        }

    def capacity(self) -> int:
        assert self.services is not None
        try:
            return self.services.capacity()
        except Exception:  # a stopped or dead master: nothing mounted as far as we can tell
            return 0

    def wait_mounted(self, timeout_s: float = 120.0) -> None:
        """Until the pool client's whole segment is mounted at the master."""
        wait_until(lambda: self.capacity() == POOL_BYTES, timeout_s, "pool segment mounted")

    def processes(self) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for member in (self.master, self.client):
            if member is not None:
                out.update(member.processes())
        return out

    def logs(self) -> list[Path]:
        return [p for m in (self.master, self.client) if m is not None for p in m.logs()]


def write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


def wait_all(servers: list[Server]) -> float:
    """Wait until every server serves; the seconds it took."""
    started = time.monotonic()
    for server in servers:
        server.wait_ready()
    return time.monotonic() - started
