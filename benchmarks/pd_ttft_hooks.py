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


# ---- stage timing (issue 21 §3: the time each stage above the floor costs) ----------------------
#
# Timestamps are `time.perf_counter()` (CLOCK_MONOTONIC on Linux: one clock for every process of
# the machine), so the benchmark process can set them against its own call times. The wrappers
# add a few microseconds per step and are installed in every engine alike.


def _timed(events: list[Any], kind: str, fn: Any, extra: Any = None) -> Any:
    import time

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        out = fn(*args, **kwargs)
        event = [kind, started, time.perf_counter()]
        if extra is not None:
            event.append(extra(out, args))
        events.append(event)
        return out

    return wrapper


def _started(events: list[Any], kind: str, fn: Any) -> Any:
    import time

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        now = time.perf_counter()
        events.append([kind, now, now])
        return fn(*args, **kwargs)

    return wrapper


def _delayed(events: list[Any], fn: Any) -> Any:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        delay = run_delay_s()
        out = fn(*args, **kwargs)
        events.append(["step_delay", 0.0, run_delay_s() - delay])
        return out

    return wrapper


def install_trace(llm: Any, connector: bool = True) -> bool:
    """Wrap the engine's step, scheduler, executor and (`connector`) the connector worker's
    `get_finished`, `add_recvs` and transfer-thread read (ours only) once; events go to a list
    that `traced_generate` drains. Returns whether the trace was installed by this call."""
    core = llm.llm_engine.engine_core.engine_core
    if hasattr(core, "bench_events"):
        return False
    events: list[Any] = []
    core.bench_events = events
    step = llm.llm_engine.step
    if not connector:  # the single engine: each step's runqueue wait too (the floor's step)
        step = _delayed(events, step)
    llm.llm_engine.step = _timed(events, "step", step)
    sched = core.scheduler
    sched.schedule = _timed(
        events, "schedule", sched.schedule, lambda out, _: int(out.total_num_scheduled_tokens)
    )
    executor = core.model_executor
    executor.execute_model = _timed(events, "execute", executor.execute_model)
    if connector:
        from vllm.distributed.kv_transfer import get_kv_transfer_group

        worker = _connector_worker(get_kv_transfer_group())
        worker.get_finished = _timed(events, "get_finished", worker.get_finished)
        if hasattr(worker, "_receive"):  # ours: submit and the transfer thread's read
            worker.add_recvs = _timed(events, "add_recvs", worker.add_recvs)
            # The read's start only: `_receive` ends after ReadDone, often after the call.
            worker._receive = _started(events, "receive", worker._receive)
            worker._record = _timed(events, "record", worker._record)
    return True


def run_delay_s() -> float:
    """Seconds the calling thread has spent runnable but waiting for a core (the second field
    of Linux's `/proc/thread-self/schedstat`); 0 where that file does not exist.

    Engines run one OMP thread, the calling one, so for the engine thread this is the part of
    a call that other processes' work cost it. Only this thread: the sum over all threads
    counts Mooncake's and ZMQ's polling threads, which wait for a core at the same time."""
    try:
        with open("/proc/thread-self/schedstat", encoding="ascii") as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return 0.0


def traced_generate(llm: Any, **kwargs: Any) -> dict[str, Any]:
    """`mooncake_probe.generate(**kwargs)` with the engine's events during it: `{"outputs",
    "entered", "returned", "delay_s", "events": [[kind, start, end(, scheduled tokens)], ...]}`;
    `delay_s`: the time the engine thread waited for a core meanwhile (`run_delay_s`)."""
    import time

    from mooncake_probe import generate

    events = llm.llm_engine.engine_core.engine_core.bench_events
    events.clear()
    delay = run_delay_s()
    entered = time.perf_counter()
    outputs = generate(llm, **kwargs)
    returned = time.perf_counter()
    return {
        "outputs": outputs,
        "entered": entered,
        "returned": returned,
        "delay_s": run_delay_s() - delay,
        "events": list(events),
    }


def connector_bytes_read(llm: Any) -> float:
    """Bytes our decode worker has read so far (its `bytes_read` counter)."""
    from vllm.distributed.kv_transfer import get_kv_transfer_group

    return float(get_kv_transfer_group().stats().get("bytes_read", 0.0))
