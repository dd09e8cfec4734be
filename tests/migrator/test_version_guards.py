"""Version-guarded code (issue 13, part 3): the old branch of `if vllm_version_is(...)` and
its other shapes is left alone while migrating and not counted by `vam check`;
`vam migrate --drop-compat VERSION` collapses the blocks of VERSION and older, keeping
comments and layout, into valid Python.

"Compound" here means `not`, `and` and `or` of guards and other conditions, decided with
three-valued logic: `vllm_version_is("0.11.0") and flag` is False on every later version,
`vllm_version_is("0.11.0") or flag` is not decided (it is reported for a human).
"""

from __future__ import annotations

import ast
import json
import textwrap
from pathlib import Path

import pytest

import rules
from migrator.core import findings as F
from migrator.core.resolver import Resolver
from migrator.core.settings import Options
from migrator.rewrite.engine import Engine
from tests.migrator.conftest import vam

# A small vLLM-like table: cdiv left vllm.utils in 0.11.1, vllm.attention.layer moved in 0.12.0.
PACK_TABLE = {
    "pack": {"name": "mini_vllm", "description": "test table", "packages": ["vllm"]},
    "step": [
        {
            "version": "0.11.1",
            "summary": "vllm.utils split",
            "symbol": [{"old": "vllm.utils.cdiv", "new": "vllm.utils.math_utils.cdiv"}],
        },
        {
            "version": "0.12.0",
            "summary": "attention layers",
            "module": [{"old": "vllm.attention.layer", "new": "vllm.attention.layers.layer"}],
        },
    ],
}
PACK = rules.parse(PACK_TABLE)
OLD, NEW = "from vllm.utils import cdiv", "from vllm.utils.math_utils import cdiv"


def d(text: str) -> str:
    return textwrap.dedent(text)


def run(source: str, **options: object) -> tuple[str, list[F.Finding]]:
    engine = Engine(Resolver(PACK), Options(**options))  # type: ignore[arg-type]
    new, findings = engine.transform_python(d(source), None)
    ast.parse(new)  # every result is valid Python
    again, _ = engine.transform_python(new, None)
    assert again == new  # and a second run changes nothing
    return new, findings


def codes(findings: list[F.Finding]) -> list[str]:
    return [f.code for f in findings]


def stale(findings: list[F.Finding]) -> list[F.Finding]:
    """What `vam check` counts: everything but info findings."""
    return [f for f in findings if f.code not in (F.COMPAT_PAIR, F.PINNED, F.GUARDED_BRANCH,
                                                  F.COMPAT_DROPPED)]


# -- each guard shape: the old branch kept, the new one migrated, check counts only the new ---

