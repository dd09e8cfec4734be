"""Log lines written by the soak's parts while a fault runs: the per-fault log budget.

A fault may cost one line when it starts and one when it ends per peer that notices, not one
per request: the count of warning and error lines all logs gain between a fault's start and the
end of its recovery window is recorded with the fault, with the first few distinct lines.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

__all__ = ["log_lines_since", "log_offsets"]

# vLLM's and Python's levels, a traceback's head, glog's (Mooncake's) "E1202 ..." lines.
_NOISY = re.compile(r"\b(WARNING|ERROR|CRITICAL|Traceback)\b|^[EW]\d{4} ")
_GLOG = re.compile(r"^[EW]\d{4} ")


def log_offsets(paths: list[Path]) -> dict[str, int]:
    """Each log's size now (bytes)."""
    out = {}
    for path in paths:
        try:
            out[str(path)] = path.stat().st_size
        except OSError:
            out[str(path)] = 0
    return out


def log_lines_since(before: dict[str, int], paths: list[Path]) -> dict[str, Any]:
    """Warning/error lines written to the logs of `before` (offsets) since then.

    A log started after `before` (a restarted part's new instance) is left out: its start-up
    warnings are vLLM's, once per start. Returns `{"ours": n, "mooncake": n, "examples": [...]}`:
    `ours` counts Python logging lines (vLLM, this project, the proxy), `mooncake` the C++
    library's glog lines (its own per-transfer errors), `examples` the first few distinct lines.
    """
    counts = {"ours": 0, "mooncake": 0}
    seen: list[str] = []
    for path in paths:
        if str(path) not in before:
            continue
        try:
            with open(path, "rb") as f:
                f.seek(before[str(path)])
                text = f.read().decode("utf-8", "replace")
        except OSError:
            continue
        for line in text.splitlines():
            if not _NOISY.search(line):
                continue
            counts["mooncake" if _GLOG.match(line) else "ours"] += 1
            short = f"{path.stem}: {line.strip()[:160]}"
            if len(seen) < 6 and short not in seen:
                seen.append(short)
    return {**counts, "examples": seen}
