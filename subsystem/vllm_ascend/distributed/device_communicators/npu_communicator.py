"""`NPUCommunicator`: vLLM's device communicator for Ascend NPUs.

vLLM's `GroupCoordinator` builds one communicator per process group through the platform
(`get_device_communicator_cls()` returns this class's dotted path on Ascend). It hands over a
CPU group (gloo) and a device group whose backend is the platform's (`hccl` on an NPU, provided
by `torch_npu`); every collective here runs on the device group, so the same code runs HCCL on
an NPU and gloo on a CPU (the tests use a 2-process gloo group).

On top of `DeviceCommunicatorBase` (all-reduce, all-gather, reduce-scatter, gather, send/recv,
broadcast) it adds `all_to_all` with equal or explicit split sizes along any dimensions, which
the MoE and sequence-parallel code paths of vllm-ascend use.
"""

from __future__ import annotations

import importlib

import torch
import torch.distributed as dist
from torch.distributed import ProcessGroup
from vllm.distributed.device_communicators.base_device_communicator import (
    DeviceCommunicatorBase,
)

__all__ = ["NPUCommunicator"]


def _split_sizes(
    length: int,
    dim: int,
    world: int,
    scatter_sizes: list[int] | None,
    gather_sizes: list[int] | None,
) -> tuple[list[int], list[int]]:
    # all_to_all's split sizes, checked (its docstring says what raises), equal parts if None.
    if (scatter_sizes is None) != (gather_sizes is None):
        raise ValueError("give both scatter_sizes and gather_sizes, or neither")
    if scatter_sizes is None or gather_sizes is None:
        if length % world:
            raise ValueError(f"dimension {dim} of size {length} does not split into {world} parts")
        scatter_sizes = gather_sizes = [length // world] * world
    if len(scatter_sizes) != world or len(gather_sizes) != world:
        raise ValueError(f"scatter_sizes and gather_sizes need {world} entries each")
    if sum(scatter_sizes) != length:
        raise ValueError(f"scatter_sizes {scatter_sizes} sum to {sum(scatter_sizes)}, not {length}")
    return scatter_sizes, gather_sizes


class NPUCommunicator(DeviceCommunicatorBase):
    """Collectives over a device group (HCCL on Ascend, any torch backend elsewhere).

    Args:
        cpu_group: the group's CPU (gloo) process group.
        device: this rank's device (`npu:N`; default: the CPU).
        device_group: the group's device process group (default: torch's default group).
        unique_name: the group's name (vLLM's `"tp:0"`, `"ep:0"`, ...).
        global_ranks, global_world_size: for stateless groups (see the base class).
        use_all2all: whether an expert-parallel group may use all-to-all kernels.

    Raises:
        ImportError: `device` is an NPU but `torch_npu` is not installed.
    """

    def __init__(
        self,
        cpu_group: ProcessGroup,
        device: torch.device | None = None,
        device_group: ProcessGroup | None = None,
        unique_name: str = "",
        global_ranks: list[int] | None = None,
        global_world_size: int | None = None,
        use_all2all: bool = False,
    ) -> None:
        if device is not None and device.type == "npu":
            # Registers the `npu` device type and the `hccl` backend with torch.
            importlib.import_module("torch_npu")
        super().__init__(
            cpu_group,
            device,
            device_group,
            unique_name,
            global_ranks,
            global_world_size,
            use_all2all,
        )

    def all_to_all(
        self,
        input_: torch.Tensor,
        scatter_dim: int = 0,
        gather_dim: int = -1,
        scatter_sizes: list[int] | None = None,
        gather_sizes: list[int] | None = None,
    ) -> torch.Tensor:
        """Split `input_` along `scatter_dim`, send part `r` to rank `r`, and concatenate what
        every rank sent along `gather_dim`.

        Args:
            input_: this rank's tensor (any dtype, on this rank's device).
            scatter_dim: the dimension split across ranks.
            gather_dim: the dimension received parts are concatenated along.
            scatter_sizes: size of each part along `scatter_dim` (default: equal parts).
            gather_sizes: size along `scatter_dim` of the part each rank sends here. Give
                both lists (one entry per rank) or neither.

        Returns:
            The concatenation, in rank order; other dimensions as in `input_`.

        Raises:
            ValueError: only one of the size lists, sizes that do not match the world size or
                the input, or a dimension that does not divide evenly when no sizes are given.
        """
        world = self.world_size
        if world == 1:
            return input_
        ndim = input_.dim()
        if not -ndim <= scatter_dim < ndim or not -ndim <= gather_dim < ndim:
            raise ValueError(
                f"scatter_dim {scatter_dim} / gather_dim {gather_dim} out of range for a "
                f"{ndim}-d tensor"
            )
        scatter_dim %= ndim
        gather_dim %= ndim
        scatter_sizes, gather_sizes = _split_sizes(
            input_.shape[scatter_dim], scatter_dim, world, scatter_sizes, gather_sizes
        )
        # One all_to_all_single with split sizes (alltoallv): the parts travel along dim 0.
        send = input_.movedim(scatter_dim, 0).contiguous()
        recv = torch.empty(
            (sum(gather_sizes), *send.shape[1:]), dtype=input_.dtype, device=input_.device
        )
        dist.all_to_all_single(
            recv,
            send,
            output_split_sizes=list(gather_sizes),
            input_split_sizes=list(scatter_sizes),
            group=self.device_group,
        )
        parts = [p.movedim(0, scatter_dim) for p in torch.split(recv, list(gather_sizes), 0)]
        return torch.cat(parts, dim=gather_dim).contiguous()
