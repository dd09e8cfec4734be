"""Compatibility blocks that already exist survive every command (issue 20, section 2).

A `try` branch that binds the name through a module alias (`import new.path.mod as _m` then
`X = _m.X`) with the old import in `except ImportError` is a compatibility pair, as the
plain form is: never rewritten, reported as info (VAM004). A `try` of the old path first,
falling back to the new one, runs the old path while shims serve it: kept, and reported as a
warning (VAM008) that suggests swapping the branches. Both with the bundled `vllm` pack
(`vllm.utils.cdiv` -> `vllm.utils.math_utils.cdiv`, 0.11.1) and `vllm_ascend` pack (the
mooncake connector's module move, 0.14.0).
"""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

import rules
from migrator.core import codes
from migrator.core import findings as F
from migrator.core.resolver import Resolver
from migrator.core.settings import Options
from migrator.rewrite.engine import Engine
from tests.migrator.conftest import vam

OLD_MC = "vllm_ascend.distributed.mooncake_connector"
NEW_MC = "vllm_ascend.distributed.kv_transfer.kv_p2p.mooncake_connector"

# pack -> (--to, old module, new module, name): a real row of each bundled pack.
ROWS = {
    "vllm": ("0.11.1", "vllm.utils", "vllm.utils.math_utils", "cdiv"),
    "vllm_ascend": ("0.14.0", OLD_MC, NEW_MC, "MooncakeConnector"),
}

ALIAS_FORMS = {
    "import-as": """\
        try:
            import {new} as _m
            {name} = _m.{name}
        except ImportError:
            from {old} import {name}
        """,
    "from-import-as": """\
        try:
            from {new_parent} import {new_leaf} as _m

            {name} = _m.{name}
        except (ImportError, ModuleNotFoundError):
            from {old} import {name}
        """,
    "whole-chain": """\
        try:
            import {new}
            {name} = {new}.{name}
        except ImportError:
            from {old} import {name}
        """,
    "old-side-aliased": """\
        try:
            from {new} import {name}
        except ImportError:
            import {old} as _old
            {name} = _old.{name}
        """,
}


def source_of(form: str, pack: str) -> str:
    _, old, new, name = ROWS[pack]
    parent, _, leaf = new.rpartition(".")
    text = form.format(old=old, new=new, name=name, new_parent=parent, new_leaf=leaf)
    return textwrap.dedent(text)


def run(source: str, pack: str, **options: object) -> tuple[str, list[F.Finding]]:
    resolver = Resolver(rules.load_pack(pack), to_version=ROWS[pack][0])
    engine = Engine(resolver, Options(**options))  # type: ignore[arg-type]
    new, findings = engine.transform_python(source, None)
    ast.parse(new)
    assert engine.transform_python(new, None)[0] == new  # a second run changes nothing
    return new, findings


@pytest.mark.parametrize("pack", sorted(ROWS))
@pytest.mark.parametrize("form", sorted(ALIAS_FORMS))
def test_a_pair_bound_through_a_module_alias_is_kept(form: str, pack: str) -> None:
    source = source_of(ALIAS_FORMS[form], pack)
    for report_only in (False, True):
        new, findings = run(source, pack, report_only=report_only)
        assert new == source  # the fallback still imports the old path
        assert [f.code for f in findings] == [F.COMPAT_PAIR]
        _, old, module, name = ROWS[pack]
        assert (findings[0].old, findings[0].new) == (f"{old}.{name}", f"{module}.{name}")


OLD_FIRST = {
    "plain": """\
        try:
            from {old} import {name}
        except ImportError:
            from {new} import {name}
        """,
    "aliased": """\
        try:
            import {old} as _m
            {name} = _m.{name}
        except ModuleNotFoundError:
            import {new} as _m
            {name} = _m.{name}
        """,
}


@pytest.mark.parametrize("pack", sorted(ROWS))
@pytest.mark.parametrize("form", sorted(OLD_FIRST))
def test_a_try_of_the_old_path_first_is_kept_and_reported(form: str, pack: str) -> None:
    source = source_of(OLD_FIRST[form], pack)
    for report_only in (False, True):
        new, findings = run(source, pack, report_only=report_only)
        assert new == source  # never both branches on the new path
        # One finding per name: a module the pack moves (vllm_ascend's) pairs `_m` too.
        assert {f.code for f in findings} == {F.OLD_FIRST}
        named = [f for f in findings if f.old.endswith(f".{ROWS[pack][3]}")]
        line = 3 if form == "aliased" else 2  # where the old path binds the name
        assert [f.line for f in named] == [line] and "swap the branches" in named[0].message


def test_the_old_first_code_is_a_documented_warning() -> None:
    assert codes.BY_CODE[F.OLD_FIRST].level == codes.WARNING
    shown = vam("rule", F.OLD_FIRST)
    assert shown.returncode == 0 and shown.stdout.startswith("VAM008 (warning): try block")


def test_check_fails_on_old_first_and_passes_on_the_aliased_pair(tmp_path: Path) -> None:
    old_first = tmp_path / "old_first.py"
    old_first.write_text(source_of(OLD_FIRST["plain"], "vllm"))
    checked = vam("check", "--rules", "vllm", str(old_first))
    assert checked.returncode == 1 and "VAM008" in checked.stdout
    pair = tmp_path / "pair.py"
    pair.write_text(source_of(ALIAS_FORMS["import-as"], "vllm"))
    checked = vam("check", "--rules", "vllm", str(pair))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "VAM004" in checked.stdout


def test_drop_compat_collapses_the_aliased_pair_to_its_new_branch() -> None:
    source = source_of(ALIAS_FORMS["import-as"], "vllm")
    new, findings = run(source, "vllm", drop_compat="0.11.0")
    assert new == "import vllm.utils.math_utils as _m\ncdiv = _m.cdiv\n"
    assert [f.code for f in findings] == [F.COMPAT_DROPPED]
