"""Block copies between CPU tensors as a loop of `memmove`s over byte ranges.

On the CPU a torch copy op costs about a microsecond of dispatch and TensorIterator set-up
before it moves a byte, as long as the copy of an 8-16 KiB block itself. Here a block of one
layer is a contiguous byte range of the tensor's memory (`chunk_layout`), a run of consecutive
block ids is one range per layer, and a batch is a loop of `memmove`s over those ranges, with no
tensor allocated. Two implementations of that loop:

- compiled (`_block_memmove.c`, used whenever it built; `compiled_copier`): ONE call per batch
  checks the ids, merges them into runs and does every `memmove` in C, the GIL released for
  batches of 256 KiB and more. The interpreter's ~0.2 us per range and ~1 us of planning per
  batch were as long as the copies of small blocks, so only compiled code gets scattered or
  single small blocks to the speed of one contiguous copy. From 4 MiB per batch it copies the
  runs in source order when that cannot change the result (source and destination memory
  disjoint, no destination block written twice): scattered ids then read the source in one
  forward sweep, which the hardware prefetcher follows.
- fallback (`copy_runs`): the same ranges as slice assignments between two `memoryview`s, for
  an install where the optional extension did not compile (no C compiler).

Only for CPU tensors whose per-block region is contiguous after the block axis (every vLLM KV
cache layout); `chunk_layout` returns None for anything else and the caller falls back to
torch ops (the path every accelerator takes).
"""

from __future__ import annotations

import ctypes
import functools
import importlib
import itertools
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import ModuleType

import torch

__all__ = [
    "EXTENSION",
    "ChunkLayout",
    "PairPlan",
    "chunk_layout",
    "compatible",
    "compiled_copier",
    "copy_runs",
    "pack_plan",
    "plan_pair",
]


def _load_extension() -> ModuleType | None:
    try:
        return importlib.import_module("vllm_ascend.distributed.kv_transfer.utils._block_memmove")
    except ImportError:  # the install had no C compiler: the extension is optional
        return None


# The compiled loop, or None where it did not build. Read when a copier is made, so a test can
# set it to None to check the fallback.
EXTENSION: ModuleType | None = _load_extension()


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

    The fallback of `compiled_copier`, in Python: ~0.2 us of interpreter time per range.

    The caller has checked that every id is in range: a slice past the end of a memoryview
    would not raise. Within one tensor, each run is moved as one `memmove` would move it (read
    whole before it is written).
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
            # Backwards when the run moves forward: within one tensor, the run is then read
            # before it is overwritten, as one memmove would.
            for i in range(n - 1, -1, -1) if d * ds > s * ss else range(n):
                s0, d0 = (s + i) * ss, (d + i) * ds
                for so, do in offsets:
                    a, b = so + s0, do + d0
                    dmv[b : b + chunk] = smv[a : a + chunk]


def pack_plan(
    pairs: Sequence[tuple[ChunkLayout, ChunkLayout]], src_blocks: int, dst_blocks: int
) -> bytes:
    """The plan `_block_memmove.copy_blocks` reads: native int64 words, all sizes in bytes.

    `src_blocks, dst_blocks, len(pairs)`, then per pair `source address, destination address,
    chunk bytes, source block stride, destination block stride, len(outer)` and the `(source,
    destination)` outer offsets. Ids are checked against `src_blocks`/`dst_blocks`, so they
    must not exceed any tensor's block count. Bytes, not a mutable buffer: the C side checks a
    plan once per call and must see the same words while it copies.
    """
    words = [src_blocks, dst_blocks, len(pairs)]
    for src, dst in pairs:
        words += [src.tensor.data_ptr(), dst.tensor.data_ptr(), src.chunk_bytes]
        words += [src.block_stride, dst.block_stride, len(src.outer)]
        for so, do in zip(src.outer, dst.outer, strict=True):
            words += [so, do]
    return struct.pack(f"={len(words)}q", *words)


def compiled_copier(
    pairs: Sequence[tuple[ChunkLayout, ChunkLayout]], src_blocks: int, dst_blocks: int
) -> Callable[[Sequence[int], Sequence[int]], int] | None:
    """`(src_ids, dst_ids) -> bytes copied` through the extension, or None without it.

    The callable copies block `src_ids[i]` to `dst_ids[i]` of every pair and raises
    ValueError (id lists of different lengths), IndexError (an id out of range; nothing is
    copied), TypeError (a non-integer id), like `BlockCopier.copy`'s fallback. It holds raw
    addresses: the caller keeps the tensors alive for as long as it uses it.
    """
    if EXTENSION is None:
        return None
    return functools.partial(EXTENSION.copy_blocks, pack_plan(pairs, src_blocks, dst_blocks))
