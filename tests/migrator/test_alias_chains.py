"""Attribute chains through a local name (`rewrite/sites/chains.py`): a name bound by an
import migrate rewrites follows the import, so `Cls.ATTR` after `from old import Cls` needs
nothing; a module alias whose name left that module still needs a human (VAM002)."""

from __future__ import annotations

import textwrap

import rules
from migrator.core import findings as F
from migrator.core.resolver import Resolver
from migrator.rewrite.engine import Engine, Options


def rewrite(source: str) -> tuple[str, list[F.Finding]]:
    resolver = Resolver(rules.load_pack("vllm"), from_version="0.13.0")
    return Engine(resolver, Options()).transform_python(textwrap.dedent(source), None)


def test_an_attribute_of_a_moved_class_imported_by_name_follows_the_import() -> None:
    new, findings = rewrite("""\
        from vllm.v1.attention.backends.utils import AttentionCGSupport


        def f():
            return AttentionCGSupport.ALWAYS
        """)
    assert [f.code for f in findings if f.code == F.NEEDS_HUMAN] == []
    assert new == textwrap.dedent("""\
        from vllm.v1.attention.backend import AttentionCGSupport


        def f():
            return AttentionCGSupport.ALWAYS
        """)


def test_a_moved_name_reached_through_a_module_alias_still_needs_a_human() -> None:
    source = """\
        import vllm.v1.attention.backends.utils as u


        def f():
            return u.AttentionCGSupport.ALWAYS
        """
    new, findings = rewrite(source)
    human = [f for f in findings if f.code == F.NEEDS_HUMAN]
    assert new == textwrap.dedent(source)
    assert len(human) == 1 and "through the local name 'u'" in human[0].message
