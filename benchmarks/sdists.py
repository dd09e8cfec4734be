"""Fetch public vllm-ascend sdists from the package index pip is configured to use.

pip cannot download these sdists (its metadata step fails on them), so this reads the
index's simple page (PEP 503) directly, checks the sha256 the page gives, and unpacks the
archive into a cache outside the repository (`$VAM_SDIST_CACHE`, default
`~/.cache/vam-sdists`). Nothing fetched here is ever committed.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
import tarfile
import urllib.parse
import urllib.request
from pathlib import Path

PROJECT = "vllm-ascend"
DEFAULT_INDEX = "https://pypi.org/simple"


def cache_dir() -> Path:
    return Path(os.environ.get("VAM_SDIST_CACHE", Path.home() / ".cache" / "vam-sdists"))


def pip_index_url() -> str:
    """The index pip would use: `pip config` (global, user, site, env), else PyPI."""
    try:
        out = subprocess.run(
            [sys.executable, "-m", "pip", "config", "list"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        out = ""
    # `global.index-url='...'` or `:env:.index-url='...'`, never `extra-index-url`.
    urls = re.findall(r"^[\w:]*\.index-url='([^']*)'", out, re.M)
    url = urls[-1] if urls else DEFAULT_INDEX
    return url.rstrip("/")


def sdist(version: str) -> Path:
    """The unpacked source tree of `vllm-ascend==version` (downloaded on first use).

    Raises:
        RuntimeError: the index lists no sdist for `version`, or the hash does not match.
    """
    root = cache_dir()
    tree = root / f"vllm_ascend-{version}"
    if (tree / "vllm_ascend").is_dir():
        return tree
    root.mkdir(parents=True, exist_ok=True)
    archive = root / f"vllm_ascend-{version}.tar.gz"
    if not archive.exists():
        _download(version, archive)
    with tarfile.open(archive) as tar:
        tar.extractall(root, filter="data")
    return tree


def _download(version: str, archive: Path) -> None:
    index = pip_index_url()
    page_url = f"{index}/{PROJECT}/"
    with urllib.request.urlopen(page_url, timeout=60) as response:
        page = response.read().decode("utf-8", "replace")
    name = re.escape(f"vllm_ascend-{version}.tar.gz")
    match = re.search(rf'href="([^"]*{name})(?:#sha256=([0-9a-f]+))?"', page)
    if not match:
        raise RuntimeError(f"{page_url} lists no sdist vllm_ascend-{version}.tar.gz")
    url = urllib.parse.urljoin(page_url, match.group(1))
    tmp = archive.with_suffix(".part")
    digest = hashlib.sha256()
    with urllib.request.urlopen(url, timeout=300) as response, tmp.open("wb") as out:
        while chunk := response.read(1 << 20):
            digest.update(chunk)
            out.write(chunk)
    if match.group(2) and digest.hexdigest() != match.group(2):
        tmp.unlink()
        raise RuntimeError(f"sha256 mismatch for {url}")
    tmp.replace(archive)


if __name__ == "__main__":
    for v in sys.argv[1:] or ["0.13.0", "0.14.0rc1"]:
        print(sdist(v))
