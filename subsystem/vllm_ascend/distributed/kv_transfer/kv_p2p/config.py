"""Settings of the Mooncake P/D connectors, read once from vLLM's `KVTransferConfig`.

From `KVTransferConfig`: `kv_role` (`kv_producer` = prefill, `kv_consumer` = decode,
`kv_both`), `engine_id`, `kv_port` (base port of the side channel: worker `tp_rank` of
data-parallel rank `dp_rank` serves on `kv_port + dp_rank * tp_size + tp_rank`).

`kv_connector_extra_config` keys (all optional; unknown keys are errors):

- `side_channel_host` (str): interface the side channel binds and advertises
  (default `"127.0.0.1"`; set the node's address, or `"0.0.0.0"` plus `engine_hostname`,
  across hosts);
- `engine_hostname` (str): the address Mooncake peers reach this host by (default: the
  side-channel host, or the machine's hostname when that is `0.0.0.0`);
- `protocol` (str, default `"tcp"`) and `device_name` (str, default `""`): Mooncake transport
  (`"rdma"` with NIC names, `"ascend"` on Ascend clusters);
- `metadata_server` (str, default `"P2PHANDSHAKE"`);
- `handshake_timeout_s` (number > 0, default 30): bound on a side-channel call, seconds;
- `transfer_timeout_s` (number > 0, default `get_transfer_timeout_value() / 1000`): bound on
  a stalled Mooncake transfer, seconds;
- `send_timeout_s` (number > 0, default 300): how long a prefill instance keeps a finished
  request's blocks for the decode side to read, seconds;
- `num_transfer_threads` (int > 0, default 4): concurrent reads per decode worker;
- `transfer_queue_size` (int > 0, default 1024): transfers (a request's read, or its chain of
  layer pushes) waiting for a transfer thread; a transfer that finds the queue full fails at
  once (a load failure on the decode side, `kv_load_failure_policy` applies);
- `layer_wait_timeout_s` (number > 0, default: `transfer_timeout_s`): layerwise only, bound on
  waiting for a layer in `wait_for_layer_load`;
- `prefill` / `decode` (dict): `{"tp_size": int, "dp_size": int}` of each side, as vllm-ascend
  deployments write them; a missing size defaults to this instance's own.

Accepted and ignored, for configs written for older vllm-ascend releases: `use_ascend_direct`.
"""

from __future__ import annotations

import socket
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from vllm_ascend.distributed.kv_transfer.kv_p2p.tp_mapping import validate_pairing
from vllm_ascend.distributed.kv_transfer.utils.extra_config import (
    check_known_keys,
    positive_number,
)
from vllm_ascend.distributed.kv_transfer.utils.mooncake_transfer_engine import (
    DEFAULT_METADATA_SERVER,
)

if TYPE_CHECKING:
    from vllm.config import VllmConfig

__all__ = ["MooncakeP2PConfig", "ParallelSizes"]

DEFAULT_HANDSHAKE_TIMEOUT_S = 30.0
DEFAULT_SEND_TIMEOUT_S = 300.0
DEFAULT_NUM_TRANSFER_THREADS = 4
DEFAULT_TRANSFER_QUEUE_SIZE = 1024
DEFAULT_SIDE_CHANNEL_HOST = "127.0.0.1"
MS_PER_S = 1000.0

_KEYS = (
    "side_channel_host",
    "engine_hostname",
    "protocol",
    "device_name",
    "metadata_server",
    "handshake_timeout_s",
    "transfer_timeout_s",
    "send_timeout_s",
    "num_transfer_threads",
    "transfer_queue_size",
    "layer_wait_timeout_s",
    "prefill",
    "decode",
)
_IGNORED_KEYS = ("use_ascend_direct",)
_SIZE_KEYS = ("tp_size", "dp_size")


@dataclass(frozen=True)
class ParallelSizes:
    """TP and DP sizes of one side (prefill or decode)."""

    tp_size: int
    dp_size: int


def _positive(key: str, value: Any, *, integer: bool = False) -> float:
    # Unlike the other connectors' configs, this one also takes digit strings ("2").
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    return positive_number(key, value, integer=integer)


