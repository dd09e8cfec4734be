"""`KVCacheLayout`: where each KV cache block lives, as raw `(address, size)` segments.

One segment per KV cache tensor and leading index (e.g. K and V halves), in a fixed order; the
pool value of a block is their concatenation.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from vllm_ascend.distributed.kv_transfer.utils.block_copy import find_block_axis

if TYPE_CHECKING:
    import torch

__all__ = ["KVCacheLayout"]


@dataclass(frozen=True)
class _Segment:
    # Block b's bytes of this segment: [offset + b * block_stride, ... + size).
    offset: int
    block_stride: int
    size: int


class KVCacheLayout:
    """Raw addresses of every block of a set of KV cache tensors.

    A block's value is one segment per KV cache tensor and leading index (the K/V axis of
    `[2, num_blocks, ...]` layouts), in tensor order. Consecutive segments that are adjacent in
    memory for every block (same block stride, one ending where the next starts, as in
    block-major layouts that keep all layers of a block side by side) are merged, so such a
    block is one segment and one zero-copy range for the store.

    Args:
        tensors: the distinct KV cache tensors, in layer order (any device).
        num_blocks: blocks per tensor (`KVCacheConfig.num_blocks`).

    Raises:
        ValueError: a tensor without a block axis among its first two axes, or whose block
            slices are not contiguous (the store needs raw byte ranges).
    """

    def __init__(self, tensors: Sequence[torch.Tensor], num_blocks: int) -> None:
        self.num_blocks = num_blocks
        segments: list[_Segment] = []
        storages: dict[int, int] = {}
        for t in tensors:
            segments.extend(self._describe(t, num_blocks))
            storage = t.untyped_storage()
            storages[storage.data_ptr()] = storage.nbytes()
        self._segments = _merge(segments)
        self.buffers: list[tuple[int, int]] = sorted(storages.items())
        self.segments_per_block = len(self._segments)
        self.bytes_per_block = sum(seg.size for seg in self._segments)
        self._sizes = [seg.size for seg in self._segments]

    @staticmethod
    def _describe(t: torch.Tensor, num_blocks: int) -> list[_Segment]:
        axis = find_block_axis(t, num_blocks)
        es = t.element_size()
        leads = [i * t.stride(0) * es for i in range(t.shape[0])] if axis == 1 else [0]
        one = t.select(axis, 0) if axis == 0 else t[0].select(0, 0)
        if not one.is_contiguous():
            raise ValueError(
                f"KV cache tensor of shape {tuple(t.shape)} and strides {t.stride()}: a block "
                "is not one contiguous byte range per leading index"
            )
        stride = t.stride(axis) * es
        size = one.numel() * es
        return [_Segment(t.data_ptr() + lead, stride, size) for lead in leads]

    def segments(self, block_id: int) -> tuple[list[int], list[int]]:
        """`(addresses, sizes)` of block `block_id`, in the pool value's order.

        Raises:
            IndexError: `block_id` outside `[0, num_blocks)`.
        """
        if not 0 <= block_id < self.num_blocks:
            raise IndexError(f"block id {block_id} outside [0, {self.num_blocks})")
        return [seg.offset + block_id * seg.block_stride for seg in self._segments], self._sizes


def _merge(segments: list[_Segment]) -> list[_Segment]:
    merged: list[_Segment] = []
    for seg in segments:
        last = merged[-1] if merged else None
        if (
            last is not None
            and last.block_stride == seg.block_stride
            and last.offset + last.size == seg.offset
        ):
            merged[-1] = _Segment(last.offset, last.block_stride, last.size + seg.size)
        else:
            merged.append(seg)
    return merged
