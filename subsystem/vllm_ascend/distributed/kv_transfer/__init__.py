"""KV transfer between vLLM engines and KV stores (RFC 5604 layout).

Subpackages:

- `kv_p2p`: prefill/decode disaggregation, one engine's KV cache read or pushed straight into
  another's (`MooncakeConnector`, `MooncakeLayerwiseConnector`);
- `kv_pool`: connectors that keep KV blocks in a pool (`cpu_offload`: host memory;
  `ascend_store`: a distributed store, Mooncake or MemCache; `ucm_connector`);
- `utils`: what connectors share (the connector facade and its metrics, the device
  abstraction, block copies, the Mooncake transfer engine, the all-to-all helpers).

`register_connector()` registers every connector that exists in this package with vLLM's
`KVConnectorFactory`. Registration is lazy on vLLM's side (module path + class name), so this
module imports nothing heavy until `register_connector()` runs.
"""

from __future__ import annotations

from vllm_ascend.logger import init_logger

__all__ = ["CONNECTORS", "register_connector"]

logger = init_logger(__name__)

_CPU_OFFLOAD = "vllm_ascend.distributed.kv_transfer.kv_pool.cpu_offload.cpu_offload_connector"
_MOONCAKE_P2P = "vllm_ascend.distributed.kv_transfer.kv_p2p.mooncake_connector"
_MOONCAKE_LAYERWISE = "vllm_ascend.distributed.kv_transfer.kv_p2p.mooncake_layerwise_connector"
_ASCEND_STORE = "vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.ascend_store_connector"
_UCM = "vllm_ascend.distributed.kv_transfer.kv_pool.ucm_connector"

# (name registered with vLLM, module path, attribute). Only connectors that exist are listed;
# each module also exposes the registered name as a module attribute (docs/architecture.md,
# "Subsystem"), because vLLM resolves `kv_connector` as an attribute of
# `kv_connector_module_path` first.
CONNECTORS: tuple[tuple[str, str, str], ...] = (
    ("CPUOffloadingConnector", _CPU_OFFLOAD, "CPUOffloadingConnector"),
    ("MooncakeConnectorV1", _MOONCAKE_P2P, "MooncakeConnector"),
    ("MooncakeLayerwiseConnector", _MOONCAKE_LAYERWISE, "MooncakeLayerwiseConnector"),
    ("MooncakeConnectorStoreV1", _ASCEND_STORE, "AscendStoreConnector"),
    ("AscendStoreConnector", _ASCEND_STORE, "AscendStoreConnector"),
    ("UCMConnector", _UCM, "UCMConnectorV1"),
)

# Names this process registered, so a second call is silent while a clash with someone else's
# connector (vLLM's built-ins included) is reported once and never overridden.
_registered: set[str] = set()


def register_connector() -> list[str]:
    """Register this package's connectors with `vllm`'s `KVConnectorFactory`.

    Idempotent: names already registered by this function are skipped. A name that another
    party already registered (for example one of vLLM's built-in connectors) is left alone
    with a warning: we never register over a name we do not own.

    Returns:
        The names registered by this call (empty on a repeated call).

    Raises:
        ImportError: vLLM is not installed.
    """
    from vllm.distributed.kv_transfer.kv_connector.factory import KVConnectorFactory

    added: list[str] = []
    for name, module_path, class_name in CONNECTORS:
        if name in _registered:
            continue
        try:
            KVConnectorFactory.register_connector(name, module_path, class_name)
        except ValueError:
            # vLLM raises ValueError for a name that is already taken.
            logger.warning(
                "KV connector name %r is already registered by another package; "
                "vllm_ascend does not override it",
                name,
            )
            _registered.add(name)
            continue
        _registered.add(name)
        added.append(name)
    return added
