"""Log lines written by the soak's parts while a fault runs: the per-fault log budget.

A fault may cost one line when it starts and one when it ends per peer that notices, not one
per request: the count of warning and error lines all logs gain between a fault's start and the
end of its recovery window is recorded with the fault, with the first few distinct lines.
"""

from __future__ import annotations

import re
from pathlib import Path

__all__ = ["log_lines_since", "log_offsets"]

# vLLM's and Python's levels, a traceback's head, glog's (Mooncake's) "E1202 ..." lines.
_NOISY = re.compile(r"\b(WARNING|ERROR|CRITICAL|Traceback)\b|^E\d{4} ")


def log_offsets(paths: list[Path]) -> dict[str, int]:
    """Each log's size now (bytes)."""
    out = {}
    for path in paths:
        try:
            out[str(path)] = path.stat().st_size
        except OSError:
            out[str(path)] = 0
    return out


def log_lines_since(before: dict[str, int], paths: list[Path]) -> tuple[int, list[str]]:
    """Warning/error lines written to `paths` since `before` (offsets; a new file from 0):
    their count and the first few distinct ones."""
    count, seen = 0, []
    for path in paths:
        try:
            with open(path, "rb") as f:
                f.seek(before.get(str(path), 0))
                text = f.read().decode("utf-8", "replace")
        except OSError:
            continue
        for line in text.splitlines():
            if _NOISY.search(line):
                count += 1
                short = f"{path.stem}: {line.strip()[:160]}"
                if len(seen) < 6 and short not in seen:
                    seen.append(short)
    return count, seen
