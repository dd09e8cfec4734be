"""Benchmark-only code that `pd_ttft_bench.py` runs inside its engine processes.

Each function is an `EngineProcess.call` target (`"pd_ttft_hooks:name"`; the bench puts this
folder on the engines' `PYTHONPATH`): it takes the `vllm.LLM` first and returns a JSON-able
value. Engines run uniproc, so the scheduler, the worker and the connector's both halves live in
the process that runs these functions. Nothing here is imported by the project itself.
"""

from __future__ import annotations

from typing import Any


def set_idle_wait(llm: Any, seconds: float) -> None:
    """Our decode engine only: set how long `get_finished` waits for a read in flight on a step
    without a forward pass (0: the behaviour before that wait existed)."""
    from vllm_ascend.distributed.kv_transfer.kv_p2p import pull_worker

    pull_worker.IDLE_STEP_WAIT_S = seconds


def _connector_worker(group: Any) -> Any:
    # Ours keeps its worker half in `.worker`, vLLM's MooncakeConnector in `.connector_worker`.
    inner = getattr(group, "worker", None)
    return inner if inner is not None else group.connector_worker


def take_steps(llm: Any) -> int:
    """Worker steps (`get_finished` calls of the connector's worker half) since the last call;
    the first call installs the counter and returns 0. vLLM's `get_transfer_results` calls
    `get_finished` too, so both connectors count one per engine step."""
    from vllm.distributed.kv_transfer import get_kv_transfer_group

    worker = _connector_worker(get_kv_transfer_group())
    if not hasattr(worker, "bench_steps"):
        inner = worker.get_finished

        def counted() -> Any:
            worker.bench_steps += 1
            return inner()

        worker.bench_steps = 0
        worker.get_finished = counted
    steps, worker.bench_steps = worker.bench_steps, 0
    return int(steps)


def hand_off(llm: Any) -> bool:
    """vLLM's prefill engine only: one engine step after `generate` returned.

    vLLM's producer learns a finished request's blocks in `request_finished` and passes them to
    its sender thread in the NEXT step's connector metadata (`record_send_reqs` sets the
    transfer's `ready` event); until then a decode pull waits. A served engine takes that step
    at once (its busy loop runs while a request holds blocks); an offline `LLM.generate`
    returns first, so the benchmark takes it here, inside the timed prefill. Returns whether
    the scheduler still holds requests (True: blocks await the decode side's pull).
    """
    llm.llm_engine.step()
    return bool(llm.llm_engine.engine_core.engine_core.scheduler.has_requests())


def device_index_patched(llm: Any) -> bool:
    """Whether this engine runs under the benchmark-only `current_device_index` patch."""
    import torch

    fn = torch.accelerator.current_device_index
    return getattr(fn, "__name__", "") == "_bench_only_device_index"
