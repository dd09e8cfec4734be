"""The KV pool and P/D across hosts: network namespaces on one private switch (`netns.py`).

Hosts (each a namespace, `10.201.0.0/24`, no default route; made and removed here; services
placed by `netns_services.py`):

| host | address | runs |
|---|---|---|
| master | 10.201.0.1 | `mooncake_master` (RPC 50051, metrics 9003) |
| pool | 10.201.0.2 | `mooncake_client` holding the pool's 256 MB (`--port 50052`) |
| a | 10.201.0.3 | engine A (AscendStoreConnector, sync loads); later the P/D prefill engine |
| b | 10.201.0.4 | engine B (AscendStoreConnector, async loads); later the P/D decode engine |

Engines contribute no memory (`global_segment_size = 0`): every pool value lives on the pool
host, every P/D read crosses the switch. A cut (`ip link set <port> down` on the switch) makes a
host silent while its processes run on: packets to it vanish, nothing answers "refused".
The reference tokens come from the session's baseline engine (no connector, no network).

Bounds: the pool engines set Mooncake's TCP progress/status timeouts (`MC_TCP_*_TIMEOUT_SEC`)
and engine B a `load_timeout_s` (and a `failed_load_ttl_s` longer than the test's cut, so a
block whose load failed stays a miss throughout it); the master forgets a silent client after
`--client_ttl`. Every
wait is bounded by the harness timeouts passed below (a hang fails the test with the engine's
log); none of them is a speed assertion.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from greedy import assert_same_greedy
from harness import EngineProcess, token_prompts

for _name in ("torch", "transformers", "tokenizers", "vllm", "mooncake.store", "zmq"):
    pytest.importorskip(_name)
from kvpool_master import master_binary  # noqa: E402
from mooncake_pd import (  # noqa: E402
    SEND_TIMEOUT_S,
    decode,
    delta,
    disaggregated_generate,
    pd_config,
    prefill,
    stats,
    step_until_idle,
)
from netns import Host, Network, probe  # noqa: E402
from netns_services import (  # noqa: E402
    POOL_BYTES,
    MooncakePool,
    client_binary,
    engine_on,
    foreign_listeners,
    start_all,
)

from tests.polling import wait_until  # noqa: E402

if master_binary() is None or client_binary() is None:  # pragma: no cover - the wheel ships both
    pytest.skip("mooncake_master / mooncake_client not installed", allow_module_level=True)

PD_KV_PORT = 30100
CLIENT_TTL_S = 15  # the master forgets a client this long after its last heartbeat
MC_TCP_TIMEOUT_S = 8  # Mooncake: a transfer without progress is dropped after this
LOAD_TIMEOUT_S = 4  # engine B: an asynchronous load not done by then is a failed load
FAILED_LOAD_TTL_S = CLIENT_TTL_S * 4  # engine B: a block whose load failed is a miss this long
PD_TRANSFER_TIMEOUT_S = 5
BLOCK_TOKENS = 32
LONG = 600  # tokens: 18 full blocks
LONG_HIT = 18 * BLOCK_TOKENS
MAX_TOKENS = 12
POOL_PROBE = "kvpool_probe"


# ---- the network and its services ----------------------------------------------------------


@pytest.fixture(scope="module")
def network() -> Iterator[Network]:
    reason = probe()
    if reason is not None:
        pytest.skip(f"network namespaces unavailable: {reason}")
    net = Network(["master", "pool", "a", "b"])
    with net:
        yield net
    assert net.existing() == [], "namespaces left behind"


@pytest.fixture(scope="class")
def pool(network: Network, tmp_path_factory: pytest.TempPathFactory) -> Iterator[MooncakePool]:
    with MooncakePool(network, tmp_path_factory.mktemp("netns-pool"), CLIENT_TTL_S) as services:
        yield services


# ---- the KV pool across hosts ------------------------------------------------------------------


def pool_config(host: Host, pool: MooncakePool, **extra: Any) -> dict[str, Any]:
    return {
        "kv_connector": "AscendStoreConnector",
        "kv_role": "kv_both",
        "kv_load_failure_policy": "recompute",
        "kv_connector_extra_config": {
            "mooncake": {
                "master_server_address": pool.address,
                "local_hostname": host.address,
                "metadata_server": "P2PHANDSHAKE",
                "protocol": "tcp",
                "global_segment_size": 0,
                "local_buffer_size": "4MB",
            },
            "retry_interval_s": 2,
            "error_log_interval_s": 10,
            **extra,
        },
    }


@pytest.fixture(scope="class")
def pool_engines(
    network: Network,
    pool: MooncakePool,
    tiny_model_dir: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[EngineProcess, EngineProcess]]:
    tmp_path = tmp_path_factory.mktemp("netns-pool-engines")
    tcp_env = {
        "MC_TCP_PROGRESS_TIMEOUT_SEC": str(MC_TCP_TIMEOUT_S),
        "MC_TCP_STATUS_TIMEOUT_SEC": str(MC_TCP_TIMEOUT_S),
    }
    a, b = network["a"], network["b"]
    engine_a = engine_on(a, tiny_model_dir, tmp_path, pool_config(a, pool), tcp_env)
    config_b = pool_config(
        b,
        pool,
        load_async=True,
        load_timeout_s=LOAD_TIMEOUT_S,
        failed_load_ttl_s=FAILED_LOAD_TTL_S,
    )
    engine_b = engine_on(b, tiny_model_dir, tmp_path, config_b, tcp_env)
    start_all([engine_a, engine_b])
    try:
        yield engine_a, engine_b
    finally:
        engine_b.close()
        engine_a.close()


def wait_saves(engine: EngineProcess) -> dict[str, Any]:
    result: dict[str, Any] = engine.call(f"{POOL_PROBE}:wait_saves", timeout_s=180, wait_s=150)
    return result


def pool_stats(engine: EngineProcess) -> dict[str, Any]:
    result: dict[str, Any] = engine.call(f"{POOL_PROBE}:stats")
    return result


def free_blocks(engine: EngineProcess) -> int:
    return int(engine.call(f"{POOL_PROBE}:free_device_blocks"))


def generated(engine: EngineProcess, prompt: list[list[int]], timeout_s: float = 180) -> Any:
    return engine.generate(prompt_token_ids=prompt, max_tokens=16, timeout_s=timeout_s)


class TestPoolAcrossHosts:
    def test_every_process_runs_and_listens_on_its_own_host(
        self,
        network: Network,
        pool: MooncakePool,
        pool_engines: tuple[EngineProcess, EngineProcess],
    ) -> None:
        engine_a, engine_b = pool_engines
        assert pool.master.proc is not None and pool.client.proc is not None
        placed = [
            ("master", pool.master.proc.pid),
            ("pool", pool.client.proc.pid),
            ("a", engine_a.pid),
            ("b", engine_b.pid),
        ]
        for role, pid in placed:
            assert foreign_listeners(network[role], [pid]) == []
        # Every byte of the pool is the pool host's: the engines mounted nothing.
        assert pool.capacity() == POOL_BYTES

    def test_engine_b_loads_the_prefix_engine_a_saved(
        self, pool_engines: tuple[EngineProcess, EngineProcess], baseline_engine: EngineProcess
    ) -> None:
        engine_a, engine_b = pool_engines
        prompt = token_prompts(1, LONG, seed=LONG)
        expected = baseline_engine.generate(prompt_token_ids=prompt)
        first = generated(engine_a, prompt)
        assert_same_greedy(first, expected)
        saved = wait_saves(engine_a)
        assert saved["saved_blocks"] == 18 and saved["save_failed_blocks"] == 0
        second = generated(engine_b, prompt)  # host b, empty local cache: all from host pool
        assert second[0].num_cached_tokens == LONG_HIT
        assert_same_greedy(second, expected)
        assert pool_stats(engine_b)["loaded_blocks"] == 18

    def test_pool_host_cut_off_requests_miss_without_leaks_then_hits_resume(
        self,
        network: Network,
        pool: MooncakePool,
        pool_engines: tuple[EngineProcess, EngineProcess],
        baseline_engine: EngineProcess,
    ) -> None:
        engine_a, engine_b = pool_engines
        free_a, free_b = free_blocks(engine_a), free_blocks(engine_b)
        saved_prompt = token_prompts(1, LONG, seed=LONG)  # the previous test's, in the pool
        prompt = token_prompts(1, LONG, seed=LONG + 1)
        expected = baseline_engine.generate(prompt_token_ids=prompt)
        expected_saved = baseline_engine.generate(prompt_token_ids=saved_prompt)
        assert_same_greedy(generated(engine_a, prompt), expected)
        wait_saves(engine_a)
        before_b = pool_stats(engine_b)
        network.cut("pool")
        try:
            # The master still lists the pool's segment (for CLIENT_TTL_S): B's lookup hits,
            # its load stalls on the silent host, ends at load_timeout_s, and B recomputes.
            # vLLM looks the request up again after a failed load: B answers the blocks that
            # failed as misses (failed_load_ttl_s) instead of loading from the silent host again.
            stalled = generated(engine_b, prompt, timeout_s=(CLIENT_TTL_S + LOAD_TIMEOUT_S) * 4)
            assert_same_greedy(stalled, expected)
            after_b = pool_stats(engine_b)
            assert after_b["loaded_blocks"] == before_b["loaded_blocks"]
            failed = after_b["load_failed_blocks"] - before_b["load_failed_blocks"]
            assert failed == 18, failed  # one whole load, never partial, never repeated
            # A later request with that prefix (B's own cache reset) is a plain miss: no load.
            wait_saves(engine_b)
            assert engine_b.reset_prefix_cache()
            again = generated(engine_b, prompt, timeout_s=MC_TCP_TIMEOUT_S * 15)
            assert again[0].num_cached_tokens == 0
            assert_same_greedy(again, expected)
            assert pool_stats(engine_b)["load_failed_blocks"] == after_b["load_failed_blocks"]
            # Then the master forgets the silent client and its segment: plain misses.
            wait_until(lambda: pool.capacity() == 0, CLIENT_TTL_S * 6, "segment dropped")
            for engine in (engine_a, engine_b):
                wait_saves(engine)  # saves to the silent host end (failed); blocks released
                assert engine.reset_prefix_cache()
                out = generated(engine, saved_prompt, timeout_s=MC_TCP_TIMEOUT_S * 15)
                assert out[0].num_cached_tokens == 0
                assert_same_greedy(out, expected_saved)
        finally:
            network.restore("pool")
        # The pool client rejoins and mounts its segment again; new saves, then hits.
        wait_until(lambda: pool.capacity() == POOL_BYTES, 120, "segment remounted")
        fresh = token_prompts(1, LONG, seed=LONG + 2)
        want = baseline_engine.generate(prompt_token_ids=fresh)
        deadline = time.monotonic() + 240
        saved_before = pool_stats(engine_a)["saved_blocks"]
        while True:  # A saves once its pool guard lets the store back in
            assert_same_greedy(generated(engine_a, fresh), want)
            if wait_saves(engine_a)["saved_blocks"] - saved_before >= 18:
                break
            assert time.monotonic() < deadline, "engine A never saved after the link came up"
            assert engine_a.reset_prefix_cache()
        while True:
            out = generated(engine_b, fresh)
            assert_same_greedy(out, want)
            if out[0].num_cached_tokens == LONG_HIT:
                break
            assert time.monotonic() < deadline, "engine B never hit after the link came up"
            assert engine_b.reset_prefix_cache()
            time.sleep(2)
        wait_saves(engine_b)
        # No request kept a KV block: both engines are back to their free-block baseline.
        assert (free_blocks(engine_a), free_blocks(engine_b)) == (free_a, free_b)


# ---- P/D across hosts: prefill on host a, decode on host b ------------------------------------


@pytest.fixture(scope="class")
def pd_pair(
    network: Network, tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[EngineProcess, EngineProcess]]:
    folder = tmp_path_factory.mktemp("netns-pd")
    a, b = network["a"], network["b"]
    producer = engine_on(
        a,
        tiny_model_dir,
        folder,
        pd_config(
            "kv_producer",
            PD_KV_PORT,
            side_channel_host=a.address,
            transfer_timeout_s=PD_TRANSFER_TIMEOUT_S,
        ),
        {},
    )
    consumer = engine_on(
        b,
        tiny_model_dir,
        folder,
        pd_config(
            "kv_consumer",
            PD_KV_PORT,
            side_channel_host=b.address,
            transfer_timeout_s=PD_TRANSFER_TIMEOUT_S,
        ),
        {},
    )
    start_all([producer, consumer])
    try:
        yield producer, consumer
    finally:
        consumer.close()
        producer.close()


class TestPrefillDecodeAcrossHosts:
    def test_disaggregated_tokens_equal_a_single_engine(
        self,
        network: Network,
        pd_pair: tuple[EngineProcess, EngineProcess],
        baseline_engine: EngineProcess,
    ) -> None:
        producer, consumer = pd_pair
        assert foreign_listeners(network["a"], [producer.pid]) == []
        assert foreign_listeners(network["b"], [consumer.pid]) == []
        assert (network["a"].address, PD_KV_PORT) in network["a"].listening()  # side channel
        prompts = [p for n, size in [(2, 40), (1, 600)] for p in token_prompts(n, size, seed=size)]
        expected = baseline_engine.generate(prompt_token_ids=prompts, max_tokens=MAX_TOKENS)
        before = stats(consumer)
        outputs = disaggregated_generate(producer, consumer, prompts, MAX_TOKENS)
        # Every read landed (a failed one is recomputed: its tokens would say less about why).
        after = stats(consumer)
        assert delta(after, before, "worker", "reads_ok") == len(prompts), after
        # Decode computed only the last prompt token and the new ones: the rest came from a.
        assert [o["scheduled_tokens"] for o in outputs] == [MAX_TOKENS] * len(prompts)
        assert_same_greedy(outputs, expected)

    def test_prefill_host_cut_off_decode_recomputes_or_fails_and_keeps_serving(
        self,
        network: Network,
        pd_pair: tuple[EngineProcess, EngineProcess],
        baseline_engine: EngineProcess,
    ) -> None:
        producer, consumer = pd_pair
        step_until_idle(producer, wait_s=SEND_TIMEOUT_S * 2)
        producer_before = stats(producer)
        prompts = token_prompts(3, 90, seed=15)
        expected = baseline_engine.generate(prompt_token_ids=prompts, max_tokens=MAX_TOKENS)
        # A healthy round first: decode holds a warm connection to host a.
        warm = disaggregated_generate(producer, consumer, prompts[:1], MAX_TOKENS)
        assert_same_greedy(warm, expected[:1])
        params: list[dict[str, Any] | None] = list(prefill(producer, prompts[1:]))
        before = stats(consumer)
        network.cut("a")
        try:
            # The read starts on the warm connection and gets no answer: it fails at
            # transfer_timeout_s and decode, with the recompute policy, computes the prompt.
            bound = PD_TRANSFER_TIMEOUT_S * 15
            recomputed = decode(consumer, prompts[1:2], params[:1], MAX_TOKENS, timeout_s=bound)
            assert_same_greedy(recomputed, expected[1:2])
            assert recomputed[0]["scheduled_tokens"] == len(prompts[1]) + MAX_TOKENS - 1
            consumer.call("netns_probe:set_load_failure_policy", policy="fail")
            failed = decode(consumer, prompts[2:], params[1:], MAX_TOKENS, timeout_s=bound)
            assert failed[0]["finish_reason"] == "error"
        finally:
            consumer.call("netns_probe:set_load_failure_policy", policy="recompute")
            network.restore("a")
        after = stats(consumer)
        assert delta(after, before, "worker", "reads_failed") == 2
        assert after["free_blocks"] == before["free_blocks"] and after["requests"] == 0
        # Decode keeps serving: P/D works again over the restored link.
        other = token_prompts(1, 70, seed=70)
        other_expected = baseline_engine.generate(prompt_token_ids=other, max_tokens=MAX_TOKENS)
        assert_same_greedy(
            disaggregated_generate(producer, consumer, other, MAX_TOKENS), other_expected
        )
        # Prefill freed the blocks nobody could read once send_timeout_s passed.
        idle = step_until_idle(producer, wait_s=SEND_TIMEOUT_S * 6)
        assert idle["idle"] and idle["free_blocks"] == producer_before["free_blocks"]
