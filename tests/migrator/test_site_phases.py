"""The site rewriters in three phases (issue 18, section 3) and the one placement helper
(section 4): phase 1's result is immutable, rewriters are independent of each other (in
code and in what they return), phase 3's precedence for overlapping edits, and where a new
import or block goes in a module."""

from __future__ import annotations

import ast
import dataclasses
import re
import textwrap

import pytest

import rules
from migrator.core.placement import IMPORTS, PROLOGUE, insertion
from migrator.core.resolver import Resolver
from migrator.core.settings import Options
from migrator.rewrite.pysource import PythonRewriter
from migrator.rewrite.sites import SITE_REWRITERS, rewrite_sites
from migrator.rewrite.sites.context import Edit, SiteContext
from migrator.rewrite.sites.finish import apply_edits
from migrator.rewrite.sites.protect import protect
from tests.migrator.conftest import REPO

OLD = "vllm_ascend.distributed.mooncake_connector"
NEW = "vllm_ascend.distributed.kv_transfer.kv_p2p.mooncake_connector"

MODULE = textwrap.dedent(f"""\
    import vllm_ascend.distributed.utils
    from {OLD} import MooncakeConnector  # a comment
    x = {OLD}.MooncakeConnector  # vam: ignore
    try:
        from {NEW} import Thing
    except ImportError:
        from {OLD} import Thing
    if vllm_version_is("0.9.0"):
        from {OLD} import Old
    name = "{OLD}"
    y = vllm_ascend.distributed.utils.align_memory
    """)


def context(text: str, **options: object) -> SiteContext:
    resolver = Resolver(rules.load_pack("vllm_ascend"))
    trigger = re.compile(resolver.trigger_pattern().decode(), re.ASCII)
    ctx = PythonRewriter(resolver, trigger).context(text, None, Options(**options))  # type: ignore[arg-type]
    assert ctx is not None
    return ctx


def line_of(text: str, needle: str) -> int:
    return next(n for n, line in enumerate(text.splitlines(), 1) if needle in line)


def test_phase_one_returns_what_is_protected_immutable() -> None:
    ctx = context(MODULE)
    protected, findings = protect(ctx)
    with pytest.raises(dataclasses.FrozenInstanceError):
        protected.kept = frozenset()  # type: ignore[misc]
    assert isinstance(protected.kept, frozenset) and isinstance(protected.frozen, tuple)
    # The ignored line, the old branch of the guard, the pair's statements, the import lines.
    ignored = MODULE.index("x = ")
    assert protected.skip(ignored, ignored + 3)
    old_branch = MODULE.index("from", MODULE.index("vllm_version_is"))
    assert protected.skip(old_branch, old_branch + 4)
    assert not protected.skip(MODULE.index("name = "), MODULE.index("name = ") + 4)
    pair = [n for n in ctx.sites.imports if isinstance(n, ast.ImportFrom) and n.names[0].name
            == "Thing"]
    assert len(pair) == 2 and all(protected.keeps(node) for node in pair)
    # The import statements on lines that spell a moved name (not line 1's, which none moves).
    assert protected.import_lines == {2, *(n.lineno for n in pair), line_of(MODULE, "import Old")}
    assert protected.drops is None
    assert sorted(f.code for f in findings) == ["VAM004", "VAM006"]


def test_rewriters_are_independent_of_their_order() -> None:
    ctx = context(MODULE)
    protected, _ = protect(ctx)
    forward = [rewrite(ctx, protected) for rewrite in SITE_REWRITERS]
    backward = [rewrite(ctx, protected) for rewrite in reversed(SITE_REWRITERS)]
    assert forward == backward[::-1]
    assert any(result.held for result in forward)  # the chain to a moved symbol
    new, _ = rewrite_sites(ctx)
    assert f"from {NEW} import MooncakeConnector  # a comment\n" in new
    assert "import vllm_ascend.distributed.utils\nimport vllm_ascend.distributed.kv_transfer" in new
    assert f"x = {OLD}.MooncakeConnector  # vam: ignore" in new  # protected: untouched
    assert f"    from {OLD} import Old\n" in new and f'name = "{NEW}"' in new


def test_site_rewriters_never_import_each_other_nor_the_phases() -> None:
    sites = REPO / "migrator" / "rewrite" / "sites"
    rewriters = {f.__module__.rpartition(".")[2] for f in SITE_REWRITERS}
    assert rewriters == {"imports", "chains", "strings", "calls", "patches", "comments"}
    off_limits = rewriters | {"protect", "finish", "drop", "guards", "compat", "collapse"}
    for name in rewriters:
        tree = ast.parse((sites / f"{name}.py").read_text(encoding="utf-8"))
        imported = {
            node.module.rpartition(".")[2]
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module
            and node.module.startswith("migrator.rewrite.sites")
        }
        imported |= {
            alias.name
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module == "migrator.rewrite.sites"
            for alias in node.names
        }
        assert not imported & off_limits, (name, imported & off_limits)


def test_overlapping_edits_earlier_start_then_list_order_wins() -> None:
    text = "abcdefgh"
    # The earlier start wins over an overlapping later one, whatever the list order.
    assert apply_edits(text, [Edit(2, 6, "X"), Edit(1, 3, "Y")]) == "aYdefgh"
    # At one start, the first in the list wins.
    assert apply_edits(text, [Edit(2, 4, "P"), Edit(2, 5, "Q")]) == "abPefgh"
    # An insertion blocks nothing at its offset; disjoint edits all apply.
    assert apply_edits(text, [Edit(2, 2, "I"), Edit(2, 4, "R"), Edit(6, 8, "S")]) == "abIRefS"


# -- where a new import or block goes ---------------------------------------------------------

HEAD = '"""Doc."""\nfrom __future__ import annotations\nimport os\n\n\ndef f():\n    pass\n\nimport sys\n'


def test_prologue_is_below_docstring_and_future_imports() -> None:
    spot = insertion(HEAD, PROLOGUE, ast.parse(HEAD).body)
    assert (spot.line, HEAD[: spot.offset], spot.indent) == (
        2, '"""Doc."""\nfrom __future__ import annotations\n', "")


def test_imports_is_below_the_last_top_level_import_wherever_it_is() -> None:
    spot = insertion(HEAD, IMPORTS, ast.parse(HEAD).body)
    assert spot.line == 9 and HEAD[spot.offset:] == ""


@pytest.mark.parametrize("after", [PROLOGUE, IMPORTS])
def test_a_module_with_nothing_that_counts_gets_it_below_its_leading_comments(
    after: str,
) -> None:
    text = "#!/usr/bin/env python\n# Licence.\nx = 1\n"
    spot = insertion(text, after, ast.parse(text).body)  # type: ignore[call-overload]
    assert spot.line == 2 and text[spot.offset:] == "x = 1\n"


def test_after_a_statement_at_its_indentation_past_its_comment() -> None:
    text = "if c:\n    import m  # why\n    y = 1\n"
    start = text.index("import")
    spot = insertion(text, (start, start + len("import m")))
    assert spot is not None
    assert (text[: spot.offset], spot.indent, spot.line) == ("if c:\n    import m  # why", "    ", 2)


@pytest.mark.parametrize("text", ["try: import m\nexcept ImportError: pass\n", "import m; x = 1\n"])
def test_a_statement_sharing_its_line_leaves_no_place(text: str) -> None:
    start = text.index("import m")
    assert insertion(text, (start, start + len("import m"))) is None
