"""The P/D proxy (`examples/pd_proxy.py`) in front of two real `vllm serve` instances with
`MooncakeConnectorV1`: the deployment path (OpenAI API, multiprocessing engines whose busy loop
frees the prefill blocks by itself, the serving layer's rejection hook).

Services (module scope): a prefill server (`max_model_len` 1024), a decode server
(`max_model_len` 256, so that longer prompts are rejected there after their prefill, S16), and
the proxy. Expected tokens come from the session's baseline engine (same model, same seed).
"""

from __future__ import annotations

import json
import re
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from harness import REPO_ROOT, ServiceProcess, engine_env, free_port, token_prompts
from openai_server import serve_argv, wait_ready

pytest.importorskip("mooncake.engine")

MAX_TOKENS = 12
DECODE_MAX_MODEL_LEN = 256
# Far above the S16 bound below: a release within it cannot be the timeout's doing.
SEND_TIMEOUT_S = 300
# `usage.prompt_tokens_details.cached_tokens` in each answer (S23).
TOKEN_DETAILS = ("--enable-prompt-tokens-details",)


def post(url: str, body: dict[str, Any]) -> tuple[int, bytes]:
    request = urllib.request.Request(
        f"{url}/v1/completions", json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=300) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def completion(
    model: Path, prompt: list[int], stream: bool, max_tokens: int = MAX_TOKENS
) -> dict[str, Any]:
    return {
        "model": str(model),
        "prompt": prompt,
        "max_tokens": max_tokens,
        "temperature": 0.0,
        "ignore_eos": True,
        "return_token_ids": True,
        "stream": stream,
    }


def streamed_token_ids(body: bytes) -> list[int]:
    ids: list[int] = []
    for line in body.decode().splitlines():
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        for choice in json.loads(line[len("data: ") :])["choices"]:
            ids.extend(choice.get("token_ids") or ())
    return ids


def kv_cache_usage(url: str) -> float:
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as response:
        text = response.read().decode()
    match = re.search(r"^vllm:kv_cache_usage_perc\{[^}]*\} (\S+)$", text, re.MULTILINE)
    assert match, "vllm:kv_cache_usage_perc missing from /metrics"
    return float(match.group(1))


def wait_usage_zero(url: str, timeout_s: float) -> float:
    """Seconds until the server's KV cache usage gauge reads 0 (no block held)."""
    started = time.monotonic()
    while kv_cache_usage(url) > 0:
        if time.monotonic() - started > timeout_s:
            raise AssertionError(f"{url} still holds KV blocks after {timeout_s} s")
        time.sleep(0.25)
    return time.monotonic() - started


@pytest.fixture(scope="module")
def pd_services(
    tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Any]]:
    logs = tmp_path_factory.mktemp("pd-proxy-logs")
    # vLLM's CPU worker pins its threads to cores it assumes it owns; two servers on one
    # small machine would then share core 0 with their busy loops and starve each other.
    env = engine_env({"MC_LOG_LEVEL": "ERROR", "VLLM_CPU_OMP_THREADS_BIND": "nobind"})
    p_url, d_url, proxy_url = (f"http://127.0.0.1:{free_port()}" for _ in range(3))
    extra = {"handshake_timeout_s": 10, "transfer_timeout_s": 15, "send_timeout_s": SEND_TIMEOUT_S}
    prefill_cfg = {
        "kv_connector": "MooncakeConnectorV1",
        "kv_role": "kv_producer",
        "kv_port": free_port(),
        "kv_connector_extra_config": extra,
    }
    decode_cfg = {
        "kv_connector": "MooncakeConnectorV1",
        "kv_role": "kv_consumer",
        "kv_port": free_port(),
        "kv_connector_extra_config": extra,
    }
    services = {
        "prefill": ServiceProcess(
            serve_argv(
                tiny_model_dir, int(p_url.rsplit(":", 1)[1]), prefill_cfg, 1024, TOKEN_DETAILS
            ),
            env=env,
            log_path=logs / "prefill.log",
        ),
        "decode": ServiceProcess(
            serve_argv(
                tiny_model_dir,
                int(d_url.rsplit(":", 1)[1]),
                decode_cfg,
                DECODE_MAX_MODEL_LEN,
                TOKEN_DETAILS,
            ),
            env=env,
            log_path=logs / "decode.log",
        ),
        "proxy": ServiceProcess(
            [
                sys.executable,
                str(REPO_ROOT / "examples" / "pd_proxy.py"),
                "--port",
                proxy_url.rsplit(":", 1)[1],
                "--prefill",
                p_url,
                "--decode",
                d_url,
            ],
            log_path=logs / "proxy.log",
        ),
    }
    try:
        for service in services.values():
            service.start()
        wait_ready(p_url, services["prefill"])
        wait_ready(d_url, services["decode"])
        wait_ready(proxy_url, services["proxy"], 30)
        yield {"prefill": p_url, "decode": d_url, "proxy": proxy_url, "services": services}
    finally:
        for service in services.values():
            service.close()


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "no-stream"])
def test_proxy_answers_equal_a_single_engine(
    pd_services: dict[str, Any], baseline_engine: Any, tiny_model_dir: Path, stream: bool
) -> None:
    seed = 1 if stream else 2
    prompts = [p for length in (20, 64, 150) for p in token_prompts(1, length, seed=seed + length)]
    outputs = baseline_engine.generate(prompt_token_ids=prompts, max_tokens=MAX_TOKENS)
    for prompt, want in zip(prompts, [g.token_ids for g in outputs], strict=True):
        status, body = post(pd_services["proxy"], completion(tiny_model_dir, prompt, stream))
        assert status == 200, body
        got = streamed_token_ids(body) if stream else json.loads(body)["choices"][0]["token_ids"]
        assert got == want
    # The prefill server's own busy loop frees the blocks once the decode side has read them.
    assert wait_usage_zero(pd_services["prefill"], 60) < 60


