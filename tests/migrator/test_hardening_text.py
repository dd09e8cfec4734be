"""Hardening of the walk, the text rewriters, the writer and the CLI (issue "Hardening",
items 1, 4, 5, 7, 10b, 11, 12): each test is a case a new user met that hung, was missed
silently, or was rewritten wrongly."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.migrator.conftest import REPO

OLD_SYMBOL = "from vllm_ascend.distributed.utils import align_memory"
NEW_SYMBOL = "from vllm_ascend.distributed.kv_transfer.utils.utils import align_memory"
OLD_MODULE = "vllm_ascend.distributed.mooncake_connector"
NEW_MODULE = "vllm_ascend.distributed.kv_transfer.kv_p2p.mooncake_connector"
PINNED = "VAM005"
NOT_REGULAR = "VAM904"


def d(text: str) -> str:
    return textwrap.dedent(text)


def vam(*args: str, cwd: Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """The CLI in a subprocess, with a timeout: a run that blocks fails the test."""
    return subprocess.run(
        [sys.executable, "-m", "migrator", *args],
        cwd=cwd,
        input=stdin if stdin is not None else "",
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )


# -- 1. FIFOs, sockets and devices never hang a run ---------------------------------------


@pytest.fixture
def with_fifos(tmp_path: Path) -> Path:
    os.mkfifo(tmp_path / "pipe.py")
    os.mkfifo(tmp_path / "x.yaml")
    (tmp_path / "a.py").write_text(OLD_SYMBOL + "\n")
    return tmp_path


@pytest.mark.parametrize("command", ["check", "migrate"])
def test_fifos_in_a_tree_are_skipped_and_listed_with_verbose(with_fifos: Path, command: str) -> None:
    result = vam(command, "-v", ".", cwd=with_fifos)
    assert result.returncode in (0, 1), result.stderr
    skipped = [line for line in result.stderr.splitlines() if "skipped" in line]
    assert any("pipe.py" in line and "not a regular file (FIFO)" in line for line in skipped)
    assert any("x.yaml" in line and "not a regular file (FIFO)" in line for line in skipped)
    assert NOT_REGULAR not in result.stdout + result.stderr  # met in a walk: not a finding


@pytest.mark.parametrize("command", ["check", "migrate"])
def test_a_fifo_named_on_the_command_line_is_reported(with_fifos: Path, command: str) -> None:
    result = vam(command, "pipe.py", "x.yaml", "a.py", cwd=with_fifos)
    assert result.returncode == 1
    out = result.stdout + result.stderr
    assert f"pipe.py:1:1: {NOT_REGULAR} not a regular file (FIFO)" in out
    assert f"x.yaml:1:1: {NOT_REGULAR} not a regular file (FIFO)" in out
    if command == "migrate":
        assert (with_fifos / "a.py").read_text() == NEW_SYMBOL + "\n"


def test_reading_never_blocks_on_a_fifo(tmp_path: Path) -> None:
    from migrator.core.discover import SourceFile
    from migrator.rewrite.engine import read

    os.mkfifo(tmp_path / "late.py")  # became a FIFO after the walk looked at it
    data = read(SourceFile(tmp_path / "late.py", tmp_path, "python"))
    assert isinstance(data, OSError) and "FIFO" in str(data)


# -- 4. Python inside text follows the Python rules ------------------------------------------


PYTHON_IN_TEXT = {
    "run.sh": (
        f'python -c "{OLD_SYMBOL}; print(align_memory)"\n',
        f'python -c "{NEW_SYMBOL}; print(align_memory)"\n',
    ),
    "Dockerfile": (
        f"FROM python:3.11\nRUN python3 -c '{OLD_SYMBOL}'\n",
        f"FROM python:3.11\nRUN python3 -c '{NEW_SYMBOL}'\n",
    ),
    "guide.rst": (
        f"Use it:\n\n.. code-block:: python\n   :linenos:\n\n   {OLD_SYMBOL}\n   x = 1 +\n",
        f"Use it:\n\n.. code-block:: python\n   :linenos:\n\n   {NEW_SYMBOL}\n   x = 1 +\n",
    ),
    "code.rst": (
        f".. code:: python\n\n   {OLD_SYMBOL}\n\n.. sourcecode:: python\n\n   {OLD_SYMBOL}\n",
        f".. code:: python\n\n   {NEW_SYMBOL}\n\n.. sourcecode:: python\n\n   {NEW_SYMBOL}\n",
    ),
    "doctest.txt": (f">>> {OLD_SYMBOL}\n>>> align_memory(1)\n", f">>> {NEW_SYMBOL}\n>>> align_memory(1)\n"),
    "doctest.md": (f"Try:\n\n    >>> {OLD_SYMBOL}\n", f"Try:\n\n    >>> {NEW_SYMBOL}\n"),
    "install.md": (
        f"```python\n$ pip install vllm-ascend\n{OLD_SYMBOL}\nalign_memory(1)\n```\n",
        f"```python\n$ pip install vllm-ascend\n{NEW_SYMBOL}\nalign_memory(1)\n```\n",
    ),
}


@pytest.mark.parametrize("name", sorted(PYTHON_IN_TEXT))
def test_symbol_moves_in_python_inside_text_are_rewritten(tmp_path: Path, name: str) -> None:
    old, new = PYTHON_IN_TEXT[name]
    (tmp_path / name).write_text(old)
    checked = vam("check", name, cwd=tmp_path)
    assert checked.returncode == 1 and "align_memory" in checked.stdout, checked.stdout
    assert vam("migrate", name, cwd=tmp_path).returncode == 0
    assert (tmp_path / name).read_text() == new
    assert vam("check", name, cwd=tmp_path).returncode == 0  # nothing left


def test_notebook_cell_with_magics_follows_the_python_rules(tmp_path: Path) -> None:
    source = ["%load_ext autoreload\n", "!pip install vllm-ascend\n", OLD_SYMBOL + "\n",
              "align_memory(1)"]
    notebook = {"cells": [{"cell_type": "code", "source": source, "metadata": {},
                           "outputs": [], "execution_count": None}],
                "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    path = tmp_path / "nb.ipynb"
    path.write_text(json.dumps(notebook, indent=1) + "\n")
    assert vam("migrate", "nb.ipynb", cwd=tmp_path).returncode == 0
    cell = json.loads(path.read_text())["cells"][0]["source"]
    assert cell == [source[0], source[1], NEW_SYMBOL + "\n", source[3]]


# -- 5. the owner of a rewritten file is kept ---------------------------------------------


@pytest.mark.skipif(os.geteuid() != 0, reason="only root may give a file away")
def test_owner_and_group_are_kept(tmp_path: Path) -> None:
    path = tmp_path / "owned.py"
    path.write_text(OLD_SYMBOL + "\n")
    os.chown(path, 65534, 65534)
    assert vam("migrate", "owned.py", cwd=tmp_path).returncode == 0
    assert path.read_text() == NEW_SYMBOL + "\n"
    info = path.stat()
    assert (info.st_uid, info.st_gid) == (65534, 65534)


# -- 7. pinned links and diffs are history: kept, reported as info -------------------------


PINNED_LINKS = [
    f"https://github.com/vllm-project/vllm-ascend/blob/v0.13.0/{OLD_MODULE.replace('.', '/')}.py",
    f"https://github.com/vllm-project/vllm-ascend/tree/releases/v0.13.0/{OLD_MODULE.replace('.', '/')}.py",
    f"https://github.com/vllm-project/vllm-ascend/raw/v0.13.0-dev/{OLD_MODULE.replace('.', '/')}.py",
    f"https://raw.githubusercontent.com/vllm-project/vllm-ascend/3f2a9c1/{OLD_MODULE.replace('.', '/')}.py",
    f"https://gitee.com/ascend/vllm-ascend/blob/{'a' * 40}/{OLD_MODULE.replace('.', '/')}.py",
]


@pytest.mark.parametrize("link", PINNED_LINKS)
def test_pinned_links_are_kept_and_reported_as_info(tmp_path: Path, link: str) -> None:
    path = tmp_path / "notes.md"
    path.write_text(f"See [the connector]({link}).\n")
    checked = vam("check", "notes.md", cwd=tmp_path)
    assert checked.returncode == 0, checked.stdout
    assert PINNED in checked.stdout
    assert vam("migrate", "notes.md", cwd=tmp_path).returncode == 0
    assert path.read_text() == f"See [the connector]({link}).\n"


def test_links_to_main_are_still_rewritten(tmp_path: Path) -> None:
    old = f"https://github.com/vllm-project/vllm-ascend/blob/main/{OLD_MODULE.replace('.', '/')}.py"
    path = tmp_path / "notes.md"
    path.write_text(old + "\n")
    assert vam("migrate", "notes.md", cwd=tmp_path).returncode == 0
    assert path.read_text() == old.replace(OLD_MODULE.replace(".", "/"), NEW_MODULE.replace(".", "/")) + "\n"


DIFF = f"""\
--- a/x.py
+++ b/x.py
@@ -1 +1 @@
-import {OLD_MODULE}
+import {OLD_MODULE}  # still old
"""


def test_removed_lines_of_a_diff_are_kept(tmp_path: Path) -> None:
    (tmp_path / "change.patch").write_text(DIFF)
    (tmp_path / "notes.md").write_text(f"```diff\n{DIFF}```\n")
    checked = vam("check", ".", cwd=tmp_path)
    assert PINNED in checked.stdout
    assert vam("migrate", ".", cwd=tmp_path).returncode == 0
    new_diff = DIFF.replace(f"+import {OLD_MODULE}", f"+import {NEW_MODULE}")
    assert (tmp_path / "change.patch").read_text() == new_diff
    assert (tmp_path / "notes.md").read_text() == f"```diff\n{new_diff}```\n"


# -- 10b. no file is skipped silently ---------------------------------------------------------


@pytest.mark.parametrize("codec,bom", [("utf-16-le", b"\xff\xfe"), ("utf-16-be", b"\xfe\xff"),
                                       ("utf-32-le", b"\xff\xfe\x00\x00")])
@pytest.mark.parametrize("name", ["config.yaml", "mod.py"])
def test_utf16_and_utf32_files_are_migrated_in_their_encoding(
    tmp_path: Path, codec: str, bom: bytes, name: str
) -> None:
    path = tmp_path / name
    text = f"# é\nimport {OLD_MODULE}\n" if name.endswith(".py") else f"path: {OLD_MODULE}  # é\n"
    path.write_bytes(bom + text.encode(codec))
    assert vam("check", name, cwd=tmp_path).returncode == 1
    assert vam("migrate", name, cwd=tmp_path).returncode == 0
    assert path.read_bytes() == bom + text.replace(OLD_MODULE, NEW_MODULE).encode(codec)


@pytest.mark.parametrize("name", ["values.yaml.jinja2", "deploy.tmpl", "chart.gotmpl", "Jenkins.groovy",
                                  "main.hcl", "page.mdx", "guide.adoc", "data.jsonl", "conf.jinja"])
def test_more_text_kinds_are_walked(tmp_path: Path, name: str) -> None:
    (tmp_path / name).write_text(f"module: {OLD_MODULE}\n")
    assert vam("migrate", ".", cwd=tmp_path).returncode == 0
    assert (tmp_path / name).read_text() == f"module: {NEW_MODULE}\n"


def test_extensionless_scripts_with_a_shebang_are_walked(tmp_path: Path) -> None:
    (tmp_path / "serve").write_text(f"#!/bin/bash\nexport M={OLD_MODULE}\n")
    (tmp_path / "tool").write_text(f"#!/usr/bin/env python3\n{OLD_SYMBOL}\n")
    (tmp_path / "LICENSE").write_text(f"{OLD_MODULE}\n")  # no shebang: not looked at
    assert vam("migrate", ".", cwd=tmp_path).returncode == 0
    assert (tmp_path / "serve").read_text() == f"#!/bin/bash\nexport M={NEW_MODULE}\n"
    assert (tmp_path / "tool").read_text() == f"#!/usr/bin/env python3\n{NEW_SYMBOL}\n"
    assert (tmp_path / "LICENSE").read_text() == f"{OLD_MODULE}\n"


# -- 11. the pool is sized to the work and the machine ----------------------------------------


def test_pool_is_capped_by_cpus_and_by_the_work() -> None:
    from migrator.rewrite.runner import pool_size

    cpus = len(os.sched_getaffinity(0))
    assert pool_size(999, 100_000) == cpus
    assert pool_size(999, 40) <= min(cpus, 40)
    assert pool_size(1, 100_000) == 1
    assert pool_size(999, 0) == 1


# -- 12. newcomer friction ---------------------------------------------------------------------


def test_check_on_a_clean_tree_says_so_unless_quiet(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("import os\n")
    (tmp_path / "b.md").write_text("nothing\n")
    result = vam("check", ".", cwd=tmp_path)
    assert result.returncode == 0 and result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and "2 files scanned, 0 stale" in lines[0], result.stderr
    quiet = vam("check", "-q", ".", cwd=tmp_path)
    assert (quiet.returncode, quiet.stdout, quiet.stderr) == (0, "", "")


def test_check_reads_stdin_named_by_stdin_filename(tmp_path: Path) -> None:
    result = vam("check", "-", "--stdin-filename", "pkg/x.py", cwd=tmp_path, stdin=OLD_SYMBOL + "\n")
    assert result.returncode == 1
    assert result.stdout.startswith("pkg/x.py:1:1: VAM001"), result.stdout
    # The filename decides the kind: as YAML the import is a line of text, still found.
    as_yaml = vam("check", "-", "--stdin-filename", "x.yaml", cwd=tmp_path, stdin=f"m: {OLD_MODULE}\n")
    assert as_yaml.returncode == 1 and as_yaml.stdout.startswith("x.yaml:1:4: VAM001")


def test_relative_import_from_stdin_resolves_from_the_stdin_filename(tmp_path: Path) -> None:
    filename = "vllm_ascend/distributed/kvpool/worker.py"
    result = vam("migrate", "-", "--stdin-filename", filename, cwd=tmp_path,
                 stdin="from ..utils import align_memory\n")
    assert result.stdout == "from ..kv_transfer.utils.utils import align_memory\n", result.stderr


def test_migrate_stdin_writes_the_result_to_stdout(tmp_path: Path) -> None:
    result = vam("migrate", "-", cwd=tmp_path, stdin=OLD_SYMBOL + "\n")
    assert result.returncode == 0, result.stderr
    assert result.stdout == NEW_SYMBOL + "\n"
    untouched = vam("migrate", "-", cwd=tmp_path, stdin="import os\n")
    assert untouched.stdout == "import os\n"


@pytest.mark.parametrize("args,fragment", [
    (["check", "--bogus"], "--bogus"),
    (["check", "--format", "xml"], "xml"),
    (["explain"], "NAME"),
    (["no-such-command"], "no-such-command"),
])
def test_click_usage_errors_are_one_line(tmp_path: Path, args: list[str], fragment: str) -> None:
    result = vam(*args, cwd=tmp_path)
    assert result.returncode == 2
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("vam: error: "), result.stderr
    assert fragment in lines[0]


def test_bad_exclude_glob_is_a_usage_error(tmp_path: Path) -> None:
    result = vam("check", "--exclude", "[", ".", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.startswith("vam: error: ") and len(result.stderr.splitlines()) == 1


def test_empty_text_files_setting_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.vam]\ntext-files = []\n")
    result = vam("check", ".", cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert "text-files" in result.stderr and len(result.stderr.splitlines()) == 1


NEWER_SYNTAX = "except ValueError, TypeError:" if sys.version_info >= (3, 12) else "type X = int"


def test_syntax_of_a_newer_python_names_the_interpreter(tmp_path: Path) -> None:
    body = f"{OLD_SYMBOL}\n"
    body += f"try:\n    pass\n{NEWER_SYNTAX}\n    pass\n" if "except" in NEWER_SYNTAX else NEWER_SYNTAX + "\n"
    (tmp_path / "new.py").write_text(body)
    result = vam("check", "new.py", cwd=tmp_path)
    assert "VAM901" in result.stdout
    version = ".".join(map(str, sys.version_info[:3]))
    assert f"Python {version}" in result.stdout and "newer Python" in result.stdout
