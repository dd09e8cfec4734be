"""One rank of the 2-process gloo checks in test_kv_transfer_utils.py (run as a script).

Usage: python gloo_worker.py RANK WORLD_SIZE INIT_FILE OUT_JSON
Each rank builds deterministic inputs from its rank, runs the collectives under test and writes
the results as JSON; the test computes the expected values from the same inputs.
"""

from __future__ import annotations

import json
import os
import sys

import torch
import torch.distributed as dist


def rank_input(rank: int, tokens: int = 4, heads: int = 2, dim: int = 3) -> torch.Tensor:
    """[tokens, heads, dim] with values that encode (rank, token, head, dim)."""
    t = torch.arange(tokens * heads * dim, dtype=torch.float32).view(tokens, heads, dim)
    return t + 1000 * rank


def main() -> int:
    rank, world, init_file, out_path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    from vllm.config import VllmConfig  # noqa: F401  (vLLM's forward context needs vllm)
    from vllm.forward_context import DPMetadata, ForwardContext, override_forward_context

    from vllm_ascend.distributed.kv_transfer.utils.utils import (
        alltoall_and_rearrange,
        kv_alltoall_and_rearrange,
    )
    from vllm_ascend.distributed.utils import fc3_all_gather_and_maybe_unpad_impl

    out: dict[str, object] = {}
    x = rank_input(rank)
    out["alltoall"] = alltoall_and_rearrange(world, x).tolist()
    k, v = kv_alltoall_and_rearrange(world, x, x * -1)
    assert k is not None and v is not None
    out["kv"] = [k.tolist(), v.tolist()]
    try:
        alltoall_and_rearrange(world + 1, x)
    except ValueError as exc:
        out["ratio_error"] = str(exc)

    # fc3: outside a forward pass the input comes back unchanged.
    out["fc3_no_ctx"] = fc3_all_gather_and_maybe_unpad_impl(x).tolist()
    # Padded to 4 rows per rank; rank 0 has 3 real rows, rank 1 has 2.
    dp = DPMetadata(num_tokens_across_dp_cpu=torch.tensor([3, 2]))
    ctx = ForwardContext(no_compile_layers={}, attn_metadata={}, slot_mapping={}, dp_metadata=dp)
    with override_forward_context(ctx):
        out["fc3_dp"] = fc3_all_gather_and_maybe_unpad_impl(x).tolist()
    ctx = ForwardContext(
        no_compile_layers={},
        attn_metadata={},
        slot_mapping={},
        additional_kwargs={"pad_size": 3},
    )
    with override_forward_context(ctx):
        out["fc3_pad"] = fc3_all_gather_and_maybe_unpad_impl(x).tolist()

    dist.barrier()
    dist.destroy_process_group()
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(out, f)
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    # The results are written and closed: skip the interpreter's teardown, where a C++ thread
    # left by an imported library (gloo/vLLM) occasionally aborts the process ("terminate
    # called without an active exception", exit -6) after the work succeeded.
    os._exit(code)
