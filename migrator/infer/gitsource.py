"""Two revisions of a git repository -> two `Source`s, plus the paths that lived only between.

Reads with `git` plumbing (`rev-parse`, `ls-tree`, `cat-file --batch`, `log --name-status`);
never checks anything out, so the repository's work tree is left alone.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from migrator.core.sources import InputError, Source, tree_version

_META = ("PKG-INFO", "pyproject.toml", "setup.py")


@dataclass(frozen=True)
class Interim:
    """A `.py` path written by some commit in OLD..NEW but present in neither release.

    `commit` is the newest commit that wrote it; `data` its content there.
    """

    path: str
    commit: str
    data: bytes


def open_git(repo: Path, old_rev: str, new_rev: str) -> tuple[Source, Source, list[Interim]]:
    """The releases at `old_rev` and `new_rev`, and the interim paths of OLD..NEW.

    Raises:
        InputError: `repo` is not a git repository, or a revision does not name a commit.
    """
    if not repo.is_dir():
        raise InputError(f"{repo}: no such directory")
    old_sha = _commit(repo, old_rev)
    new_sha = _commit(repo, new_rev)
    old = _source_at(repo, old_sha, f"{repo}@{old_rev}", old_rev)
    new = _source_at(repo, new_sha, f"{repo}@{new_rev}", new_rev)
    packages = old.packages() | new.packages()
    interims = _interims(repo, old_sha, new_sha, packages, set(old.files) | set(new.files))
    return old, new, interims


def _git(repo: Path, *args: str, stdin: bytes | None = None) -> bytes:
    try:
        done = subprocess.run(
            ["git", "-c", "core.quotePath=false", "-C", str(repo), *args],
            input=stdin,
            capture_output=True,
            check=False,
        )
    except OSError as exc:
        raise InputError(f"cannot run git: {exc}") from None
    if done.returncode:
        message = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise InputError(f"{repo}: git {args[0]} failed: {message[-1] if message else ''}")
    return done.stdout


def _commit(repo: Path, rev: str) -> str:
    try:
        return _git(repo, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}").decode().strip()
    except InputError:
        raise InputError(f"{repo}: no commit {rev!r}") from None


def _source_at(repo: Path, sha: str, label: str, rev: str) -> Source:
    names = _git(repo, "ls-tree", "-r", "-z", "--name-only", sha).decode("utf-8").split("\0")
    wanted = [n for n in names if n.endswith(".py") or n in _META]
    blobs = _cat(repo, [f"{sha}:{n}" for n in wanted])
    source = Source(label=label, files=dict(zip(wanted, blobs, strict=True)))
    meta = {n: source.files.pop(n, None) for n in _META}
    packages = source.packages()
    source.files = {n: b for n, b in source.files.items() if n.split("/")[0] in packages}
    # A tag like v0.14.0 states the version when no metadata file does.
    source.version = tree_version(meta) or (rev[1:] if rev[:1] == "v" else None)
    return source


def _cat(repo: Path, specs: list[str]) -> list[bytes]:
    """Contents of `rev:path` objects, read in one `git cat-file --batch` process."""
    if not specs:
        return []
    out = _git(repo, "cat-file", "--batch", stdin=("\n".join(specs) + "\n").encode("utf-8"))
    blobs: list[bytes] = []
    pos = 0
    for _ in specs:
        end = out.index(b"\n", pos)
        header = out[pos:end].split()
        if header[-1] == b"missing":
            blobs.append(b"")
            pos = end + 1
            continue
        size = int(header[2])
        blobs.append(out[end + 1 : end + 1 + size])
        pos = end + 1 + size + 1
    return blobs


def _interims(
    repo: Path, old_sha: str, new_sha: str, packages: set[str], released: set[str]
) -> list[Interim]:
    log = _git(repo, "log", "--name-status", "-M", "--format=@@%H", f"{old_sha}..{new_sha}")
    newest: dict[str, str] = {}  # path -> newest commit that wrote it (log is newest first)
    commit = ""
    for line in log.decode("utf-8", "replace").splitlines():
        if line.startswith("@@"):
            commit = line[2:]
            continue
        fields = line.split("\t")
        if len(fields) < 2 or fields[0][:1] not in "AMRC":
            continue
        path = fields[-1]
        if path.endswith(".py") and path.split("/")[0] in packages and path not in released:
            newest.setdefault(path, commit)
    paths = sorted(newest)
    blobs = _cat(repo, [f"{newest[p]}:{p}" for p in paths])
    return [Interim(p, newest[p], b) for p, b in zip(paths, blobs, strict=True)]
