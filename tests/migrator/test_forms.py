"""One test per form of reference (docs/architecture.md, "Forms of reference"), each asserting the exact output."""

from __future__ import annotations

import textwrap

import pytest

import rules
from migrator.core import findings as F
from migrator.core.resolver import Resolver
from migrator.rewrite.engine import Engine, Options

# The forms are those of the 0.13 -> 0.14 move; the bundled table's later steps would take
# some names further (or remove them).
TO_VERSION = "0.14.0"


def rewrite(source: str, package: str | None = None, **options: object
            ) -> tuple[str, list[F.Finding]]:
    """Migrate one Python module's source in-process, up to step TO_VERSION."""
    resolver = Resolver(rules.load_pack("vllm_ascend"), to_version=TO_VERSION)
    return Engine(resolver, Options(**options)).transform_python(source, package)  # type: ignore[arg-type]


def migrate(source: str, **kwargs: object) -> str:
    new, _ = rewrite(textwrap.dedent(source), **kwargs)  # type: ignore[arg-type]
    # Idempotence is part of every form's contract.
    again, findings = rewrite(new, **kwargs)  # type: ignore[arg-type]
    assert again == new
    assert not [f for f in findings if f.fixable]
    return new


def d(text: str) -> str:
    return textwrap.dedent(text)


# -- 1. import old / import old as x / import old.sub / import a, old -------------------------


def test_form1_import_statements() -> None:
    assert migrate("""\
        import vllm_ascend.distributed.mooncake_connector
        import vllm_ascend.distributed.communicator as comm
        import vllm_ascend.distributed.kvpool.backend.backend
        import os, vllm_ascend.distributed.mooncake_transfer_engine
        """) == d("""\
        import vllm_ascend.distributed.kv_transfer.kv_p2p.mooncake_connector
        import vllm_ascend.distributed.device_communicators.npu_communicator as comm
        import vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.backend.backend
        import os, vllm_ascend.distributed.kv_transfer.utils.mooncake_transfer_engine
        """)


def test_form1_multi_name_import_splits_only_when_too_long() -> None:
    source = "import os, vllm_ascend.distributed.mooncake_transfer_engine  # engine\n"
    assert migrate(source, line_length=60) == (
        "import os  # engine\n"
        "import vllm_ascend.distributed.kv_transfer.utils.mooncake_transfer_engine\n"
    )
    assert migrate(source, line_length=120) == (
        "import os, vllm_ascend.distributed.kv_transfer.utils.mooncake_transfer_engine  # engine\n"
    )


# -- 2. from old import X: parentheses, comments, backslashes, star --------------------------


def test_form2_from_old_import_keeps_layout() -> None:
    assert migrate("""\
        from vllm_ascend.distributed.mooncake_connector import MooncakeConnector
        from vllm_ascend.distributed.kvpool.config_data import (  # pool metadata
            ChunkedTokenDatabase,  # keys
            # the request side
            ReqMeta,
        )
        from vllm_ascend.distributed.cpu_offload_manager.metadata import \\
            MetadataServer
        from vllm_ascend.distributed.ucm_connector import *
        """) == d("""\
        from vllm_ascend.distributed.kv_transfer.kv_p2p.mooncake_connector import MooncakeConnector
        from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.config_data import (  # pool metadata
            ChunkedTokenDatabase,  # keys
            # the request side
            ReqMeta,
        )
        from vllm_ascend.distributed.kv_transfer.kv_pool.cpu_offload.metadata import \\
            MetadataServer
        from vllm_ascend.distributed.kv_transfer.kv_pool.ucm_connector import *
        """)


# -- 3. from parent import oldmod [as m] ------------------------------------------------------


def test_form3_from_parent_import_moved_module() -> None:
    assert migrate("""\
        from vllm_ascend.distributed import mooncake_transfer_engine
        from vllm_ascend.distributed import mooncake_connector as mc
        from vllm_ascend.distributed import communicator
        from vllm_ascend.distributed import kvpool, cpu_offload_manager
        from vllm_ascend.distributed.kvpool import backend
        """) == d("""\
        from vllm_ascend.distributed.kv_transfer.utils import mooncake_transfer_engine
        from vllm_ascend.distributed.kv_transfer.kv_p2p import mooncake_connector as mc
        from vllm_ascend.distributed.device_communicators import npu_communicator as communicator
        from vllm_ascend.distributed.kv_transfer.kv_pool import ascend_store as kvpool, cpu_offload as cpu_offload_manager
        from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store import backend
        """)


