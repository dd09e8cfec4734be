"""UCMConnectorV1 forwards every KVConnectorBase_V1 member to UCM's connector.

UCM (`uc-manager`) ships CUDA and CANN builds only, so it cannot run here: the adapter runs
against `FakeUCMConnector`, installed as `ucm.integration.vllm.ucm_connector.UCMConnector`,
which records each call and answers with a value unique to the method. The list of methods is
taken from vLLM's `KVConnectorBase_V1` itself, so a method vLLM adds is checked too.
"""

from __future__ import annotations

import inspect
import subprocess
import sys
import types
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("vllm")

from vllm.config import KVTransferConfig, VllmConfig  # noqa: E402
from vllm.distributed.kv_transfer.kv_connector.v1.base import (  # noqa: E402
    KVConnectorBase_V1,
    KVConnectorRole,
)

from vllm_ascend.distributed.kv_transfer import register_connector  # noqa: E402
from vllm_ascend.distributed.kv_transfer.kv_pool import ucm_connector  # noqa: E402
from vllm_ascend.distributed.kv_transfer.kv_pool.ucm_connector import (  # noqa: E402
    UCM_MODULE,
    UCMConnectorV1,
    delegated_method_names,
)


class FakeUCMConnector:
    """Stands in for `ucm.integration.vllm.ucm_connector.UCMConnector` (not runnable here)."""

    instances: list[FakeUCMConnector] = []

    def __init__(self, vllm_config: Any, role: Any, kv_cache_config: Any = None) -> None:
        self.init_args = (vllm_config, role, kv_cache_config)
        self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []
        FakeUCMConnector.instances.append(self)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)

        def method(*args: Any, **kwargs: Any) -> Any:
            self.calls.append((name, args, kwargs))
            return f"ucm:{name}"

        return method

    supports_divergent_local_hybrid_hits = True
    requires_kv_delivery = True

    @classmethod
    def get_required_kvcache_layout(cls, vllm_config: Any) -> str:
        return "HND"

    @classmethod
    def requires_piecewise_for_cudagraph(cls, extra_config: dict[str, Any]) -> bool:
        return extra_config.get("layerwise", False)

    @classmethod
    def build_kv_connector_stats(cls, data: Any = None) -> Any:
        return ("stats", data)

    @classmethod
    def build_prom_metrics(cls, *args: Any) -> Any:
        return ("prom", args)


@pytest.fixture
def fake_ucm(monkeypatch: pytest.MonkeyPatch) -> Iterator[type[FakeUCMConnector]]:
    names = ["ucm", "ucm.integration", "ucm.integration.vllm", UCM_MODULE]
    for name in names:
        module = types.ModuleType(name)
        monkeypatch.setitem(sys.modules, name, module)
    sys.modules[UCM_MODULE].UCMConnector = FakeUCMConnector  # type: ignore[attr-defined]
    FakeUCMConnector.instances.clear()
    yield FakeUCMConnector


def vllm_config() -> VllmConfig:
    register_connector()  # VllmConfig checks that the name is registered
    return VllmConfig(
        kv_transfer_config=KVTransferConfig(kv_connector="UCMConnector", kv_role="kv_both")
    )


def test_every_base_method_is_forwarded(fake_ucm: type[FakeUCMConnector]) -> None:
    config = vllm_config()
    adapter = UCMConnectorV1(config, KVConnectorRole.WORKER, "kv-cache-config")  # type: ignore[arg-type]
    (inner,) = fake_ucm.instances
    assert inner.init_args == (config, KVConnectorRole.WORKER, "kv-cache-config")
    names = delegated_method_names()
    # Every public instance method vLLM's base class defines, enumerated independently.
    base_methods = {
        n for n, v in vars(KVConnectorBase_V1).items() if inspect.isfunction(v) and n[0] != "_"
    }
    assert set(names) == base_methods
    # The enumeration covers vLLM's whole worker- and scheduler-side API.
    for expected in (
        "start_load_kv",
        "wait_for_save",
        "get_num_new_matched_tokens",
        "build_connector_meta",
        "request_finished",
        "bind_connector_metadata",
        "get_finished",
        "get_block_ids_with_load_errors",
        "shutdown",
        "reset_cache",
        "update_connector_output",
        "take_events",
        "handle_preemptions",
    ):
        assert expected in names
    for name in names:
        params = list(inspect.signature(getattr(KVConnectorBase_V1, name)).parameters)[1:]
        args = tuple(f"{name}-arg{i}" for i, p in enumerate(params) if p not in ("kwargs",))
        assert getattr(adapter, name)(*args) == f"ucm:{name}", name
        assert inner.calls[-1] == (name, args, {}), name
    assert len(inner.calls) == len(names)
    # Keyword arguments travel too.
    adapter.start_load_kv("ctx", extra=1)
    assert inner.calls[-1] == ("start_load_kv", ("ctx",), {"extra": 1})


def test_properties_and_class_methods_are_forwarded(fake_ucm: type[FakeUCMConnector]) -> None:
    adapter = UCMConnectorV1(vllm_config(), KVConnectorRole.SCHEDULER, None)  # type: ignore[arg-type]
    assert adapter.supports_divergent_local_hybrid_hits is True
    assert adapter.requires_kv_delivery is True
    assert adapter.role == KVConnectorRole.SCHEDULER  # the adapter's own
    assert UCMConnectorV1.get_required_kvcache_layout(vllm_config()) == "HND"
    assert UCMConnectorV1.requires_piecewise_for_cudagraph({"layerwise": True}) is True
    assert UCMConnectorV1.build_kv_connector_stats({"a": 1}) == ("stats", {"a": 1})
    assert UCMConnectorV1.build_prom_metrics(None, {}, ["l"], {}) == ("prom", (None, {}, ["l"], {}))


def test_a_two_argument_ucm_constructor_is_supported(
    fake_ucm: type[FakeUCMConnector], monkeypatch: pytest.MonkeyPatch
) -> None:
    class OldFakeUCMConnector(FakeUCMConnector):
        def __init__(self, vllm_config: Any, role: Any) -> None:
            super().__init__(vllm_config, role)

    monkeypatch.setattr(sys.modules[UCM_MODULE], "UCMConnector", OldFakeUCMConnector)
    UCMConnectorV1(vllm_config(), KVConnectorRole.WORKER, "layout")  # type: ignore[arg-type]
    assert fake_ucm.instances[-1].init_args[2] is None


def test_without_ucm_construction_fails_with_one_clear_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "ucm", None)  # import ucm -> ImportError
    with pytest.raises(ImportError, match="'uc-manager' distribution.*CUDA and CANN builds"):
        UCMConnectorV1(vllm_config(), KVConnectorRole.WORKER, None)  # type: ignore[arg-type]
    # Class-level queries vLLM makes before construction fall back to the base defaults.
    assert UCMConnectorV1.get_required_kvcache_layout(vllm_config()) is None
    assert UCMConnectorV1.requires_piecewise_for_cudagraph({}) is False


def test_importing_the_adapter_does_not_import_ucm() -> None:
    code = (
        "import sys\n"
        "import vllm_ascend.distributed.kv_transfer.kv_pool.ucm_connector as m\n"
        "assert m.UCMConnector is m.UCMConnectorV1\n"
        "print('ucm' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.strip() == "False"
    assert ucm_connector.UCMConnector is UCMConnectorV1