def test_rejected_by_decode_releases_prefill_blocks_s16(
    pd_services: dict[str, Any], tiny_model_dir: Path
) -> None:
    prefill_url, decode_url, proxy_url = (pd_services[k] for k in ("prefill", "decode", "proxy"))
    wait_usage_zero(prefill_url, 60)
    # Longer than the decode server's max_model_len (the prefill server's is 1024): vLLM
    # rejects them at the decode server's serving layer, after the prefill.
    prompts = token_prompts(21, DECODE_MAX_MODEL_LEN + 44, seed=16)
    # By hand first: the prefill server holds the blocks for its reader...
    request = {**completion(tiny_model_dir, prompts[0], stream=False, max_tokens=1)}
    request["kv_transfer_params"] = {"do_remote_decode": True}
    status, body = post(prefill_url, request)
    assert status == 200, body
    params = json.loads(body)["kv_transfer_params"]
    time.sleep(2)
    assert kv_cache_usage(prefill_url) > 0
    # ...until the decode server rejects the request and its connector releases them.
    rejected = {
        **completion(tiny_model_dir, prompts[0], stream=False),
        "kv_transfer_params": params,
    }
    status, body = post(decode_url, rejected)
    assert status == 400, body
    assert wait_usage_zero(prefill_url, 30) < 30  # far below the 300 s send timeout
    # Through the proxy, 20 times: the error reaches the client, no block is left behind.
    for prompt in prompts[1:]:
        status, body = post(proxy_url, completion(tiny_model_dir, prompt, stream=False))
        assert status == 400, body
    assert wait_usage_zero(prefill_url, 30) < 30
    # Every decode request carried the parameters of its own prefill: none replayed.
    log = pd_services["services"]["proxy"].log_tail(200_000)
    ids = re.findall(r"remote_request_id=(\S+)", log)
    assert len(ids) == len(set(ids)) >= len(prompts) - 1


def test_models_and_tokenizer_routes_pass_through_to_decode(
    pd_services: dict[str, Any], tiny_model_dir: Path
) -> None:
    proxy, decode = pd_services["proxy"], pd_services["decode"]

    def call(url: str, path: str, body: dict[str, Any] | None = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(f"{url}{path}", data, {"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=60) as response:
            assert response.status == 200, path
            return json.loads(response.read())

    models = call(proxy, "/v1/models")
    assert [m["id"] for m in models["data"]] == [str(tiny_model_dir)]
    text = {"model": str(tiny_model_dir), "prompt": "The quick brown fox jumps over the lazy dog."}
    tokens = call(proxy, "/tokenize", text)
    assert tokens["tokens"] == call(decode, "/tokenize", text)["tokens"]
    assert tokens["count"] > 5
    back = call(proxy, "/detokenize", {"model": str(tiny_model_dir), "tokens": tokens["tokens"]})
    assert back["prompt"] == text["prompt"]


def test_decode_reports_its_own_cached_tokens_and_prefill_hits_apart_s23(
    pd_services: dict[str, Any], tiny_model_dir: Path
) -> None:
    """The answer's `cached_tokens` is the decode instance's (tokens it did not compute); the
    prefill instance's prefix hits come as `X-Prefill-Cached-Tokens`, never in its place."""
    (prompt,) = token_prompts(1, 200, seed=23)  # 6 full 32-token blocks and 8 tokens

    def ask() -> tuple[int, int | None]:
        request = urllib.request.Request(
            f"{pd_services['proxy']}/v1/completions",
            json.dumps(completion(tiny_model_dir, prompt, stream=False)).encode(),
            {"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=300) as response:
            answer = json.loads(response.read())
            header = response.headers.get("X-Prefill-Cached-Tokens")
        prefill_hits = None if header is None else int(header)
        return answer["usage"]["prompt_tokens_details"]["cached_tokens"], prefill_hits

    # Cold on both sides: decode read the whole prompt's KV (it reports all 200 tokens, as
    # vLLM's own connector does); prefill hit nothing.
    assert ask() == (200, 0)
    # Again: prefill hits its 6 cached blocks; decode's figure is its own (local hits plus the
    # loaded rest), the same as before, not the prefill's 192.
    assert ask() == (200, 192)
