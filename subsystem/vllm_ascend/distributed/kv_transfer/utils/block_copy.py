"""Batched copies of KV cache blocks between vLLM's KV cache and host buffers.

A KV cache tensor holds `num_blocks` blocks along one axis, the *block axis*: axis 0 for the
layouts vLLM's CPU backend and most attention backends use (`[num_blocks, ...]`), axis 1 for
the split K/V layouts (`[2, num_blocks, ...]`). `BlockTensor` finds that axis once;
`copy_blocks` then moves a batch of blocks for every layer.

What limits small KV blocks is the fixed cost per copy, not the bytes (an 8 KiB block needs
~0.3 us of memory bandwidth), so a batch is planned for as few copies as possible:

- `stack_layers`: vLLM allocates the KV cache of all layers in one buffer, each layer a view
  at a fixed offset from the previous one. Such views are stacked into ONE strided tensor
  `[num_layers, ...]`, so a block of all layers is one strided copy.
- runs (`plan_runs`): consecutive source ids that map to consecutive destination ids become
  one slice copy. Host buffers (`host_mirror`) have the KV cache's own layout, so a run is
  also adjacent in host memory, per layer.

`BlockCopier` then picks the mechanism once per set of tensors:

- CPU tensors (vLLM's CPU backend and its host pool): `block_copy_cpu`, a `memmove` per byte
  range. `"memmove"`: the compiled extension, one C call per batch that also checks the ids and
  merges them into runs, because the interpreter's fixed costs (~0.2 us per range, ~1 us per
  batch) were as long as the copies of small blocks. `"memoryview"`: the same loop in Python,
  only where the optional extension did not build;
- anything else (an NPU or GPU KV cache and its pinned host pool): one strided torch slice
  copy per run and stacked tensor, all issued in a single `torch._foreach_copy_` call, which
  works between any two devices and keeps the copies on the current stream.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from vllm_ascend.distributed.kv_transfer.utils.block_copy_cpu import (
    chunk_layout,
    compatible,
    compiled_copier,
    copy_runs,
    plan_pair,
)

__all__ = [
    "BlockCopier",
    "BlockTensor",
    "copy_blocks",
    "find_block_axis",
    "host_mirror",
    "plan_runs",
    "stack_layers",
]


def find_block_axis(tensor: torch.Tensor, num_blocks: int) -> int:
    """Return the axis of `tensor` that indexes KV cache blocks.

    Args:
        tensor: one KV cache tensor of a layer.
        num_blocks: the number of blocks of the KV cache (`KVCacheConfig.num_blocks`).

    Raises:
        ValueError: no axis of size `num_blocks` among the first two axes.
    """
    # vLLM's layouts put the block axis first, or second behind a K/V axis of size 2.
    for axis in range(min(2, tensor.dim())):
        if tensor.shape[axis] == num_blocks:
            return axis
    raise ValueError(
        f"cannot find the block axis of a KV cache tensor of shape {tuple(tensor.shape)}: "
        f"no leading axis has num_blocks={num_blocks}"
    )


@dataclass(frozen=True)
class BlockTensor:
    """One KV cache tensor and its block axis.

    Attributes:
        tensor: the KV cache tensor (any device, any dtype).
        block_axis: the axis that indexes blocks.
    """

    tensor: torch.Tensor
    block_axis: int

    @property
    def num_blocks(self) -> int:
        return int(self.tensor.shape[self.block_axis])

    @property
    def bytes_per_block(self) -> int:
        """Bytes of one block of this tensor."""
        return self.tensor.numel() // self.num_blocks * self.tensor.element_size()


def stack_layers(tensors: Sequence[torch.Tensor], num_blocks: int) -> list[BlockTensor]:
    """Describe KV cache tensors as few `BlockTensor`s as possible.

    Consecutive tensors with the same shape, strides and dtype that live in one storage at a
    constant offset from each other (vLLM's one-buffer-per-KV-cache allocation) become one
    stacked view `[n, *shape]` whose block axis is one further right. Anything else stays a
    `BlockTensor` of its own. The result covers exactly the input's memory.

    Raises:
        ValueError: a tensor without a block axis of `num_blocks`.
    """
    out: list[BlockTensor] = []
    group: list[torch.Tensor] = []

    def flush() -> None:
        if not group:
            return
        first = group[0]
        axis = find_block_axis(first, num_blocks)
        if len(group) == 1:
            out.append(BlockTensor(first, axis))
        else:
            step = group[1].storage_offset() - first.storage_offset()
            stacked = first.as_strided(
                (len(group), *first.shape), (step, *first.stride()), first.storage_offset()
            )
            out.append(BlockTensor(stacked, axis + 1))
        group.clear()

    for t in tensors:
        if group and not _continues(group, t):
            flush()
        group.append(t)
    flush()
    return out


def _continues(group: list[torch.Tensor], t: torch.Tensor) -> bool:
    first = group[0]
    if (
        t.shape != first.shape
        or t.stride() != first.stride()
        or t.dtype != first.dtype
        or t.device != first.device
        or t.untyped_storage().data_ptr() != first.untyped_storage().data_ptr()
    ):
        return False
    step = (group[1] if len(group) > 1 else t).storage_offset() - first.storage_offset()
    # A positive step no smaller than one view's extent: the views never overlap.
    extent = 1 + sum((n - 1) * st for n, st in zip(first.shape, first.stride(), strict=True))
    return step >= extent and t.storage_offset() - group[-1].storage_offset() == step


def host_mirror(
    device: BlockTensor,
    num_host_blocks: int,
    empty: Callable[[Sequence[int], torch.dtype], torch.Tensor],
) -> BlockTensor:
    """A host `BlockTensor` for `num_host_blocks` blocks of `device`, in `device`'s layout.

    Same shape as `device` except `num_host_blocks` on the block axis, and contiguous: a run
    of consecutive blocks is then one byte range per outer index (layer, K/V) on both sides,
    which is what lets `BlockCopier` move a contiguous batch in one copy per layer.

    Args:
        device: the KV cache side.
        num_host_blocks: blocks of the host pool.
        empty: allocator `(shape, dtype) -> tensor`, e.g. `KVDevice.empty_host` (pinned memory
            on an accelerator).
    """
    shape = list(device.tensor.shape)
    shape[device.block_axis] = num_host_blocks
    return BlockTensor(empty(shape, device.tensor.dtype), device.block_axis)


def plan_runs(src_ids: Sequence[int], dst_ids: Sequence[int]) -> list[tuple[int, int, int]]:
    """Merge a block mapping into runs `(src_start, dst_start, length)`.

    `src_ids[i]` is copied to `dst_ids[i]`; a run covers positions where both sides advance by
    one. Order is preserved, so the same destination id written twice keeps the last writer.

    Raises:
        ValueError: the two id lists differ in length.
    """
    if len(src_ids) != len(dst_ids):
        raise ValueError(f"src_ids has {len(src_ids)} ids but dst_ids has {len(dst_ids)}")
    runs: list[tuple[int, int, int]] = []
    if not src_ids:
        return runs
    start_s, start_d, length = src_ids[0], dst_ids[0], 1
    for s, d in zip(src_ids[1:], dst_ids[1:], strict=True):
        if s == start_s + length and d == start_d + length:
            length += 1
            continue
        runs.append((start_s, start_d, length))
        start_s, start_d, length = s, d, 1
    runs.append((start_s, start_d, length))
    return runs


class BlockCopier:
    """Copies blocks between fixed `(source, destination)` tensor pairs; plan once, copy often.

    Args:
        pairs: `(source, destination)` tensors, one pair per KV cache tensor; both sides of a
            pair have the same layout except for the number of blocks.
        force_torch: use torch copies even on the CPU (the accelerators' path; benchmarks and
            tests measure and check it here).

    Raises:
        ValueError: a pair whose block sizes differ.

    Attributes:
        mechanism: `"memmove"` (every tensor on the CPU: the compiled loop of
            `block_copy_cpu`), `"memoryview"` (every tensor on the CPU, but the extension did not
            build: its Python fallback) or `"torch"`.
    """

    def __init__(
        self, pairs: Sequence[tuple[BlockTensor, BlockTensor]], *, force_torch: bool = False
    ) -> None:
        for src, dst in pairs:
            if src.bytes_per_block != dst.bytes_per_block:
                raise ValueError(
                    f"block size mismatch: {src.bytes_per_block} B in the source, "
                    f"{dst.bytes_per_block} B in the destination"
                )
        self.pairs = list(pairs)
        self.bytes_per_block = sum(src.bytes_per_block for src, _ in self.pairs)
        self._src_blocks = min((s.num_blocks for s, _ in self.pairs), default=0)
        self._dst_blocks = min((d.num_blocks for _, d in self.pairs), default=0)
        layouts = [
            (chunk_layout(s.tensor, s.block_axis), chunk_layout(d.tensor, d.block_axis))
            for s, d in self.pairs
        ]
        chunked = [
            (s, d) for s, d in layouts if s is not None and d is not None and compatible(s, d)
        ]
        self._plans = [plan_pair(s, d) for s, d in chunked]
        cpu = not force_torch and len(chunked) == len(self.pairs)
        self._compiled = (
            compiled_copier(chunked, self._src_blocks, self._dst_blocks) if cpu else None
        )
        if not cpu:
            self.mechanism = "torch"
        else:
            self.mechanism = "memoryview" if self._compiled is None else "memmove"

    def copy(
        self, src_ids: Sequence[int], dst_ids: Sequence[int], *, non_blocking: bool = False
    ) -> int:
        """Copy blocks `src_ids[i] -> dst_ids[i]` for every pair.

        Args:
            src_ids: block ids in the source tensors.
            dst_ids: block ids in the destination tensors, same length as `src_ids`.
            non_blocking: passed to torch copies (only meaningful between a device and pinned
                host memory; the caller then synchronises through `KVDevice`).

        Returns:
            The number of bytes copied.

        Raises:
            ValueError: mismatched id lists.
            IndexError: an id beyond the number of blocks of its tensor (nothing is copied).
        """
        if self._compiled is not None:
            # First and alone: what one small block costs is this method's fixed cost.
            return self._compiled(src_ids, dst_ids)
        runs = plan_runs(src_ids, dst_ids)
        if not runs:
            return 0
        _check_ids(src_ids, self._src_blocks, "source")
        _check_ids(dst_ids, self._dst_blocks, "destination")
        if self.mechanism == "memoryview":
            copy_runs(self._plans, runs)
        else:
            _torch_copy(self.pairs, runs, non_blocking)
        return self.bytes_per_block * len(src_ids)


def copy_blocks(
    pairs: Sequence[tuple[BlockTensor, BlockTensor]],
    src_ids: Sequence[int],
    dst_ids: Sequence[int],
    *,
    non_blocking: bool = False,
) -> int:
    """One-off `BlockCopier(pairs).copy(src_ids, dst_ids)`; same arguments, result, errors."""
    return BlockCopier(pairs).copy(src_ids, dst_ids, non_blocking=non_blocking)


def _torch_copy(
    pairs: Sequence[tuple[BlockTensor, BlockTensor]],
    runs: Sequence[tuple[int, int, int]],
    non_blocking: bool,
) -> None:
    dst_views: list[torch.Tensor] = []
    src_views: list[torch.Tensor] = []
    for src, dst in pairs:
        for s, d, n in runs:
            src_views.append(src.tensor.narrow(src.block_axis, s, n))
            dst_views.append(dst.tensor.narrow(dst.block_axis, d, n))
    # One call for all views: the per-copy Python overhead is what limits small blocks.
    torch._foreach_copy_(dst_views, src_views, non_blocking=non_blocking)


def _check_ids(ids: Sequence[int], num_blocks: int, name: str) -> None:
    # A memoryview slice past the end would not raise, and narrow()'s message names neither
    # the id nor the side.
    lo, hi = min(ids), max(ids)
    if lo < 0 or hi >= num_blocks:
        raise IndexError(f"{name} block id out of range [0, {num_blocks}): span {lo}..{hi}")
