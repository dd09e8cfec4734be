"""ascend-plugin: site-specific KV connectors on top of vllm-ascend."""

from ascend_plugin.connectors import register_site_connectors

__all__ = ["register_site_connectors"]
