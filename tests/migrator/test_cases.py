"""The handed-over real-world cases (tests/cases, copied from shared/cases): each input must
migrate to its `.expected` file byte for byte, and a second run must change nothing."""

from __future__ import annotations

import filecmp
import os
import shutil
from pathlib import Path

import pytest

from tests.migrator.conftest import vam

CASES = Path(__file__).resolve().parents[1] / "cases"
# The cases are the 0.13 -> 0.14 migration (shared/cases/README.md: "Only step 0.14.0 is
# covered here"); the bundled table goes on to later releases, which would take 04, 05, 14,
# 22 and 24 further (backend.backend -> backend.base, config_data -> metadata, cpu_offload
# removed in 0.24.0rc1).
TO = ("--to", "0.14.0")


def _cases() -> list[tuple[Path, Path]]:
    pairs = []
    for path in sorted(CASES.iterdir()):
        if ".expected" in path.name or path.name == "README.md":
            continue
        if path.is_dir():
            expected = CASES / f"{path.name}.expected"
        else:
            stem, _, ext = path.name.rpartition(".")
            expected = CASES / f"{stem}.expected.{ext}"
        if expected.exists():
            pairs.append((path, expected))
    return pairs


def _same_tree(left: Path, right: Path) -> bool:
    if left.is_file():
        return left.read_bytes() == right.read_bytes()
    cmp = filecmp.dircmp(left, right)
    if cmp.left_only or cmp.right_only or cmp.funny_files:
        return False
    for name in cmp.common_files:
        if (left / name).read_bytes() != (right / name).read_bytes():
            return False
    return all(_same_tree(left / d, right / d) for d in cmp.common_dirs)


def test_every_case_is_collected() -> None:
    assert len(_cases()) == 24


@pytest.mark.parametrize(("source", "expected"), _cases(), ids=lambda p: p.name)
def test_case(source: Path, expected: Path, tmp_path: Path) -> None:
    work = tmp_path / source.name
    # Copied like `cp -r` does (the recipe in shared/cases/README.md): mode bits included,
    # and the shared cases are read-only (0444) - which root may still write.
    if source.is_dir():
        shutil.copytree(source, work)
    else:
        shutil.copy2(source, work)
    for path in [work, *work.rglob("*")]:
        if path.is_file():
            # As handed over (0444); only root may write those, so others get u+w.
            path.chmod(0o444 if os.geteuid() == 0 else 0o644)
    invalid = "-invalid-" in source.name

    first = vam("migrate", *TO, str(work))
    assert first.returncode == (1 if invalid and source.suffix == ".py" and "syntax" in source.name
                                else 0), first.stderr
    assert _same_tree(work, expected)

    second = vam("migrate", *TO, str(work))
    assert _same_tree(work, expected)
    assert ", 0 changed," in second.stderr  # and it says so
    if "syntax" in source.name:
        # Reported with its path and the reason, every time, and left untouched.
        assert f"{work}:" in second.stderr and "VAM901 cannot parse" in second.stderr
        assert second.returncode == 1
