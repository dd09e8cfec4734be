"""The import mistakes a review found in the real distributed -> kv_transfer refactor, planted in
small trees: each is found at the right place, and Python itself agrees that it breaks."""

from __future__ import annotations

from tests.verify_imports.vi_helpers import codes, python_import, static

CLEAN_PACKAGE = {
    "pkg/__init__.py": """
        from pkg import kv  # S11-style: a submodule through its package
        from pkg.kv.register import register_connector

        __all__ = ["register_connector", "kv"]
    """,
    "pkg/kv/__init__.py": """
        from .register import register_connector
        from .utils.helpers import *  # noqa: F403
    """,
    "pkg/kv/register.py": """
        from __future__ import annotations

        from typing import TYPE_CHECKING

        if TYPE_CHECKING:
            from pkg.kv.p2p.connector import Connector

        REGISTRY: dict[str, str] = {}


        def register_connector(name: str) -> Connector | None:
            from pkg.kv.p2p import connector  # deferred: connector imports this module

            REGISTRY[name] = connector.__name__
            return None
    """,
    "pkg/kv/p2p/__init__.py": "",
    "pkg/kv/p2p/connector.py": """
        import pkg.kv.utils.helpers as helpers_mod
        from pkg.kv.register import REGISTRY, register_connector
        from ..utils import helpers
        from ..utils.helpers import align_memory, rearrange


        class Connector:
            registry = REGISTRY
            helpers = (helpers, helpers_mod, align_memory, rearrange, register_connector)
    """,
    "pkg/kv/utils/__init__.py": "",
    "pkg/kv/utils/helpers.py": """
        __all__ = ["align_memory", "rearrange"]

        try:
            import numpy as np
        except ImportError:
            np = None


        def align_memory(size: int) -> int:
            return size


        def rearrange(x):
            return x


        def _private():
            return np
    """,
    "pkg/dist_utils.py": """
        from pkg.kv import align_memory  # reaches helpers through the star import in kv/__init__
        from pkg.kv.utils.helpers import rearrange

        GLOBAL_COUNTER: int = 0
        ANNOTATED_ONLY: int


        def fc3_all_gather(x):
            global LATE_NAME
            LATE_NAME = x
            return align_memory(rearrange(x))
    """,
}


def test_clean_tree_has_zero_findings_and_imports(tree) -> None:
    root = tree(CLEAN_PACKAGE)
    assert static("pkg") == []
    for module in ("pkg", "pkg.kv.p2p.connector", "pkg.dist_utils", "pkg.kv.register"):
        assert python_import(root, module).returncode == 0, module


def test_names_imported_from_a_package_whose_init_is_empty(tree) -> None:
    root = tree({
        "pkg/__init__.py": "",
        "pkg/kv_pool/__init__.py": "",
        "pkg/kv_pool/ascend_store/__init__.py": "",  # empty: exports nothing
        "pkg/kv_pool/ascend_store/ascend_store_connector.py": "class AscendStoreConnector: ...\n",
        "pkg/caller.py": """
            import os

            from pkg.kv_pool.ascend_store import AscendStoreConnector
        """,
    })
    found = static("pkg")
    assert codes(found) == [("pkg/caller.py", 3, 38, "VAI001")]
    assert found[0].message == (
        "cannot import name 'AscendStoreConnector' from 'pkg.kv_pool.ascend_store' "
        "(pkg/kv_pool/ascend_store/__init__.py defines no 'AscendStoreConnector'); "
        "did you mean pkg.kv_pool.ascend_store.ascend_store_connector.AscendStoreConnector? "
        "(a guess: same name elsewhere)"
    )
    assert found[0].suggestion == (
        "pkg.kv_pool.ascend_store.ascend_store_connector.AscendStoreConnector")
    assert "cannot import name 'AscendStoreConnector'" in python_import(root, "pkg.caller").stderr


def test_helper_imported_from_the_module_it_did_not_move_to(tree) -> None:
    root = tree({
        "pkg/__init__.py": "",
        "pkg/distributed/__init__.py": "",
        # utils stays put; align_memory moved to kv_transfer/utils/utils.py
        "pkg/distributed/utils.py": "def fc3_all_gather_and_maybe_unpad_impl(x):\n    return x\n",
        "pkg/distributed/kv_transfer/__init__.py": "",
        "pkg/distributed/kv_transfer/utils/__init__.py": "",
        "pkg/distributed/kv_transfer/utils/utils.py": "def align_memory(t, n):\n    return t\n",
        "pkg/distributed/kv_transfer/kv_p2p.py": """
            from pkg.distributed.utils import (
                fc3_all_gather_and_maybe_unpad_impl,
                align_memory,
            )
        """,
    })
    found = static("pkg")
    assert codes(found) == [("pkg/distributed/kv_transfer/kv_p2p.py", 3, 5, "VAI001")]
    assert found[0].suggestion == "pkg.distributed.kv_transfer.utils.utils.align_memory"
    assert "align_memory" in python_import(root, "pkg.distributed.kv_transfer.kv_p2p").stderr


