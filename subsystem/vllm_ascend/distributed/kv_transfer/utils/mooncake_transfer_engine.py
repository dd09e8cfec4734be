"""One Mooncake `TransferEngine` per process, shared by every connector that moves KV blocks.

Mooncake's `TransferEngine` (package `mooncake-transfer-engine-non-cuda` on CPU/NPU hosts, Debian
`libibverbs1 librdmacm1` beside it) moves bytes between registered memory regions of two
processes: TCP here, RDMA or Ascend transports on real clusters. A process should run one engine
(it owns listening sockets and, for RDMA, device contexts), so connectors share it through
`get_transfer_engine()`.

API (small on purpose; the KV pool reuses it):

- `get_transfer_engine(hostname, protocol, device_name, metadata_server, tcp_timeout_s)` ->
  `MooncakeTransferEngine`: created on first call (thread-safe), the same object afterwards. A
  later call with a different transport spec raises `TransferEngineError` instead of silently
  returning an engine configured otherwise.
- `MooncakeTransferEngine.session_id`: the name peers address this engine by
  (`"host:rpc_port"` in the `P2PHANDSHAKE` metadata mode).
- `register_memory(addr, length)` / `unregister_memory(addr)`: bytes of the KV cache regions;
  registering the same region twice is a no-op, an overlapping one is an error.
- `batch_read(session, local_addrs, remote_addrs, lengths)` / `batch_write(...)`: one batched,
  synchronous transfer; raises `TransferError` on failure (Mooncake returns -1 for every cause:
  dead peer, unknown session, address not registered on the peer).
- `raw`: the underlying `mooncake.engine.TransferEngine` (e.g. to hand to
  `MooncakeDistributedStore.setup(..., engine=...)`).

Facts this module relies on (checked on this machine, Mooncake 0.3.13.post1): with the
`P2PHANDSHAKE` metadata mode no metadata server is needed and loopback works; a frozen peer
blocks a transfer for `MC_TCP_PROGRESS_TIMEOUT_SEC` (default 30 s) on a warm connection, which
`tcp_timeout_s` sets when the environment does not; the engine's listeners bind all interfaces
(not configurable). A read into an unregistered *local* address still lands on TCP: callers keep
their buffers alive for the duration of a transfer.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from vllm_ascend.logger import init_logger

__all__ = [
    "DEFAULT_METADATA_SERVER",
    "MooncakeNotInstalledError",
    "MooncakeTransferEngine",
    "TransferEngineError",
    "TransferEngineSpec",
    "TransferError",
    "get_transfer_engine",
]

logger = init_logger(__name__)

# Peers exchange their session names out of band (our side channel): no metadata server.
DEFAULT_METADATA_SERVER = "P2PHANDSHAKE"
SUPPORTED_METADATA_PREFIXES = ("P2PHANDSHAKE", "http://", "https://", "etcd://", "redis://")
# Environment variables of Mooncake's TCP transport that bound a transfer to a stalled peer.
TCP_TIMEOUT_ENV_VARS = ("MC_TCP_PROGRESS_TIMEOUT_SEC", "MC_TCP_STATUS_TIMEOUT_SEC")
INSTALL_HINT = (
    "install it with `pip install mooncake-transfer-engine-non-cuda` "
    "(Debian also needs `apt-get install -y libibverbs1 librdmacm1`)"
)


class TransferEngineError(RuntimeError):
    """The transfer engine could not be created, configured or registered memory."""


class MooncakeNotInstalledError(ImportError):
    """`mooncake.engine` does not import (package or its shared libraries missing)."""


class TransferError(RuntimeError):
    """A batched transfer failed (Mooncake returned a negative status)."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class TransferEngineSpec:
    """How the process-wide engine is set up.

    Attributes:
        hostname: the address peers reach this host by (`"127.0.0.1"` on loopback).
        protocol: Mooncake transport: `"tcp"`, `"rdma"`, `"ascend"`, ...
        device_name: transport device list (RDMA NICs, e.g. `"mlx5_0"`); `""` for TCP.
        metadata_server: `"P2PHANDSHAKE"` or a metadata server URL.
    """

    hostname: str = "127.0.0.1"
    protocol: str = "tcp"
    device_name: str = ""
    metadata_server: str = DEFAULT_METADATA_SERVER


