"""How `examples/pd_proxy.py` talks to the prefill and decode instances, and logs their failures.

- `send` / `post` / `post_json`: one HTTP request to an instance; `UpstreamError` (naming it)
  when it refuses, resets or cuts its answer short;
- `chunks`: an answer's body as it arrives (`UpstreamError` when it is cut);
- `PeerLog`: the warnings about failing instances, per instance, never one per request.

Standard library only.
"""

from __future__ import annotations

import http.client
import json
import logging
import threading
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

__all__ = ["PeerLog", "UpstreamError", "chunks", "post", "post_json", "send"]

logger = logging.getLogger("pd_proxy")

TIMEOUT_S = 600.0
CHUNK_BYTES = 64 * 1024


class UpstreamError(Exception):
    """An instance failed to answer (refused, reset, cut mid-response); names it."""

    def __init__(self, peer: str, exc: BaseException) -> None:
        super().__init__(f"{peer}: {type(exc).__name__}: {exc}")
        self.peer = peer


# An instance that dies: a reset or refused connection, a cut answer (`IncompleteRead`).
UPSTREAM_ERRORS = (OSError, http.client.HTTPException, ValueError)


def post(url: str, path: str, body: dict[str, Any]) -> http.client.HTTPResponse:
    """POST JSON; returns the open response (the caller reads or streams it)."""
    return send(url, "POST", path, json.dumps(body).encode())


def send(url: str, method: str, path: str, data: bytes | None) -> http.client.HTTPResponse:
    """One request (JSON body, if any); returns the open response."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=TIMEOUT_S)
    try:
        conn.request(method, path, data, {"Content-Type": "application/json"})
        return conn.getresponse()
    except UPSTREAM_ERRORS as exc:
        raise UpstreamError(url, exc) from exc


def post_json(url: str, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    response = post(url, path, body)
    try:
        data = response.read()
    except UPSTREAM_ERRORS as exc:
        raise UpstreamError(url, exc) from exc
    try:
        return response.status, json.loads(data or b"{}")
    except json.JSONDecodeError:
        return response.status, {"error": data.decode(errors="replace")}


class PeerLog:
    """Warnings about failing instances: one line when an instance starts failing, then at most
    one per `interval_s` (with how many were left out), one line when it answers again; never
    one per request. Thread-safe."""

    def __init__(self, interval_s: float = 10.0) -> None:
        self.interval_s = interval_s
        self._lock = threading.Lock()
        self._down: dict[str, tuple[float, int]] = {}  # peer -> (last line, left out since)

    def failed(self, peer: str, message: str) -> None:
        now = time.monotonic()
        with self._lock:
            last, left_out = self._down.get(peer, (-self.interval_s, 0))
            if now - last < self.interval_s:
                self._down[peer] = (last, left_out + 1)
                return
            self._down[peer] = (now, 0)
        more = f" (and {left_out} more since the last such line)" if left_out else ""
        logger.warning("%s%s", message, more)

    def answered(self, peer: str) -> None:
        with self._lock:
            was_down = self._down.pop(peer, None) is not None
        if was_down:
            logger.warning("%s answers again", peer)


def chunks(response: http.client.HTTPResponse, peer: str) -> Iterator[bytes]:
    """The response body as it arrives; `UpstreamError` naming `peer` when it is cut short."""
    while True:
        try:
            chunk = response.read1(CHUNK_BYTES)
        except UPSTREAM_ERRORS as exc:
            raise UpstreamError(peer, exc) from exc
        if not chunk:
            return
        yield chunk
