"""The contract between the KV pool and a distributed key-value store (`Backend`).

A backend moves KV cache blocks between raw memory addresses of this process and a store shared
by many engines. It never sees tensors: the pool worker turns each KV cache block into a list of
`(address, size)` segments (one per layer and K/V half, in a fixed order) and hands the store
one *key* per block whose value is the concatenation of those segments.

Units everywhere: addresses are raw pointers (`int`, host or device memory, as
`torch.Tensor.data_ptr()` returns them), sizes are bytes, keys are `str`.

Per-key outcomes are integers, never exceptions, so one bad key does not fail a batch:

- `exists`: 1 present, 0 absent;
- `put`: 0 stored (or already present), a negative store code otherwise (pool full, ...);
- `get`: the number of bytes written into the segments (the value's size) on success, a
  negative store code otherwise (not found, buffer too small, ...).

A call that fails as a whole (store unreachable, client closed) raises `BackendError`; a
malformed call (lists of different lengths, a negative size) raises `ValueError`. Callers treat a
`BackendError` as "every key missed".

`parse_byte_size` reads the size fields of backend configurations (`"1GB"`, `512 << 20`, ...).
"""

from __future__ import annotations

import math
import re
import socket
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    import torch
    from vllm.config import ParallelConfig

__all__ = [
    "Backend",
    "BackendError",
    "check_batch",
    "parse_byte_size",
    "probe_tcp",
    "single_segments",
    "split_host_port",
]


class BackendError(RuntimeError):
    """A backend call failed as a whole, or the store could not be reached or set up.

    Attributes:
        code: the store's own error code when there is one, else None.
    """

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.code = code


class Backend(ABC):
    """A client of a distributed key-value store that holds KV cache blocks.

    Subclasses connect in `__init__` (raising `BackendError` or `ValueError` with a one-line
    reason when they cannot) and implement the four data methods below. They must be safe to
    call from the pool's sending and receiving threads concurrently.

    Args:
        parallel_config: the engine's parallel config (ranks, sizes), for backends that place
            or name data per rank; may be None.

    Attributes:
        device: the device of the buffers registered with `register_buffer` (the KV cache), set
            by the pool worker before the first transfer; None until then (and on the
            scheduler side, which only calls `exists`).
    """

    #: Short name used in logs and in `kv_connector_extra_config["backend"]`.
    name: ClassVar[str] = "backend"

    def __init__(self, parallel_config: ParallelConfig | None = None) -> None:
        self.parallel_config = parallel_config
        self.device: torch.device | None = None

    def set_device(self) -> None:
        """Bind the calling thread to `device` (NPU: `torch.npu.set_device`).

        Called once by each transfer thread before its first transfer: on Ascend the current
        device is per thread, and the store's copy engine runs on the caller's device. A no-op
        for the CPU or when no device is set.
        """
        device = self.device
        if device is None or device.type == "cpu":
            return
        import torch

        module = getattr(torch, device.type, None)
        if module is not None and hasattr(module, "set_device"):
            module.set_device(device)

    @abstractmethod
    def register_buffer(self, ptrs: Sequence[int], lengths: Sequence[int]) -> None:
        """Register memory regions that later `put`/`get` segments lie in.

        Args:
            ptrs: start addresses of the regions.
            lengths: their sizes in bytes, same length as `ptrs`.

        Raises:
            BackendError: the store refused a region (overlap with a registered one, ...).
            ValueError: `ptrs` and `lengths` differ in length or a length is not positive.
        """

    @abstractmethod
    def exists(self, keys: Sequence[str]) -> list[int]:
        """Whether each key is in the store, in one round trip.

        Returns:
            One int per key: 1 present, 0 absent.

        Raises:
            BackendError: the store could not answer.
        """

    @abstractmethod
    def put(
        self, keys: Sequence[str], addrs: Sequence[Sequence[int]], sizes: Sequence[Sequence[int]]
    ) -> list[int]:
        """Store each key's value, read from its segments (concatenated in order).

        Args:
            keys: one key per value.
            addrs: per key, the start address of each segment.
            sizes: per key, the size of each segment in bytes (same shape as `addrs`).

        Returns:
            Per key: 0 stored or already present (a key's value is never replaced), a negative
            store code otherwise.

        Raises:
            BackendError: the call failed as a whole.
            ValueError: malformed arguments (see `check_batch`).
        """

    @abstractmethod
    def get(
        self, keys: Sequence[str], addrs: Sequence[Sequence[int]], sizes: Sequence[Sequence[int]]
    ) -> list[int]:
        """Read each key's value into its segments (filled in order).

        Returns:
            Per key: bytes written (the value's size) on success, a negative store code
            otherwise. A value larger than the segments is an error, never a partial write.

        Raises:
            BackendError: the call failed as a whole.
            ValueError: malformed arguments (see `check_batch`).
        """

    @property
    def service(self) -> str:
        """The service this client talks to, for log lines (e.g. `"master 10.0.0.1:50051"`)."""
        return self.name

    def is_reachable(self) -> bool:
        """A cheap check that the store's service answers (e.g. a TCP connect), never blocking
        for long. Used after failures to decide when to try the store again."""
        return True

    def close(self) -> None:  # noqa: B027 - optional hook, a no-op by default
        """Release the client (unmounts the memory it contributed). Idempotent."""


