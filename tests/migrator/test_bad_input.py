"""Bad input, through the real CLI in a subprocess (real exit codes, real stderr).

Usage and configuration mistakes: exit 2, one line on stderr, no traceback, nothing written.
Per-file failures (unparsable Python, undecodable bytes, a read-only file): each reported
with its path and reason, the file left byte-identical with its mtime, the other files of
the same run processed, exit 1.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

OLD = "vllm_ascend.distributed.mooncake_connector"
NEW = "vllm_ascend.distributed.kv_transfer.kv_p2p.mooncake_connector"
STALE = f"from {OLD} import MooncakeConnector\n"
PAST = 1_600_000_000_000_000_000  # ns: 2020-09-13, so an unchanged mtime means untouched


def vam(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "migrator", *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
    )


def assert_usage_error(result: subprocess.CompletedProcess[str], *fragments: str) -> None:
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("vam: error: "), lines[0]
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A folder with one stale file: usage errors must leave it alone."""
    root = tmp_path / "project"
    root.mkdir()
    (root / "plugin.py").write_text(STALE)
    return root


def assert_untouched(project: Path) -> None:
    assert (project / "plugin.py").read_text() == STALE


# -- usage and configuration errors: exit 2 ------------------------------------------------------


@pytest.mark.parametrize("command", ["migrate", "check"])
def test_unknown_rule_pack(project: Path, command: str) -> None:
    result = vam(command, "--rules", "no_such_pack", ".", cwd=project)
    assert_usage_error(result, "unknown rule pack 'no_such_pack'", "vllm_ascend")
    assert_untouched(project)


@pytest.mark.parametrize("command", ["migrate", "check"])
def test_rules_file_with_bad_toml(project: Path, tmp_path: Path, command: str) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[pack\nname = 'x'\n")
    result = vam(command, "--rules", bad, ".", cwd=project)
    assert_usage_error(result, str(bad), "invalid TOML", "line 1")
    assert_untouched(project)


def test_rules_file_that_does_not_exist(project: Path) -> None:
    result = vam("migrate", "--rules", "missing_table.toml", ".", cwd=project)
    assert_usage_error(result, "missing_table.toml")
    assert_untouched(project)


@pytest.mark.parametrize("command", ["migrate", "check"])
def test_missing_path_stops_the_run_before_anything_is_written(project: Path, command: str) -> None:
    result = vam(command, "plugin.py", "no/such/dir", cwd=project)
    assert_usage_error(result, "no such file or directory: no/such/dir")
    assert_untouched(project)


def test_from_after_to(project: Path) -> None:
    result = vam("migrate", "--from", "0.15.0", "--to", "0.14.0", ".", cwd=project)
    assert_usage_error(result, "--from 0.15.0 is after --to 0.14.0")
    assert_untouched(project)


def test_unknown_tool_vam_key(project: Path) -> None:
    (project / "pyproject.toml").write_text('[tool.vam]\nrulez = "vllm_ascend"\n')
    result = vam("migrate", ".", cwd=project)
    assert_usage_error(result, "pyproject.toml", "[tool.vam] unknown key 'rulez'")
    assert_untouched(project)


def test_tool_vam_value_of_the_wrong_type(project: Path) -> None:
    (project / "pyproject.toml").write_text('[tool.vam]\nline-length = "long"\n')
    result = vam("migrate", ".", cwd=project)
    assert_usage_error(result, "pyproject.toml", "line-length", "'long'")
    assert_untouched(project)


DUPLICATE_OLD = """\
[pack]
name = "dup"
packages = ["oldpkg"]

[[step]]
version = "1.0"

[[step.module]]
old = "oldpkg.a"
new = "newpkg.a"

[[step.module]]
old = "oldpkg.b"
new = "newpkg.b"

[[step.module]]
old = "oldpkg.a"
new = "newpkg.a"
"""


@pytest.mark.parametrize("command", [["migrate", "."], ["check", "."], ["rules", "validate"]])
def test_rules_table_with_a_duplicate_old_names_the_entry(
    project: Path, tmp_path: Path, command: list[str]
) -> None:
    table = tmp_path / "dup.toml"
    table.write_text(DUPLICATE_OLD)
    args: list[str | Path] = (
        [*command, table] if command[0] == "rules" else [*command, "--rules", table]
    )
    result = vam(*args, cwd=project)
    assert_usage_error(
        result,
        f"{table}: step 1.0: module[2] (oldpkg.a): duplicate old 'oldpkg.a'",
        "first at step 1.0: module[0] (oldpkg.a)",
    )
    assert_untouched(project)


# -- per-file failures: reported, untouched, the run goes on, exit 1 ---------------------------


BROKEN_PY = f'print "{OLD}"\n'.encode()  # Python 2: does not parse
UNDECODABLE_PY = f"# caf\xe9 without a coding cookie\n{STALE}".encode("latin-1")
UNDECODABLE_MD = f"Use `{OLD}` (caf\xe9).\n".encode("latin-1")
READ_ONLY_PY = STALE.encode()


# Root may write a mode-0444 file (as `cp` copies of the shared cases are), so the read-only
# case runs vam as an unprivileged user when the tests run as root.
AS_USER = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] if os.geteuid() == 0 else []


