"""Registers this site's KV connectors with vLLM, next to the vllm-ascend ones."""

from vllm.distributed.kv_transfer.kv_connector.factory import KVConnectorFactory
from vllm_ascend.distributed import register_connector
from vllm_ascend.distributed.cpu_offload_manager.metadata import MetadataServer, MetadataServerProc
from vllm_ascend.distributed.kvpool.backend.backend import Backend

# Stock connectors of vllm-ascend, by the module path vLLM imports lazily.
SITE_CONNECTORS = {
    "SiteMooncakeConnector": ("vllm_ascend.distributed.mooncake_connector", "MooncakeConnector"),
    "SiteStoreConnector": (
        "vllm_ascend.distributed.kvpool.ascend_store_connector",
        "AscendStoreConnector",
    ),
    "SiteOffloadConnector": (
        "vllm_ascend.distributed.cpu_offload_connector",
        "CPUOffloadingConnector",
    ),
}


def register_site_connectors() -> None:
    register_connector()
    for name, (module_path, class_name) in SITE_CONNECTORS.items():
        if name not in KVConnectorFactory._registry:
            KVConnectorFactory.register_connector(name, module_path, class_name)


def start_offload_metadata_server(vllm_config) -> MetadataServerProc:
    """The CPU-offload metadata server runs next to the scheduler."""
    return MetadataServerProc(vllm_config)


def offload_server_class() -> type[MetadataServer]:
    return MetadataServer


class ObjectStoreBackend(Backend):
    """A KV-pool backend for the site's object store (see docs/deployment.md)."""

    def __init__(self, parallel_config):
        self.rank = parallel_config.rank

    def exists(self, keys: list[str]) -> list[int]:
        return [0] * len(keys)
