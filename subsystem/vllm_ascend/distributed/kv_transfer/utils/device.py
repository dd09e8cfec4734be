"""The device abstraction used by every KV connector of this package.

A connector never imports `torch_npu` itself and never branches on the platform: it asks this
module for a `KVDevice` and uses that for host buffers, side streams, events and
synchronisation.

Resolution order (`resolve_device`):
1. the device of the KV cache tensors that vLLM hands to `register_kv_caches` (the truth for
   the worker: on an Ascend machine that is `npu:N`, here it is `cpu`);
2. otherwise an NPU when `torch_npu` imports and reports a device;
3. otherwise the CPU.

`torch_npu` is imported lazily, on first need, by `npu_available()`: importing it registers
the `torch.npu` namespace and the `npu` device type, which the NPU code paths below use.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import torch

__all__ = [
    "DeviceEvent",
    "KVDevice",
    "iter_kv_tensors",
    "npu_available",
    "resolve_device",
    "unique_kv_tensors",
]


@functools.cache
def npu_available() -> bool:
    """True when `torch_npu` imports and at least one NPU is visible. Cached per process."""
    try:
        importlib.import_module("torch_npu")
    except ImportError:
        return False
    npu = getattr(torch, "npu", None)
    return bool(npu is not None and npu.is_available() and npu.device_count() > 0)


def iter_kv_tensors(
    kv_caches: Mapping[str, torch.Tensor | Sequence[torch.Tensor]],
) -> Iterator[tuple[str, torch.Tensor]]:
    """Yield `(layer_name, tensor)` for every tensor of a vLLM `kv_caches` mapping.

    vLLM hands one tensor per layer; some platforms (vllm-ascend's attention backends) hand a
    `(key_cache, value_cache)` pair per layer. Both shapes are accepted.
    """
    for name, value in kv_caches.items():
        if isinstance(value, torch.Tensor):
            yield name, value
        else:
            for part in value:
                yield name, part


def unique_kv_tensors(
    kv_caches: Mapping[str, torch.Tensor | Sequence[torch.Tensor]],
) -> list[torch.Tensor]:
    """The distinct KV cache tensors of a vLLM `kv_caches` mapping, in layer order.

    Layers that share a KV cache (cross-layer sharing) hand the same view twice; it is kept
    once (same data pointer, shape and strides).
    """
    seen: set[tuple[int, tuple[int, ...], tuple[int, ...]]] = set()
    out: list[torch.Tensor] = []
    for _, t in iter_kv_tensors(kv_caches):
        key = (t.data_ptr(), tuple(t.shape), tuple(t.stride()))
        if key not in seen:
            seen.add(key)
            out.append(t)
    return out


class DeviceEvent:
    """A completion marker for work queued on a device stream.

    On the CPU there is no queue: work is done when the call returns, so the event is always
    complete.
    """

    def __init__(self, native: Any | None) -> None:
        self._native = native

    def synchronize(self) -> None:
        """Block until the work before `record` has finished."""
        if self._native is not None:
            self._native.synchronize()

    def query(self) -> bool:
        """True when the work before `record` has finished; never blocks."""
        return True if self._native is None else bool(self._native.query())


class KVDevice:
    """Where a KV cache lives, and how host buffers and copies are made for it.

    Attributes:
        torch_device: the `torch.device` of the KV cache (`npu:0`, `cuda:0`, `cpu`).
    """

    def __init__(self, torch_device: torch.device) -> None:
        self.torch_device = torch_device

    def __repr__(self) -> str:
        return f"KVDevice({self.torch_device})"

    @property
    def type(self) -> str:
        """The device type string: `"npu"`, `"cuda"`, `"cpu"`, ..."""
        return self.torch_device.type

    @property
    def is_accelerator(self) -> bool:
        """True for a device with its own memory and queues (anything but the CPU)."""
        return self.type != "cpu"

    def _module(self) -> Any | None:
        # torch.npu exists once torch_npu is imported; torch.cuda always exists.
        if not self.is_accelerator:
            return None
        if self.type == "npu":
            npu_available()
        return getattr(torch, self.type, None)

    def empty_host(self, shape: Sequence[int], dtype: torch.dtype) -> torch.Tensor:
        """Allocate an uninitialised host tensor for copies to and from this device.

        The memory is page-locked (pinned) when the device is an accelerator, so that copies
        can run asynchronously at full bandwidth; on the CPU it is ordinary memory (a CPU-only
        torch has no pinned allocator).

        Args:
            shape: tensor shape.
            dtype: element type.
        """
        return torch.empty(tuple(shape), dtype=dtype, device="cpu", pin_memory=self.is_accelerator)

    def new_stream(self) -> Any | None:
        """A new side stream for transfers, or None on the CPU (copies run inline)."""
        module = self._module()
        if module is None:
            return None
        return module.Stream(device=self.torch_device)

    def stream(self, stream: Any | None) -> contextlib.AbstractContextManager[Any]:
        """Context manager that makes `stream` current; a no-op for `None`."""
        module = self._module()
        if module is None or stream is None:
            return contextlib.nullcontext()
        return module.stream(stream)  # type: ignore[no-any-return]

    def record_event(self, stream: Any | None = None) -> DeviceEvent:
        """Record an event after the work queued so far on `stream` (the current stream if
        None)."""
        module = self._module()
        if module is None:
            return DeviceEvent(None)
        event = module.Event()
        event.record(stream)
        return DeviceEvent(event)

    def synchronize(self) -> None:
        """Block until all queued work on this device has finished (no-op on the CPU)."""
        module = self._module()
        if module is not None:
            module.synchronize(self.torch_device)

    @property
    def non_blocking(self) -> bool:
        """Whether host<->device copies may be issued with `non_blocking=True`."""
        return self.is_accelerator


def resolve_device(tensors: Iterable[torch.Tensor] | None = None) -> KVDevice:
    """Pick the device for a connector.

    Args:
        tensors: the KV cache tensors vLLM registered (e.g. the values of
            `iter_kv_tensors(kv_caches)`); their device wins when given.

    Returns:
        A `KVDevice`.

    Raises:
        ValueError: the tensors live on more than one device.
    """
    if tensors is not None:
        devices = {t.device for t in tensors}
        if len(devices) > 1:
            raise ValueError(f"KV cache tensors span several devices: {sorted(map(str, devices))}")
        if devices:
            return KVDevice(devices.pop())
    if npu_available():
        # torch.npu exists once torch_npu is imported (npu_available() imported it).
        return KVDevice(torch.device("npu", torch.npu.current_device()))  # type: ignore[attr-defined]
    return KVDevice(torch.device("cpu"))
