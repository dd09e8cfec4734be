"""A commit of a local git repository as a `Source` (`migrator.core.sources`), read with git
plumbing (`rev-parse`, `ls-tree`, `cat-file --batch`): nothing is checked out, so the
repository's work tree and index are left alone. A DIST spelled `REPO@REV` (a bare clone or a
work tree, then any revision git understands: a tag, a branch, a sha) is read this way by
`migrator.core.dists`; `rules infer --git` reads two revisions through it."""

from __future__ import annotations

import subprocess
from pathlib import Path

from migrator.core.sources import InputError, Source, tree_version

META = ("PKG-INFO", "pyproject.toml", "setup.py")


def split_spec(spec: str) -> tuple[Path, str] | None:
    """(repository, revision) of `REPO@REV` when REPO is a folder and the whole spec is not a
    path; else None. Whether REPO is a git repository is for `commit_of` to say."""
    repo, at, rev = spec.rpartition("@")
    if not at or not repo or not rev or Path(spec).exists():
        return None
    return (Path(repo), rev) if Path(repo).is_dir() else None


def git(repo: Path, *args: str, stdin: bytes | None = None) -> bytes:
    """The stdout of `git -C repo ARGS`.

    Raises InputError when git cannot run or exits non-zero (its last stderr line)."""
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


def commit_of(repo: Path, rev: str) -> str:
    """The full sha of the commit `rev` names in `repo`.

    Raises InputError: not a git repository, or no such commit."""
    if not repo.is_dir():
        raise InputError(f"{repo}: no such directory")
    try:
        return git(repo, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}").decode().strip()
    except InputError:
        raise InputError(f"{repo}: no commit {rev!r}") from None


def version_hint(rev: str) -> str | None:
    """The version a tag such as `v0.14.0` states, for trees whose metadata states none."""
    return rev[1:] if rev[:1] == "v" and rev[1:2].isdigit() else None


def source_at(repo: Path, sha: str, label: str, rev: str) -> Source:
    """The packages of commit `sha` (top-level folders with an `__init__.py`; `src/` when the
    root has none) as a `Source`; `version` from the metadata files, else from a `v` tag.

    Raises InputError when git fails."""
    names = git(repo, "ls-tree", "-r", "-z", "--name-only", sha).decode("utf-8").split("\0")
    wanted = [n for n in names if n.endswith(".py") or n in META]
    blobs = cat(repo, [f"{sha}:{n}" for n in wanted])
    source = Source(label=label, files=dict(zip(wanted, blobs, strict=True)))
    meta = {n: source.files.pop(n, None) for n in META}
    if not source.packages():
        source.files = {n[len("src/"):]: b for n, b in source.files.items() if n[:4] == "src/"}
    packages = source.packages()
    source.files = {n: b for n, b in source.files.items() if n.split("/")[0] in packages}
    source.version = tree_version(meta) or version_hint(rev)
    return source


def cat(repo: Path, specs: list[str]) -> list[bytes]:
    """Contents of `rev:path` objects, read in one `git cat-file --batch` process (b"" for a
    missing one)."""
    if not specs:
        return []
    out = git(repo, "cat-file", "--batch", stdin=("\n".join(specs) + "\n").encode("utf-8"))
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