def test_form3_mixed_list_is_split_in_order_of_first_appearance() -> None:
    assert migrate("""\
        def setup():
            from vllm_ascend.distributed import (parallel_state,  # groups
                                                 mooncake_connector, utils,
                                                 communicator)
            return parallel_state, mooncake_connector, utils, communicator
        """) == d("""\
        def setup():
            from vllm_ascend.distributed import (parallel_state,  # groups
                                                 utils)
            from vllm_ascend.distributed.kv_transfer.kv_p2p import mooncake_connector
            from vllm_ascend.distributed.device_communicators import npu_communicator as communicator
            return parallel_state, mooncake_connector, utils, communicator
        """)


# -- 4. symbol moves --------------------------------------------------------------------------


def test_form4_symbol_moves_split_from_stay_put_names() -> None:
    assert migrate("""\
        from vllm_ascend.distributed.utils import kv_alltoall_and_rearrange, fc3_all_gather_and_maybe_unpad_impl
        from vllm_ascend.distributed.utils import align_memory as align
        from vllm_ascend.distributed import register_connector
        """) == d("""\
        from vllm_ascend.distributed.kv_transfer.utils.utils import kv_alltoall_and_rearrange
        from vllm_ascend.distributed.utils import fc3_all_gather_and_maybe_unpad_impl
        from vllm_ascend.distributed.kv_transfer.utils.utils import align_memory as align
        from vllm_ascend.distributed.kv_transfer import register_connector
        """)


def test_form4_attribute_use_of_moved_symbol_adds_the_import() -> None:
    assert migrate("""\
        import vllm_ascend.distributed.utils


        def pad(t):
            out = vllm_ascend.distributed.utils.align_memory(t, 64)
            return vllm_ascend.distributed.utils.fc3_all_gather_and_maybe_unpad_impl(out)
        """) == d("""\
        import vllm_ascend.distributed.utils
        import vllm_ascend.distributed.kv_transfer.utils.utils


        def pad(t):
            out = vllm_ascend.distributed.kv_transfer.utils.utils.align_memory(t, 64)
            return vllm_ascend.distributed.utils.fc3_all_gather_and_maybe_unpad_impl(out)
        """)


# -- 5. attribute chains after `import vllm_ascend` -------------------------------------------


def test_form5_attribute_chains() -> None:
    assert migrate("""\
        import vllm_ascend

        cls = vllm_ascend.distributed.mooncake_connector.MooncakeConnector
        comm = vllm_ascend.distributed.communicator.NPUCommunicator(group)
        ok = isinstance(x, vllm_ascend.distributed.kvpool.backend.backend.Backend)
        """) == d("""\
        import vllm_ascend

        cls = vllm_ascend.distributed.kv_transfer.kv_p2p.mooncake_connector.MooncakeConnector
        comm = vllm_ascend.distributed.device_communicators.npu_communicator.NPUCommunicator(group)
        ok = isinstance(x, vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.backend.backend.Backend)
        """)


# -- 6. relative imports ----------------------------------------------------------------------


def test_form6_relative_imports_stay_relative() -> None:
    source = """\
        from . import mooncake_connector
        from . import communicator
        from .mooncake_transfer_engine import global_te
        from .kvpool.backend.backend import Backend
        from .parallel_state import get_p_tp_group
        """
    assert migrate(source, package="vllm_ascend.distributed") == d("""\
        from .kv_transfer.kv_p2p import mooncake_connector
        from .device_communicators import npu_communicator as communicator
        from .kv_transfer.utils.mooncake_transfer_engine import global_te
        from .kv_transfer.kv_pool.ascend_store.backend.backend import Backend
        from .parallel_state import get_p_tp_group
        """)


