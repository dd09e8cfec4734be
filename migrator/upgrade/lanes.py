"""Which lines of a file do not run at a given release: the branches of version guards
(`if vllm_version_is("0.13.0"): <old> else: <new>`) that release never takes.

`vam verify-imports --against` reads every import of a file, so the old lane of a dual-lane
block is reported as broken at the new release, though that release never runs it. The
upgrade report leaves those findings out: a dual-lane block is the point of the migration.
"""

from __future__ import annotations

import ast
from pathlib import Path

from migrator.rewrite.sites.versions import Floor, decide


def dead_lines(source: bytes, helpers: tuple[str, ...], version: str) -> set[int]:
    """The 1-based line numbers of the statements `version` never runs: the body of an `if`
    (or of a conditional expression) whose guard is False at `version` and later, the
    `else` branch of one whose guard is True. A file that does not parse has none."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return set()
    floor = Floor(version, inclusive=True)
    dead: set[int] = set()
    for node in ast.walk(tree):
        if not isinstance(node, (ast.If, ast.IfExp)):
            continue
        value = decide(node.test, helpers, floor)
        if value is None:
            continue
        branch, taken = (node.orelse, node.body) if value else (node.body, node.orelse)
        # A line the test or the taken branch shares (a one-line `a if guard else b`) runs.
        dead.update(_lines(branch) - _lines(taken) - _lines(node.test))
    return dead


def _lines(part: ast.AST | list[ast.stmt]) -> set[int]:
    found: set[int] = set()
    for node in part if isinstance(part, list) else [part]:
        first = getattr(node, "lineno", None)
        if first is not None:
            found.update(range(first, (getattr(node, "end_lineno", None) or first) + 1))
    return found


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
