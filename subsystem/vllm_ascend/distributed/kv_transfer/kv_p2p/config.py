"""Settings of the Mooncake P/D connectors, read once from vLLM's `KVTransferConfig`.

From `KVTransferConfig`: `kv_role` (`kv_producer` = prefill, `kv_consumer` = decode,
`kv_both`), `engine_id`, `kv_port` (base port of the side channel: worker `tp_rank` of
data-parallel rank `dp_rank` serves on `kv_port + dp_rank * tp_size + tp_rank`).

`kv_connector_extra_config` keys (all optional; unknown keys are errors): the `setting` fields
of `MooncakeP2PConfig`, each with its default and meaning (the table in README.md is rendered
from them by `config_table`).
"""

from __future__ import annotations

import socket
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, TypedDict

from typing_extensions import Unpack

from vllm_ascend.distributed.kv_transfer.kv_p2p.tp_mapping import validate_pairing
from vllm_ascend.distributed.kv_transfer.utils.extra_config import (
    Convert,
    ExtraConfigSource,
    extra_config_label,
    parse,
    positive,
    setting,
    text,
)
from vllm_ascend.distributed.kv_transfer.utils.mooncake_transfer_engine import (
    DEFAULT_METADATA_SERVER,
)

if TYPE_CHECKING:
    from vllm.config import VllmConfig

__all__ = ["EngineFacts", "MooncakeP2PConfig", "ParallelSizes"]

DEFAULT_HANDSHAKE_TIMEOUT_S = 30.0
DEFAULT_SEND_TIMEOUT_S = 300.0
DEFAULT_NUM_TRANSFER_THREADS = 4
DEFAULT_TRANSFER_QUEUE_SIZE = 1024
DEFAULT_SIDE_CHANNEL_HOST = "127.0.0.1"
MS_PER_S = 1000.0

_SOURCE = ExtraConfigSource("Mooncake P/D")
_SIZE_KEYS = ("tp_size", "dp_size")
# Unlike the other connectors' configs, this one also takes digit strings ("2") for numbers.
_SECONDS = positive(digits=True)
_COUNT = positive(integer=True, digits=True)


@dataclass(frozen=True)
class ParallelSizes:
    """TP and DP sizes of one side (prefill or decode)."""

    tp_size: int
    dp_size: int


def _sizes(side: str) -> Convert:
    # A size not given is this instance's own TP size and DP 1.
    def convert(label: str, value: Any, values: Mapping[str, Any]) -> ParallelSizes:
        if not isinstance(value, Mapping):
            raise ValueError(
                f'{label} must be a dict like {{"tp_size": 1, "dp_size": 1}}, got {value!r}'
            )
        unknown = sorted(set(value) - set(_SIZE_KEYS))
        if unknown:
            raise ValueError(f"unknown key(s) {unknown} in {label}; valid keys: {list(_SIZE_KEYS)}")
        tp = value.get("tp_size", values["tp_size"])
        dp = value.get("dp_size", 1)
        return ParallelSizes(
            tp_size=_COUNT(extra_config_label(f"{side}.tp_size"), tp, values),
            dp_size=_COUNT(extra_config_label(f"{side}.dp_size"), dp, values),
        )

    return convert


def _engine_hostname(values: Mapping[str, Any]) -> str:
    host = values["side_channel_host"]
    return socket.gethostname() if host in ("0.0.0.0", "::") else host


class EngineFacts(TypedDict):
    """The engine's side of `MooncakeP2PConfig.from_extra_config` (ports, sizes: see fields)."""

    engine_id: str
    kv_role: str
    kv_port: int
    tp_size: int
    dp_rank: int
    total_kv_heads: int
    block_size: int
    # `transfer_timeout_s` when the key is absent, seconds.
    default_transfer_timeout_s: float


def _sizes_setting(side: str) -> Any:
    return setting(
        f'`{{"tp_size": int, "dp_size": int}}` of the {side} side, as vllm-ascend deployments '
        "write them; a missing size defaults to this instance's own",
        _sizes(side),
        derive=lambda values: {},
        none_is_absent=True,
        default_doc="this instance's sizes",
    )