def test_form6_relative_import_from_a_subpackage_and_inside_a_moved_package() -> None:
    assert migrate("from ..kvpool.backend.backend import Backend\n",
                   package="vllm_ascend.distributed.fork") == (
        "from ..kv_transfer.kv_pool.ascend_store.backend.backend import Backend\n")
    # A file inside a moved package stays where it is: siblings stay `.x`, and imports that
    # leave the package keep the file's current package as their anchor, and their dots.
    inside = "from .config_data import ReqMeta\nfrom ..mooncake_connector import GET_META_MSG\n"
    assert migrate(inside, package="vllm_ascend.distributed.kvpool") == (
        "from .config_data import ReqMeta\n"
        "from ..kv_transfer.kv_p2p.mooncake_connector import GET_META_MSG\n")


def test_form6_relative_imports_left_alone_when_the_package_is_unknown() -> None:
    source = "from .mooncake_connector import MooncakeConnector\nfrom . import communicator\n"
    assert migrate(source) == source
    assert migrate(source, package="toolkit.comm") == source


# -- 7. strings holding dotted paths ----------------------------------------------------------


def test_form7_strings() -> None:
    assert migrate('''\
        import importlib, sys
        from unittest import mock

        @mock.patch("vllm_ascend.distributed.mooncake_connector.threading.Thread")
        def test(thread):
            importlib.import_module("vllm_ascend.distributed.kvpool.pool_worker")
            sys.modules["vllm_ascend.distributed.mooncake_transfer_engine"] = None
            register_connector("UCMConnector", "vllm_ascend.distributed.ucm_connector", "UCMConnectorV1")
            cfg = KVTransferConfig(kv_connector_module_path='vllm_ascend.distributed.cpu_offload_connector')
            cls = "vllm_ascend.distributed.communicator.NPUCommunicator"
            entry = "vllm_ascend.distributed.mooncake_connector:MooncakeConnector"
            hook = "vllm_ascend.distributed:register_connector"
            blob = '{"kv_connector_module_path": "vllm_ascend.distributed.mooncake_layerwise_connector"}'
            raw = rb"vllm_ascend.distributed.kvpool"
            fmt = f"{prefix}: vllm_ascend.distributed.utils.align_memory"
        ''') == d('''\
        import importlib, sys
        from unittest import mock

        @mock.patch("vllm_ascend.distributed.kv_transfer.kv_p2p.mooncake_connector.threading.Thread")
        def test(thread):
            importlib.import_module("vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.pool_worker")
            sys.modules["vllm_ascend.distributed.kv_transfer.utils.mooncake_transfer_engine"] = None
            register_connector("UCMConnector", "vllm_ascend.distributed.kv_transfer.kv_pool.ucm_connector", "UCMConnectorV1")
            cfg = KVTransferConfig(kv_connector_module_path='vllm_ascend.distributed.kv_transfer.kv_pool.cpu_offload.cpu_offload_connector')
            cls = "vllm_ascend.distributed.device_communicators.npu_communicator.NPUCommunicator"
            entry = "vllm_ascend.distributed.kv_transfer.kv_p2p.mooncake_connector:MooncakeConnector"
            hook = "vllm_ascend.distributed.kv_transfer:register_connector"
            blob = '{"kv_connector_module_path": "vllm_ascend.distributed.kv_transfer.kv_p2p.mooncake_layerwise_connector"}'
            raw = rb"vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store"
            fmt = f"{prefix}: vllm_ascend.distributed.kv_transfer.utils.utils.align_memory"
        ''')


def test_form7_entry_point_follows_its_dotted_twin() -> None:
    # `mod:obj` names `mod.obj`: when that dotted name moves on past the module's own move
    # (an intermediate path, or a module moved out of an unmoved package), so does the entry.
    assert migrate('''\
        a = "vllm_ascend.distributed.kvpool:metadata"
        b = "vllm_ascend.distributed:mooncake_connector"
        c = "vllm_ascend.distributed.kvpool:AscendStoreConnector"
        d = "vllm_ascend.distributed.utils:fc3_all_gather_and_maybe_unpad_impl"
        ''') == d('''\
        a = "vllm_ascend.distributed.kv_transfer.kv_pool.cpu_offload:metadata"
        b = "vllm_ascend.distributed.kv_transfer.kv_p2p:mooncake_connector"
        c = "vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store:AscendStoreConnector"
        d = "vllm_ascend.distributed.utils:fc3_all_gather_and_maybe_unpad_impl"
        ''')


