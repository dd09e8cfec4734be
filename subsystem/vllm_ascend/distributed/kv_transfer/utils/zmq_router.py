"""The ZMQ ROUTER request/reply loop shared by the connectors' small services.

`bind_router` opens a ROUTER socket with a bound on frame size (ZMQ disconnects a peer that
sends a larger frame, before buffering it, and keeps serving the others); `serve_router` runs
the receive/answer loop on the caller's thread until a stop event is set, waking every
`POLL_MS` to check it. The P/D side channel (`kv_p2p/side_channel.py`) and the CPU offload
metadata server (`cpu_offload/metadata.py`) each run one on a daemon thread.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import zmq

__all__ = ["POLL_MS", "bind_router", "serve_router"]

# How often a serving thread wakes up to check its stop event, in milliseconds.
POLL_MS = 100


def bind_router(
    context: zmq.Context[zmq.Socket[bytes]], address: str, max_message_bytes: int
) -> zmq.Socket[bytes]:
    """A ROUTER socket bound to `address` (no linger; frames over `max_message_bytes`, bytes,
    disconnect their sender).

    Raises:
        zmq.ZMQError: `address` cannot be bound (port in use, bad host); the socket is closed.
    """
    sock = context.socket(zmq.ROUTER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.MAXMSGSIZE, max_message_bytes)
    try:
        sock.bind(address)
    except zmq.ZMQError:
        sock.close(0)
        raise
    return sock


def serve_router(
    sock: zmq.Socket[bytes],
    stop: threading.Event,
    respond: Callable[[list[bytes]], list[bytes] | None],
    name: str,
    log: logging.Logger,
) -> None:
    """Answer each multipart request on `sock` with `respond(frames)` until `stop` is set,
    then close `sock`.

    Args:
        sock: a bound ROUTER socket (`bind_router`); this loop owns it from now on.
        stop: set by the owner to end the loop (within `POLL_MS`).
        respond: the reply frames for a request's frames, envelope (identity) first; None
            sends nothing. It must not raise: an exception ends the loop.
        name: the service's name, for the log line of a socket error.
        log: where a socket error that ends the loop is logged (not one after `stop`).
    """
    poller = zmq.Poller()
    poller.register(sock, zmq.POLLIN)
    try:
        while not stop.is_set():
            if not poller.poll(POLL_MS):
                continue
            reply = respond(sock.recv_multipart())
            if reply is not None:
                sock.send_multipart(reply)
    except zmq.ZMQError as exc:
        if not stop.is_set():
            log.error("%s stopped after a socket error: %s", name, exc)
    finally:
        sock.close(0)