def _import_engine_class() -> Any:
    try:
        from mooncake.engine import TransferEngine
    except ImportError as exc:
        raise MooncakeNotInstalledError(
            f"Mooncake's transfer engine is not available ({exc}); {INSTALL_HINT}"
        ) from exc
    return TransferEngine


def _validate(spec: TransferEngineSpec) -> None:
    # A bad metadata scheme makes Mooncake abort the whole process (glog FATAL): check first.
    if not spec.metadata_server.startswith(SUPPORTED_METADATA_PREFIXES):
        raise TransferEngineError(
            f"metadata_server {spec.metadata_server!r} is not supported; use one of "
            f"{list(SUPPORTED_METADATA_PREFIXES)}"
        )
    if not spec.hostname:
        raise TransferEngineError("hostname must not be empty")
    if not spec.protocol:
        raise TransferEngineError("protocol must not be empty")


def _overlaps(a_start: int, a_len: int, b_start: int, b_len: int) -> bool:
    return a_start < b_start + b_len and b_start < a_start + a_len


class MooncakeTransferEngine:
    """A started Mooncake `TransferEngine` plus the regions this process registered.

    Use `get_transfer_engine()`; constructing one directly starts a second engine.

    Raises:
        MooncakeNotInstalledError: `mooncake.engine` does not import.
        TransferEngineError: the spec is invalid or `initialize` failed.
    """

    def __init__(self, spec: TransferEngineSpec) -> None:
        _validate(spec)
        engine_cls = _import_engine_class()
        self.spec = spec
        self.raw = engine_cls()
        status = self.raw.initialize(
            spec.hostname, spec.metadata_server, spec.protocol, spec.device_name
        )
        if status != 0:
            raise TransferEngineError(
                f"Mooncake TransferEngine.initialize({spec.hostname!r}, "
                f"{spec.metadata_server!r}, {spec.protocol!r}, {spec.device_name!r}) "
                f"returned {status}"
            )
        if spec.metadata_server == DEFAULT_METADATA_SERVER:
            self.session_id = f"{spec.hostname}:{self.raw.get_rpc_port()}"
        else:
            self.session_id = spec.hostname
        self._lock = threading.Lock()
        self._regions: dict[int, int] = {}  # start address -> length in bytes
        logger.info(
            "Mooncake transfer engine up: session %s, protocol %s", self.session_id, spec.protocol
        )

    def register_memory(self, addr: int, length: int) -> None:
        """Register `length` bytes at `addr` for transfers (no-op if exactly that region is).

        Raises:
            TransferEngineError: overlaps another registered region, or Mooncake refused it.
        """
        if length <= 0:
            raise TransferEngineError(f"cannot register {length} bytes at {addr:#x}")
        with self._lock:
            if self._regions.get(addr) == length:
                return
            for start, size in self._regions.items():
                if _overlaps(addr, length, start, size):
                    raise TransferEngineError(
                        f"region {addr:#x}+{length} overlaps registered {start:#x}+{size}"
                    )
            status = self.raw.register_memory(addr, length)
            if status != 0:
                raise TransferEngineError(f"register_memory({addr:#x}, {length}) returned {status}")
            self._regions[addr] = length

    def unregister_memory(self, addr: int) -> None:
        """Deregister the region that starts at `addr` (no-op if none does)."""
        with self._lock:
            if self._regions.pop(addr, None) is None:
                return
            status = self.raw.unregister_memory(addr)
        if status != 0:
            logger.warning("Mooncake unregister_memory(%#x) returned %d", addr, status)

    def registered_regions(self) -> dict[int, int]:
        """A copy of the registered regions: start address -> length in bytes."""
        with self._lock:
            return dict(self._regions)

    def batch_read(
        self,
        session_id: str,
        local_addrs: Sequence[int],
        remote_addrs: Sequence[int],
        lengths: Sequence[int],
    ) -> None:
        """Copy `lengths[i]` bytes from the peer's `remote_addrs[i]` to `local_addrs[i]`.

        Blocks until done (the GIL is released meanwhile).

        Raises:
            TransferError: the transfer failed; which entries landed is unknown.
        """
        self._batch("read", session_id, local_addrs, remote_addrs, lengths)

    def batch_write(
        self,
        session_id: str,
        local_addrs: Sequence[int],
        remote_addrs: Sequence[int],
        lengths: Sequence[int],
    ) -> None:
        """Copy `lengths[i]` bytes from `local_addrs[i]` to the peer's `remote_addrs[i]`.

        Raises:
            TransferError: the transfer failed; which entries landed is unknown.
        """
        self._batch("write", session_id, local_addrs, remote_addrs, lengths)

    def _batch(
        self,
        op: str,
        session_id: str,
        local_addrs: Sequence[int],
        remote_addrs: Sequence[int],
        lengths: Sequence[int],
    ) -> None:
        if not (len(local_addrs) == len(remote_addrs) == len(lengths)):
            raise ValueError("local_addrs, remote_addrs and lengths differ in length")
        if not lengths:
            return
        call = (
            self.raw.batch_transfer_sync_read
            if op == "read"
            else (self.raw.batch_transfer_sync_write)
        )
        status = call(session_id, list(local_addrs), list(remote_addrs), list(lengths))
        if status < 0:
            raise TransferError(
                f"Mooncake batch {op} of {len(lengths)} entries ({sum(lengths)} bytes) "
                f"with {session_id} failed (status {status})",
                status,
            )