# -- 8. file paths ----------------------------------------------------------------------------


def test_form8_file_paths() -> None:
    source = """\
        # Owners of vllm_ascend/distributed/mooncake_connector.py and vllm_ascend/distributed/kvpool/
        FILES = [
            "vllm_ascend/distributed/cpu_offload_manager/metadata.py",
            "/vllm-workspace/vllm-ascend/vllm_ascend/distributed/kvpool/backend/backend.py",
            "site-packages/vllm_ascend/distributed/communicator.py",
            "vllm_ascend/distributed/__init__.py",
            "vllm_ascend/distributed/utils.py",
            "mooncake_connector.py",
            "tests/ut/distributed/test_mooncake_connector.py",
            "vllm_ascend/distributed/mooncake_connector.json",
        ]
        """
    assert migrate(source) == d("""\
        # Owners of vllm_ascend/distributed/kv_transfer/kv_p2p/mooncake_connector.py and vllm_ascend/distributed/kv_transfer/kv_pool/ascend_store/
        FILES = [
            "vllm_ascend/distributed/kv_transfer/kv_pool/cpu_offload/metadata.py",
            "/vllm-workspace/vllm-ascend/vllm_ascend/distributed/kv_transfer/kv_pool/ascend_store/backend/backend.py",
            "site-packages/vllm_ascend/distributed/device_communicators/npu_communicator.py",
            "vllm_ascend/distributed/__init__.py",
            "vllm_ascend/distributed/utils.py",
            "mooncake_connector.py",
            "tests/ut/distributed/test_mooncake_connector.py",
            "vllm_ascend/distributed/mooncake_connector.json",
        ]
        """)


# -- 10. comments and docstrings ----------------------------------------------------------------


COMMENTED = '''\
    """Uses vllm_ascend.distributed.mooncake_connector (see also vllm_ascend.distributed.kvpool)."""
    # from vllm_ascend.distributed.utils import fc3_all_gather_and_maybe_unpad_impl, align_memory
    def f():
        """The pool lives in vllm_ascend.distributed.kvpool.pool_worker."""
        # from vllm_ascend.distributed import communicator
        return 1  # vllm_ascend.distributed.mooncake_layerwise_connector does the push
    '''


def test_form10_comments_docstrings_and_commented_out_imports() -> None:
    assert migrate(COMMENTED) == d('''\
        """Uses vllm_ascend.distributed.kv_transfer.kv_p2p.mooncake_connector (see also vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store)."""
        # from vllm_ascend.distributed.utils import fc3_all_gather_and_maybe_unpad_impl
        # from vllm_ascend.distributed.kv_transfer.utils.utils import align_memory
        def f():
            """The pool lives in vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.pool_worker."""
            # from vllm_ascend.distributed.device_communicators import npu_communicator as communicator
            return 1  # vllm_ascend.distributed.kv_transfer.kv_p2p.mooncake_layerwise_connector does the push
        ''')


def test_form10_no_comments_leaves_comments_and_docstrings() -> None:
    source = d(COMMENTED)
    assert migrate(source, comments=False) == source


# -- 11. never: prefixes, stay-put names, pragmas --------------------------------------------


def test_form11_prefix_near_misses_and_stay_put_names_never_change() -> None:
    source = d("""\
        import my_vllm_ascend.distributed.mooncake_connector
        import vllm_ascend.distributed.parallel_state as ps
        from vllm_ascend.distributed import parallel_state, utils
        from vllm_ascend.distributed.device_communicators.pyhccl import PyHcclCommunicator
        from vllm_ascend.distributed.utils import fc3_all_gather_and_maybe_unpad_impl
        from vllm_ascend.distributed.kvpool_extra import lru
        X = "vllm_ascend.distributed.mooncake_connector_v1_barebone"
        Y = "vllm_ascend.distributed.utils.align_memory_v2"
        Z = "vllm_ascend.distributed.communicator_v2 and my.vllm_ascend.distributed.kvpool"
        W = "vllm.distributed.kv_transfer and torch.distributed and mooncake.store"
        """)
    new, findings = rewrite(source)
    assert new == source
    assert findings == []