def test_relative_import_one_level_off(tree) -> None:
    root = tree({
        "pkg/__init__.py": "",
        "pkg/kv_transfer/__init__.py": "",
        "pkg/kv_transfer/utils/__init__.py": "",
        "pkg/kv_transfer/utils/mooncake_transfer_engine.py": "class TransferEngine: ...\n",
        "pkg/kv_transfer/kv_pool/__init__.py": "",
        "pkg/kv_transfer/kv_pool/ascend_store/__init__.py": "",
        "pkg/kv_transfer/kv_pool/ascend_store/backend.py": """
            # needs three dots: kv_pool.utils does not exist
            from ..utils.mooncake_transfer_engine import TransferEngine
        """,
    })
    found = static("pkg")
    assert codes(found) == [("pkg/kv_transfer/kv_pool/ascend_store/backend.py", 2, 1, "VAI002")]
    assert found[0].module == "pkg.kv_transfer.kv_pool.utils"
    assert found[0].suggestion == "pkg.kv_transfer.utils"
    assert "No module named 'pkg.kv_transfer.kv_pool.utils'" in python_import(
        root, "pkg.kv_transfer.kv_pool.ascend_store.backend").stderr


def test_relative_import_beyond_the_top_level_package(tree) -> None:
    root = tree({
        "pkg/__init__.py": "",
        "pkg/a.py": "from ...elsewhere import x\n",
    })
    found = static("pkg")
    assert codes(found) == [("pkg/a.py", 1, 1, "VAI002")]
    assert "attempted relative import beyond top-level package" in found[0].message
    assert "beyond top-level package" in python_import(root, "pkg.a").stderr


def test_module_moved_but_a_caller_left_behind(tree) -> None:
    root = tree({
        "pkg/__init__.py": "",
        "pkg/distributed/__init__.py": "",
        "pkg/distributed/kv_transfer/__init__.py": "",
        "pkg/distributed/kv_transfer/kv_p2p/__init__.py": "",
        "pkg/distributed/kv_transfer/kv_p2p/mooncake_connector.py":
            "class MooncakeConnector: ...\n",
        "pkg/platform.py": """
            def connector_class():
                from pkg.distributed.mooncake_connector import MooncakeConnector
                return MooncakeConnector
        """,
        "pkg/worker.py": "import pkg.distributed.mooncake_connector as mc\n",
    })
    found = static("pkg")
    assert codes(found) == [("pkg/platform.py", 2, 5, "VAI002"), ("pkg/worker.py", 1, 8, "VAI002")]
    for finding in found:
        assert finding.module == "pkg.distributed.mooncake_connector"
        assert finding.suggestion == "pkg.distributed.kv_transfer.kv_p2p.mooncake_connector"
        assert "pkg/distributed/ has no mooncake_connector.py or mooncake_connector/" in (
            finding.message)
    assert "No module named 'pkg.distributed.mooncake_connector'" in python_import(
        root, "pkg.worker").stderr


def test_circular_import_that_breaks(tree) -> None:
    root = tree({
        "pkg/__init__.py": "",
        "pkg/kv_transfer/__init__.py": """
            from pkg.kv_transfer.connector import Connector

            def register_connector(name):
                return name
        """,
        "pkg/kv_transfer/connector.py": """
            from pkg.kv_transfer import register_connector

            class Connector: ...
        """,
    })
    found = static("pkg")
    assert codes(found) == [("pkg/kv_transfer/connector.py", 1, 29, "VAI003")]
    assert found[0].message == (
        "cannot import name 'register_connector' from partially initialised module "
        "'pkg.kv_transfer' (circular import when 'pkg.kv_transfer' is imported first: "
        "pkg.kv_transfer:1 -> pkg.kv_transfer.connector:1 -> pkg.kv_transfer; "
        "'register_connector' is bound at pkg/kv_transfer/__init__.py:3)"
    )
    assert "partially initialized module" in python_import(root, "pkg.kv_transfer").stderr
