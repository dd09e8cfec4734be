"""`examples/pd_proxy.py` when a decode instance dies in the middle of its answer, and its log
lines about failing instances.

The proxy runs in this process; the prefill and decode instances are small HTTP servers that
answer as vLLM's do, the decode one closing its connection after its first event (what a
SIGKILLed `vllm serve` does to its streams). The client must get an error, never a response
that looks whole, and the proxy must log one line naming the decode instance, no traceback.
"""

from __future__ import annotations

import http.client
import importlib.util
import json
import logging
import socket
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
PROXY_PATH = EXAMPLES / "pd_proxy.py"
FIRST_EVENT = b'data: {"choices": [{"text": "Hello"}]}\n\n'


def load_proxy() -> Any:
    if str(EXAMPLES) not in sys.path:  # its sibling `pd_proxy_upstream`, as when run as a script
        sys.path.insert(0, str(EXAMPLES))
    spec = importlib.util.spec_from_file_location("pd_proxy_under_test", PROXY_PATH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


class Upstream(BaseHTTPRequestHandler):
    """Prefill: a one-token answer with `kv_transfer_params`. Decode: one streamed event, then
    the connection dies (no last chunk)."""

    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib name
        pass

    def do_POST(self) -> None:  # noqa: N802 - stdlib name
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if body["kv_transfer_params"].get("do_remote_decode"):
            data = json.dumps({"kv_transfer_params": {"remote_block_ids": [1]}}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.write(f"{len(FIRST_EVENT):x}\r\n".encode() + FIRST_EVENT + b"\r\n")
        self.wfile.flush()
        self.connection.shutdown(socket.SHUT_RDWR)
        self.close_connection = True


def serve(server: ThreadingHTTPServer) -> str:
    threading.Thread(target=server.serve_forever, daemon=True).start()
    host, port = server.server_address[:2]
    return f"http://{host}:{port}"


@pytest.fixture
def proxy_url() -> Iterator[tuple[str, str]]:
    pd_proxy = load_proxy()
    upstream = ThreadingHTTPServer(("127.0.0.1", 0), Upstream)
    upstream.daemon_threads = True
    url = serve(upstream)
    router = pd_proxy.Router([pd_proxy.Prefill(url)], [url])
    proxy = pd_proxy.ProxyServer(("127.0.0.1", 0), router, layerwise=False)
    try:
        yield serve(proxy), url
    finally:
        proxy.shutdown()
        upstream.shutdown()


def test_a_decode_dying_mid_stream_ends_the_request_with_an_error_and_one_line(
    proxy_url: tuple[str, str], caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    url, decode = proxy_url
    host, port = url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    body = {"model": "m", "prompt": "hi", "max_tokens": 8, "stream": True}
    with caplog.at_level(logging.DEBUG, logger="pd_proxy"):
        conn.request("POST", "/v1/completions", json.dumps(body).encode())
        response = conn.getresponse()
        assert response.status == 200  # streamed: the status went out with the first event
        received = b""
        with pytest.raises(http.client.IncompleteRead) as cut:
            while chunk := response.read1(65536):
                received += chunk
        received += cut.value.partial
    # What arrived: the first event, then an error event naming the decode instance; the body
    # never completes, so no client takes the cut output for a whole one.
    events = [e for e in received.split(b"\n\n") if e]
    assert events[0] + b"\n\n" == FIRST_EVENT
    error = json.loads(events[-1].removeprefix(b"data: "))["error"]
    assert decode in error["message"] and error["code"] == 502
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and decode in warnings[0], warnings
    assert "Traceback" not in capfd.readouterr().err


def test_failures_of_one_instance_cost_one_line_per_interval_and_one_on_recovery(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    load_proxy()
    import pd_proxy_upstream

    clock = [100.0]
    monkeypatch.setattr(pd_proxy_upstream.time, "monotonic", lambda: clock[0])
    peers = pd_proxy_upstream.PeerLog(interval_s=10.0)
    with caplog.at_level(logging.DEBUG, logger="pd_proxy"):
        for _ in range(50):  # a decode restarting: every request is refused
            peers.failed("http://decode:1", "upstream failed: http://decode:1: refused")
            clock[0] += 0.1
        peers.failed("http://other:2", "upstream failed: http://other:2: refused")
        clock[0] += 10.0
        peers.failed("http://decode:1", "upstream failed: http://decode:1: refused")
        peers.answered("http://decode:1")
        peers.answered("http://decode:1")  # answering as usual: nothing to say
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [
        "upstream failed: http://decode:1: refused",
        "upstream failed: http://other:2: refused",
        "upstream failed: http://decode:1: refused (and 49 more since the last such line)",
        "http://decode:1 answers again",
    ]


def test_a_client_that_resets_its_connection_leaves_no_traceback(
    proxy_url: tuple[str, str], capfd: pytest.CaptureFixture[str]
) -> None:
    import struct
    import time

    host, port = proxy_url[0].removeprefix("http://").split(":")
    with socket.create_connection((host, int(port))) as sock:
        sock.sendall(b"POST /v1/completions HTTP/1.1\r\n")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    time.sleep(0.5)  # the proxy's thread reads, gets the reset, and ends
    assert "Traceback" not in capfd.readouterr().err
