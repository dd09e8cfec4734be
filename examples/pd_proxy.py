"""A small prefill/decode proxy for vLLM's OpenAI server with the Mooncake connectors.

Pull mode (`MooncakeConnectorV1`), the flow of vLLM's own disaggregation examples:
1. send the request to a prefill instance with `max_tokens=1`, no streaming, and
   `kv_transfer_params={"do_remote_decode": true}`;
2. send the original request to a decode instance with the `kv_transfer_params` the prefill
   answer carries (where the prompt's KV blocks are);
3. stream the decode instance's answer back to the client.

Layerwise mode (`MooncakeLayerwiseConnector`, `--layerwise`): both requests go out at once,
sharing a fresh `transfer_id`; the decode request names the prefill instance's side channel
(`--prefill-kv HOST:PORT`, its `kv_port`), and the prefill instance pushes each layer as soon
as it is computed.

Parameters are made per request and never reused. `/v1/models`, `/tokenize` and `/detokenize`
go to a decode instance unchanged. An instance that fails is logged by `PeerLog` (one line when
it starts failing, then at most one per 10 s, one when it answers again), and an answer cut
short ends the client's request with an error, never as a whole response. In pull mode the
prefill instance's prefix hits (tokens) reach the client as the `X-Prefill-Cached-Tokens`
response header; the response's own `usage.prompt_tokens_details.cached_tokens` is the decode
instance's (tokens it did not compute: local hits plus tokens loaded). Standard library only;
`pd_proxy_upstream.py` beside it talks to the instances.

Usage::

    python examples/pd_proxy.py --port 8000 \\
        --prefill http://127.0.0.1:8100 --decode http://127.0.0.1:8200
    python examples/pd_proxy.py --port 8000 --layerwise --prefill-kv 127.0.0.1:20001 \\
        --prefill http://127.0.0.1:8100 --decode http://127.0.0.1:8200

Several `--prefill`/`--decode` URLs are used round-robin (pair `--prefill-kv` with each
`--prefill` in layerwise mode).
"""

from __future__ import annotations

import argparse
import http.client
import itertools
import json
import logging
import sys
import threading
import uuid
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# The sibling module (found beside this file when it runs as a script).
from pd_proxy_upstream import PeerLog, UpstreamError, chunks, post, post_json, send

logger = logging.getLogger("pd_proxy")

ROUTES = ("/v1/completions", "/v1/chat/completions")
# Answered by a decode instance as they are (same model and tokenizer on every instance): what
# clients such as `vllm bench serve` ask before they send requests.
PASSTHROUGH_GET = ("/v1/models",)
PASSTHROUGH_POST = ("/tokenize", "/detokenize")
TIMEOUT_S = 600.0  # the layerwise prefill's wait (the upstream calls have their own)
# The prefill instance's own prefix hits (tokens), on each pull-mode answer that has them.
PREFILL_CACHED_HEADER = "X-Prefill-Cached-Tokens"


@dataclass(frozen=True)
class Prefill:
    """A prefill instance: its OpenAI URL and (layerwise) its side channel."""

    url: str
    kv_host: str = ""
    kv_port: int = 0
    tp_size: int = 1


def prefill_body(body: dict[str, Any], kv_transfer_params: dict[str, Any]) -> dict[str, Any]:
    """The request for the prefill instance: one token, no streaming, `kv_transfer_params`."""
    request = dict(body)
    request.update(max_tokens=1, stream=False, kv_transfer_params=kv_transfer_params)
    if "max_completion_tokens" in request:
        request["max_completion_tokens"] = 1
    request.pop("stream_options", None)
    return request


def decode_body(body: dict[str, Any], kv_transfer_params: dict[str, Any]) -> dict[str, Any]:
    """The original request plus the parameters that locate the prompt's KV."""
    return {**body, "kv_transfer_params": kv_transfer_params}


def split_prefill_params(params: dict[str, Any]) -> tuple[dict[str, Any], int | None]:
    """`(parameters for the decode instance, the prefill instance's prefix hits in tokens)`.

    vLLM adds `remote_prefill_cached_tokens` (the prefill side's prefix hits) to the prefill
    answer's `kv_transfer_params`; a decode instance that receives it replaces its own
    `num_cached_tokens` (local hits plus the tokens it loaded) with that figure in the
    request's output (vLLM 0.32 `OutputProcessor`). Taken out here, it reaches the client as
    the `X-Prefill-Cached-Tokens` header instead, and the decode figure stays the decode's."""
    to_decode = dict(params)
    cached = to_decode.pop("remote_prefill_cached_tokens", None)
    return to_decode, cached if isinstance(cached, int) else None


