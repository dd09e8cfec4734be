"""Two revisions of a git repository -> two `Source`s (`migrator.core.gitrev`), plus the paths
that lived only between (`log --name-status`); nothing is checked out.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from migrator.core.gitrev import cat, commit_of, git, source_at
from migrator.core.sources import Source


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
    old_sha = commit_of(repo, old_rev)
    new_sha = commit_of(repo, new_rev)
    old = source_at(repo, old_sha, f"{repo}@{old_rev}", old_rev)
    new = source_at(repo, new_sha, f"{repo}@{new_rev}", new_rev)
    packages = old.packages() | new.packages()
    interims = _interims(repo, old_sha, new_sha, packages, set(old.files) | set(new.files))
    return old, new, interims


def _interims(
    repo: Path, old_sha: str, new_sha: str, packages: set[str], released: set[str]
) -> list[Interim]:
    log = git(repo, "log", "--name-status", "-M", "--format=@@%H", f"{old_sha}..{new_sha}")
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
    blobs = cat(repo, [f"{newest[p]}:{p}" for p in paths])
    return [Interim(p, newest[p], b) for p, b in zip(paths, blobs, strict=True)]
