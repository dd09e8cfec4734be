"""The connectors' counters reach `vllm serve`'s Prometheus `/metrics` (vLLM's KV connector
metrics interface: `get_kv_connector_stats`, `build_kv_connector_stats`, `build_prom_metrics`).

One real server with `CPUOffloadingConnector`: a prompt of 70 tokens (2 full 32-token blocks)
is offloaded by the first request; after a reset of vLLM's own prefix cache the same prompt is
a host-pool hit, so the second request loads both blocks back. The counters the scheduler side
(lookups, hits) and the worker (stored and loaded blocks) report must then read exactly that.
"""

from __future__ import annotations

import json
import re
import time
import urllib.request
from pathlib import Path
from typing import Any

from harness import ServiceProcess, engine_env, free_port, token_prompts
from openai_server import serve_argv, wait_ready

# Metrics reach the API server with the engine's next stats update: wait for them, bounded.
SCRAPE_WAIT_S = 60.0
PROMPT_TOKENS = 70  # 2 full blocks of 32 tokens, + 6


def http(url: str, body: dict[str, Any] | None = None, method: str = "GET") -> bytes:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data, {"Content-Type": "application/json"}, method=method)
    with urllib.request.urlopen(request, timeout=300) as response:
        assert response.status == 200, url
        return bytes(response.read())


def counters(url: str, prefix: str) -> dict[str, float]:
    """`/metrics` counters named `<prefix><name>_total`, by name (summed over labels)."""
    text = http(f"{url}/metrics").decode()
    found: dict[str, float] = {}
    pattern = rf"^{re.escape(prefix)}(\w+)_total(?:\{{[^}}]*\}})? (\S+)$"
    for name, value in re.findall(pattern, text, re.MULTILINE):
        found[name] = found.get(name, 0.0) + float(value)
    return found


def test_cpu_offload_counters_reach_prometheus(tiny_model_dir: Path, tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    kv_config = {
        "kv_connector": "CPUOffloadingConnector",
        "kv_role": "kv_both",
        "kv_connector_extra_config": {
            "metadata_server_address": f"tcp://127.0.0.1:{free_port()}",
            "rpc_timeout_s": 20,
        },
    }
    # Dev mode serves /reset_prefix_cache; one server needs no core pinning.
    env = engine_env({"VLLM_SERVER_DEV_MODE": "1", "VLLM_CPU_OMP_THREADS_BIND": "nobind"})
    server = ServiceProcess(
        serve_argv(tiny_model_dir, int(url.rsplit(":", 1)[1]), kv_config),
        env=env,
        log_path=tmp_path / "serve.log",
    )
    with server:
        wait_ready(url, server)
        prompt = token_prompts(1, PROMPT_TOKENS, seed=7)[0]
        body = {"model": str(tiny_model_dir), "prompt": prompt, "max_tokens": 4, "temperature": 0.0}
        first = json.loads(http(f"{url}/v1/completions", body, "POST"))
        # vLLM's own prefix cache only: the host pool keeps the offloaded blocks.
        http(f"{url}/reset_prefix_cache", method="POST")
        second = json.loads(http(f"{url}/v1/completions", body, "POST"))
        assert first["choices"][0]["text"] == second["choices"][0]["text"]

        want = {"lookups": 2.0, "hit_blocks": 2.0, "stored_blocks": 2.0, "loaded_blocks": 2.0}
        deadline = time.monotonic() + SCRAPE_WAIT_S
        got = counters(url, "vllm:cpu_offload_")
        while any(got.get(k, 0) < v for k, v in want.items()) and time.monotonic() < deadline:
            time.sleep(1.0)
            got = counters(url, "vllm:cpu_offload_")
        assert {k: got.get(k) for k in want} == want, server.log_tail()
        assert got.get("load_failed_blocks", 0) == 0
        assert got.get("store_failed_blocks", 0) == 0