def vam_as_user(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*AS_USER, sys.executable, "-m", "migrator", *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.fixture
def mixed(tmp_path: Path) -> Iterator[Path]:
    # Outside pytest's private tmp folder, so the unprivileged user can reach it.
    base = Path(tempfile.mkdtemp(prefix="vam-bad-input-"))
    base.chmod(0o777)
    root = base / "mixed"
    (root / "pkg").mkdir(parents=True)
    files = {
        "pkg/a_good.py": STALE.encode(),
        "pkg/broken.py": BROKEN_PY,
        "pkg/undecodable.py": UNDECODABLE_PY,
        "docs.md": UNDECODABLE_MD,
        "pkg/readonly.py": READ_ONLY_PY,
        "pkg/z_good.yaml": f"kv_connector_module_path: {OLD}\n".encode(),
    }
    for name, data in files.items():
        (root / name).write_bytes(data)
        (root / name).chmod(0o666)
        os.utime(root / name, ns=(PAST, PAST))
    root.chmod(0o777)
    (root / "pkg").chmod(0o777)
    (root / "pkg" / "readonly.py").chmod(0o444)
    yield root
    shutil.rmtree(base, ignore_errors=True)


FAILED = {
    "docs.md": "VAM902 cannot decode as UTF-8: invalid utf-8 byte 0xe9 at offset",
    "pkg/broken.py": "VAM901 cannot parse: Missing parentheses in call to 'print'",
    "pkg/readonly.py": "VAM903 not written: read-only file (mode -r--r--r--)",
    "pkg/undecodable.py": "VAM902 cannot decode:",
}


def test_failures_are_reported_and_the_other_files_processed(mixed: Path) -> None:
    result = vam_as_user("migrate", ".", cwd=mixed)

    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    failures = {
        line.split(":", 1)[0]: line for line in result.stderr.splitlines() if ": VAM9" in line
    }
    assert sorted(failures) == sorted(FAILED), result.stderr
    for path, reason in FAILED.items():
        assert f"{path}:1:1: {reason}" in failures[path], failures[path]
    assert "6 files scanned" in result.stderr and "4 failed" in result.stderr

    for name, data in {
        "pkg/broken.py": BROKEN_PY,
        "pkg/undecodable.py": UNDECODABLE_PY,
        "docs.md": UNDECODABLE_MD,
        "pkg/readonly.py": READ_ONLY_PY,
    }.items():
        info = (mixed / name).stat()
        assert (mixed / name).read_bytes() == data, name
        assert info.st_mtime_ns == PAST, name
    assert stat.S_IMODE((mixed / "pkg" / "readonly.py").stat().st_mode) == 0o444

    # The other files of the same run, before and after the failing ones, were rewritten.
    assert (mixed / "pkg" / "a_good.py").read_text() == STALE.replace(OLD, NEW)
    assert (mixed / "pkg" / "z_good.yaml").read_text() == f"kv_connector_module_path: {NEW}\n"
    assert not list(mixed.rglob("*.vam-tmp"))


def test_a_second_run_reports_the_same_failures_and_changes_nothing(mixed: Path) -> None:
    first = vam_as_user("migrate", ".", cwd=mixed)
    snapshot = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in mixed.rglob("*") if p.is_file()}
    second = vam_as_user("migrate", ".", cwd=mixed)
    assert second.returncode == 1
    assert [line for line in second.stderr.splitlines() if ": VAM9" in line] == [
        line for line in first.stderr.splitlines() if ": VAM9" in line
    ]
    after = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in mixed.rglob("*") if p.is_file()}
    assert after == snapshot


