"""Prefill/decode plumbing shared by the Mooncake e2e tests: engine configs and the proxy step.

`disaggregated_generate` is what a P/D proxy does (`examples/pd_proxy.py` does the same over
HTTP): send the request to the prefill instance with `max_tokens=1` and
`kv_transfer_params={"do_remote_decode": True}`, take the `kv_transfer_params` of its answer,
and send the request to the decode instance with them. Nothing is cached between requests, so
stale parameters are never replayed.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from harness import UNIPROC_ENV, EngineProcess

PROBE = "mooncake_probe"
OLD_MODULE_PATH = "vllm_ascend.distributed.mooncake_connector"  # vam: ignore (the 0.13 path)
# Side-channel and transfer bounds of the test engines, seconds. Generous for two shared CPU
# cores: a healthy read takes milliseconds; only the fault tests wait for them.
HANDSHAKE_TIMEOUT_S = 10
TRANSFER_TIMEOUT_S = 15
SEND_TIMEOUT_S = 15
MOONCAKE_ENV = {**UNIPROC_ENV, "MC_LOG_LEVEL": "ERROR"}


def pd_config(
    role: str,
    kv_port: int,
    *,
    connector: str = "MooncakeConnectorV1",
    module_path: str | None = None,
    policy: str = "recompute",
    **extra: Any,
) -> dict[str, Any]:
    """A `KVTransferConfig` dict for one side of a P/D pair."""
    config: dict[str, Any] = {
        "kv_connector": connector,
        "kv_role": role,
        "kv_port": kv_port,
        "kv_load_failure_policy": policy,
        "kv_connector_extra_config": {
            "handshake_timeout_s": HANDSHAKE_TIMEOUT_S,
            "transfer_timeout_s": TRANSFER_TIMEOUT_S,
            "send_timeout_s": SEND_TIMEOUT_S,
            **extra,
        },
    }
    if module_path is not None:
        config["kv_connector_module_path"] = module_path
    return config


def prefill(
    engine: EngineProcess, prompts: list[list[int]], extra_params: dict[str, Any] | None = None
) -> list[dict[str, Any]]:
    """Run the prefill step; returns each request's `kv_transfer_params` for the decode side."""
    request = {"do_remote_decode": True, **(extra_params or {})}
    outputs = engine.call(
        f"{PROBE}:generate",
        prompt_token_ids=prompts,
        max_tokens=1,
        kv_transfer_params=[dict(request) for _ in prompts],
    )
    params = [o["kv_transfer_params"] for o in outputs]
    assert all(p and p["do_remote_prefill"] for p in params), params
    return params


def decode(
    engine: EngineProcess,
    prompts: list[list[int]],
    params: list[dict[str, Any] | None],
    max_tokens: int,
    timeout_s: float = 180.0,
) -> list[dict[str, Any]]:
    """Run the decode step with the prefill side's `kv_transfer_params`."""
    result: list[dict[str, Any]] = engine.call(
        f"{PROBE}:generate",
        prompt_token_ids=prompts,
        max_tokens=max_tokens,
        kv_transfer_params=params,
        timeout_s=timeout_s,
    )
    return result


def disaggregated_generate(
    prefill_engine: EngineProcess,
    decode_engine: EngineProcess,
    prompts: list[list[int]],
    max_tokens: int,
) -> list[dict[str, Any]]:
    """The proxy: prefill with `max_tokens=1`, then decode with the returned parameters."""
    return decode(decode_engine, prompts, list(prefill(prefill_engine, prompts)), max_tokens)


@contextmanager
def running_pair(
    producer: EngineProcess, consumer: EngineProcess
) -> Iterator[tuple[EngineProcess, EngineProcess]]:
    """Start the prefill engine, then the decode engine; close both (decode first) on exit,
    also when a start fails."""
    try:
        producer.start()
        consumer.start()
        yield producer, consumer
    finally:
        consumer.close()
        producer.close()


def stats(engine: EngineProcess) -> dict[str, Any]:
    result: dict[str, Any] = engine.call(f"{PROBE}:stats")
    return result


def delta(after: dict[str, Any], before: dict[str, Any], side: str, key: str) -> float:
    """How much counter `key` of `side` ("scheduler" or "worker") grew between two `stats`."""
    return float(after[side].get(key, 0) - before[side].get(key, 0))


def step_until_idle(engine: EngineProcess, wait_s: float) -> dict[str, Any]:
    """Let an offline engine step like a server would until it holds nothing for a peer."""
    result: dict[str, Any] = engine.call(
        f"{PROBE}:step_until_idle", wait_s=wait_s, timeout_s=wait_s + 120
    )
    return result


def layerwise_params(
    prompts: list[list[int]], prefill_port: int, prefill_tp: int = 1
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Fresh `(prefill params, decode params)` for the layerwise connector, one transfer id per
    request: what a layerwise proxy sends to both instances at once."""
    transfer_ids = [uuid.uuid4().hex for _ in prompts]
    to_prefill = [{"do_remote_decode": True, "transfer_id": t} for t in transfer_ids]
    to_decode = [
        {
            "do_remote_prefill": True,
            "transfer_id": t,
            "remote_host": "127.0.0.1",
            "remote_port": prefill_port,
            "tp_size": prefill_tp,
        }
        for t in transfer_ids
    ]
    return to_prefill, to_decode


def layerwise_generate(
    prefill_engine: EngineProcess,
    decode_engine: EngineProcess,
    prompts: list[list[int]],
    max_tokens: int,
    *,
    decode_first: bool,
) -> list[dict[str, Any]]:
    """Send both requests concurrently (the decode one first or second); decode's outputs."""
    port = prefill_engine.spec["kv_transfer_config"]["kv_port"]
    to_prefill, to_decode = layerwise_params(prompts, port)
    results: dict[str, Any] = {}

    def run(name: str, engine: EngineProcess, params: list[dict[str, Any]], tokens: int) -> None:
        try:
            results[name] = engine.call(
                f"{PROBE}:generate",
                prompt_token_ids=prompts,
                max_tokens=tokens,
                kv_transfer_params=params,
            )
        except BaseException as exc:  # surfaced below
            results[name] = exc

    jobs = [
        ("decode", decode_engine, to_decode, max_tokens),
        ("prefill", prefill_engine, to_prefill, 1),
    ]
    if not decode_first:
        jobs.reverse()
    threads = [threading.Thread(target=run, args=job) for job in jobs]
    for thread in threads:
        thread.start()
        time.sleep(0.2)  # let the first request reach its engine first
    for thread in threads:
        thread.join()
    for name in ("prefill", "decode"):
        if isinstance(results[name], BaseException):
            raise results[name]
    decoded: list[dict[str, Any]] = results["decode"]
    return decoded
