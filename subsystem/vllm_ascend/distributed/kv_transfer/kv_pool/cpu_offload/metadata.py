"""The metadata server between the CPU offload connector's scheduler side and worker side.

One `MetadataServer` per engine runs a thread in the scheduler's process. It owns the
`CPUKVCacheManager` and answers requests on a ZMQ ROUTER socket; the scheduler side and every
worker talk to it through a `MetadataClient`. Messages: `messages.py`.

Direct calls: a client in the server's own process (the scheduler side always; the worker too
with TP=1 and the uniproc executor) calls the server's dispatch directly instead of sending a
message, which costs microseconds instead of a ZMQ round trip through two threads. A lock
serialises those calls with the server thread's, so the manager still sees one caller at a
time. Only workers in other processes go through ZMQ.

Client identities: a ROUTER socket routes replies by the peer's identity and, by default,
rejects a second peer that presents an identity already in use. Identities derived from the
process id alone (`worker-<pid>`) collide for two clients of one process, the second client's
requests are dropped, and its first blocking receive waits forever (the seed bug). Every
`MetadataClient` therefore gets an identity unique to the client object (`client_identity`),
and every receive is bounded by a timeout that turns a dead or unreachable server into
`MetadataServerError`.

Bound: the ROUTER drops (disconnects) a peer that sends a frame over `MAX_MESSAGE_BYTES`, so a
stray or hostile peer cannot make the server buffer an arbitrary amount; the server serves on.
The socket and its serve loop: `utils/zmq_router.py`.
"""

from __future__ import annotations

import itertools
import os
import threading
import time
import uuid
from dataclasses import asdict
from typing import Any

import msgspec
import zmq

from vllm_ascend.distributed.kv_transfer.kv_pool.cpu_offload.cpu_kv_cache_manager import (
    CPUKVCacheManager,
)
from vllm_ascend.distributed.kv_transfer.kv_pool.cpu_offload.messages import (
    Acquire,
    Body,
    Commit,
    Discard,
    GetStats,
    Lookup,
    MetadataServerError,
    Register,
    Reply,
    Request,
    Reset,
    StepDone,
    StoreRequest,
)
from vllm_ascend.distributed.kv_transfer.utils.zmq_router import bind_router, serve_router
from vllm_ascend.logger import init_logger

__all__ = [
    "MAX_MESSAGE_BYTES",
    "Acquire",
    "Commit",
    "Discard",
    "GetStats",
    "Lookup",
    "MetadataClient",
    "MetadataServer",
    "MetadataServerError",
    "Register",
    "Reset",
    "StepDone",
    "StoreRequest",
    "client_identity",
    "local_server",
]

logger = init_logger(__name__)

# Largest frame the server accepts. The largest real message is a Lookup, Acquire or Commit of
# one long prompt: ~35 bytes per block hash, so a 1M-token prompt of 16-token blocks is ~2.3 MB.
MAX_MESSAGE_BYTES = 64 << 20

# Servers started in this process, by address, with the pid that started them (a forked child
# inherits the dict but not the server thread).
_LOCAL_SERVERS: dict[str, tuple[int, MetadataServer]] = {}
_LOCAL_LOCK = threading.Lock()


def local_server(address: str) -> MetadataServer | None:
    """The running server of this process bound to `address`, if any."""
    with _LOCAL_LOCK:
        found = _LOCAL_SERVERS.get(address)
    if found is None or found[0] != os.getpid() or not found[1].running:
        return None
    return found[1]


def client_identity(role: str) -> bytes:
    """A ZMQ identity unique to one client object: role, process id and a random suffix.

    The random part is what keeps two clients of one process (scheduler and worker with
    TP=1 and the uniproc executor) apart.
    """
    return f"{role}-{os.getpid()}-{uuid.uuid4().hex[:12]}".encode()


# ---- server --------------------------------------------------------------------------------


