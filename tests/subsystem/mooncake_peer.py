"""A prefill-side `MooncakeConnectorWorker` in its own process, for the worker-level tests.

Run as `python mooncake_peer.py SPEC_JSON`; the spec gives the connector settings and the KV
cache geometry. The process builds a KV cache shaped like vLLM's CPU backend
(`[num_blocks, kv_heads, block_size, 2 * head_size]` per layer, all layers in one
allocation) filled by `kv_values` (deterministic), registers it through the real worker and
serves the real side channel. It prints one JSON line when ready, then answers one JSON line
per command read from stdin:

- `{"op": "send", "request_id": str, "hold_s": float}`: hand a finished request to the worker;
- `{"op": "finished"}` -> `{"sending": [...]}` (the worker's `get_finished`);
- `{"op": "stats"}` -> the worker's counters;
- `{"op": "withhold", "withheld": {transfer_id: reason}}`: layerwise peers (`"layerwise": true`
  in the spec) only: the scheduler's word that these transfers will not be pushed;
- `{"op": "push", "request_id": str, "transfer_id": str, "block_ids": [int]}`: layerwise peers
  only: one prefill step that computes the whole prompt in these blocks, every layer pushed to
  the decode workers registered for the transfer;
- `{"op": "quit"}`.

`kv_values(...)` is imported by the tests to know what the prefill blocks hold.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import torch


def kv_values(
    layers: int, num_blocks: int, heads: int, block_size: int, width: int, seed: int
) -> torch.Tensor:
    """The full KV cache content `[layers, num_blocks, heads, block_size, width]`, bf16.

    `heads` is the model's total; a TP rank holds a slice of dim 2.
    """
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(layers, num_blocks, heads, block_size, width, generator=gen).to(
        torch.bfloat16
    )


def worker_config(spec: dict[str, Any]) -> Any:
    from vllm_ascend.distributed.kv_transfer.kv_p2p.config import MooncakeP2PConfig

    return MooncakeP2PConfig.from_extra_config(
        spec.get("extra", {}),
        engine_id=spec["engine_id"],
        kv_role=spec["kv_role"],
        kv_port=spec["kv_port"],
        tp_size=spec["tp_size"],
        dp_rank=0,
        total_kv_heads=spec["total_heads"],
        block_size=spec["block_size"],
        default_transfer_timeout_s=10.0,
    )


def rank_cache(spec: dict[str, Any], rank: int) -> torch.Tensor:
    """This rank's KV cache: its head slice of `kv_values`, made contiguous."""
    from vllm_ascend.distributed.kv_transfer.kv_p2p.tp_mapping import heads_of_rank

    full = kv_values(
        spec["layers"],
        spec["num_blocks"],
        spec["total_heads"],
        spec["block_size"],
        spec["width"],
        spec["seed"],
    )
    heads = heads_of_rank(spec["total_heads"], spec["tp_size"], rank)
    return full[:, :, heads.start : heads.stop].contiguous()


def main() -> int:
    from vllm_ascend.distributed.kv_transfer.kv_p2p.layerwise_metadata import (
        LayerwiseMetadata,
        SaveSpec,
    )
    from vllm_ascend.distributed.kv_transfer.kv_p2p.layerwise_worker import (
        MooncakeLayerwiseWorker,
    )
    from vllm_ascend.distributed.kv_transfer.kv_p2p.pull_worker import MooncakeConnectorWorker

    spec = json.loads(sys.argv[1])
    rank = spec.get("tp_rank", 0)
    cache = rank_cache(spec, rank)
    kind = MooncakeLayerwiseWorker if spec.get("layerwise") else MooncakeConnectorWorker
    worker: Any = kind(worker_config(spec), rank, spec["num_blocks"])
    worker.register_kv_caches({f"layers.{i}": cache[i] for i in range(spec["layers"])})
    assert worker.agent is not None
    print(json.dumps({"ready": True, "session": worker.agent.session_id}), flush=True)
    for line in sys.stdin:
        cmd = json.loads(line)
        op = cmd["op"]
        if op == "send":
            worker.add_sends({cmd["request_id"]: cmd["hold_s"]})
            answer: Any = {"ok": True}
        elif op == "finished":
            sending, _ = worker.get_finished()
            answer = {"sending": sorted(sending or ())}
        elif op == "stats":
            answer = worker.stats()
        elif op == "withhold":
            worker.bind(LayerwiseMetadata(withheld=cmd["withheld"]))
            answer = {"ok": True}
        elif op == "push":
            blocks = cmd["block_ids"]
            save = SaveSpec(cmd["request_id"], cmd["transfer_id"], blocks, 0, len(blocks), True)
            worker.bind(LayerwiseMetadata(saves=[save]))
            for layer in range(spec["layers"]):
                worker.save_kv_layer(f"layers.{layer}")
            answer = {"ok": True}
        elif op == "quit":
            worker.shutdown()
            print(json.dumps({"ok": True}), flush=True)
            return 0
        else:
            answer = {"error": f"unknown op {op!r}"}
        print(json.dumps(answer), flush=True)
    worker.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
