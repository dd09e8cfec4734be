"""One line-number system for the whole upgrade report: that of each file as it is on disk
after the command. Migrate names lines of the file as read; the check after it reads the
migrated text, whose lines a dual-lane block shifts. Without `--write` the migrated text is
nowhere on disk, so the check's findings are mapped back to the file as read; with it, the
file as read is gone, so migrate's findings are mapped forward to the new text. The map is
difflib's (`migrator.rewrite.lanes.line_map`): a line inside a rewritten block lands on the
first line of the block it became.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from typing import Any

from migrator.rewrite.engine import FileResult
from migrator.rewrite.lanes import line_map

Lines = dict[str, Callable[[int], int]]


def _key(path: str) -> str:
    return os.path.normcase(os.path.abspath(path))


def maps(results: list[FileResult], *, ahead: bool) -> Lines:
    """Per changed file (keyed by absolute path): a line of the migrated text to the line of
    the file as read, or (`ahead`) a line of the file as read to that of the migrated text."""
    return {_key(r.path): line_map(r.new, r.old) if ahead else line_map(r.old, r.new)
            for r in results if r.new and r.old is not None}


def forward(results: list[FileResult], ahead: Lines) -> list[FileResult]:
    """`results` with each changed file's findings on the lines of its new text."""
    return [dataclasses.replace(r, findings=moved(r.findings, ahead)) if r.findings else r
            for r in results]


def moved(found: list[Any], maps: Lines) -> list[Any]:
    """`found` (dataclasses with `path` and `line`) with each line taken through the map of
    its file; a file without a map keeps its lines."""
    if not maps:
        return found
    kept = []
    for finding in found:
        lines, line = maps.get(_key(finding.path)), finding.line
        if lines is not None and dataclasses.is_dataclass(finding) \
                and not isinstance(finding, type):
            finding = dataclasses.replace(finding, line=lines(line))
        kept.append(finding)
    return kept
