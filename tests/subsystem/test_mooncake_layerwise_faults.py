"""The layerwise Mooncake worker under faults: a prefill side that will not push (issue
"Hardening", item 16), or pushes late (issue 21: a late push must not stall the batch).

Real workers on both sides: the prefill `MooncakeLayerwiseWorker` runs in its own process
(`mooncake_peer.py` with `"layerwise": true`), the decode one here; they talk over the real
side channel (ZMQ) and register their KV caches with real Mooncake transfer engines.

`layer_wait_timeout_s` is 60 s and each load must be reported finished within `BOUND_S`
(30 s): a load that only ends at the layer deadline fails, so passing means it ended on the
prefill side's word (`Withheld`), not on a tuned margin. Loads are asynchronous: the decode
worker's forward pass (`wait_for_layer_load`) never waits for them; `get_finished` reports them.
"""

from __future__ import annotations

import sys
import threading
import time
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


def layerwise_decode_worker() -> tuple[MooncakeLayerwiseWorker, torch.Tensor]:
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
    return worker, cache


def load(transfer_id: str, kv_port: int, block_ids: list[int]) -> LoadSpec:
    remote = RemotePrefill("", transfer_id, "127.0.0.1", kv_port, [], 1)
    return LoadSpec(f"decode-{transfer_id}", transfer_id, remote, block_ids, 0)


def decode_step(worker: MooncakeLayerwiseWorker) -> tuple[float, set[str]]:
    """One decode step's connector work: `(seconds the forward pass waited on layers, the
    requests whose loads finished)`."""
    started = time.monotonic()
    for layer in range(GEOMETRY["layers"]):
        worker.wait_for_layer_load(f"layers.{layer}")
    waited = time.monotonic() - started
    _, recving = worker.get_finished()
    return waited, set(recving or ())


def step_until_received(
    worker: MooncakeLayerwiseWorker, request_id: str, bound_s: float
) -> list[float]:
    """Step (every 10 ms) until `request_id`'s load is reported finished; each step's wait."""
    waits: list[float] = []
    deadline = time.monotonic() + bound_s
    while True:
        waited, recving = decode_step(worker)
        waits.append(waited)
        if request_id in recving:
            return waits
        assert time.monotonic() < deadline, f"{request_id} not finished within {bound_s} s"
        time.sleep(0.01)


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
    worker, _ = layerwise_decode_worker()
    try:
        worker.bind(LayerwiseMetadata(loads=[load("t-dropped", kv_port, [3, 4, 5])]))
        step_until_received(worker, "decode-t-dropped", BOUND_S)
        assert worker.get_block_ids_with_load_errors() == {3, 4, 5}
        assert worker.stats()["loads_failed"] == 1
    finally:
        worker.shutdown()


def test_a_transfer_withheld_after_registration_ends_the_load_already_waiting(
    prefill_peer: tuple[Peer, int],
) -> None:
    peer, kv_port = prefill_peer
    worker, _ = layerwise_decode_worker()
    try:
        worker.bind(LayerwiseMetadata(loads=[load("t-aborted", kv_port, [7, 8])]))
        wait_until(
            lambda: peer.command(op="stats").get("push_requests_received", 0) >= 1,
            WAIT_S,
            "the push request registered on the prefill peer",
            0.05,
        )
        # Registered, nothing pushed yet: the load goes on waiting, outside the steps.
        assert decode_step(worker)[1] == set()
        peer.command(op="withhold", withheld={"t-aborted": "prefill request aborted"})
        step_until_received(worker, "decode-t-aborted", BOUND_S)
        assert worker.get_block_ids_with_load_errors() == {7, 8}
    finally:
        worker.shutdown()


def test_a_late_push_never_stalls_the_decode_steps_of_other_requests(
    prefill_peer: tuple[Peer, int],
) -> None:
    """The prefill side pushes 1 s after the decode side registered: the decode steps that run
    meanwhile (the other requests' forward passes) do not wait for it, and the load is
    reported once every layer arrived, with the prefill blocks' bytes."""
    peer, kv_port = prefill_peer
    worker, cache = layerwise_decode_worker()
    try:
        worker.bind(LayerwiseMetadata(loads=[load("t-late", kv_port, [3, 4])]))
        wait_until(
            lambda: peer.command(op="stats").get("push_requests_received", 0) >= 1,
            WAIT_S,
            "the push request registered on the prefill peer",
            0.05,
        )
        pusher = threading.Timer(
            1.0,
            peer.command,
            kwargs={
                "op": "push",
                "request_id": "prefill-late",
                "transfer_id": "t-late",
                "block_ids": [10, 11],
            },
        )
        started = time.monotonic()
        pusher.start()
        waits = step_until_received(worker, "decode-t-late", BOUND_S)
        assert time.monotonic() - started >= 1.0  # reported only once the push came
        pusher.join()
        # Every step of the second it waited was a normal step: no layer wait held one.
        assert len(waits) > 10 and max(waits) < 0.05, (len(waits), max(waits))
        assert worker.get_block_ids_with_load_errors() == set()
        assert worker.stats()["loads_ok"] == 1
        prefill = rank_cache({**GEOMETRY, "total_heads": 2, "tp_size": 1}, 0)
        assert torch.equal(cache[:, [3, 4]], prefill[:, [10, 11]])
    finally:
        worker.shutdown()


def test_shutdown_hands_the_kv_cache_back_to_the_engine_when_no_transfer_is_open() -> None:
    # The transfer engine lives as long as the process; a region left registered after its
    # tensor is freed makes a later cache allocated inside it fail to register ("overlaps").
    worker, _ = layerwise_decode_worker()
    engine = worker.engine
    assert engine is not None and worker.layout is not None
    starts = [start for start, _ in worker.layout.allocations]
    assert set(starts) <= set(engine.registered_regions())
    worker.shutdown()
    assert not set(starts) & set(engine.registered_regions())