def test_check_reports_unreadable_files_and_exits_1(mixed: Path) -> None:
    result = vam("check", ".", cwd=mixed)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    out = result.stdout.splitlines()
    assert any(line.startswith("pkg/broken.py:1:1: VAM901 cannot parse") for line in out), out
    assert any(line.startswith("docs.md:1:1: VAM902 cannot decode as UTF-8") for line in out)
    assert any(line.startswith("pkg/undecodable.py:1:1: VAM902 cannot decode") for line in out)
    # A check writes nothing, so a read-only file is just a stale reference.
    assert f"pkg/readonly.py:1:1: VAM001 '{OLD}' moved to '{NEW}' (0.14.0)" in out
    assert (mixed / "pkg" / "a_good.py").read_text() == STALE


# -- issue 19, from a newcomer's run -------------------------------------------------------------


def test_python_file_with_a_nul_byte_is_reported_not_passed(tmp_path: Path) -> None:
    # CPython refuses a NUL in source whatever its version: VAM901 (does not parse), with
    # where the NUL is. Walked or named, a `.py` that spells a moved name is reported; a
    # non-Python file with a NUL is binary and skipped in a walk, as before.
    (tmp_path / "pkg").mkdir()
    nul_py = f"import {OLD}\nx = 1\x00\n".encode()
    (tmp_path / "pkg" / "nul.py").write_bytes(nul_py)
    (tmp_path / "pkg" / "blob.bin").write_bytes(f"{OLD}\x00\n".encode())
    expected = [
        f"pkg/nul.py:1:1: VAM001 '{OLD}' moved to '{NEW}' (0.14.0)",
        "pkg/nul.py:2:6: VAM901 cannot parse: NUL byte at line 2, column 6"
        " (Python source cannot hold one)",
    ]
    for target in ("pkg/nul.py", "."):
        result = vam("check", target, cwd=tmp_path)
        assert result.returncode == 1, result
        assert result.stdout.splitlines() == expected, result.stdout
    assert vam("migrate", ".", cwd=tmp_path).returncode == 1
    assert (tmp_path / "pkg" / "nul.py").read_bytes() == nul_py


def test_findings_of_a_file_print_in_line_order(tmp_path: Path) -> None:
    # The parse failure (line 2) is found before the text-level reference (line 1).
    (tmp_path / "mod.py").write_text(f"import {OLD}\nprint 'x'\n")
    result = vam("check", "--format", "json", "mod.py", cwd=tmp_path)
    assert result.returncode == 1, result
    found = [(f["line"], f["column"], f["code"]) for f in json.loads(result.stdout)]
    assert found == [(1, 1, "VAM001"), (2, 1, "VAM901")], found


def test_an_immutable_file_is_not_called_read_only(tmp_path: Path) -> None:
    if os.geteuid() != 0 or shutil.which("chattr") is None:
        pytest.skip("needs root and chattr to make a file immutable")
    base = Path(tempfile.mkdtemp(prefix="vam-immutable-", dir="/tmp"))
    target = base / "plugin.py"
    target.write_text(STALE)
    target.chmod(0o644)
    if subprocess.run(["chattr", "+i", str(target)], capture_output=True).returncode != 0:
        shutil.rmtree(base)
        pytest.skip("this filesystem refuses chattr +i")
    try:
        result = vam("migrate", "plugin.py", cwd=base)
        assert result.returncode == 1, result
        assert (
            "plugin.py:1:1: VAM903 not written: immutable or append-only file, operation not"
            " permitted (EPERM)"
        ) in result.stderr, result.stderr
        assert "mode -rw-r--r--" not in result.stderr
        assert target.read_text() == STALE
    finally:
        subprocess.run(["chattr", "-i", str(target)], check=False)
        shutil.rmtree(base, ignore_errors=True)
