"""Code the CPU offload e2e tests run inside an engine process (`EngineProcess.call` targets)
and a test-only connector subclass (`kv_connector_module_path="cpu_offload_probe"`).

Functions take the `vllm.LLM` first and return JSON-able values. Those marked "uniproc" need
`VLLM_ENABLE_V1_MULTIPROCESSING=0` and the uni executor: the scheduler and the worker then
live in the process that runs them.
"""

from __future__ import annotations

from typing import Any

from vllm_ascend.distributed.kv_transfer.kv_pool.cpu_offload.cpu_offload_connector import (
    CPUOffloadingConnector,
)
from vllm_ascend.distributed.kv_transfer.kv_pool.cpu_offload.metadata import (
    Discard,
    GetStats,
    MetadataClient,
)

# What DiscardingCPUOffloadingConnector did and saw, per side (both live in one uniproc process).
_RECORD: dict[str, list[int]] = {"discarded_block_ids": [], "reported_block_ids": []}


def stats(llm: Any, address: str) -> dict[str, int]:
    """The metadata server's counters, fetched over ZMQ like any client (any executor)."""
    client = MetadataClient(address, 10.0, "test-probe")
    try:
        result: dict[str, int] = client.call(GetStats())
        return result
    finally:
        client.close()


def _scheduler(llm: Any) -> Any:
    return llm.llm_engine.engine_core.engine_core.scheduler


def free_device_blocks(llm: Any) -> int:
    """Free blocks of vLLM's KV cache block pool (uniproc)."""
    return int(_scheduler(llm).kv_cache_manager.block_pool.get_num_free_blocks())


def zero_host_pool(llm: Any) -> int:
    """Overwrite every offloaded block with zeros (uniproc); returns the tensors touched."""
    import torch
    from vllm.distributed.kv_transfer import get_kv_transfer_group

    connector = get_kv_transfer_group()
    assert isinstance(connector, CPUOffloadingConnector) and connector.worker is not None
    tensors = connector.worker.host_tensors()
    # The pool was allocated during a forward pass, under torch.inference_mode.
    with torch.inference_mode():
        for t in tensors:
            t.zero_()
    return len(tensors)


def opened_zmq_sockets(llm: Any) -> dict[str, bool]:
    """Whether the scheduler's and the worker's metadata clients opened a ZMQ socket (uniproc:
    both live in the server's process and should call it directly)."""
    from vllm.distributed.kv_transfer import get_kv_transfer_group

    worker = get_kv_transfer_group()
    scheduler = _scheduler(llm).connector
    assert isinstance(worker, CPUOffloadingConnector) and worker.worker is not None
    assert isinstance(scheduler, CPUOffloadingConnector) and scheduler.scheduler is not None
    return {
        "scheduler": scheduler.scheduler.client._sock is not None,
        "worker": worker.worker.client._sock is not None,
    }


def load_error_record(llm: Any) -> dict[str, list[int]]:
    """Device block ids the test connector made fail, and those the worker reported (uniproc)."""
    return {k: sorted(v) for k, v in _RECORD.items()}


class DiscardingCPUOffloadingConnector(CPUOffloadingConnector):
    """The real connector, plus a test that deletes a key between lookup and load (S14).

    After each lookup that finds hits, the last hit block is discarded from the host pool
    through the metadata server's `Discard` request, as an eviction by another party would.
    The scheduler side then pins one block fewer and must report that block as a load error.
    """

    def get_num_new_matched_tokens(
        self, request: Any, num_computed_tokens: int
    ) -> tuple[int | None, bool]:
        tokens, is_async = super().get_num_new_matched_tokens(request, num_computed_tokens)
        if tokens:
            sched = self._scheduler()
            last = (num_computed_tokens + tokens) // sched.block_size - 1
            sched.client.call(Discard(block_hashes=[request.block_hashes[last]]))
            self._discard_index = {request.request_id: last}
        return tokens, is_async

    def update_state_after_alloc(self, request: Any, blocks: Any, num_external_tokens: int) -> None:
        super().update_state_after_alloc(request, blocks, num_external_tokens)
        index = getattr(self, "_discard_index", {}).pop(request.request_id, None)
        if index is not None and num_external_tokens:
            _RECORD["discarded_block_ids"].append(blocks.get_block_ids()[0][index])

    def get_block_ids_with_load_errors(self) -> set[int]:
        errors = super().get_block_ids_with_load_errors()
        _RECORD["reported_block_ids"].extend(errors)
        return errors
