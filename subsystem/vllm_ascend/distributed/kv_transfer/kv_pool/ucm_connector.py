"""`UCMConnectorV1`: vLLM's KV connector API onto Unified Cache Management (UCM).

UCM (the `uc-manager` distribution, module `ucm`) implements its own connector,
`ucm.integration.vllm.ucm_connector.UCMConnector`, on `KVConnectorBase_V1`. This module is a thin
adapter: it builds that connector and forwards every `KVConnectorBase_V1` method, property and
class method to it, so vllm-ascend can register it under the name `UCMConnector` next to its own
connectors. UCM ships CUDA and CANN builds only; it is imported when the connector is built
(never when this module is imported), and its absence is one clear `ImportError` then.

Use it with `KVTransferConfig(kv_connector="UCMConnector", kv_role="kv_both",
kv_connector_extra_config={...UCM's own keys...})`.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from vllm.distributed.kv_transfer.kv_connector.v1.base import (
    KVConnectorBase_V1,
    KVConnectorRole,
)

if TYPE_CHECKING:
    from vllm.config import VllmConfig
    from vllm.v1.kv_cache_interface import KVCacheConfig

__all__ = ["UCM_CLASS", "UCM_MODULE", "UCMConnector", "UCMConnectorV1", "load_ucm_connector_class"]

UCM_MODULE = "ucm.integration.vllm.ucm_connector"
UCM_CLASS = "UCMConnector"

# Members of KVConnectorBase_V1 the adapter keeps for itself: its role, and the internal
# metadata helpers (the wrapped connector binds its own metadata).
_OWN = frozenset({"role"})
_PROPERTIES = ("supports_divergent_local_hybrid_hits", "requires_kv_delivery")
_CLASS_METHODS = (
    "get_required_kvcache_layout",
    "requires_piecewise_for_cudagraph",
    "build_kv_connector_stats",
    "build_prom_metrics",
)


def load_ucm_connector_class() -> type[Any]:
    """Import UCM's connector class.

    Raises:
        ImportError: `uc-manager` is not installed (or its build does not match this host).
    """
    try:
        module = importlib.import_module(UCM_MODULE)
    except ImportError as exc:
        raise ImportError(
            f"UCMConnector needs {UCM_MODULE}.{UCM_CLASS} from the 'uc-manager' distribution, "
            f"which ships CUDA and CANN builds only; install it on the GPU/NPU host ({exc})"
        ) from exc
    cls: type[Any] = getattr(module, UCM_CLASS)
    return cls


def _ucm_class_or_none() -> type[Any] | None:
    try:
        return load_ucm_connector_class()
    except ImportError:
        return None


def delegated_method_names() -> list[str]:
    """The `KVConnectorBase_V1` instance methods the adapter forwards (every public one)."""
    names = []
    for name, member in inspect.getmembers(KVConnectorBase_V1):
        if name.startswith("_") or name in _OWN or name in _PROPERTIES:
            continue
        if name in _CLASS_METHODS or not inspect.isfunction(member):
            continue
        names.append(name)
    return names


class UCMConnectorV1(KVConnectorBase_V1):
    """Adapter onto `ucm.integration.vllm.ucm_connector.UCMConnector`.

    Args:
        vllm_config: the engine config.
        role: scheduler or worker.
        kv_cache_config: the KV cache layout (passed on when UCM's constructor takes it).

    Attributes:
        connector: the wrapped UCM connector.

    Raises:
        ImportError: `uc-manager` is not installed.
    """

    def __init__(
        self, vllm_config: VllmConfig, role: KVConnectorRole, kv_cache_config: KVCacheConfig
    ) -> None:
        ucm_cls = load_ucm_connector_class()
        super().__init__(vllm_config, role, kv_cache_config)
        params = inspect.signature(ucm_cls).parameters
        takes_layout = "kv_cache_config" in params or len(params) >= 3
        args = (vllm_config, role, kv_cache_config) if takes_layout else (vllm_config, role)
        self.connector = ucm_cls(*args)

    @property
    def supports_divergent_local_hybrid_hits(self) -> bool:
        return bool(self.connector.supports_divergent_local_hybrid_hits)

    @property
    def requires_kv_delivery(self) -> bool:
        return bool(self.connector.requires_kv_delivery)

    @classmethod
    def get_required_kvcache_layout(cls, vllm_config: VllmConfig) -> str | None:
        ucm_cls = _ucm_class_or_none()
        if ucm_cls is None:
            return None
        layout: str | None = ucm_cls.get_required_kvcache_layout(vllm_config)
        return layout

    @classmethod
    def requires_piecewise_for_cudagraph(cls, extra_config: dict[str, Any]) -> bool:
        ucm_cls = _ucm_class_or_none()
        return bool(ucm_cls and ucm_cls.requires_piecewise_for_cudagraph(extra_config))

    @classmethod
    def build_kv_connector_stats(cls, data: dict[str, Any] | None = None) -> Any:
        ucm_cls = _ucm_class_or_none()
        return None if ucm_cls is None else ucm_cls.build_kv_connector_stats(data)

    @classmethod
    def build_prom_metrics(
        cls,
        vllm_config: VllmConfig,
        metric_types: dict[Any, Any],
        labelnames: list[str],
        per_engine_labelvalues: dict[int, list[object]],
    ) -> Any:
        ucm_cls = _ucm_class_or_none()
        if ucm_cls is None:
            return None
        return ucm_cls.build_prom_metrics(
            vllm_config, metric_types, labelnames, per_engine_labelvalues
        )


def _forward(name: str) -> Callable[..., Any]:
    def method(self: UCMConnectorV1, *args: Any, **kwargs: Any) -> Any:
        return getattr(self.connector, name)(*args, **kwargs)

    base = getattr(KVConnectorBase_V1, name)
    method.__name__ = name
    method.__qualname__ = f"UCMConnectorV1.{name}"
    method.__doc__ = f"Forwarded to UCM's `UCMConnector.{name}`." + (
        f"\n\n{inspect.getdoc(base)}" if inspect.getdoc(base) else ""
    )
    return method


# One forwarding method per KVConnectorBase_V1 method, generated so that a method vLLM adds to
# the base class is forwarded too (the adapter test enumerates the base class the same way).
for _name in delegated_method_names():
    setattr(UCMConnectorV1, _name, _forward(_name))
# Clears the abstract methods the generated ones implement.
UCMConnectorV1.__abstractmethods__ = frozenset()

# The name vLLM registers (docs/architecture.md, "Subsystem": `kv_connector` is resolved as an
# attribute of `kv_connector_module_path` first).
UCMConnector = UCMConnectorV1