def _string(key: str, value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError(f"kv_connector_extra_config[{key!r}] must be a string, got {value!r}")
    return value


def _sizes(side: str, value: Any, own_tp: int) -> ParallelSizes:
    if value is None:
        return ParallelSizes(tp_size=own_tp, dp_size=1)
    if not isinstance(value, Mapping):
        raise ValueError(
            f"kv_connector_extra_config[{side!r}] must be a dict like "
            f'{{"tp_size": 1, "dp_size": 1}}, got {value!r}'
        )
    unknown = sorted(set(value) - set(_SIZE_KEYS))
    if unknown:
        raise ValueError(
            f"unknown key(s) {unknown} in kv_connector_extra_config[{side!r}]; "
            f"valid keys: {list(_SIZE_KEYS)}"
        )
    tp = int(_positive(f"{side}.tp_size", value.get("tp_size", own_tp), integer=True))
    dp = int(_positive(f"{side}.dp_size", value.get("dp_size", 1), integer=True))
    return ParallelSizes(tp_size=tp, dp_size=dp)


@dataclass(frozen=True)
class MooncakeP2PConfig:
    """Validated settings of one Mooncake P/D connector instance (see the module docstring).

    Attributes are in the units their names say (seconds, bytes); `tp_size`/`tp_rank` are
    this instance's own, `prefill`/`decode` the two sides' sizes.
    """

    engine_id: str
    kv_role: str
    side_channel_host: str
    side_channel_port: int
    engine_hostname: str
    protocol: str
    device_name: str
    metadata_server: str
    handshake_timeout_s: float
    transfer_timeout_s: float
    send_timeout_s: float
    layer_wait_timeout_s: float
    num_transfer_threads: int
    tp_size: int
    dp_rank: int
    total_kv_heads: int
    block_size: int
    prefill: ParallelSizes
    decode: ParallelSizes
    transfer_queue_size: int = DEFAULT_TRANSFER_QUEUE_SIZE

    @property
    def is_producer(self) -> bool:
        return self.kv_role in ("kv_producer", "kv_both")

    @property
    def is_consumer(self) -> bool:
        return self.kv_role in ("kv_consumer", "kv_both")

    def worker_port(self, tp_rank: int) -> int:
        """Side-channel port of this instance's worker `tp_rank`."""
        return self.side_channel_port + tp_rank

    @classmethod
    def from_extra_config(
        cls,
        extra: Mapping[str, Any] | None,
        *,
        engine_id: str,
        kv_role: str,
        kv_port: int,
        tp_size: int,
        dp_rank: int,
        total_kv_heads: int,
        block_size: int,
        default_transfer_timeout_s: float,
    ) -> MooncakeP2PConfig:
        """Parse and validate `kv_connector_extra_config` (see the module docstring).

        Raises:
            ValueError: unknown key (the message lists the valid ones), a value of the wrong
                type or sign, a role this connector does not know, or a TP pairing that
                cannot be served (the message names both sizes).
        """
        extra = dict(extra or {})
        check_known_keys(extra, _KEYS, connector="Mooncake P/D", ignored=_IGNORED_KEYS)
        if kv_role not in ("kv_producer", "kv_consumer", "kv_both"):
            raise ValueError(
                f"kv_role must be kv_producer, kv_consumer or kv_both, got {kv_role!r}"
            )
        host = _string(
            "side_channel_host", extra.get("side_channel_host", DEFAULT_SIDE_CHANNEL_HOST)
        )
        default_hostname = socket.gethostname() if host in ("0.0.0.0", "::") else host
        transfer_timeout = (
            _positive("transfer_timeout_s", extra["transfer_timeout_s"])
            if "transfer_timeout_s" in extra
            else default_transfer_timeout_s
        )
        prefill = _sizes("prefill", extra.get("prefill"), tp_size)
        decode = _sizes("decode", extra.get("decode"), tp_size)
        own = prefill if kv_role == "kv_producer" else decode if kv_role == "kv_consumer" else None
        if own is not None and own.tp_size != tp_size:
            side = "prefill" if kv_role == "kv_producer" else "decode"
            raise ValueError(
                f"kv_connector_extra_config[{side!r}]['tp_size'] is {own.tp_size} but this "
                f"{side} instance runs tensor_parallel_size={tp_size}"
            )
        validate_pairing(prefill.tp_size, decode.tp_size, total_kv_heads)
        return cls(
            engine_id=engine_id,
            kv_role=kv_role,
            side_channel_host=host,
            side_channel_port=int(kv_port) + dp_rank * tp_size,
            engine_hostname=_string(
                "engine_hostname", extra.get("engine_hostname", default_hostname)
            ),
            protocol=_string("protocol", extra.get("protocol", "tcp")),
            device_name=_string("device_name", extra.get("device_name", "")),
            metadata_server=_string(
                "metadata_server", extra.get("metadata_server", DEFAULT_METADATA_SERVER)
            ),
            handshake_timeout_s=_positive(
                "handshake_timeout_s", extra.get("handshake_timeout_s", DEFAULT_HANDSHAKE_TIMEOUT_S)
            ),
            transfer_timeout_s=transfer_timeout,
            send_timeout_s=_positive(
                "send_timeout_s", extra.get("send_timeout_s", DEFAULT_SEND_TIMEOUT_S)
            ),
            layer_wait_timeout_s=_positive(
                "layer_wait_timeout_s", extra.get("layer_wait_timeout_s", transfer_timeout)
            ),
            num_transfer_threads=int(
                _positive(
                    "num_transfer_threads",
                    extra.get("num_transfer_threads", DEFAULT_NUM_TRANSFER_THREADS),
                    integer=True,
                )
            ),
            transfer_queue_size=int(
                _positive(
                    "transfer_queue_size",
                    extra.get("transfer_queue_size", DEFAULT_TRANSFER_QUEUE_SIZE),
                    integer=True,
                )
            ),
            tp_size=tp_size,
            dp_rank=dp_rank,
            total_kv_heads=total_kv_heads,
            block_size=block_size,
            prefill=prefill,
            decode=decode,
        )

    @classmethod
    def from_vllm_config(cls, vllm_config: VllmConfig) -> MooncakeP2PConfig:
        """`from_extra_config` with the values vLLM's config holds.

        Raises:
            ValueError: as `from_extra_config`; also for pipeline parallelism (not supported).
        """
        from vllm_ascend.distributed.kv_transfer.utils.utils import get_transfer_timeout_value

        transfer = vllm_config.kv_transfer_config
        assert transfer is not None
        parallel = vllm_config.parallel_config
        if parallel.pipeline_parallel_size != 1:
            raise ValueError(
                "the Mooncake P/D connectors do not support pipeline parallelism "
                f"(pipeline_parallel_size={parallel.pipeline_parallel_size})"
            )
        return cls.from_extra_config(
            transfer.kv_connector_extra_config,
            engine_id=str(transfer.engine_id),
            kv_role=str(transfer.kv_role),
            kv_port=int(transfer.kv_port),
            tp_size=parallel.tensor_parallel_size,
            dp_rank=parallel.data_parallel_rank,
            total_kv_heads=vllm_config.model_config.get_total_num_kv_heads(),
            block_size=vllm_config.cache_config.block_size,
            default_transfer_timeout_s=get_transfer_timeout_value() / MS_PER_S,
        )
