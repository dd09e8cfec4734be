"""Block copies between CPU tensors as a loop of `memmove`s over byte ranges.

On the CPU a torch copy op costs several microseconds of dispatch and TensorIterator set-up
before it moves a byte, which is what limited batches of small KV cache blocks (an 8 KiB block
needs ~0.3 us of memory bandwidth). Here a block of one layer is a contiguous byte range of
the tensor's memory, and a batch is copied by slice assignment between two `memoryview`s of
the raw memory: a C `memmove` per range with ~0.2 us of interpreter overhead, no allocation of
tensors, and a run of consecutive block ids becomes one range per layer.

Only for CPU tensors whose per-block region is contiguous after the block axis (every vLLM KV
cache layout); `chunk_layout` returns None for anything else and the caller falls back to
torch ops (the path every accelerator takes).
"""

from __future__ import annotations

import ctypes
import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import torch

__all__ = ["ChunkLayout", "PairPlan", "chunk_layout", "compatible", "copy_runs", "plan_pair"]


@dataclass(frozen=True)
class ChunkLayout:
    """Where the bytes of each block of one CPU tensor lie.

    Block `b` is, for every outer index `o` (the axes before the block axis, in row-major
    order), the range `buffer[outer[o] + b * block_stride : ... + chunk_bytes]`.

    Attributes:
        tensor: the tensor described (kept so that its memory outlives `buffer`).
        buffer: a writable byte view of the tensor's memory, from its first element.
        outer: byte offset of block 0 for each outer index.
        block_stride: bytes between block `b` and block `b + 1`.
        chunk_bytes: bytes of one block for one outer index.
    """

    tensor: torch.Tensor
    buffer: memoryview
    outer: tuple[int, ...]
    block_stride: int
    chunk_bytes: int


def chunk_layout(tensor: torch.Tensor, block_axis: int) -> ChunkLayout | None:
    """Describe a CPU tensor as byte ranges, or None when it cannot be.

    None for: a tensor not on the CPU, an empty tensor, or one whose axes after the block axis
    are not contiguous (then a block of one outer index is not one byte range).
    """
    if tensor.device.type != "cpu" or tensor.numel() == 0:
        return None
    shape, stride, size = tuple(tensor.shape), tensor.stride(), tensor.element_size()
    expected = 1
    inner = list(zip(shape, stride, strict=True))[block_axis + 1 :]
    for n, st in reversed(inner):
        if n != 1 and st != expected:
            return None
        expected *= n
    extent = (1 + sum((n - 1) * st for n, st in zip(shape, stride, strict=True))) * size
    raw = (ctypes.c_ubyte * extent).from_address(tensor.data_ptr())
    outer = tuple(
        sum(i * st for i, st in zip(index, stride, strict=False)) * size
        for index in itertools.product(*(range(n) for n in shape[:block_axis]))
    )
    return ChunkLayout(
        tensor=tensor,
        buffer=memoryview(raw).cast("B"),
        outer=outer,
        block_stride=stride[block_axis] * size,
        chunk_bytes=expected * size,
    )


def compatible(src: ChunkLayout, dst: ChunkLayout) -> bool:
    """True when a block of `src` and a block of `dst` split into the same byte ranges."""
    return src.chunk_bytes == dst.chunk_bytes and len(src.outer) == len(dst.outer)


# What the copy loop reads for one pair, flattened once: (source buffer, destination buffer,
# chunk bytes, source block stride, destination block stride, [(source, destination) outer
# offsets]).
PairPlan = tuple[memoryview, memoryview, int, int, int, list[tuple[int, int]]]


def plan_pair(src: ChunkLayout, dst: ChunkLayout) -> PairPlan:
    """Flatten a compatible pair for `copy_runs`.

    The plan holds raw views of the tensors' memory, not the tensors: the caller keeps the
    tensors alive for as long as it uses the plan (`BlockCopier` holds its pairs).
    """
    offsets = list(zip(src.outer, dst.outer, strict=True))
    return (src.buffer, dst.buffer, src.chunk_bytes, src.block_stride, dst.block_stride, offsets)


def copy_runs(plans: Sequence[PairPlan], runs: Sequence[tuple[int, int, int]]) -> None:
    """Copy runs `(src_start, dst_start, length)` of blocks for every planned pair.

    The caller has checked that every id is in range: a slice past the end of a memoryview
    would not raise. Overlapping ranges (a copy within one tensor) are copied as `memmove`
    does.
    """
    for smv, dmv, chunk, ss, ds, offsets in plans:
        if ss == chunk and ds == chunk:
            # Consecutive blocks are adjacent on both sides: a run is one range per outer index.
            for s, d, n in runs:
                nbytes, s0, d0 = n * chunk, s * ss, d * ds
                for so, do in offsets:
                    a, b = so + s0, do + d0
                    dmv[b : b + nbytes] = smv[a : a + nbytes]
            continue
        for s, d, n in runs:
            for i in range(n):
                s0, d0 = (s + i) * ss, (d + i) * ds
                for so, do in offsets:
                    a, b = so + s0, do + d0
                    dmv[b : b + chunk] = smv[a : a + chunk]
