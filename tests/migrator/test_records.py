"""Records are left alone (issue 19): a Python traceback in a log, a doc, a docstring or a
comment names what ran; like a diff's removed lines it is kept and reported as info (VAM011),
and the exit code does not change."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from migrator.rewrite.records import is_record, traceback_lines
from tests.migrator.conftest import vam

OLD = "vllm_ascend.distributed.mooncake_connector"
NEW = "vllm_ascend.distributed.kv_transfer.kv_p2p.mooncake_connector"
OLD_PATH = OLD.replace(".", "/")
RECORD = "VAM011"

TRACEBACK = textwrap.dedent(f"""\
    Traceback (most recent call last):
      File "/usr/lib/python3/site-packages/{OLD_PATH}.py", line 120, in start_load_kv
        from {OLD} import MooncakeConnector
        ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
    ModuleNotFoundError: No module named '{OLD}'
    """)
# As vLLM's worker processes print it: a prefix on every line.
PREFIXED = textwrap.dedent(f"""\
    (VllmWorker rank=0 pid=12)   File "/x/{OLD_PATH}.py", line 3, in f
    (VllmWorker rank=0 pid=12)     {OLD}.MooncakeConnector()
    (VllmWorker rank=0 pid=12) ImportError: cannot import name 'X' from '{OLD}'
    """)
AFTER = f"Fixed in the config: kv_connector_module_path={OLD}\n"


def _codes(stdout: str) -> list[tuple[int, str]]:
    out = []
    for line in stdout.splitlines():
        parts = line.split(":")
        if len(parts) > 3 and parts[1].isdigit():
            out.append((int(parts[1]), parts[3].split()[0]))
    return out


def test_traceback_lines_are_frames_their_source_and_the_exception() -> None:
    lines = (TRACEBACK + PREFIXED + AFTER).splitlines()
    assert sorted(traceback_lines(lines)) == [1, 2, 3, 4, 5, 6, 7]
    assert not is_record(lines)  # the line after the traceback is not one
    assert is_record(lines[:8])


@pytest.mark.parametrize("command", ["check", "migrate"])
def test_a_traceback_in_a_log_is_kept_and_reported_as_info(tmp_path: Path, command: str) -> None:
    log = tmp_path / "engine.log"
    log.write_text(TRACEBACK + PREFIXED)
    result = vam(command, str(log))
    assert result.returncode == 0, result.stdout + result.stderr  # info only
    assert _codes(result.stdout + result.stderr) == [(2, RECORD), (3, RECORD), (5, RECORD), (6, RECORD),
                                     (7, RECORD), (8, RECORD)]
    assert "kept in a traceback" in result.stdout + result.stderr
    assert log.read_text() == TRACEBACK + PREFIXED


def test_the_line_after_a_traceback_is_migrated(tmp_path: Path) -> None:
    log = tmp_path / "engine.log"
    log.write_text(TRACEBACK + AFTER)
    result = vam("migrate", str(log))
    assert result.returncode == 0, result.stderr
    assert log.read_text() == TRACEBACK + AFTER.replace(OLD, NEW)


@pytest.mark.parametrize(
    ("name", "document"),
    [
        ("README.md", f"# Crash\n\n```python\n{TRACEBACK}```\n\n{AFTER}"),
        ("README.md", f"# Crash\n\n```pytb\n{TRACEBACK}```\n\n{AFTER}"),
        ("index.rst", "Crash\n=====\n\n.. code-block:: python\n\n"
         + textwrap.indent(TRACEBACK, "   ") + "\n" + AFTER),
    ],
    ids=["python fence", "pytb fence", "rst code-block"],
)
def test_a_traceback_pasted_in_a_doc_block_is_kept(tmp_path: Path, name: str, document: str) -> None:
    path = tmp_path / name
    path.write_text(document)
    result = vam("migrate", str(path))
    assert result.returncode == 0, result.stderr
    assert path.read_text() == document.replace(AFTER, AFTER.replace(OLD, NEW))
    assert [code for _, code in _codes(result.stdout + result.stderr)].count(RECORD) == 3


def test_a_traceback_in_a_docstring_or_comment_is_kept(tmp_path: Path) -> None:
    frame = f'File "/x/{OLD_PATH}.py", line 3, in f'
    source = (
        f'"""Fails with:\n\n{TRACEBACK}"""\n'
        f"# {frame}\n"
        f"CONNECTOR = '{OLD}'\n"
    )
    path = tmp_path / "mod.py"
    path.write_text(source)
    result = vam("migrate", str(path))
    assert result.returncode == 0, result.stderr
    assert path.read_text() == source.replace(f"= '{OLD}'", f"= '{NEW}'")
    records = [line for line, code in _codes(result.stdout + result.stderr) if code == RECORD]
    assert records == [4, 5, 7, 9]
