"""Code the Mooncake P/D e2e tests run inside an engine process (`EngineProcess.call` targets).

Functions take the `vllm.LLM` first and return JSON-able values. Engines run uniproc
(`VLLM_ENABLE_V1_MULTIPROCESSING=0`, uni executor), so the scheduler, the worker and both
halves of the connector live in the process that runs these functions.

A served engine (`vllm serve`) steps continuously; an offline `LLM` only steps inside
`generate`. `step_until_idle` stands in for the server loop between two commands: it steps the
engine (empty steps, as the busy loop does) until no request waits for a connector transfer.
"""

from __future__ import annotations

import time
from typing import Any

from greedy import LOGPROBS, logprobs_json
from vllm.distributed.kv_transfer import get_kv_transfer_group


def _engine_core(llm: Any) -> Any:
    return llm.llm_engine.engine_core.engine_core


def _scheduler(llm: Any) -> Any:
    return _engine_core(llm).scheduler


def _count_scheduled_tokens(llm: Any) -> dict[str, int]:
    # Wrap the scheduler once: prompt and decode tokens it scheduled, per request id. This
    # is what the engine really computed, whatever the connector claims.
    scheduler = _scheduler(llm)
    counts: dict[str, int] | None = getattr(scheduler, "_vam_scheduled_tokens", None)
    if counts is None:
        counts = {}
        schedule = scheduler.schedule

        def counting_schedule(*args: Any, **kwargs: Any) -> Any:
            output = schedule(*args, **kwargs)
            for request_id, n in output.num_scheduled_tokens.items():
                counts[request_id] = counts.get(request_id, 0) + n
            return output

        scheduler.schedule = counting_schedule
        scheduler._vam_scheduled_tokens = counts
    return counts


def generate(
    llm: Any,
    prompt_token_ids: list[list[int]],
    max_tokens: int,
    kv_transfer_params: list[dict[str, Any] | None],
    ignore_eos: bool = True,
) -> list[dict[str, Any]]:
    """Greedy generation with per-request `kv_transfer_params` (vLLM's P/D request API)."""
    from vllm import SamplingParams

    params = [
        SamplingParams(
            max_tokens=max_tokens,
            temperature=0.0,
            ignore_eos=ignore_eos,
            logprobs=LOGPROBS,
            extra_args={"kv_transfer_params": kv} if kv is not None else None,
        )
        for kv in kv_transfer_params
    ]
    prompts: list[Any] = [{"prompt_token_ids": ids} for ids in prompt_token_ids]
    counts = _count_scheduled_tokens(llm)
    counts.clear()
    results = llm.generate(prompts, params, use_tqdm=False)
    # Internal request ids are "<external id>-<suffix>".
    scheduled = {key.rsplit("-", 1)[0]: n for key, n in counts.items()}
    return [
        {
            "scheduled_tokens": scheduled.get(r.request_id, 0),
            "token_ids": list(r.outputs[0].token_ids),
            "num_cached_tokens": r.num_cached_tokens,
            "finish_reason": r.outputs[0].finish_reason,
            "logprobs": logprobs_json(r.outputs[0]),
            "kv_transfer_params": r.kv_transfer_params,
        }
        for r in results
    ]


def stats(llm: Any) -> dict[str, Any]:
    """Free KV blocks and both halves' connector counters."""
    scheduler = _scheduler(llm)
    pool = scheduler.kv_cache_manager.block_pool
    return {
        "free_blocks": int(pool.get_num_free_blocks()),
        "total_blocks": int(pool.num_gpu_blocks),
        "requests": len(scheduler.requests),
        "scheduler": scheduler.connector.stats(),
        "worker": get_kv_transfer_group().stats(),
    }


def step_until_idle(llm: Any, wait_s: float) -> dict[str, Any]:
    """Step the engine until it holds no finished request for a transfer, or `wait_s`."""
    scheduler = _scheduler(llm)
    deadline = time.monotonic() + wait_s
    while scheduler.has_requests() and time.monotonic() < deadline:
        llm.llm_engine.step()
        time.sleep(0.01)
    result = stats(llm)
    result["idle"] = not scheduler.has_requests()
    return result


def submit_rejected(llm: Any, request_id: str, kv_transfer_params: dict[str, Any]) -> None:
    """What the OpenAI server does for a P/D request it rejects before admission (S16):
    submit it pre-aborted, so the connector's `request_finished` runs. Uniproc only."""
    from vllm import SamplingParams
    from vllm.v1.engine import EngineCoreRequest

    request = EngineCoreRequest(
        request_id=request_id,
        prompt_token_ids=[0],
        mm_features=None,
        sampling_params=SamplingParams(
            max_tokens=1, extra_args={"kv_transfer_params": dict(kv_transfer_params)}
        ),
        pooling_params=None,
        arrival_time=time.time(),
        lora_request=None,
        cache_salt=None,
        data_parallel_rank=None,
        abort_immediately=True,
    )
    core = _engine_core(llm)
    core.add_request(*core.preprocess_add_request(request))
    llm.llm_engine.step()
