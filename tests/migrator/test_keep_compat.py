"""`vam migrate --keep-compat VERSION` (issue 20, part 2): moved imports written in dual-lane
form, as a vLLM plugin writes them while it supports the last release and the newest, and
what `vam check` and `--drop-compat VERSION` make of them."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

import rules
from migrator.core import findings as F
from migrator.core.codes import levels
from migrator.core.config import ConfigError, load_config
from migrator.core.resolver import Resolver
from migrator.core.settings import Options
from migrator.rewrite.engine import Engine
from tests.migrator.conftest import vam

# A vLLM-like table: cdiv and get_open_port left vllm.utils for two modules in 0.11.1,
# vllm.attention.layer moved in 0.12.0.
TABLE = {
    "pack": {"name": "mini", "description": "t", "packages": ["vllm"],
             "version-helper": "vllm_ascend.utils"},
    "step": [
        {"version": "0.11.1", "summary": "split", "symbol": [
            {"old": "vllm.utils.cdiv", "new": "vllm.utils.math_utils.cdiv"},
            {"old": "vllm.utils.get_open_port", "new": "vllm.utils.network_utils.get_open_port"},
        ]},
        {"version": "0.12.0", "summary": "layers",
         "module": [{"old": "vllm.attention.layer", "new": "vllm.attention.layers.layer"}]},
    ],
}
PACK = rules.parse(TABLE)
HELPER = "from vllm_ascend.utils import vllm_version_is\n"


def d(text: str) -> str:
    return textwrap.dedent(text)


def engine(pack: rules.Pack = PACK, **options: object) -> Engine:
    return Engine(Resolver(pack), Options(**options))  # type: ignore[arg-type]


def keep(source: str, version: str = "0.11.0", pack: rules.Pack = PACK, dropped: bool = True,
         **options: object) -> tuple[str, list[F.Finding]]:
    """--keep-compat `version` on `source`, with the properties every result has: valid
    Python, a second run changes nothing, and (`dropped`: the source holds no compatibility
    code of its own) `--drop-compat` gives what a plain migrate writes."""
    source = d(source)
    run = engine(pack, keep_compat=version, **options)
    new, findings = run.transform_python(source, None)
    ast.parse(new)
    assert run.transform_python(new, None)[0] == new
    if not dropped:
        return new, findings
    guards = {k: v for k, v in options.items() if k == "version_guards"}
    dropped = engine(pack, drop_compat=version, **guards).transform_python(new, None)[0]
    assert dropped == engine(pack).transform_python(source, None)[0]
    return new, findings


def stale(text: str, pack: rules.Pack = PACK, **options: object) -> list[str]:
    """What `vam check` (no --from) reports as an error or warning in `text`."""
    found = engine(pack, report_only=True, **options).transform_python(text, None)[1]
    graded = levels("VAM")
    return [f"{f.code} {f.message}" for f in found if graded[f.code] != "info"]


def codes(findings: list[F.Finding]) -> list[str]:
    return [f.code for f in findings]


def test_names_imported_together_get_one_block_per_branch() -> None:
    new, findings = keep("""\
        import os

        from vllm.utils import cdiv, get_open_port, other  # noqa: F401
        """)
    assert new == HELPER.join(["import os\n\n", d("""\
        if vllm_version_is("0.11.0"):
            from vllm.utils import cdiv, get_open_port, other  # noqa: F401
        else:
            from vllm.utils.math_utils import cdiv  # noqa: F401
            from vllm.utils.network_utils import get_open_port
            from vllm.utils import other
        """)])
    assert codes(findings) == ["VAM001", "VAM001"]
    assert stale(new) == []


def test_nested_imports_keep_their_indentation_and_the_helper_is_imported_once() -> None:
    new, _ = keep("""\
        \"\"\"Doc.\"\"\"
        import os


        class A:
            def f(self):
                try:
                    from vllm.attention.layer import Attention
                except RuntimeError:
                    pass
        """)
    assert new == d("""\
        \"\"\"Doc.\"\"\"
        import os
        from vllm_ascend.utils import vllm_version_is


        class A:
            def f(self):
                try:
                    if vllm_version_is("0.11.0"):
                        from vllm.attention.layer import Attention
                    else:
                        from vllm.attention.layers.layer import Attention
                except RuntimeError:
                    pass
        """)
    assert stale(new) == []


def test_a_name_that_version_already_has_at_its_new_path_is_rewritten_plainly() -> None:
    # 0.11.1 has math_utils.cdiv: only the 0.12.0 move needs a lane.
    new, _ = keep("""\
        from vllm.utils import cdiv
        from vllm.attention.layer import Attention
        """, version="0.11.1")
    assert new == "from vllm.utils.math_utils import cdiv\n" + HELPER + d("""\
        if vllm_version_is("0.11.1"):
            from vllm.attention.layer import Attention
        else:
            from vllm.attention.layers.layer import Attention
        """)


def test_try_style_tries_the_new_import_first_and_needs_no_helper() -> None:
    new, findings = keep("from vllm.utils import cdiv\n", compat_style="try")
    assert new == d("""\
        try:
            from vllm.utils.math_utils import cdiv
        except ImportError:
            from vllm.utils import cdiv
        """)
    assert stale(new) == []
    assert F.OLD_FIRST not in codes(engine(report_only=True).transform_python(new, None)[1])


def test_try_style_across_steps_is_dropped_to_a_plain_migrate() -> None:
    # Attention moved in 0.12.0, a step after the first one after 0.11.0: the pair vam writes
    # for 0.11.0 still collapses (keep() checks --drop-compat 0.11.0 against a plain migrate).
    new, _ = keep("from vllm.attention.layer import Attention\nfrom vllm.utils import cdiv\n",
                  compat_style="try")
    assert new.count("except ImportError:") == 2


@pytest.mark.parametrize("binding", [
    # (used elsewhere: an import only the dropped lanes use goes with them)
    "from vllm_ascend.utils import vllm_version_is\nNEW = vllm_version_is('0.99.0')\n",
    "def vllm_version_is(version):\n    return False\n",  # the module that defines it
])
def test_a_module_that_binds_the_helper_gets_no_import(binding: str) -> None:
    new, _ = keep(binding + "from vllm.utils import cdiv\n")
    assert new.count("vllm_version_is") == binding.count("vllm_version_is") + 1
    assert new.startswith(binding + 'if vllm_version_is("0.11.0"):')


def test_without_a_helper_module_the_import_is_left_and_reported() -> None:
    bare = rules.parse({**TABLE, "pack": {**TABLE["pack"], "version-helper": ""}})
    source = "from vllm.utils import cdiv\n"
    new, findings = keep(source, pack=bare)
    assert new == source and codes(findings) == ["VAM002"]
    assert "version-helper-module" in findings[0].message
    new, _ = keep(source, pack=bare, version_helper_module="plugin.compat")
    assert new.startswith("from plugin.compat import vllm_version_is\n")


@pytest.mark.parametrize(("helper", "first", "second"), [
    ("vllm_version_le", "from vllm.utils import cdiv", "from vllm.utils.math_utils import cdiv"),
    ("vllm_version_gt", "from vllm.utils.math_utils import cdiv", "from vllm.utils import cdiv"),
])
def test_the_condition_follows_the_helpers_comparison(helper: str, first: str,
                                                      second: str) -> None:
    guards = (helper, "vllm_version_is")
    new, _ = keep("from vllm.utils import cdiv\n", version_guards=guards)
    assert new == f"from vllm_ascend.utils import {helper}\n" + d(f"""\
        if {helper}("0.11.0"):
            {first}
        else:
            {second}
        """)
    assert stale(new, version_guards=guards) == []


def test_strings_become_conditional_expressions_or_are_reported() -> None:
    new, findings = keep("""\
        from unittest import mock

        p = mock.patch("vllm.utils.cdiv")
        q = "see vllm.utils.cdiv"


        def f():
            \"\"\"Docs take the new path: vllm.utils.cdiv.\"\"\"
        """)
    assert new == "from unittest import mock\n" + HELPER + d("""\

        p = mock.patch("vllm.utils.cdiv" if vllm_version_is("0.11.0") else "vllm.utils.math_utils.cdiv")
        q = "see vllm.utils.cdiv"


        def f():
            \"\"\"Docs take the new path: vllm.utils.math_utils.cdiv.\"\"\"
        """)
    # VAM014: the patch now names where cdiv is defined, not the module that looked it up.
    assert codes(findings) == ["VAM001", "VAM014", "VAM002", "VAM001"]
    assert [s.split()[0] for s in stale(new)] == ["VAM001"]  # the string a human must split


def test_chains_through_a_moved_module_become_conditional_expressions() -> None:
    new, findings = keep("""\
        import vllm

        a = vllm.attention.layer.Attention
        b = vllm.attention.layer.Attention()
        c = vllm.utils.cdiv
        """)
    assert new == "import vllm\n" + HELPER + d("""\

        a = vllm.attention.layer.Attention if vllm_version_is("0.11.0") else vllm.attention.layers.layer.Attention
        b = (vllm.attention.layer.Attention if vllm_version_is("0.11.0") else vllm.attention.layers.layer.Attention)()
        c = vllm.utils.cdiv
        """)
    # A symbol chain needs `import vllm.utils.math_utils`, which 0.11.0 cannot run.
    assert codes(findings) == ["VAM001", "VAM001", "VAM002"]


def test_existing_compatibility_code_and_shared_lines_are_not_touched() -> None:
    source = d("""\
        from vllm_ascend.utils import vllm_version_is
        if vllm_version_is("0.10.0"):
            from vllm.utils import cdiv
        else:
            from vllm.utils.math_utils import cdiv
        try:
            from vllm.utils.network_utils import get_open_port
        except ImportError:
            from vllm.utils import get_open_port
        import os; from vllm.attention.layer import Attention
        """)
    new, findings = keep(source, dropped=False)
    assert new == source
    assert codes(findings)[-1] == "VAM002" and "line of its own" in findings[-1].message


def test_drop_compat_removes_the_parentheses_of_a_collapsed_expression() -> None:
    source = 'x = (a.b if vllm_version_is("0.11.0") else c.d)()\nf((a if vllm_version_is("0.11.0") else b))\n'
    new, _ = engine(drop_compat="0.11.0").transform_python(source, None)
    assert new == "x = c.d()\nf(b)\n"
    call = 'f(a if vllm_version_is("0.11.0") else b)\n'
    assert engine(drop_compat="0.11.0").transform_python(call, None)[0] == "f(b)\n"


def test_drop_compat_keeps_a_helper_import_that_guarded_nothing() -> None:
    source = HELPER + "x = 1\n"
    assert engine(drop_compat="0.11.0").transform_python(source, None)[0] == source


# -- text files, the CLI, the configuration ------------------------------------------------


def _tree(tmp_path: Path) -> Path:
    (tmp_path / "table.toml").write_text(_toml())
    (tmp_path / "mod.py").write_text("from vllm.utils import cdiv\n")
    (tmp_path / "ci.yaml").write_text("run: python -m vllm.attention.layer\n")
    (tmp_path / "deploy.yaml").write_text("pip install vllm==0.12.0\nmod: vllm.attention.layer\n")
    return tmp_path / "table.toml"


def _toml() -> str:
    return d("""\
        [pack]
        name = "mini"
        description = "t"
        packages = ["vllm"]
        version-helper = "vllm_ascend.utils"

        [[step]]
        version = "0.11.1"
        summary = "split"
        [[step.symbol]]
        old = "vllm.utils.cdiv"
        new = "vllm.utils.math_utils.cdiv"

        [[step]]
        version = "0.12.0"
        summary = "layers"
        [[step.module]]
        old = "vllm.attention.layer"
        new = "vllm.attention.layers.layer"
        """)


def test_cli_text_files_keep_the_old_path_unless_they_pin_a_release_that_has_the_new(
    tmp_path: Path,
) -> None:
    table = str(_tree(tmp_path))
    done = vam("migrate", "--rules", table, "--keep-compat", "0.11.0", ".", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "mod.py").read_text().startswith(HELPER + 'if vllm_version_is("0.11.0"):')
    assert (tmp_path / "ci.yaml").read_text() == "run: python -m vllm.attention.layer\n"
    assert "ci.yaml:1:16: VAM013" in done.stdout + done.stderr
    assert "vllm.attention.layers.layer" in (tmp_path / "deploy.yaml").read_text()
    checked = vam("check", "--rules", table, "--keep-compat", "0.11.0", ".", cwd=tmp_path)
    assert checked.returncode == 0, checked.stdout
    plain = vam("check", "--rules", table, ".", cwd=tmp_path)  # the text file is stale then
    assert plain.returncode == 1 and "ci.yaml:1:16: VAM001" in plain.stdout + plain.stderr
    again = vam("migrate", "--rules", table, "--keep-compat", "0.11.0", "--check", ".",
                cwd=tmp_path)
    assert again.returncode == 0, again.stdout


@pytest.mark.parametrize(("args", "error"), [
    (("--keep-compat", "0.11.0", "--drop-compat", "0.11.0"), "cannot be combined"),
    (("--compat-style", "try"), "needs --keep-compat"),
    (("--keep-compat", "x.y"), "not a version"),
    (("--keep-compat", "0.11.0", "--version-guard", "vllm_version_lt"), "_gt"),
    (("--keep-compat", "0.12.0", "--to", "0.11.1"), "is not before --to 0.11.1"),
    (("--keep-compat", "0.12.0"), "is not before --to 0.12.0"),
])
def test_cli_usage_errors(tmp_path: Path, args: tuple[str, ...], error: str) -> None:
    table = str(_tree(tmp_path))
    bad = vam("migrate", "--rules", table, *args, ".", cwd=tmp_path)
    assert bad.returncode == 2 and error in bad.stderr and "Traceback" not in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1, bad.stderr


def test_cli_an_empty_version_guards_list_is_a_configuration_error(tmp_path: Path) -> None:
    table = str(_tree(tmp_path))
    (tmp_path / "pyproject.toml").write_text("[tool.vam]\nversion-guards = []\n")
    for extra in (("--keep-compat", "0.11.0", "--diff"), ("--diff",)):
        bad = vam("migrate", "--rules", table, *extra, ".", cwd=tmp_path)
        assert bad.returncode == 2, bad.stdout + bad.stderr
        assert "version-guards" in bad.stderr and "Traceback" not in bad.stderr
        assert len(bad.stderr.strip().splitlines()) == 1, bad.stderr


def test_cli_help_shows_an_example() -> None:
    shown = vam("migrate", "--help").stdout
    assert "--keep-compat 0.13.0" in shown and "--compat-style" in shown


def test_config_and_pack_keys(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.vam]\nversion-helper-module = "p.compat"\n')
    assert load_config(tmp_path).version_helper_module == "p.compat"
    (tmp_path / "pyproject.toml").write_text('[tool.vam]\nversion-helper-module = "p compat"\n')
    with pytest.raises(ConfigError, match="version-helper-module"):
        load_config(tmp_path)
    assert rules.load_pack("vllm").version_helper == "vllm_ascend.utils"
    with pytest.raises(rules.RulesError, match="version-helper"):
        rules.parse({**TABLE, "pack": {**TABLE["pack"], "version-helper": "not dotted!"}})


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_multi_line_statements_tabs_and_line_breaks_are_kept_in_both_lanes(newline: str) -> None:
    source = d("""\
        import os
        from vllm.utils import (  # keep
            cdiv,  # one
            get_open_port,
        )
        if os.name:
        \tfrom vllm.utils import \\
        \t    cdiv as c2
        """).replace("\n", newline)
    new, _ = keep(source)
    assert new == d("""\
        import os
        from vllm_ascend.utils import vllm_version_is
        if vllm_version_is("0.11.0"):
            from vllm.utils import (  # keep
                cdiv,  # one
                get_open_port,
            )
        else:
            from vllm.utils.math_utils import (  # keep
                cdiv,  # one
            )
            from vllm.utils.network_utils import get_open_port
        if os.name:
        \tif vllm_version_is("0.11.0"):
        \t\tfrom vllm.utils import \\
        \t\t    cdiv as c2
        \telse:
        \t\tfrom vllm.utils.math_utils import \\
        \t\t    cdiv as c2
        """).replace("\n", newline)