def test_form11_pragmas() -> None:
    source = d("""\
        from vllm_ascend.distributed.mooncake_connector import X  # vam: ignore
        OLD = "vllm_ascend.distributed.kvpool"  # vam: ignore  (kept for the shim test)
        NEW = "vllm_ascend.distributed.kvpool"
        """)
    new, _ = rewrite(source)
    assert new == source.replace(
        'NEW = "vllm_ascend.distributed.kvpool"',
        'NEW = "vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store"')
    whole = "# vam: ignore-file\nfrom vllm_ascend.distributed.mooncake_connector import X\n"
    assert rewrite(whole) == (whole, [])


# -- conventions --------------------------------------------------------------------------------


def test_reference_ends_at_any_non_ascii_identifier_character() -> None:
    source = '# 调用vllm_ascend.distributed.mooncake_connector中的类\n'
    assert migrate(source) == '# 调用vllm_ascend.distributed.kv_transfer.kv_p2p.mooncake_connector中的类\n'


# -- forms a tool cannot rewrite safely are reported, never silently skipped -----------------


@pytest.mark.parametrize(("source", "needle"), [
    ('X = ("vllm_ascend.distributed."\n     "mooncake_connector")\n', "split across"),
    ('importlib.import_module(".mooncake_connector", "vllm_ascend.distributed")\n',
     "passed separately"),
    ("mock.patch.object(vllm_ascend.distributed, 'communicator')\n", "passed separately"),
    ("from vllm_ascend.distributed.utils import *\n", "star import"),
    ('m = f"vllm_ascend.distributed.{name}"\n', "format field"),
    ('m = "vllm_ascend.distributed.%s" % name\n', "format field"),
    ('m = "vllm_ascend.distributed.{}".format(name)\n', "format field"),
    ("import vllm_ascend.distributed.utils as du\ndu.align_memory(t, 2)\n", "local name 'du'"),
    ('X = "vllm_ascend\\x2edistributed.kvpool"\n', "escapes"),
])
def test_unsafe_forms_are_reported_for_a_human(source: str, needle: str) -> None:
    new, findings = rewrite(source)
    assert new == source
    human = [f for f in findings if f.code == F.NEEDS_HUMAN]
    assert len(human) == 1, findings
    assert needle in human[0].message
    assert human[0].line >= 1


def test_pragma_with_codes_only_silences_vam_codes() -> None:
    source = d("""\
        from vllm_ascend.distributed.mooncake_connector import X  # vam: ignore[VAI001]
        from vllm_ascend.distributed.kvpool import Y  # vam: ignore[VAI001, VAM001]
        """)
    new, _ = rewrite(source)
    assert new == source.replace(
        "distributed.mooncake_connector", "distributed.kv_transfer.kv_p2p.mooncake_connector")


@pytest.mark.parametrize("source", [
    "import vllm_ascend.distributed.communicator as c, os\n",
    "from vllm_ascend.distributed import parallel_state, mooncake_connector, register_connector\n",
    "from vllm_ascend.distributed.utils import *\nfrom vllm_ascend.distributed.kvpool import *\n",
    "from . import communicator\nfrom ..kvpool.backend import backend\n",
    "if x:\n    from vllm_ascend.distributed.utils import (align_memory,  # c\n        fc3_all_gather_and_maybe_unpad_impl)\n",
])
def test_check_mode_reports_exactly_what_migrate_does(source: str) -> None:
    """`vam check` judges imports from the ast without libcst; it must agree with migrate."""
    package = "vllm_ascend.distributed.sub"
    _, migrate_findings = rewrite(source, package=package)
    _, check_findings = rewrite(source, package=package, report_only=True)
    assert check_findings == migrate_findings
    assert migrate_findings


def test_doctest_imports_follow_the_import_rules() -> None:
    assert migrate('''\
        def f():
            """Example.

            >>> from vllm_ascend.distributed import communicator, parallel_state
            >>> communicator.NPUCommunicator  # see vllm_ascend.distributed.kvpool
            """
        ''') == d('''\
        def f():
            """Example.

            >>> from vllm_ascend.distributed.device_communicators import npu_communicator as communicator
            >>> from vllm_ascend.distributed import parallel_state
            >>> communicator.NPUCommunicator  # see vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store
            """
        ''')