class MetadataServer:
    """Serve a `CPUKVCacheManager` over a ZMQ ROUTER socket from a background thread.

    Args:
        address: ZMQ endpoint to bind (`ipc://...` or `tcp://127.0.0.1:PORT`).
        manager: the manager the server owns from now on.
        bytes_per_block: the scheduler's view of one block's size on a worker, bytes; used to
            size the host pool and reported to workers.

    Raises:
        MetadataServerError: from `start()`, when the address cannot be bound.
    """

    def __init__(self, address: str, manager: CPUKVCacheManager, bytes_per_block: int) -> None:
        self.address = address
        self.manager = manager
        self.bytes_per_block = bytes_per_block
        self._workers: dict[int, int] = {}
        self._worker_stats = {"loaded_blocks": 0, "load_failed_blocks": 0}
        self._stop = threading.Event()
        self._ready = threading.Event()
        # Serialises the server thread's dispatch with direct calls from this process.
        self._dispatch_lock = threading.Lock()
        self._bind_error: BaseException | None = None
        self._thread = threading.Thread(
            target=self._run, name="cpu-offload-metadata-server", daemon=True
        )
        self._encoder = msgspec.msgpack.Encoder()
        self._decoder = msgspec.msgpack.Decoder(Request)

    def start(self, timeout_s: float = 10.0) -> MetadataServer:
        """Bind and start serving; returns once the socket is bound."""
        self._thread.start()
        if not self._ready.wait(timeout_s):
            raise MetadataServerError(f"metadata server did not bind {self.address} in time")
        if self._bind_error is not None:
            raise MetadataServerError(
                f"cannot bind the CPU offload metadata server to {self.address}: {self._bind_error}"
            ) from self._bind_error
        with _LOCAL_LOCK:
            _LOCAL_SERVERS[self.address] = (os.getpid(), self)
        return self

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop the thread and close the socket. Idempotent."""
        with _LOCAL_LOCK:
            if _LOCAL_SERVERS.get(self.address, (0, None))[1] is self:
                del _LOCAL_SERVERS[self.address]
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout_s)

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def _run(self) -> None:
        ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context.instance()
        try:
            sock = bind_router(ctx, self.address, MAX_MESSAGE_BYTES)
        except zmq.ZMQError as exc:
            self._bind_error = exc
            self._ready.set()
            return
        self._ready.set()
        logger.info("CPU offload metadata server listening on %s", self.address)
        serve_router(sock, self._stop, self._respond, "CPU offload metadata server", logger)

    def _respond(self, frames: list[bytes]) -> list[bytes]:
        identity, payload = frames[0], frames[-1]
        return [identity, self._handle(payload)]

    def _handle(self, payload: bytes) -> bytes:
        try:
            request = self._decoder.decode(payload)
        except msgspec.DecodeError as exc:
            return self._encoder.encode(Reply(seq=-1, error=f"undecodable request: {exc}"))
        try:
            with self._dispatch_lock:
                value = self._dispatch(request.body)
        except Exception as exc:  # the reply carries it to the caller, the server lives on
            logger.exception("metadata server failed on %s", type(request.body).__name__)
            return self._encoder.encode(
                Reply(seq=request.seq, error=f"{type(exc).__name__}: {exc}")
            )
        return self._encoder.encode(Reply(seq=request.seq, value=value))

    def call_direct(self, body: Body) -> Any:
        """Answer `body` in the caller's thread, as the server thread would (a `MetadataClient`
        in this process uses it instead of ZMQ).

        Raises:
            MetadataServerError: the request failed; the message names the exception.
        """
        try:
            with self._dispatch_lock:
                return self._dispatch(body)
        except Exception as exc:
            logger.exception("metadata server failed on %s", type(body).__name__)
            raise MetadataServerError(
                f"CPU offload metadata server at {self.address} rejected "
                f"{type(body).__name__}: {type(exc).__name__}: {exc}"
            ) from exc

    def _dispatch(self, body: Body) -> Any:
        m = self.manager
        if isinstance(body, Lookup):
            return m.lookup(body.block_hashes)
        if isinstance(body, Acquire):
            return m.acquire(body.owner, body.block_hashes)
        if isinstance(body, Commit):
            for owner in body.release:
                m.release(owner)
            skipped_before = m.counters.store_skipped_blocks
            allocations = [m.allocate(s.block_hashes) for s in body.stores]
            return [allocations, m.counters.store_skipped_blocks - skipped_before]
        if isinstance(body, StepDone):
            m.complete(body.stored, body.rank, ok=True)
            m.complete(body.store_failed, body.rank, ok=False)
            self._worker_stats["loaded_blocks"] += body.loaded_blocks
            self._worker_stats["load_failed_blocks"] += body.load_failed_blocks
            return None
        if isinstance(body, Register):
            return self._register(body)
        if isinstance(body, GetStats):
            return self.stats()
        if isinstance(body, Reset):
            return m.reset()
        if isinstance(body, Discard):
            return m.discard(body.block_hashes)
        raise TypeError(f"unknown request {type(body).__name__}")

    def _register(self, body: Register) -> int:
        if body.world_size != self.manager.world_size:
            raise ValueError(
                f"worker {body.rank} reports world_size={body.world_size}, "
                f"the scheduler side expects {self.manager.world_size}"
            )
        self._workers[body.rank] = body.bytes_per_block
        return self.manager.num_blocks

    def stats(self) -> dict[str, int]:
        """Counters and gauges of the manager, plus worker-reported load counts (summed over
        workers) and the number of registered workers."""
        out = asdict(self.manager.stats())
        out.update(self._worker_stats)
        out["registered_workers"] = len(self._workers)
        out["bytes_per_block"] = self.bytes_per_block
        return out


# ---- client --------------------------------------------------------------------------------


class MetadataClient:
    """A DEALER connection to a `MetadataServer`, with a bounded wait on every call.

    Args:
        address: the server's ZMQ endpoint.
        timeout_s: bound on each `call`, seconds.
        role: a label for the identity and for error messages (`"scheduler"`, `"worker0"`).
        identity: override the unique identity (tests use it to reproduce a collision).
        direct: call a server of this process directly (see the module docstring); False
            always goes through ZMQ (tests and benchmarks of the wire path).

    Thread-safe: calls are serialised by a lock.
    """

    def __init__(
        self,
        address: str,
        timeout_s: float,
        role: str,
        *,
        identity: bytes | None = None,
        direct: bool = True,
    ) -> None:
        self.address = address
        self.timeout_s = timeout_s
        self.role = role
        self.identity = identity if identity is not None else client_identity(role)
        self.direct = direct
        self._lock = threading.Lock()
        self._seq = itertools.count()
        self._encoder = msgspec.msgpack.Encoder()
        self._decoder = msgspec.msgpack.Decoder(Reply)
        self._sock: zmq.Socket[bytes] | None = None

    def _socket(self) -> zmq.Socket[bytes]:
        if self._sock is None:
            sock: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.DEALER)
            sock.setsockopt(zmq.IDENTITY, self.identity)
            sock.setsockopt(zmq.LINGER, 0)
            sock.setsockopt(zmq.SNDTIMEO, int(self.timeout_s * 1000))
            sock.connect(self.address)
            self._sock = sock
        return self._sock

    def call(self, body: Body) -> Any:
        """Send `body` and wait for its reply.

        Returns:
            The reply's value (type per message, see the message classes).

        Raises:
            MetadataServerError: no reply within `timeout_s` (server dead, not started, or
                unreachable), or the server answered with an error.
        """
        server = local_server(self.address) if self.direct else None
        if server is not None:
            return server.call_direct(body)
        with self._lock:
            sock = self._socket()
            seq = next(self._seq)
            what = type(body).__name__
            try:
                sock.send(self._encoder.encode(Request(seq=seq, body=body)))
            except zmq.Again:
                raise self._timeout(what) from None
            deadline = time.monotonic() + self.timeout_s
            while True:
                # Replies to earlier calls that timed out may still arrive: skip them by seq.
                left_ms = max(0, int((deadline - time.monotonic()) * 1000))
                if not sock.poll(left_ms, zmq.POLLIN):
                    raise self._timeout(what)
                reply = self._decoder.decode(sock.recv())
                if reply.seq == seq:
                    break
                self._note_unawaited(reply)
            if reply.error is not None:
                raise MetadataServerError(
                    f"CPU offload metadata server at {self.address} rejected {what}: {reply.error}"
                )
            return reply.value

    def send(self, body: Body) -> None:
        """Send `body` without waiting for its reply (a server in this process answers it
        directly, in this thread, as `call` does).

        For messages whose answer the caller does not need (`StepDone`): the worker's step then
        does not wait for the scheduler's process to take the GIL and answer. Replies of
        earlier sends are read and dropped here and in `call`; a server-side error in one is
        logged then (the server logs it too, with its traceback).

        Raises:
            MetadataServerError: the message could not be queued within `timeout_s`, or a
                server in this process rejected it.
        """
        server = local_server(self.address) if self.direct else None
        if server is not None:
            server.call_direct(body)
            return
        with self._lock:
            sock = self._socket()
            while sock.poll(0, zmq.POLLIN):
                self._note_unawaited(self._decoder.decode(sock.recv()))
            try:
                sock.send(self._encoder.encode(Request(seq=next(self._seq), body=body)))
            except zmq.Again:
                raise self._timeout(type(body).__name__) from None

    def _note_unawaited(self, reply: Reply) -> None:
        # A reply nobody waits for: of a `send`, or of a `call` that timed out.
        if reply.error is not None:
            logger.warning(
                "CPU offload metadata server at %s rejected a message from %s: %s",
                self.address,
                self.role,
                reply.error,
            )

    def _timeout(self, what: str) -> MetadataServerError:
        return MetadataServerError(
            f"CPU offload metadata server at {self.address} did not answer {what} from "
            f"{self.role} within {self.timeout_s:g} s (is the engine's scheduler alive?)"
        )

    def close(self) -> None:
        """Close the socket. Idempotent; a later call reconnects."""
        with self._lock:
            if self._sock is not None:
                self._sock.close(linger=0)
                self._sock = None