@dataclass(frozen=True, kw_only=True)
class MooncakeP2PConfig:
    """Validated settings of one Mooncake P/D connector instance (see the module docstring).

    Attributes are in the units their names say (seconds, bytes); `tp_size`/`tp_rank` are
    this instance's own, `prefill`/`decode` the two sides' sizes.
    """

    IGNORED_KEYS: ClassVar[tuple[str, ...]] = ("use_ascend_direct",)

    engine_id: str
    kv_role: str
    side_channel_port: int
    tp_size: int
    dp_rank: int
    total_kv_heads: int
    block_size: int
    side_channel_host: str = setting(
        "interface the side channel binds and advertises; across hosts set the node's address, "
        'or `"0.0.0.0"` plus `engine_hostname`',
        text(),
        default=DEFAULT_SIDE_CHANNEL_HOST,
    )
    engine_hostname: str = setting(
        "the address Mooncake peers reach this host by",
        text(),
        derive=_engine_hostname,
        default_doc="the side-channel host (the machine's hostname when that is `0.0.0.0`)",
    )
    protocol: str = setting(
        'Mooncake transport (`"rdma"` with NIC names, `"ascend"` on Ascend clusters)',
        text(),
        default="tcp",
    )
    device_name: str = setting("the transport's device (NIC) names", text(), default="")
    metadata_server: str = setting(
        "Mooncake metadata server", text(), default=DEFAULT_METADATA_SERVER
    )
    handshake_timeout_s: float = setting(
        "bound on a side-channel call, seconds (> 0)",
        _SECONDS,
        default=DEFAULT_HANDSHAKE_TIMEOUT_S,
    )
    transfer_timeout_s: float = setting(
        "bound on a stalled Mooncake transfer, seconds (> 0)",
        _SECONDS,
        default_doc="`get_transfer_timeout_value() / 1000`",
    )
    send_timeout_s: float = setting(
        "how long a prefill instance keeps a finished request's blocks for the decode side to "
        "read, seconds (> 0)",
        _SECONDS,
        default=DEFAULT_SEND_TIMEOUT_S,
    )
    num_transfer_threads: int = setting(
        "concurrent reads per decode worker (integer > 0)",
        _COUNT,
        default=DEFAULT_NUM_TRANSFER_THREADS,
    )
    transfer_queue_size: int = setting(
        "transfers waiting for a transfer thread, each a request's read or its chain of layer "
        "pushes (integer > 0); a transfer that finds the queue full fails at once (a load "
        "failure on the decode side, `kv_load_failure_policy` applies)",
        _COUNT,
        default=DEFAULT_TRANSFER_QUEUE_SIZE,
    )
    layer_wait_timeout_s: float = setting(
        "layerwise only: bound on a decode request's wait for every layer of its prefill's "
        "push, seconds from its registration (> 0); it waits outside the batch, and a load "
        "past the bound fails (`kv_load_failure_policy`)",
        _SECONDS,
        derive=lambda values: values["transfer_timeout_s"],
        default_doc="`transfer_timeout_s`",
    )
    prefill: ParallelSizes = _sizes_setting("prefill")
    decode: ParallelSizes = _sizes_setting("decode")

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
        cls, extra: Mapping[str, Any] | None, **engine: Unpack[EngineFacts]
    ) -> MooncakeP2PConfig:
        """Parse and validate `kv_connector_extra_config` for the engine `engine` describes.

        Raises:
            ValueError: as `parse` and `validate`.
        """
        facts: dict[str, Any] = dict(engine)
        port = int(facts.pop("kv_port")) + facts["dp_rank"] * facts["tp_size"]
        timeout = facts.pop("default_transfer_timeout_s")
        return parse(
            cls, extra or {}, _SOURCE, side_channel_port=port, transfer_timeout_s=timeout, **facts
        )

    def validate(self) -> None:
        """Check the rules that span fields (called by `parse`).

        Raises:
            ValueError: a role this connector does not know, this instance's own side given a
                TP size other than its own, or a TP pairing that cannot be served (the message
                names both sizes).
        """
        if self.kv_role not in ("kv_producer", "kv_consumer", "kv_both"):
            raise ValueError(
                f"kv_role must be kv_producer, kv_consumer or kv_both, got {self.kv_role!r}"
            )
        side = {"kv_producer": "prefill", "kv_consumer": "decode"}.get(self.kv_role)
        own = self.prefill if side == "prefill" else self.decode
        if side is not None and own.tp_size != self.tp_size:
            raise ValueError(
                f"kv_connector_extra_config[{side!r}]['tp_size'] is {own.tp_size} but this "
                f"{side} instance runs tensor_parallel_size={self.tp_size}"
            )
        validate_pairing(self.prefill.tp_size, self.decode.tp_size, self.total_kv_heads)

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