_engine: MooncakeTransferEngine | None = None
_engine_lock = threading.Lock()


def _request_amx_permission() -> None:
    # On x86 CPUs with AMX, a process must ask the kernel for the AMX tile state before using
    # it; torch and vLLM's CPU attention ask lazily, on first use. Once Mooncake's transfer
    # threads run, that late request is refused and the first AMX kernel dies with SIGILL
    # (seen with vLLM 0.32's CPU backend). Asking before the engine starts avoids it; it is a
    # no-op without torch, on other CPUs and when already granted.
    try:
        import torch
    except ImportError:
        return
    cpu = getattr(torch, "cpu", None)
    is_supported = getattr(cpu, "_is_amx_tile_supported", None)
    init_amx = getattr(cpu, "_init_amx", None)
    if callable(is_supported) and callable(init_amx) and is_supported() and not init_amx():
        logger.warning("could not enable AMX before starting Mooncake; AMX kernels may fail")


def _apply_tcp_timeouts(tcp_timeout_s: int | None) -> None:
    if tcp_timeout_s is None:
        return
    for name in TCP_TIMEOUT_ENV_VARS:
        os.environ.setdefault(name, str(max(1, int(tcp_timeout_s))))


def get_transfer_engine(
    hostname: str = "127.0.0.1",
    protocol: str = "tcp",
    device_name: str = "",
    metadata_server: str = DEFAULT_METADATA_SERVER,
    tcp_timeout_s: int | None = None,
) -> MooncakeTransferEngine:
    """The process-wide transfer engine, created on first call.

    Args:
        hostname: the address peers reach this host by.
        protocol: `"tcp"` (here), `"rdma"`, `"ascend"`, ...
        device_name: transport devices, `""` for TCP.
        metadata_server: `"P2PHANDSHAKE"` (default) or a metadata server URL.
        tcp_timeout_s: seconds after which a TCP transfer to a stalled peer fails; applied
            to Mooncake's `MC_TCP_*_TIMEOUT_SEC` unless the environment sets them. Only the
            first call's value counts.

    Raises:
        MooncakeNotInstalledError: `mooncake.engine` does not import.
        TransferEngineError: initialisation failed, or the engine exists with another spec.
    """
    global _engine
    spec = TransferEngineSpec(hostname, protocol, device_name, metadata_server)
    with _engine_lock:
        if _engine is None:
            _apply_tcp_timeouts(tcp_timeout_s)
            _request_amx_permission()
            _engine = MooncakeTransferEngine(spec)
        elif _engine.spec != spec:
            raise TransferEngineError(
                f"this process already runs a transfer engine with {_engine.spec}; "
                f"cannot start another with {spec}"
            )
        return _engine