def layerwise_params(prefill: Prefill) -> tuple[dict[str, Any], dict[str, Any]]:
    """Fresh `(prefill, decode)` parameters sharing a new `transfer_id`."""
    transfer_id = uuid.uuid4().hex
    return (
        {"do_remote_decode": True, "transfer_id": transfer_id},
        {
            "do_remote_prefill": True,
            "transfer_id": transfer_id,
            "remote_host": prefill.kv_host,
            "remote_port": prefill.kv_port,
            "tp_size": prefill.tp_size,
        },
    )


class Router:
    """Round-robin choice of instances; thread-safe."""

    def __init__(self, prefills: list[Prefill], decodes: list[str]) -> None:
        self._prefills = itertools.cycle(prefills)
        self._decodes = itertools.cycle(decodes)
        self._lock = threading.Lock()

    def pick(self) -> tuple[Prefill, str]:
        with self._lock:
            return next(self._prefills), next(self._decodes)


class ProxyHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: ProxyServer

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib name
        logger.debug(format, *args)

    def do_GET(self) -> None:  # noqa: N802 - stdlib name
        if self.path == "/health":
            self._send_json(200, {"status": "ok"})
        elif self.path in PASSTHROUGH_GET:
            self._pass_through("GET", None)
        else:
            self._send_json(404, {"error": f"no route {self.path}"})

    def do_POST(self) -> None:  # noqa: N802 - stdlib name
        if self.path in PASSTHROUGH_POST:
            try:
                length = int(self.headers.get("Content-Length", "0"))
            except ValueError:
                self._send_json(400, {"error": "invalid Content-Length"})
                return
            self._pass_through("POST", self.rfile.read(length))
            return
        if self.path not in ROUTES:
            self._send_json(404, {"error": f"no route {self.path}"})
            return
        try:
            length = int(self.headers.get("Content-Length", "0"))
            body = json.loads(self.rfile.read(length) or b"{}")
        except (ValueError, json.JSONDecodeError) as exc:
            self._send_json(400, {"error": f"invalid JSON body: {exc}"})
            return
        try:
            if self.server.layerwise:
                self._layerwise(body)
            else:
                self._pull(body)
        except UpstreamError as exc:
            self._upstream_failed(exc)

    def _upstream_failed(self, exc: UpstreamError) -> None:
        """An instance failed before the answer began: a 502 naming it (and `PeerLog`)."""
        self.server.peers.failed(exc.peer, f"{self.path}: upstream failed: {exc}")
        self._send_json(502, {"error": f"upstream failed: {exc}"})

    def _pass_through(self, method: str, data: bytes | None) -> None:
        _, decode = self.server.router.pick()
        try:
            self._relay(send(decode, method, self.path, data), decode)
        except UpstreamError as exc:
            self._upstream_failed(exc)

    def _pull(self, body: dict[str, Any]) -> None:
        prefill, decode = self.server.router.pick()
        status, answer = post_json(
            prefill.url, self.path, prefill_body(body, {"do_remote_decode": True})
        )
        if status != 200:
            self._send_json(status, answer)
            return
        self.server.peers.answered(prefill.url)
        params = answer.get("kv_transfer_params")
        if not params:
            self._send_json(502, {"error": "the prefill instance returned no kv_transfer_params"})
            return
        params, prefill_cached = split_prefill_params(params)
        logger.info(
            "prefill %s -> decode %s: remote_request_id=%s blocks=%d prefill_cached_tokens=%s",
            prefill.url,
            decode,
            params.get("remote_request_id"),
            len(params.get("remote_block_ids") or ()),
            prefill_cached,
        )
        headers = {} if prefill_cached is None else {PREFILL_CACHED_HEADER: str(prefill_cached)}
        self._relay(post(decode, self.path, decode_body(body, params)), decode, headers)

    def _layerwise(self, body: dict[str, Any]) -> None:
        prefill, decode = self.server.router.pick()
        to_prefill, to_decode = layerwise_params(prefill)
        outcome: dict[str, Any] = {}

        def run_prefill() -> None:
            try:
                outcome["prefill"] = post_json(
                    prefill.url, self.path, prefill_body(body, to_prefill)
                )
            except UpstreamError as exc:
                outcome["prefill"] = (502, {"error": str(exc)})

        thread = threading.Thread(target=run_prefill, daemon=True)
        thread.start()
        logger.info(
            "prefill %s + decode %s: transfer_id=%s", prefill.url, decode, to_prefill["transfer_id"]
        )
        self._relay(post(decode, self.path, decode_body(body, to_decode)), decode)
        thread.join(TIMEOUT_S)
        status = outcome.get("prefill", (0, {}))[0]
        if status != 200:
            logger.warning("transfer %s: prefill answered %s", to_prefill["transfer_id"], status)

    def _relay(
        self,
        response: http.client.HTTPResponse,
        peer: str,
        headers: dict[str, str] | None = None,
    ) -> None:
        """Stream `peer`'s response to the client (chunked), with extra `headers`. When `peer`
        stops mid-response (killed: `IncompleteRead`, a reset), the client gets an error event
        (an event stream) and a response that never completes (no last chunk, connection
        closed): no client takes the cut output for a whole one."""
        self.send_response(response.status)
        content_type = response.getheader("Content-Type", "application/json")
        self.send_header("Content-Type", content_type)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        sent = 0
        try:
            for chunk in chunks(response, peer):
                self._write_chunk(chunk)
                sent += len(chunk)
            self._write_chunk(b"")
            self.server.peers.answered(peer)
        except UpstreamError as exc:
            self.server.peers.failed(peer, (
                f"{self.path}: {peer} stopped after {sent} bytes of its answer "
                f"({exc.__cause__!r}); the client's request ends with an error"))  # fmt: skip
            self._end_cut(content_type, f"upstream {exc} after {sent} bytes")
        except OSError as exc:  # the client is gone
            logger.debug("%s: client gone mid-response: %s", self.path, exc)
            self.close_connection = True

    def _write_chunk(self, chunk: bytes) -> None:
        """One chunk of a chunked body; the empty chunk ends the body."""
        tail = b"\r\n" if chunk else b"\r\n\r\n"
        self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + tail)
        self.wfile.flush()

    def _end_cut(self, content_type: str, reason: str) -> None:
        """An error event (vLLM's shape) for an event stream; close without the last chunk."""
        self.close_connection = True
        if not content_type.startswith("text/event-stream"):
            return
        event = {"error": {"message": reason, "type": "BadGateway", "code": 502}}
        try:
            self._write_chunk(f"data: {json.dumps(event)}\n\n".encode())
        except OSError:  # the client is gone too
            return

    def _send_json(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class ProxyServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], router: Router, layerwise: bool) -> None:
        super().__init__(address, ProxyHandler)
        self.router = router
        self.layerwise = layerwise
        self.peers = PeerLog()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that resets its connection is no error of ours: no traceback."""
        if isinstance(sys.exc_info()[1], ConnectionError):
            logger.debug("client %s reset its connection", client_address)
            return
        super().handle_error(request, client_address)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--prefill", action="append", required=True, help="prefill URL")
    parser.add_argument("--decode", action="append", required=True, help="decode URL")
    parser.add_argument("--layerwise", action="store_true", help="MooncakeLayerwiseConnector")
    parser.add_argument(
        "--prefill-kv", action="append", default=[], help="HOST:PORT of a prefill side channel"
    )
    parser.add_argument("--prefill-tp", type=int, default=1, help="prefill TP size")
    args = parser.parse_args(argv)
    if args.layerwise and len(args.prefill_kv) != len(args.prefill):
        parser.error("--layerwise needs one --prefill-kv HOST:PORT per --prefill")
    return args


def build_router(args: argparse.Namespace) -> Router:
    prefills = []
    for i, url in enumerate(args.prefill):
        host, port = "", 0
        if args.layerwise:
            host, _, raw_port = args.prefill_kv[i].rpartition(":")
            port = int(raw_port)
        prefills.append(Prefill(url.rstrip("/"), host, port, args.prefill_tp))
    return Router(prefills, [url.rstrip("/") for url in args.decode])


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    args = parse_args(argv)
    server = ProxyServer((args.host, args.port), build_router(args), args.layerwise)
    logger.info(
        "P/D proxy on http://%s:%d (%s mode)",
        args.host,
        args.port,
        "layerwise" if args.layerwise else "pull",
    )
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
