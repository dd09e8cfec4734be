"""One `vam migrate` suffices: a second one changes nothing and `vam check` (no `--from`)
finds nothing, however the reference is reached."""

from __future__ import annotations

import textwrap

import rules
from migrator.core import findings as F
from migrator.core.resolver import Resolver
from migrator.rewrite.engine import Engine, Options

PACK = rules.load_pack("vllm_ascend")
STORE = "vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store"


def _run(source: str, from_version: str | None = None, **options: object
         ) -> tuple[str, list[F.Finding]]:
    engine = Engine(Resolver(PACK, from_version), Options(**options))  # type: ignore[arg-type]
    return engine.transform_python(source, None)


def test_chains_through_a_module_alias_follow_every_step_in_one_pass() -> None:
    source = textwrap.dedent("""\
        from vllm_ascend.distributed.kvpool import backend as be
        import vllm_ascend.distributed.kvpool as kp

        x = be.backend.Backend
        y = kp.config_data.ReqMeta
        """)
    once, findings = _run(source, "0.13.0")
    assert once == textwrap.dedent(f"""\
        from {STORE} import backend as be
        import {STORE} as kp

        x = be.base.Backend
        y = kp.metadata.ReqMeta
        """)
    chains = [f for f in findings if f.kind == "attribute"]
    assert [(f.code, f.old, f.new) for f in chains] == [
        (F.MOVED, "be.backend.Backend", "be.base.Backend"),
        (F.MOVED, "kp.config_data.ReqMeta", "kp.metadata.ReqMeta"),
    ]
    again, later = _run(once, "0.13.0")
    assert (again, later) == (once, [])
    assert _run(once, None, report_only=True)[1] == []


def test_a_chain_through_an_alias_of_a_new_module_is_rewritten_in_place() -> None:
    source = f"import {STORE} as kp\ny = kp.config_data.ReqMeta\n"
    new, findings = _run(source)
    assert new == f"import {STORE} as kp\ny = kp.metadata.ReqMeta\n"
    assert [f.code for f in findings] == [F.MOVED]


def test_a_chain_through_an_alias_whose_import_is_ignored_is_left_alone() -> None:
    source = textwrap.dedent("""\
        import vllm_ascend.distributed.kvpool as kp  # vam: ignore
        y = kp.config_data.ReqMeta
        """)
    assert _run(source, "0.13.0") == (source, [])


def test_a_chain_an_alias_cannot_reach_after_the_move_is_reported() -> None:
    # The symbol left the alias' module: the chain needs another import, a human's call.
    source = "import vllm_ascend.distributed.utils as du\ndu.align_memory(t, 2)\n"
    new, findings = _run(source, "0.13.0")
    assert new == source
    assert [f.code for f in findings] == [F.NEEDS_HUMAN]
