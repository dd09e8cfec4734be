"""One code registry (migrator/core/codes/): `vam rule`, the --help code tables, the README tables
and the per-tool title/severity maps all come from it and cannot drift."""

from __future__ import annotations

import re

import pytest
from click.testing import CliRunner, Result

from migrator.cli import main
from migrator.core import codes
from migrator.core import findings as F
from migrator.verify_api import findings as VA
from migrator.verify_imports import findings as VI
from tests.migrator.conftest import REPO

ALL_CODES = [c.code for c in codes.CODES]


def invoke(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


def test_every_code_the_tools_emit_is_registered_once() -> None:
    emitted = {v for k, v in vars(F).items() if k.isupper() and isinstance(v, str)
               and re.fullmatch(r"VAM\d{3}", v)}
    emitted |= {v for k, v in vars(VI).items() if k.isupper() and isinstance(v, str)
                and re.fullmatch(r"VAI\d{3}", v)}
    emitted |= {v for k, v in vars(VA).items() if k.isupper() and isinstance(v, str)
                and re.fullmatch(r"VAP\d{3}", v)}
    assert len(ALL_CODES) == len(set(ALL_CODES))
    assert emitted == set(ALL_CODES)
    assert F.CODE_TITLES == {c: codes.BY_CODE[c].title for c in ALL_CODES if c.startswith("VAM")}
    assert VI.CODE_TITLES == {c: codes.BY_CODE[c].title for c in ALL_CODES if c.startswith("VAI")}
    assert VA.CODE_TITLES == {c: codes.BY_CODE[c].title for c in ALL_CODES if c.startswith("VAP")}
    assert VI.SEVERITY[VI.MISSING_NAME] == VI.ERROR
    assert VI.SEVERITY[VI.GUARDED_IMPORT] == VI.WARNING
    assert VI.SEVERITY[VI.OPTIONAL_SKIPPED] == VI.INFO


@pytest.mark.parametrize("code", ALL_CODES)
def test_every_code_is_documented(code: str) -> None:
    entry = codes.BY_CODE[code]
    assert entry.level in (codes.ERROR, codes.WARNING, codes.INFO)
    assert entry.title and entry.means and entry.why and entry.fix
    assert len(f"  {code} {entry.level:<9}{entry.title}") <= 80  # help tables do not wrap
    result = invoke("rule", code)
    assert result.exit_code == 0
    assert result.stdout.startswith(f"{code} ({entry.level}): {entry.title}\n")


def test_rule_prints_title_why_example_and_fix() -> None:
    result = invoke("rule", "VAM001")
    assert result.exit_code == 0
    out = result.stdout
    assert out.splitlines()[0] == "VAM001 (error): reference to a moved name"
    for heading in ("What it means", "Why it matters", "Example", "Fix"):
        assert f"\n{heading}\n" in out
    assert "  bad:\n    from vllm_ascend.distributed.mooncake_connector import" in out
    assert "  good:\n    from vllm_ascend.distributed.kv_transfer.kv_p2p.mooncake_connector" in out
    assert "`vam migrate`" in out.split("\nFix\n")[1]
    assert invoke("rule", "vai003").stdout == invoke("rule", "VAI003").stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["NOPE"], "vam: error: unknown code 'NOPE' (`vam rule --all` lists them)\n"),
        ([], "vam: error: give a CODE (such as VAM001), or --all to list them\n"),
    ],
)
def test_rule_usage_errors_are_one_line_exit_2(args: list[str], message: str) -> None:
    result = invoke("rule", *args)
    assert result.exit_code == 2
    assert (result.stdout, result.stderr) == ("", message)


def test_rule_all_lists_every_code_with_its_title() -> None:
    result = invoke("rule", "--all")
    assert result.exit_code == 0
    rows = result.stdout.splitlines()
    assert [row.split()[0] for row in rows] == ALL_CODES
    for row, entry in zip(rows, codes.CODES, strict=True):
        assert row == f"{entry.code} {entry.level:<9}{entry.title}"


def _help_table(command: str) -> list[str]:
    """The rows of the code table in `vam COMMAND --help`, unindented."""
    lines = invoke(command, "--help").stdout.splitlines()
    start = lines.index("  Codes (`vam rule CODE` explains one):") + 1
    rows = []
    for line in lines[start:]:
        if not line.strip():
            break
        rows.append(line.strip())
    return rows


@pytest.mark.parametrize(("command", "prefix"),
                         [("check", "VAM"), ("verify-imports", "VAI"), ("verify-api", "VAP")])
def test_help_code_tables_match_the_registry(command: str, prefix: str) -> None:
    expected = [f"{c.code} {c.level:<9}{c.title}".strip() for c in codes.CODES
                if c.code.startswith(prefix)]
    assert _help_table(command) == expected


def test_readme_code_tables_match_the_registry() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| `(VA[MIP]\d{3})` \| (\w+) \| (.+?) \|$", readme, re.MULTILINE)
    documented = {code: (level, title.replace("`", "")) for code, level, title in rows}
    assert len(rows) == len(documented), "a code appears twice in README.md's tables"
    assert documented == {c.code: (c.level, c.title) for c in codes.CODES}
