"""Helpers for KV transfers between prefill and decode instances.

These names moved here from `vllm_ascend.distributed.utils` in 0.14.0 (the old import path keeps
working through the shims). Contracts:

- `rearrange_output(base_output, cut_num, num_kv_heads)`: `base_output` is the result of an
  equal-split all-to-all over `cut_num` ranks, shape `[tokens, ...]` laid out as `cut_num`
  chunks of `tokens // cut_num` rows (chunk `r` came from rank `r`). The result interleaves
  the chunks row by row (row `i` of every chunk, then row `i + 1`, ...) and is viewed as
  `[tokens, num_kv_heads, -1]`.
- `alltoall_and_rearrange(tp_ratio, input_tensor)`: `torch.distributed.all_to_all_single`
  with equal splits over a process group of `tp_ratio` ranks, then `rearrange_output` with
  `num_kv_heads = input_tensor.shape[1]`.
- `kv_alltoall_and_rearrange(pd_tp_ratio, key, value)`: both of the above for a key and a value
  tensor; `(None, None)` when `pd_tp_ratio <= 1` (prefill and decode use the same TP size).
- `align_memory(tensor, alignment)`: the suffix view of a 1-D tensor whose first element sits
  on an `alignment`-byte boundary.
- `get_transfer_timeout_value()`: the KV transfer timeout in milliseconds, from
  `ASCEND_TRANSFER_TIMEOUT`, else derived from the HCCL RDMA timeout settings.

The process group defaults to torch.distributed's default group. vllm-ascend passes the
prefill TP group of its `parallel_state`; callers here pass theirs as `group=`.
"""

from __future__ import annotations

import os

import torch
import torch.distributed as dist

__all__ = [
    "align_memory",
    "alltoall_and_rearrange",
    "get_transfer_timeout_value",
    "kv_alltoall_and_rearrange",
    "rearrange_output",
]

ASCEND_TRANSFER_TIMEOUT_ENV = "ASCEND_TRANSFER_TIMEOUT"
HCCL_RDMA_TIMEOUT_ENV = "HCCL_RDMA_TIMEOUT"
HCCL_RDMA_RETRY_CNT_ENV = "HCCL_RDMA_RETRY_CNT"
# HCCL's defaults: the RDMA timeout exponent and the number of retransmissions.
DEFAULT_HCCL_RDMA_TIMEOUT = 20
DEFAULT_HCCL_RDMA_RETRY_CNT = 7
# One RDMA retransmission waits 4.096 us * 2**HCCL_RDMA_TIMEOUT (InfiniBand's local ACK timeout).
RDMA_ACK_TIMEOUT_UNIT_US = 4.096
# Added on top of the worst-case RDMA time, so the transfer layer gives up after HCCL does.
TRANSFER_TIMEOUT_MARGIN_MS = 3000


def kv_alltoall_and_rearrange(
    pd_tp_ratio: int,
    key: torch.Tensor | None,
    value: torch.Tensor | None,
    *,
    group: dist.ProcessGroup | None = None,
) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """All-to-all a layer's key and value over the prefill TP group and rearrange them.

    Args:
        pd_tp_ratio: prefill TP size / decode TP size.
        key: `[tokens, num_kv_heads, head_dim]`, tokens divisible by the group size.
        value: same shape rules as `key`.
        group: the process group of `pd_tp_ratio` ranks (default: the default group).

    Returns:
        `(key_out, value_out)` of the input shapes, or `(None, None)` if `pd_tp_ratio <= 1`.

    Raises:
        ValueError: `key` or `value` is None while a transfer is needed, or a shape rule fails.
    """
    if pd_tp_ratio <= 1:
        return None, None
    if key is None or value is None:
        raise ValueError("kv_alltoall_and_rearrange needs both key and value tensors")
    return (
        alltoall_and_rearrange(pd_tp_ratio, key, group=group),
        alltoall_and_rearrange(pd_tp_ratio, value, group=group),
    )


def alltoall_and_rearrange(
    tp_ratio: int, input_tensor: torch.Tensor, *, group: dist.ProcessGroup | None = None
) -> torch.Tensor:
    """Equal-split all-to-all of `input_tensor` along dim 0, then `rearrange_output`.

    Args:
        tp_ratio: number of ranks in `group`.
        input_tensor: `[tokens, num_kv_heads, ...]` with tokens divisible by `tp_ratio`.
        group: the process group (default: the default group).

    Returns:
        `[tokens, num_kv_heads, -1]`, same dtype and device.

    Raises:
        ValueError: `tp_ratio` differs from the group size, `input_tensor` has fewer than 2
            dims, or its first dim is not divisible by `tp_ratio`.
    """
    if input_tensor.dim() < 2:
        raise ValueError(
            "input_tensor must be [tokens, num_kv_heads, ...], "
            f"got shape {tuple(input_tensor.shape)}"
        )
    world = dist.get_world_size(group)
    if world != tp_ratio:
        raise ValueError(f"tp_ratio={tp_ratio} but the process group has {world} ranks")
    if input_tensor.shape[0] % tp_ratio:
        raise ValueError(
            f"dim 0 ({input_tensor.shape[0]}) must be divisible by tp_ratio ({tp_ratio})"
        )
    output = torch.empty_like(input_tensor)
    dist.all_to_all_single(output, input_tensor.contiguous(), group=group)
    return rearrange_output(output, tp_ratio, input_tensor.shape[1])


