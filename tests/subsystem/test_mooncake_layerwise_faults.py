"""The layerwise Mooncake worker under faults: a prefill side that will not push (issue
"Hardening", item 16).

Real workers on both sides: the prefill `MooncakeLayerwiseWorker` runs in its own process
(`mooncake_peer.py` with `"layerwise": true`), the decode one here; they talk over the real
side channel (ZMQ) and register their KV caches with real Mooncake transfer engines.

`layer_wait_timeout_s` is 60 s and each wait runs on a thread joined for at most
`BOUND_S` (30 s): a wait that only ends at the layer deadline fails the join, so passing means
the wait ended on the prefill side's word (`Withheld`), not on a tuned margin.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("vllm")
pytest.importorskip("mooncake.engine")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from mooncake_peer import rank_cache, worker_config  # noqa: E402
from test_mooncake_p2p_worker import (  # noqa: E402
    GEOMETRY,
    WAIT_S,
    Peer,
    free_port,
    spec_for,
)

from tests.polling import wait_until  # noqa: E402
from vllm_ascend.distributed.kv_transfer.kv_p2p.kv_params import RemotePrefill  # noqa: E402
from vllm_ascend.distributed.kv_transfer.kv_p2p.layerwise_metadata import (  # noqa: E402
    LayerwiseMetadata,
    LoadSpec,
)
from vllm_ascend.distributed.kv_transfer.kv_p2p.layerwise_worker import (  # noqa: E402
    MooncakeLayerwiseWorker,
)

LAYER_WAIT_S = 60.0
BOUND_S = 30.0


def layerwise_decode_worker() -> MooncakeLayerwiseWorker:
    spec = {
        **GEOMETRY,
        "engine_id": "decode-engine",
        "kv_role": "kv_consumer",
        "kv_port": free_port(),
        "tp_size": 1,
        "total_heads": 2,
        "extra": {"handshake_timeout_s": 3.0, "layer_wait_timeout_s": LAYER_WAIT_S},
    }
    cache = torch.zeros_like(rank_cache(spec, 0))
    worker = MooncakeLayerwiseWorker(worker_config(spec), 0, GEOMETRY["num_blocks"])
    worker.register_kv_caches({f"layers.{i}": cache[i] for i in range(GEOMETRY["layers"])})
    return worker


def load(transfer_id: str, kv_port: int, block_ids: list[int]) -> LoadSpec:
    remote = RemotePrefill("", transfer_id, "127.0.0.1", kv_port, [], 1)
    return LoadSpec(f"decode-{transfer_id}", transfer_id, remote, block_ids, 0)


def wait_layer_on_thread(worker: MooncakeLayerwiseWorker) -> threading.Thread:
    thread = threading.Thread(target=worker.wait_for_layer_load, args=("layers.0",), daemon=True)
    thread.start()
    return thread


@pytest.fixture
def prefill_peer(tmp_path: Path) -> Iterator[tuple[Peer, int]]:
    """A layerwise prefill worker in its own process, and its side-channel base port."""
    kv_port = free_port()
    peer = Peer({**spec_for(kv_port, 1, 2), "layerwise": True}, tmp_path / "prefill.log")
    yield peer, kv_port
    peer.close()


def test_a_withheld_transfer_fails_its_load_without_waiting_for_the_layer_deadline(
    prefill_peer: tuple[Peer, int],
) -> None:
    peer, kv_port = prefill_peer
    peer.command(op="withhold", withheld={"t-dropped": "invalid kv_transfer_params"})
    worker = layerwise_decode_worker()
    try:
        worker.bind(LayerwiseMetadata(loads=[load("t-dropped", kv_port, [3, 4, 5])]))
        waiting = wait_layer_on_thread(worker)
        waiting.join(BOUND_S)
        assert not waiting.is_alive(), "the layer wait ran on towards layer_wait_timeout_s"
        worker.get_finished()
        assert worker.get_block_ids_with_load_errors() == {3, 4, 5}
        assert worker.stats()["loads_failed"] == 1
    finally:
        worker.shutdown()


def test_a_transfer_withheld_after_registration_ends_the_wait_already_running(
    prefill_peer: tuple[Peer, int],
) -> None:
    peer, kv_port = prefill_peer
    worker = layerwise_decode_worker()
    try:
        worker.bind(LayerwiseMetadata(loads=[load("t-aborted", kv_port, [7, 8])]))
        waiting = wait_layer_on_thread(worker)
        wait_until(
            lambda: peer.command(op="stats").get("push_requests_received", 0) >= 1,
            WAIT_S,
            "the push request registered on the prefill peer",
            0.05,
        )
        assert waiting.is_alive()  # registered, nothing pushed yet: the wait goes on
        peer.command(op="withhold", withheld={"t-aborted": "prefill request aborted"})
        waiting.join(BOUND_S)
        assert not waiting.is_alive(), "the layer wait ran on towards layer_wait_timeout_s"
        worker.get_finished()
        assert worker.get_block_ids_with_load_errors() == {7, 8}
    finally:
        worker.shutdown()


def test_shutdown_hands_the_kv_cache_back_to_the_engine_when_no_transfer_is_open() -> None:
    # The transfer engine lives as long as the process; a region left registered after its
    # tensor is freed makes a later cache allocated inside it fail to register ("overlaps").
    worker = layerwise_decode_worker()
    engine = worker.engine
    assert engine is not None and worker.layout is not None
    starts = [start for start, _ in worker.layout.allocations]
    assert set(starts) <= set(engine.registered_regions())
    worker.shutdown()
    assert not set(starts) & set(engine.registered_regions())