def check_batch(
    keys: Sequence[str], addrs: Sequence[Sequence[int]], sizes: Sequence[Sequence[int]]
) -> None:
    """Validate the arguments of `Backend.put`/`Backend.get`.

    Raises:
        ValueError: lists of different lengths, a key without segments, a segment size that is
            not positive, or an empty key.
    """
    if not len(keys) == len(addrs) == len(sizes):
        raise ValueError(
            f"{len(keys)} keys but {len(addrs)} address lists and {len(sizes)} size lists"
        )
    for key, a, s in zip(keys, addrs, sizes, strict=True):
        if not key:
            raise ValueError("empty key")
        if not a or len(a) != len(s):
            raise ValueError(f"key {key!r}: {len(a)} addresses but {len(s)} sizes")
        if any(n <= 0 for n in s):
            raise ValueError(f"key {key!r}: segment sizes must be positive, got {list(s)}")


def single_segments(
    keys: Sequence[str], addrs: Sequence[Sequence[int]], sizes: Sequence[Sequence[int]]
) -> tuple[list[int], list[int]] | None:
    """Validate a batch (`check_batch`) and, when every key has exactly one segment, return
    the flat `(addresses, sizes)` lists the stores' single-buffer batch calls take; None when
    some key has several segments.

    The common case is checked with a few C-level passes: a batch holds thousands of keys and
    this runs on every transfer.

    Raises:
        ValueError: as `check_batch`.
    """
    n = len(keys)
    if n != len(addrs) or n != len(sizes) or not all(len(a) == 1 for a in addrs):
        check_batch(keys, addrs, sizes)
        return None
    ptrs = [a[0] for a in addrs]
    lengths = [s[0] if len(s) == 1 else 0 for s in sizes]
    if n and (min(lengths) <= 0 or not all(keys)):
        check_batch(keys, addrs, sizes)  # raises with the precise message
    return ptrs, lengths


# ---- configuration helpers ---------------------------------------------------------------

_UNITS = {
    "": 1,
    "b": 1,
    "kb": 1 << 10,
    "kib": 1 << 10,
    "mb": 1 << 20,
    "mib": 1 << 20,
    "gb": 1 << 30,
    "gib": 1 << 30,
    "tb": 1 << 40,
    "tib": 1 << 40,
}
_SIZE_RE = re.compile(r"^(\d+(?:\.\d+)?)\s*([a-z]*)$")
_SIZE_HELP = (
    "expected a number of bytes (an integer, or a string such as '1073741824', '512MB', "
    "'1GB', '1.5GB'; units B, KB, MB, GB, TB, also written KiB..TiB, are powers of 1024, "
    "case-insensitive)"
)


def parse_byte_size(field: str, value: Any, *, minimum: int = 0) -> int:
    """Read a size in bytes from a configuration value.

    Accepted: a non-negative `int` (bytes); a string holding digits (bytes) or a number with a
    unit, surrounded by optional spaces: `"1GB"`, `"1gb"`, `" 1 GB "`, `"1024MB"`,
    `"1048576KB"`, `"1073741824B"` and `"1GiB"` are all 2**30. Units are binary (KB = 1024)
    as in Mooncake's and MemCache's own configs. A fraction is accepted when it names a whole
    number of bytes (`"1.5GB"` = 1610612736; `"0.3B"` is rejected). Rejected with an error
    naming the field: booleans, None, floats, negative numbers, percentages, a unit without
    its `B` (`"1G"`), unknown units, empty strings.

    Args:
        field: the configuration key, for the error message.
        value: the raw value.
        minimum: the smallest allowed result in bytes.

    Raises:
        ValueError: the value is not a size, or is below `minimum`.
    """
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ValueError(f"{field}: invalid size {value!r}: {_SIZE_HELP}")
    if isinstance(value, int):
        result = value
    else:
        match = _SIZE_RE.match(value.strip().lower())
        if match is None or match.group(2) not in _UNITS:
            raise ValueError(f"{field}: invalid size {value!r}: {_SIZE_HELP}")
        number, unit = match.group(1), match.group(2)
        if "." in number:
            exact = float(number) * _UNITS[unit]
            if not math.isfinite(exact) or not exact.is_integer():
                raise ValueError(f"{field}: {value!r} is not a whole number of bytes")
            result = int(exact)
        else:
            result = int(number) * _UNITS[unit]
    if result < minimum:
        raise ValueError(f"{field}: size {value!r} is below the minimum of {minimum} bytes")
    return result


def split_host_port(field: str, address: Any) -> tuple[str, int]:
    """Split `"host:port"` (IPv6 as `"[::1]:port"`).

    Raises:
        ValueError: not a string of that form, or a port outside 1..65535.
    """
    if not isinstance(address, str):
        raise ValueError(f"{field}: expected 'host:port', got {address!r}")
    host, sep, port = address.strip().rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{field}: expected 'host:port', got {address!r}")
    return host, int(port)


def probe_tcp(host: str, port: int, timeout_s: float) -> str | None:
    """Try a TCP connect; return None when something listens, else the reason (one line).

    Stores such as Mooncake retry a dead address for a minute or more inside their `setup`;
    a connect refused here costs microseconds.
    """
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return None
    except OSError as exc:
        return exc.strerror or type(exc).__name__