SHAPES = {
    "if/else": ("""\
        if vllm_version_is("0.11.0"):
            from vllm.utils import cdiv
        else:
            from vllm.utils import cdiv
            from vllm.attention.layer import Attention
        """, """\
        if vllm_version_is("0.11.0"):
            from vllm.utils import cdiv
        else:
            from vllm.utils.math_utils import cdiv
            from vllm.attention.layers.layer import Attention
        """),
    "if not": ("""\
        if not vllm_version_is("0.11.0"):
            from vllm.utils import cdiv
        else:
            from vllm.utils import cdiv
        """, """\
        if not vllm_version_is("0.11.0"):
            from vllm.utils.math_utils import cdiv
        else:
            from vllm.utils import cdiv
        """),
    "elif": ("""\
        if flag:
            from vllm.utils import cdiv
        elif utils.vllm_version_is("0.11.0"):
            from vllm.utils import cdiv
        else:
            from vllm.utils import cdiv
        """, """\
        if flag:
            from vllm.utils.math_utils import cdiv
        elif utils.vllm_version_is("0.11.0"):
            from vllm.utils import cdiv
        else:
            from vllm.utils.math_utils import cdiv
        """),
    "and": ("""\
        if vllm_version_is("0.11.0") and flag:
            from vllm.utils import cdiv
        """, """\
        if vllm_version_is("0.11.0") and flag:
            from vllm.utils import cdiv
        """),
    "lt": ("""\
        if vllm_version_lt("0.11.1"):
            from vllm.utils import cdiv
        else:
            from vllm.utils import cdiv
        """, """\
        if vllm_version_lt("0.11.1"):
            from vllm.utils import cdiv
        else:
            from vllm.utils.math_utils import cdiv
        """),
    "conditional expression": (
        'f = vllm.utils.cdiv if vllm_version_is("0.11.0") else vllm.utils.cdiv\n',
        'f = vllm.utils.cdiv if vllm_version_is("0.11.0") else vllm.utils.math_utils.cdiv\n',
    ),
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_migrate_keeps_the_old_branch_and_migrates_the_new_one(shape: str) -> None:
    source, expected = SHAPES[shape]
    new, findings = run(source)
    assert new == d(expected)
    assert F.GUARDED_BRANCH in codes(findings)
    old = next((f.line, f.col) for f in findings if f.code == F.GUARDED_BRANCH)
    assert all((f.line, f.col) != old for f in stale(findings))


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_check_does_not_count_the_old_branch(shape: str) -> None:
    source, expected = SHAPES[shape]
    _, before = run(source, report_only=True)
    _, after = run(expected, report_only=True)
    assert not stale(after)  # the migrated text: the old branch alone is left, not stale
    assert F.GUARDED_BRANCH in codes(after)
    # Before: exactly what migrate rewrites is stale, never the old branch's references.
    _, migrated = run(source)
    moved = [(f.line, f.col) for f in migrated if f.code == F.MOVED]
    assert [(f.line, f.col) for f in stale(before)] == moved


def test_undecided_guard_is_migrated_as_any_code() -> None:
    # `or flag` may run on new versions too, and a guard for the target version itself runs
    # there: both branches are migrated.
    new, findings = run("""\
        if vllm_version_is("0.11.0") or flag:
            from vllm.utils import cdiv
        if vllm_version_is("0.12.0"):
            from vllm.utils import cdiv
        """)
    assert new.count(NEW) == 2
    assert F.GUARDED_BRANCH not in codes(findings)


def test_try_except_import_error_pair_is_kept() -> None:
    source = f"""\
        try:
            {NEW}
        except ImportError:
            {OLD}
        """
    new, findings = run(source)
    assert new == d(source)
    assert codes(findings) == [F.COMPAT_PAIR]


# -- --drop-compat ------------------------------------------------------------------------------


def drop(source: str, version: str = "0.11.0") -> tuple[str, list[F.Finding]]:
    return run(source, drop_compat=version)


def test_drop_if_else_keeps_the_new_branch_dedented_with_its_comments() -> None:
    new, findings = drop("""\
        import os

        if vllm_version_is("0.11.0"):
            # the 0.11.0 layout
            from vllm.utils import cdiv
        else:
            # the new layout
            from vllm.utils.math_utils import cdiv  # since 0.11.1

            X = 1
        Y = 2
        """)
    assert new == d("""\
        import os

        # the new layout
        from vllm.utils.math_utils import cdiv  # since 0.11.1

        X = 1
        Y = 2
        """)
    assert codes(findings) == [F.COMPAT_DROPPED]


def test_drop_if_not_keeps_the_body_and_migrates_it() -> None:
    new, _ = drop("""\
        def f():
            if not vllm_version_is("0.11.0"):
                from vllm.utils import cdiv, other
                text = '''
          kept as written
        '''
            else:
                from vllm.utils import cdiv
            return cdiv
        """)
    assert new == d("""\
        def f():
            from vllm.utils.math_utils import cdiv
            from vllm.utils import other
            text = '''
          kept as written
        '''
            return cdiv
        """)


def test_drop_elif_chain_keeps_its_other_arms() -> None:
    new, _ = drop("""\
        if vllm_version_is("0.11.0"):
            a = 0
        elif flag:
            a = 1
        elif not vllm_version_is("0.11.0"):  # the new versions
            a = 2
        else:
            a = 3
        """)
    assert new == d("""\
        if flag:
            a = 1
        else:  # the new versions
            a = 2
        """)


def test_drop_compound_conditions() -> None:
    new, findings = drop("""\
        def f():
            if vllm_version_is("0.11.0") and flag:
                a = 0
        if not vllm_version_is("0.11.0") or flag:
            b = 1
        else:
            b = 2
        if vllm_version_is("0.11.0") or flag:
            c = 3
        """)
    assert new == d("""\
        def f():
            pass
        b = 1
        if vllm_version_is("0.11.0") or flag:
            c = 3
        """)
    assert codes(findings).count(F.COMPAT_DROPPED) == 2
    assert [f.line for f in findings if f.code == F.NEEDS_HUMAN] == [8]


def test_drop_conditional_expressions_keep_the_live_side() -> None:
    new, _ = drop("""\
        a = (vllm.utils.cdiv) if vllm_version_is("0.11.0") else (x + 1)
        b = f(old if not vllm_version_is("0.11.0") else new)
        """)
    assert new == d("""\
        a = (x + 1)
        b = f(old)
        """)


def test_drop_try_except_import_error_keeps_the_new_path() -> None:
    new, findings = drop(f"""\
        try:
            {NEW}
        except ImportError:  # vLLM 0.11.0
            {OLD}
        try:
            from vllm.attention.layer import Attention
        except ModuleNotFoundError:
            from vllm.attention.layers.layer import Attention
        """)
    # cdiv moved in 0.11.1, the first step after 0.11.0: dropped. Attention moved in 0.12.0:
    # 0.11.1 still needs the old path, so that pair stays.
    assert new == d(f"""\
        {NEW}
        try:
            from vllm.attention.layer import Attention
        except ModuleNotFoundError:
            from vllm.attention.layers.layer import Attention
        """)
    assert codes(findings).count(F.COMPAT_DROPPED) == 1


def test_drop_leaves_newer_guards_and_nests() -> None:
    new, _ = drop("""\
        if not vllm_version_is("0.11.0"):
            if vllm_version_is("0.12.0"):
                a = 1
            else:
                if vllm_version_is("0.11.0"):
                    b = 0
                else:
                    b = 2
        """)
    assert new == d("""\
        if vllm_version_is("0.12.0"):
            a = 1
        else:
            b = 2
        """)


def test_drop_an_if_without_else_empties_the_block_with_pass() -> None:
    new, _ = drop("""\
        class A:
            if vllm_version_is("0.10.2"):
                x = 1
            if vllm_version_is("0.11.0"):
                y = 1
        """)
    assert new == d("""\
        class A:
            pass
        """)


def test_a_configured_guard_name_and_a_version_newer_than_dropped() -> None:
    source = """\
        if my_version_lt("0.12.0"):
            a = 0
        else:
            a = 1
        """
    assert drop(source)[0] == d(source)  # my_version_lt is no guard by default
    helpers = ("my_version_lt",)
    assert run(source, drop_compat="0.11.0", version_guards=helpers)[0] == d(source)
    assert run(source, drop_compat="0.12.0", version_guards=helpers)[0] == "a = 1\n"


# -- the CLI and [tool.vam] ---------------------------------------------------------------------


def test_cli_drop_compat_and_version_guards_config(tmp_path: Path) -> None:
    table = tmp_path / "table.json"
    table.write_text(json.dumps(PACK_TABLE))
    (tmp_path / "pyproject.toml").write_text(
        '[tool.vam]\nversion-guards = ["compat_is"]\n'
    )
    module = tmp_path / "mod.py"
    module.write_text(d("""\
        if compat_is("0.11.0"):
            from vllm.utils import cdiv
        else:
            from vllm.utils.math_utils import cdiv
        """))
    toml = tmp_path / "table.toml"
    toml.write_text(_toml(PACK_TABLE))
    checked = vam("check", "--rules", str(toml), str(module), cwd=tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "VAM006" in checked.stdout
    done = vam("migrate", "--rules", str(toml), "--drop-compat", "0.11.0", str(module),
               cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert module.read_text() == NEW + "\n"
    bad = vam("migrate", "--rules", str(toml), "--drop-compat", "x.y", str(module), cwd=tmp_path)
    assert bad.returncode == 2 and "--drop-compat" in bad.stderr
    bad = vam("check", "--rules", str(toml), "--version-guard", "helper", str(module),
              cwd=tmp_path)
    assert bad.returncode == 2 and "_is, _eq" in bad.stderr


def _toml(table: dict) -> str:  # type: ignore[type-arg]
    pack = table["pack"]
    out = [f'[pack]\nname = "{pack["name"]}"\ndescription = "{pack["description"]}"\n'
           f'packages = {json.dumps(pack["packages"])}\n']
    for step in table["step"]:
        out.append(f'[[step]]\nversion = "{step["version"]}"\nsummary = "{step["summary"]}"\n')
        for kind in ("symbol", "module"):
            for move in step.get(kind, []):
                out.append(f'[[step.{kind}]]\nold = "{move["old"]}"\nnew = "{move["new"]}"\n')
    return "\n".join(out)
