"""The P/D side channel: a small ZMQ request/reply service between connector workers.

`SideChannelServer` is a ROUTER socket served by one daemon thread (`utils/zmq_router.py`);
each request is decoded
into a `messages.Message`, handed to the owner's handler, and the handler's reply is sent back.
A frame that is not one of our messages is logged and dropped (no reply), a frame over
`MAX_MESSAGE_BYTES` makes ZMQ drop its sender's connection before buffering it, and a handler
error becomes a `Rejected` reply: a bad peer never takes the worker down.

`SideChannelClient` is a DEALER socket to one server. Calls are serialised by a lock and
bounded by a timeout; after a timeout the socket is thrown away, so a late reply can never be
read as the answer to the next call.

Sockets bind to the configured host (loopback by default), never to all interfaces unless the
user configures `0.0.0.0`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import msgspec
import zmq

from vllm_ascend.distributed.kv_transfer.kv_p2p.messages import (
    Message,
    Rejected,
    decode_message,
    encode_message,
)
from vllm_ascend.distributed.kv_transfer.utils.zmq_router import bind_router, serve_router
from vllm_ascend.logger import init_logger

__all__ = [
    "SideChannelClient",
    "SideChannelError",
    "SideChannelRejected",
    "SideChannelServer",
    "SideChannelTimeout",
    "MAX_MESSAGE_BYTES",
    "zmq_address",
]

logger = init_logger(__name__)

# Largest frame a server accepts, bytes. Our largest message, a `PushRequest`, carries one
# int per block of a request plus the agent's regions: kilobytes. ZMQ drops the connection of
# a peer that sends more, before buffering it, and the server keeps serving the others.
MAX_MESSAGE_BYTES = 4 << 20

_context_lock = threading.Lock()
_context: zmq.Context[zmq.Socket[bytes]] | None = None


def _zmq_context() -> zmq.Context[zmq.Socket[bytes]]:
    # One context per process for all side-channel sockets (its I/O thread is shared).
    global _context
    with _context_lock:
        if _context is None:
            _context = zmq.Context()
        return _context


def zmq_address(host: str, port: int) -> str:
    """`tcp://host:port`, with IPv6 hosts in brackets."""
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"tcp://{host}:{port}"


class SideChannelError(RuntimeError):
    """A side-channel call failed."""


class SideChannelTimeout(SideChannelError):
    """No reply within the timeout (peer dead, stopped, or not listening)."""


class SideChannelRejected(SideChannelError):
    """The peer answered `Rejected`."""


Handler = Callable[[Message], "Message | None"]


class SideChannelServer:
    """Serve side-channel requests on `tcp://host:port` from a daemon thread.

    Args:
        host: interface to bind (`"127.0.0.1"` by default in the connector config).
        port: TCP port.
        handler: called on the server thread with each decoded message; returns the reply
            (None: no reply). Exceptions become a `Rejected` reply.
        name: for log lines and the thread name.
        max_message_bytes: a peer that sends a larger frame is disconnected (no reply).

    Attributes:
        dropped: number of frames that were not valid messages.
        served: number of messages handed to the handler.
    """

    def __init__(
        self,
        host: str,
        port: int,
        handler: Handler,
        name: str = "side-channel",
        max_message_bytes: int = MAX_MESSAGE_BYTES,
    ) -> None:
        self.address = zmq_address(host, port)
        self.max_message_bytes = max_message_bytes
        self.name = name
        self._handler = handler
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._socket: zmq.Socket[bytes] | None = None
        self.dropped = 0
        self.served = 0

    def start(self) -> SideChannelServer:
        """Bind and start serving.

        Raises:
            SideChannelError: the address cannot be bound (port in use, bad host).
        """
        try:
            sock = bind_router(_zmq_context(), self.address, self.max_message_bytes)
        except zmq.ZMQError as exc:
            raise SideChannelError(
                f"{self.name}: cannot bind the side channel to {self.address}: {exc} "
                "(set kv_port / side_channel_host in the KV transfer config)"
            ) from exc
        self._socket = sock
        self._thread = threading.Thread(target=self._serve, name=self.name, daemon=True)
        self._thread.start()
        logger.info("%s serving on %s", self.name, self.address)
        return self

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop the thread and close the socket."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
            self._thread = None

    def _serve(self) -> None:
        assert self._socket is not None
        serve_router(self._socket, self._stop, self._respond, self.name, logger)

    def _respond(self, frames: list[bytes]) -> list[bytes] | None:
        reply = self._handle(frames)
        if reply is None:
            return None
        # Echo the envelope (identity, and the empty delimiter of a REQ peer).
        return [*frames[:-1], encode_message(reply)]

    def _handle(self, frames: list[bytes]) -> Message | None:
        if len(frames) < 2:
            self._drop(frames, "no identity frame")
            return None
        try:
            message = decode_message(frames[-1])
        except msgspec.DecodeError as exc:
            self._drop(frames, str(exc))
            return None
        self.served += 1
        try:
            return self._handler(message)
        except Exception as exc:  # a handler bug must not kill the server thread
            logger.exception("%s: handler failed on %s", self.name, type(message).__name__)
            return Rejected(reason=f"{type(exc).__name__}: {exc}")

    def _drop(self, frames: list[bytes], why: str) -> None:
        self.dropped += 1
        size = sum(len(f) for f in frames)
        logger.warning(
            "%s: dropped a malformed side-channel message (%d frames, %d bytes): %s",
            self.name,
            len(frames),
            size,
            why,
        )


class SideChannelClient:
    """Request/reply calls to one `SideChannelServer`.

    Args:
        address: `tcp://host:port` of the server.
        timeout_s: default bound on each call, seconds.
    """

    def __init__(self, address: str, timeout_s: float) -> None:
        self.address = address
        self.timeout_s = timeout_s
        self._lock = threading.Lock()
        self._socket: zmq.Socket[bytes] | None = None

    def call(self, message: Message, timeout_s: float | None = None) -> Message:
        """Send `message` and return the reply.

        Raises:
            SideChannelTimeout: no reply within the timeout.
            SideChannelRejected: the server replied `Rejected`.
            SideChannelError: the reply was not a valid message.
        """
        timeout = self.timeout_s if timeout_s is None else timeout_s
        with self._lock:
            sock = self._connected()
            sock.send(encode_message(message))
            if not sock.poll(int(timeout * 1000), zmq.POLLIN):
                self._discard()
                raise SideChannelTimeout(
                    f"no reply from {self.address} to {type(message).__name__} within {timeout:g} s"
                )
            data = sock.recv()
        try:
            reply = decode_message(data)
        except msgspec.DecodeError as exc:
            raise SideChannelError(f"invalid reply from {self.address}: {exc}") from exc
        if isinstance(reply, Rejected):
            raise SideChannelRejected(f"{self.address} rejected the request: {reply.reason}")
        return reply

    def close(self) -> None:
        """Close the socket, unless a call is using it (it closes with the process then):
        shutdown must not wait for a call to a dead peer to time out."""
        if self._lock.acquire(blocking=False):
            try:
                self._discard()
            finally:
                self._lock.release()

    def _connected(self) -> zmq.Socket[bytes]:
        if self._socket is None:
            sock = _zmq_context().socket(zmq.DEALER)
            sock.setsockopt(zmq.LINGER, 0)
            sock.connect(self.address)
            self._socket = sock
        return self._socket

    def _discard(self) -> None:
        if self._socket is not None:
            self._socket.close(0)
            self._socket = None
