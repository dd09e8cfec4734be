"""Distributed helpers that stay in `vllm_ascend.distributed.utils` (stay-put in the move table).

The KV-transfer helpers that used to live here (`kv_alltoall_and_rearrange`,
`alltoall_and_rearrange`, `rearrange_output`, `align_memory`, `get_transfer_timeout_value`)
moved to `vllm_ascend.distributed.kv_transfer.utils.utils` in 0.14.0; the shims forward those
names from here with a deprecation warning.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

__all__ = ["fc3_all_gather_and_maybe_unpad_impl", "unpad_gathered"]


def unpad_gathered(
    gathered: torch.Tensor, padded_length: int, num_tokens_per_rank: torch.Tensor | list[int]
) -> torch.Tensor:
    """Drop each rank's padding from an all-gathered `[world * padded_length, ...]` tensor.

    Args:
        gathered: rank `r`'s rows at `[r * padded_length, (r + 1) * padded_length)`.
        padded_length: rows each rank contributed.
        num_tokens_per_rank: real (unpadded) rows of each rank, `len == world`.

    Returns:
        `[sum(num_tokens_per_rank), ...]`: each rank's real rows, in rank order.

    Raises:
        ValueError: the sizes do not add up, or a rank claims more rows than it padded to.
    """
    counts = [int(n) for n in num_tokens_per_rank]
    world = len(counts)
    if gathered.shape[0] != world * padded_length:
        raise ValueError(
            f"gathered has {gathered.shape[0]} rows, expected {world} ranks x {padded_length}"
        )
    if any(n < 0 or n > padded_length for n in counts):
        raise ValueError(f"token counts {counts} must lie in [0, {padded_length}]")
    per_rank = gathered.view(world, padded_length, *gathered.shape[1:])
    return torch.cat([per_rank[r, :n] for r, n in enumerate(counts)], dim=0)


def fc3_all_gather_and_maybe_unpad_impl(
    x: torch.Tensor, *, group: dist.ProcessGroup | None = None
) -> torch.Tensor:
    """All-gather `x` along dim 0 over `group` and strip the padding of the forward pass.

    Outside a vLLM forward pass (no forward context set) `x` is returned unchanged. Inside one:
    with data parallelism (`forward_context.dp_metadata` set) each rank's rows are cut to its
    real token count (`dp_metadata.num_tokens_across_dp_cpu`); without it, the last
    `pad_size` rows (platform forward-context entry `additional_kwargs["pad_size"]`, 0 if
    absent) are dropped.

    Args:
        x: `[padded_tokens, ...]`, the same `padded_tokens` on every rank.
        group: the gather group (default: torch.distributed's default group). vllm-ascend
            passes its FC3 quantisation group.

    Returns:
        `[real_tokens_over_all_ranks, ...]`, dtype and device of `x`.
    """
    from vllm.forward_context import get_forward_context, is_forward_context_available

    if not is_forward_context_available():
        return x
    ctx = get_forward_context()
    world = dist.get_world_size(group)
    gathered = torch.empty((world * x.shape[0], *x.shape[1:]), dtype=x.dtype, device=x.device)
    dist.all_gather_into_tensor(gathered, x.contiguous(), group=group)
    if ctx.dp_metadata is None:
        pad_size = int(ctx.additional_kwargs.get("pad_size", 0))
        return gathered[:-pad_size] if pad_size > 0 else gathered
    return unpad_gathered(gathered, x.shape[0], ctx.dp_metadata.num_tokens_across_dp_cpu)