def rearrange_output(base_output: torch.Tensor, cut_num: int, num_kv_heads: int) -> torch.Tensor:
    """Interleave the `cut_num` equal chunks of `base_output` row by row.

    Args:
        base_output: `[tokens, ...]`, tokens divisible by `cut_num`.
        cut_num: number of chunks (ranks of the all-to-all).
        num_kv_heads: heads of the result view.

    Returns:
        A new contiguous tensor `[tokens, num_kv_heads, -1]`: row `i * cut_num + r` of the
        result is row `i` of chunk `r`.

    Raises:
        ValueError: `cut_num < 1`, tokens not divisible by `cut_num`, or the row size not
            divisible by `num_kv_heads`.
    """
    if cut_num < 1:
        raise ValueError(f"cut_num must be >= 1, got {cut_num}")
    tokens = base_output.shape[0]
    if tokens % cut_num:
        raise ValueError(f"dim 0 ({tokens}) must be divisible by cut_num ({cut_num})")
    row = base_output[0].numel() if tokens else 0
    if num_kv_heads < 1 or (row and row % num_kv_heads):
        raise ValueError(f"a row of {row} elements cannot be split into {num_kv_heads} heads")
    chunks = base_output.reshape(cut_num, tokens // cut_num, -1)
    return chunks.transpose(0, 1).contiguous().view(tokens, num_kv_heads, -1)


def align_memory(tensor: torch.Tensor, alignment: int) -> torch.Tensor:
    """Return the suffix view of `tensor` that starts on an `alignment`-byte boundary.

    Over-allocate by `alignment` bytes, then align: the usual way to get a buffer a DMA engine
    or RDMA registration accepts.

    Args:
        tensor: a 1-D contiguous tensor.
        alignment: bytes, a positive multiple of the element size.

    Returns:
        A view sharing storage with `tensor` (possibly `tensor` itself).

    Raises:
        ValueError: `tensor` is not 1-D contiguous, `alignment` is not a positive multiple of
            the element size, or `tensor` is too short to reach the boundary.
    """
    if tensor.dim() != 1 or not tensor.is_contiguous():
        raise ValueError(f"align_memory needs a 1-D contiguous tensor, got {tuple(tensor.shape)}")
    size = tensor.element_size()
    if alignment <= 0 or alignment % size:
        raise ValueError(f"alignment must be a positive multiple of {size} bytes, got {alignment}")
    ptr = tensor.data_ptr()
    offset_bytes = -ptr % alignment
    if offset_bytes % size:
        raise ValueError(f"data pointer {ptr:#x} cannot reach a {alignment}-byte boundary")
    offset = offset_bytes // size
    if offset > tensor.numel():
        raise ValueError(f"tensor of {tensor.numel()} elements is too short to align")
    return tensor[offset:]


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{name} must be an integer, got {raw!r}") from None
    if value <= 0:
        raise ValueError(f"{name} must be positive, got {value}")
    return value


def get_transfer_timeout_value() -> int:
    """The KV transfer timeout, in milliseconds.

    `ASCEND_TRANSFER_TIMEOUT` (ms) wins when set. Otherwise the worst case of HCCL's RDMA
    retransmissions plus a margin: `4.096 us * 2**HCCL_RDMA_TIMEOUT * HCCL_RDMA_RETRY_CNT`
    converted to ms, floored, + 3000 ms. With HCCL's defaults (20, 7) that is 33064 ms.

    Raises:
        ValueError: a variable is set to something other than a positive integer.
    """
    explicit = os.environ.get(ASCEND_TRANSFER_TIMEOUT_ENV, "").strip()
    if explicit:
        return _env_int(ASCEND_TRANSFER_TIMEOUT_ENV, 0)
    exponent = _env_int(HCCL_RDMA_TIMEOUT_ENV, DEFAULT_HCCL_RDMA_TIMEOUT)
    retries = _env_int(HCCL_RDMA_RETRY_CNT_ENV, DEFAULT_HCCL_RDMA_RETRY_CNT)
    worst_case_us = RDMA_ACK_TIMEOUT_UNIT_US * (2**exponent) * retries
    return int(worst_case_us // 1000) + TRANSFER_TIMEOUT_MARGIN_MS
