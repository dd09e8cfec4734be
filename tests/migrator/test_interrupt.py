"""Ctrl-C stops a `vam migrate -j 2` run promptly with exit 130, every time.

A terminal's Ctrl-C sends SIGINT to the whole foreground process group: the parent and its
worker processes alike. A worker that died of it mid-queue-operation used to leave the pool
locked, and the parent then waited on it forever after printing "vam: interrupted". The test
sends SIGINT to the run's process group mid-run, several times over, and asks that each run
ends within a bound, with 130, and that every file is either untouched or fully migrated
(and parses), with no temporary file of the tool left behind.
"""

from __future__ import annotations

import ast
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.migrator.test_atomic_kill import _make_tree
from tests.polling import wait_until

FOLDERS = 8  # 2000 files (test_atomic_kill's tree): the workers read and screen them too
LOOPS = 5
BOUND_S = 15.0


def _some_changed(probes: list[Path], files: dict[Path, tuple[bytes, bytes]]) -> bool:
    return any(path.read_bytes() != files[path][0] for path in probes)


def _interrupt_mid_run(root: Path, files: dict[Path, tuple[bytes, bytes]], delay: float
                       ) -> tuple[int | None, float, str]:
    """Start `vam migrate -j 2`, send SIGINT `delay` seconds after it began writing, and
    give (exit status or None if it hung, seconds, stderr)."""
    probes = sorted(files)[:: max(1, len(files) // 64)]
    process = subprocess.Popen(
        [sys.executable, "-m", "migrator", "migrate", "--quiet", "--jobs", "2", str(root)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
        preexec_fn=_as_from_a_terminal,
    )
    try:
        wait_until(lambda: process.poll() is not None or _some_changed(probes, files), 120,
                   "the run writing", interval_s=0.01)
        time.sleep(delay)
        # As `timeout -s INT` does: the run, then its whole process group (as a terminal's
        # Ctrl-C), so the parent gets SIGINT twice and each worker once.
        os.kill(process.pid, signal.SIGINT)
        os.killpg(process.pid, signal.SIGINT)
        sent = time.monotonic()
        try:
            _, err = process.communicate(timeout=BOUND_S)
            return process.returncode, time.monotonic() - sent, err.decode()
        except subprocess.TimeoutExpired:
            return None, time.monotonic() - sent, ""
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
        # No worker outlives the run (each dies with its parent, or the parent ended them).
        wait_until(lambda: not _group_alive(process.pid), 10, "the workers gone")


def _as_from_a_terminal() -> None:
    """SIGINT at its default, as a terminal starts a command: a suite started in the
    background (`nohup ... &`, as CI may be) passes SIGINT on ignored, and Python keeps an
    inherited ignore, rightly, so the run would never see the Ctrl-C this test sends."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _group_alive(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    return True


def _assert_whole(root: Path, files: dict[Path, tuple[bytes, bytes]]) -> None:
    for path, (old, new) in files.items():
        data = path.read_bytes()
        assert data in (old, new), f"{path} is neither the old nor the new file"
        ast.parse(data)
    on_disk = {p for p in root.rglob("*") if p.is_file()}
    assert on_disk == set(files), sorted(on_disk - set(files))[:5]


@pytest.mark.skipif(not hasattr(os, "killpg"), reason="process groups are POSIX")
def test_ctrl_c_with_two_jobs_exits_130_promptly(tmp_path: Path) -> None:
    for loop in range(LOOPS):
        root = tmp_path / f"loop{loop}"
        files = _make_tree(root, FOLDERS)
        status, took, err = _interrupt_mid_run(root, files, delay=0.1 * loop)
        assert status is not None, f"loop {loop}: still running {BOUND_S:g} s after SIGINT"
        assert status == 130, f"loop {loop}: exit {status}, stderr: {err[-2000:]}"
        assert "vam: interrupted" in err
        assert "Traceback" not in err, err[-2000:]
        _assert_whole(root, files)
