"""register_connector(): every connector reaches vLLM's KVConnectorFactory, idempotently."""

from __future__ import annotations

import importlib
import logging
import subprocess
import sys

import pytest

pytest.importorskip("vllm")

from vllm.distributed.kv_transfer.kv_connector.factory import KVConnectorFactory  # noqa: E402
from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorBase_V1  # noqa: E402

import vllm_ascend  # noqa: E402
from vllm_ascend.distributed import kv_transfer  # noqa: E402


def test_register_is_idempotent_and_resolves_every_connector() -> None:
    kv_transfer.register_connector()
    assert kv_transfer.register_connector() == []
    vllm_ascend.register_connector()  # the entry point's target, a third call
    for name, module_path, attr in kv_transfer.CONNECTORS:
        cls = KVConnectorFactory.get_connector_class_by_name(name)
        assert issubclass(cls, KVConnectorBase_V1)
        module = importlib.import_module(module_path)
        assert getattr(module, attr) is cls
        # vLLM resolves `kv_connector` as an attribute of `kv_connector_module_path` first.
        assert getattr(module, name) is cls


def test_registered_names_are_not_vllm_builtins() -> None:
    # A fresh interpreter: vLLM's own registrations only, before any plugin ran.
    code = (
        "from vllm.distributed.kv_transfer.kv_connector.factory import KVConnectorFactory as F;"
        "print('\\n'.join(F._registry))"
    )
    builtins = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    ).stdout.split()
    assert "MooncakeConnector" in builtins  # the check sees vLLM's list
    assert not {name for name, _, _ in kv_transfer.CONNECTORS} & set(builtins)


def test_a_taken_name_is_never_overridden(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    before = KVConnectorFactory.get_connector_class_by_name("MooncakeConnector")
    clash = ("MooncakeConnector", "vllm_ascend.nowhere", "Nothing")
    monkeypatch.setattr(kv_transfer, "CONNECTORS", (clash,))
    monkeypatch.setattr(kv_transfer, "_registered", set())
    with caplog.at_level(logging.WARNING):
        assert kv_transfer.register_connector() == []
        assert kv_transfer.register_connector() == []
    assert KVConnectorFactory.get_connector_class_by_name("MooncakeConnector") is before
    warnings = [r for r in caplog.records if "already registered" in r.getMessage()]
    assert len(warnings) == 1


def test_entry_point_is_declared() -> None:
    from importlib.metadata import entry_points

    eps = entry_points(group="vllm.general_plugins")
    assert any(ep.value == "vllm_ascend:register_connector" for ep in eps)


def test_importing_vllm_ascend_is_cheap() -> None:
    code = "import sys, vllm_ascend; print('torch' in sys.modules, 'vllm' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    ).stdout.split()
    assert out == ["False", "False"]
