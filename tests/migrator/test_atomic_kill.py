"""A `vam migrate` run killed with SIGKILL mid-run leaves every file fully old or fully new.

The contract (docs/architecture.md, "Writes"): writes go through a temporary file and a rename in the same
directory, so a killed run never leaves a half-written user file. The tool's own temporary
files (`.<name>.<random>.vam-tmp`) may be left behind by a SIGKILL - nothing can clean up
after that signal - but they never take a user file's place; the test reports how many.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

OLD_HEAD = (
    "from vllm_ascend.distributed.mooncake_connector import MooncakeConnector\n"
    "import vllm_ascend.distributed.kvpool.backend as backend\n"
    "\n"
    'PATCH = "vllm_ascend.distributed.mooncake_connector.MooncakeConnector"\n'
)
NEW_HEAD = (
    "from vllm_ascend.distributed.kv_transfer.kv_p2p.mooncake_connector import MooncakeConnector\n"
    "import vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.backend as backend\n"
    "\n"
    'PATCH = "vllm_ascend.distributed.kv_transfer.kv_p2p.mooncake_connector.MooncakeConnector"\n'
)
TMP_SUFFIX = ".vam-tmp"
FILES_PER_FOLDER = 250
ATTEMPTS = 4
KILLS = 3


def _versions(folder: int, index: int) -> tuple[bytes, bytes]:
    """Old and new bytes of one generated module; sizes vary so writes take varying time."""
    doc = f'"""Generated module {folder}.{index}."""\n'
    body = "".join(f"\n\ndef f{k}(x):\n    return x + {k}\n" for k in range(10 + index % 60))
    return (doc + OLD_HEAD + body).encode(), (doc + NEW_HEAD + body).encode()


def _make_tree(root: Path, folders: int) -> dict[Path, tuple[bytes, bytes]]:
    files: dict[Path, tuple[bytes, bytes]] = {}
    for folder in range(folders):
        for index in range(FILES_PER_FOLDER):
            path = root / f"pkg{folder:03d}" / f"mod{index:04d}.py"
            path.parent.mkdir(parents=True, exist_ok=True)
            old, new = _versions(folder, index)
            path.write_bytes(old)
            files[path] = (old, new)
    return files


def _sample(files: dict[Path, tuple[bytes, bytes]], count: int) -> list[Path]:
    paths = sorted(files)
    step = max(1, len(paths) // count)
    return paths[::step]


def _changed(paths: list[Path], files: dict[Path, tuple[bytes, bytes]]) -> int:
    return sum(path.read_bytes() != files[path][0] for path in paths)


def _kill_mid_run(
    root: Path, files: dict[Path, tuple[bytes, bytes]], jobs: int, at_least: int
) -> bool:
    """Start a run, SIGKILL it once `at_least` sampled files changed (and not half of
    them). False if the run ended before that middle state was seen."""
    probes = _sample(files, 64)
    command = [sys.executable, "-m", "migrator", "migrate", "--quiet", "--jobs", str(jobs)]
    process = subprocess.Popen(
        [*command, str(root)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,  # its own process group: workers die with it
    )
    try:
        while process.poll() is None:
            if at_least <= _changed(probes, files) < len(probes) // 2:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
                return True
            time.sleep(0.002)
        return False
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        assert process.stderr is not None
        process.stderr.close()


def _old_and_new(files: dict[Path, tuple[bytes, bytes]]) -> tuple[int, int]:
    """How many files hold their old and their new bytes; asserts each holds one of them."""
    old = new = 0
    for path, (old_bytes, new_bytes) in files.items():
        data = path.read_bytes()
        assert data in (old_bytes, new_bytes), f"{path} is neither the old nor the new file"
        old += data == old_bytes
        new += data == new_bytes
    return old, new


@pytest.mark.parametrize("jobs", [1, 2])
def test_sigkill_mid_run_leaves_every_file_old_or_new(
    tmp_path: Path, jobs: int, record_property: Callable[[str, object], None]
) -> None:
    for attempt in range(ATTEMPTS):
        root = tmp_path / f"attempt{attempt}"
        files = _make_tree(root, folders=8 * 2**attempt)
        # Several kills in a row, each resuming from the state the last one left: every
        # kill is another chance to catch a write in flight.
        for kill in range(1, KILLS + 1):
            if not _kill_mid_run(root, files, jobs, at_least=2 * kill):
                break
            old, new = _old_and_new(files)
            assert old > 0 and new > 0, "the kill did not land mid-run"
        else:
            break
    else:
        pytest.fail(f"every run finished before it could be killed ({ATTEMPTS} attempts)")

    # Nothing else in the tree but the user's files and the tool's own temporary files.
    on_disk = {p for p in root.rglob("*") if p.is_file()}
    leftovers = {p for p in on_disk if p.name.endswith(TMP_SUFFIX)}
    assert on_disk - leftovers == set(files)
    for leftover in leftovers:
        # `.<name>.<random>.vam-tmp` beside the user file it was about to replace, holding
        # a prefix of that file's new bytes (the write it was doing).
        owner = leftover.parent / leftover.name[1:].rsplit(".", 2)[0]
        assert owner in files, leftover
        assert files[owner][1].startswith(leftover.read_bytes()), leftover
    record_property("files", len(files))
    record_property("rewritten_before_last_kill", new)
    record_property("vam_tmp_leftovers", len(leftovers))
    print(
        f"jobs={jobs}: {new}/{len(files)} rewritten after {KILLS} kills, {len(leftovers)} .vam-tmp"
    )

    # A second run finishes the job: every file new, and the leftovers are not user files.
    rerun = subprocess.run(
        [sys.executable, "-m", "migrator", "migrate", "--quiet", "--jobs", str(jobs), str(root)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert rerun.returncode == 0, rerun.stderr
    assert all(path.read_bytes() == versions[1] for path, versions in files.items())
