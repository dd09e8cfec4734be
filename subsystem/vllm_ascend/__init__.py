"""vllm_ascend: the Ascend KV-transfer subsystem for vLLM, in the 0.14 layout.

Importing this package is cheap: it imports neither torch nor vLLM. vLLM finds
`register_connector` through the `vllm.general_plugins` entry point in pyproject.toml and calls
it in every process it starts.
"""

from __future__ import annotations

__all__ = ["register_connector"]


def register_connector() -> None:
    """Register every KV connector of this package with vLLM's `KVConnectorFactory`.

    Idempotent: calling it again in the same process does nothing. See
    `vllm_ascend.distributed.kv_transfer.register_connector`.
    """
    from vllm_ascend.distributed.kv_transfer import register_connector as _register

    _register()
