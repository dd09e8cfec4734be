"""Findings less those on lines a given release and every later one never run: the
branches of version guards (`if vllm_version_is("0.13.0"): <old> else: <new>`) no release
from the target on takes. A dual-lane block is the point of the migration, so the upgrade
report leaves its old lane out. Lines are found by `migrator.core.guards.branch_lines`; a
guard is decided for a floor of versions (`rewrite/sites/versions.py`), since the upgraded
code keeps running on the releases after the target.
"""

from __future__ import annotations

from pathlib import Path

from migrator.core.guards import branch_lines
from migrator.rewrite.sites.versions import Floor, decide


def dead_lines(source: bytes, helpers: tuple[str, ...], version: str) -> set[int]:
    """The 1-based numbers of the lines `version` and every later release never run (see
    `branch_lines`). A file that does not parse has none."""
    floor = Floor(version, inclusive=True)
    return branch_lines(source, lambda test: decide(test, helpers, floor))


def live_only(findings: list, helpers: tuple[str, ...], version: str, root: Path) -> list:
    """`findings` (anything with `path` and `line`) less those on lines `version` never runs;
    `path` is read relative to `root` when not absolute."""
    cache: dict[str, set[int]] = {}
    kept = []
    for finding in findings:
        if finding.path not in cache:
            path = Path(finding.path)
            try:
                data = (path if path.is_absolute() else root / path).read_bytes()
            except OSError:
                data = b""
            cache[finding.path] = dead_lines(data, helpers, version) if data else set()
        if finding.line not in cache[finding.path]:
            kept.append(finding)
    return kept
