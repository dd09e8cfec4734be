"""The byte geometry of a worker's KV cache: regions, blocks and heads, as transfers address it.

vLLM hands a worker `kv_caches: {layer_name: tensor}`. What a tensor looks like depends on the
platform:
- vLLM's CPU backend: `[num_blocks, kv_heads, block_size, 2 * head_size]` per layer, all layers
  views of one allocation;
- the usual GPU layout: `[2, num_blocks, ...]` (K and V halves);
- vllm-ascend: a `(key_cache, value_cache)` pair of `[num_blocks, block_size, kv_heads,
  head_size]` tensors per layer.

Each block-major tensor (first dim `num_blocks`) becomes one *region*: a base address, the
stride between blocks and the bytes of one block, all in bytes. A transfer of block `b` of
region `r` touches `[base_r + b * stride_r, + len_r)`. Whether a block keeps its heads one
after the other (`head_major`, vLLM's CPU layout) decides if a subset of heads is one
contiguous range: that is what heterogeneous TP needs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property

import torch

from vllm_ascend.distributed.kv_transfer.utils.device import iter_kv_tensors

__all__ = ["KVLayout", "describe_kv_caches"]


@dataclass(frozen=True)
class KVLayout:
    """Regions of a KV cache, in a stable order (layers in `kv_caches` order).

    Attributes:
        bases: start address per region, bytes.
        block_strides: bytes between consecutive blocks per region.
        block_lens: bytes of one block per region.
        layer_of_region: model layer index (position in `layer_names`) per region.
        layer_names: the layers, in order.
        num_blocks: blocks per region.
        kv_heads: KV heads per block.
        head_major: a block's heads are stored one after the other.
        allocations: `(start, length)` byte ranges to register with the transfer engine
            (the underlying storages, each once).
        tensors: the tensors themselves, kept alive while transfers may touch them.
    """

    bases: list[int]
    block_strides: list[int]
    block_lens: list[int]
    layer_of_region: list[int]
    layer_names: list[str]
    num_blocks: int
    kv_heads: int
    head_major: bool
    allocations: list[tuple[int, int]]
    tensors: list[torch.Tensor] = field(repr=False)

    @property
    def num_regions(self) -> int:
        return len(self.bases)

    @cached_property
    def _layer_numbers(self) -> dict[str, int]:
        return {name: i for i, name in enumerate(self.layer_names)}

    def layer_number(self, layer_name: str) -> int | None:
        """The position of `layer_name` in `layer_names`; None for a layer without its own KV
        cache (one shared across layers: nothing to move for it)."""
        return self._layer_numbers.get(layer_name)

    def regions_of_layer(self, layer: int) -> list[int]:
        """Indices of the regions that belong to layer number `layer`."""
        return [r for r, owner in enumerate(self.layer_of_region) if owner == layer]


def _block_major_parts(name: str, tensor: torch.Tensor, num_blocks: int) -> list[torch.Tensor]:
    if tensor.dim() >= 2 and tensor.shape[0] == num_blocks:
        return [tensor]
    if tensor.dim() >= 3 and tensor.shape[0] == 2 and tensor.shape[1] == num_blocks:
        return [tensor[0], tensor[1]]
    raise ValueError(
        f"KV cache of layer {name!r} has shape {tuple(tensor.shape)}: expected blocks "
        f"({num_blocks}) in dim 0, or K/V in dim 0 and blocks in dim 1"
    )


def _is_head_major(part: torch.Tensor, kv_heads: int) -> bool:
    # [num_blocks, kv_heads, ...] with a contiguous block: heads are consecutive byte ranges.
    return kv_heads == 1 or (part.dim() >= 4 and part.shape[1] == kv_heads)


def _region(name: str, part: torch.Tensor) -> tuple[int, int, int]:
    # (base, block stride, block length) in bytes of one block-major tensor.
    elem = part.element_size()
    block = part[0]
    if not block.is_contiguous():
        raise ValueError(
            f"KV cache of layer {name!r}: a block is not contiguous "
            f"(shape {tuple(part.shape)}, strides {part.stride()})"
        )
    return part.data_ptr(), part.stride(0) * elem, block.numel() * elem


def describe_kv_caches(
    kv_caches: Mapping[str, torch.Tensor | Sequence[torch.Tensor]],
    num_blocks: int,
    kv_heads: int,
) -> KVLayout:
    """The `KVLayout` of vLLM's `kv_caches` for this worker.

    Args:
        kv_caches: layer name -> tensor, or -> (key, value) tensors.
        num_blocks: KV cache blocks (`KVCacheConfig.num_blocks`).
        kv_heads: KV heads this worker holds per block.

    Raises:
        ValueError: a tensor is not block-major, a block is not contiguous, the tensors
            live on several devices, or `kv_caches` is empty.
    """
    if not kv_caches:
        raise ValueError("no KV cache tensors to register")
    bases: list[int] = []
    strides: list[int] = []
    lens: list[int] = []
    owners: list[int] = []
    head_major = True
    storages: dict[int, int] = {}
    tensors: list[torch.Tensor] = []
    names: list[str] = []
    devices = set()
    for name, tensor in iter_kv_tensors(kv_caches):
        if not names or names[-1] != name:
            names.append(name)
        devices.add(tensor.device)
        tensors.append(tensor)
        for part in _block_major_parts(name, tensor, num_blocks):
            base, stride, length = _region(name, part)
            bases.append(base)
            strides.append(stride)
            lens.append(length)
            owners.append(len(names) - 1)
            head_major = head_major and _is_head_major(part, kv_heads)
        storage = tensor.untyped_storage()
        storages[storage.data_ptr()] = max(storages.get(storage.data_ptr(), 0), storage.nbytes())
    if len(devices) > 1:
        raise ValueError(f"KV cache tensors span several devices: {sorted(map(str, devices))}")
    if any(length % kv_heads for length in lens):
        raise ValueError(f"a KV block's bytes do not split into {kv_heads} heads")
    return KVLayout(
        bases=bases,
        block_strides=strides,
        block_lens=lens,
        layer_of_region=owners,
        layer_names=names,
        num_blocks=num_blocks,
        kv_heads=kv_heads,
        head_major=head_major,
        allocations=sorted(storages.items()),
        tensors=tensors,
    )
