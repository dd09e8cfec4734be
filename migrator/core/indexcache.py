"""Indexes of a distribution, kept on disk by the content they were built from.

Indexing a release (parsing every module of vLLM, say) costs seconds; the release never
changes, so its index is built once and read back afterwards. An entry is one JSON file,
`<kind>-<key>.json`, in `$VAM_INDEX_CACHE`, else `$XDG_CACHE_HOME/vam-index`, else
`~/.cache/vam-index` (beside the sdist cache of `migrator.core.dists`, never in a
repository). `kind` names what was indexed and by whom (`verify-imports`; `verify-api` can
keep its own kind beside it); `key` is a sha256 of the input: the archive's bytes for an sdist
or wheel, the files read for a source tree.

An entry is used only when its format, the vam version and the caller's `tag` (a digest of the
code that builds that kind) all match; anything else, a truncated file or bad JSON included, is
a miss, and the caller builds the index again and stores it over the old one. Writes go
through a temporary file and `os.replace`, so a reader never sees half an entry, and a cache
that cannot be written (read-only home, full disk) only costs the next run its speed.
Each kind keeps its MAX_ENTRIES most recent entries. Clear it by deleting the directory.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from migrator import __version__

FORMAT = 1
MAX_ENTRIES = 32  # per kind; the oldest go first
_CHUNK = 1 << 20


def cache_dir() -> Path:
    """Where entries live (see the module docstring); not created until a store."""
    override = os.environ.get("VAM_INDEX_CACHE")
    if override:
        return Path(override)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "vam-index"


def file_key(path: Path) -> str:
    """The sha256 (hex) of the bytes of the file `path` (an sdist or a wheel).

    Raises OSError when it cannot be read."""
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        while chunk := stream.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def files_key(files: Mapping[str, bytes], *extra: str) -> str:
    """A sha256 (hex) over `files` ({relative path: bytes}, in path order) and `extra` strings
    (what else the index depends on: a version): any edit, rename or new file changes it."""
    digest = hashlib.sha256()
    for text in extra:
        digest.update(f"{len(text)}:{text}\0".encode())
    for name in sorted(files):
        data = files[name]
        digest.update(f"{name}\0{len(data)}\0".encode())
        digest.update(data)
    return digest.hexdigest()


def code_tag(files: Iterable[Path]) -> str:
    """A short digest of source files (the modules that build and encode one kind of index),
    so that a changed indexer never reads entries its older self wrote, even when the vam
    version stays the same (a development checkout). A file that cannot be read counts as
    empty."""
    digest = hashlib.sha256()
    for path in files:
        try:
            digest.update(path.read_bytes())
        except OSError:
            pass
        digest.update(b"\0")
    return digest.hexdigest()[:16]


def _entry(kind: str, key: str) -> Path:
    return cache_dir() / f"{kind}-{key}.json"


def load(kind: str, key: str, tag: str) -> Any | None:
    """The payload stored for (`kind`, `key`) under `tag`, else None (no entry, another
    format, vam version or tag, or a file that is not a complete entry). Never raises."""
    try:
        with _entry(kind, key).open("rb") as stream:
            entry = json.load(stream)
    except (OSError, ValueError, RecursionError):
        return None  # ValueError: bad JSON or bad UTF-8, e.g. a truncated or foreign file
    expected = {"format": FORMAT, "vam": __version__, "kind": kind, "key": key, "tag": tag}
    if not isinstance(entry, dict) or any(entry.get(k) != v for k, v in expected.items()):
        return None
    return entry.get("payload")


def store(kind: str, key: str, tag: str, payload: Any) -> bool:
    """Write `payload` (JSON-serialisable) for (`kind`, `key`) atomically; whether it was
    written. A cache that cannot be written is not an error: the next run rebuilds."""
    entry = {"format": FORMAT, "vam": __version__, "kind": kind, "key": key, "tag": tag,
             "payload": payload}
    target = _entry(kind, key)
    temporary = ""
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", encoding="utf-8", dir=target.parent,
                                         prefix=f".{target.name}.", suffix=".tmp",
                                         delete=False) as stream:
            temporary = stream.name
            # dumps, not dump: only the one-shot encoder is the C one (about 10x faster).
            stream.write(json.dumps(entry, separators=(",", ":")))
        os.replace(temporary, target)
    except (OSError, TypeError, ValueError):
        if temporary:
            Path(temporary).unlink(missing_ok=True)
        return False
    _prune(kind, keep=target)
    return True


def _prune(kind: str, keep: Path) -> None:
    """Delete all but the MAX_ENTRIES newest entries of `kind`: each state of an edited source
    tree is an entry of its own (a few MB for vLLM), and they would pile up."""
    try:
        entries = sorted(cache_dir().glob(f"{kind}-*.json"), key=lambda p: p.stat().st_mtime,
                         reverse=True)
        for old in entries[MAX_ENTRIES:]:
            if old != keep:
                old.unlink(missing_ok=True)
    except OSError:
        pass  # another run pruning at the same time, or a file that went away
