"""A third-party distribution at one version, as a `Source` (migrator.core.sources).

A DIST is a source tree, an sdist (`.tar.gz`), a wheel (`.whl`), a commit of a local git
repository (`REPO@REV`: a clone or a work tree, then a tag, branch or sha; read with git
plumbing, never checked out: `migrator.core.gitrev`), or `NAME==VERSION`. The last
is fetched from the package index pip is configured to use (PEP 503 simple page), never
through pip itself: pip's metadata step builds the sdist, which fails for projects such as
vLLM without their GPU toolchain. The archive lands in a cache outside the repository
(`$VAM_SDIST_CACHE`, default `~/.cache/vam-sdists/`), checked against the sha256 the page
gives, and is read in place afterwards, offline.
"""

from __future__ import annotations

import hashlib
import html.parser
import os
import re
import subprocess
import sys
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from migrator.core import gitrev, indexcache
from migrator.core.sources import InputError, Source, open_release

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

DEFAULT_INDEX = "https://pypi.org/simple"
_REQUIREMENT = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*==\s*([A-Za-z0-9.!+_-]+)\s*$")
_TIMEOUT_S = 300


class DistError(InputError):
    """A DIST that cannot be had: bad spec, index unreachable, no file, hash mismatch."""


@dataclass(frozen=True)
class IndexFile:
    """One file a simple page lists: its name, absolute URL and sha256 ("" when not given)."""

    filename: str
    url: str
    sha256: str


def cache_dir() -> Path:
    return Path(os.environ.get("VAM_SDIST_CACHE") or Path.home() / ".cache" / "vam-sdists")


def parse_requirement(spec: str) -> tuple[str, str] | None:
    """(name, version) of `NAME==VERSION`, else None (a path, or anything else)."""
    match = _REQUIREMENT.match(spec)
    return (match.group(1), match.group(2)) if match else None


def normalize(name: str) -> str:
    """The PEP 503 form of a project name: `vllm_ascend` -> `vllm-ascend`."""
    return re.sub(r"[-_.]+", "-", name).lower()


def pip_index_url() -> str:
    """The index pip would use: $PIP_INDEX_URL, then `pip config` (global, user, site, env;
    the last one set wins, as in pip), else PyPI. `extra-index-url` is not consulted."""
    url = os.environ.get("PIP_INDEX_URL", "")
    if not url:
        try:
            out = subprocess.run([sys.executable, "-m", "pip", "config", "list"],
                                 capture_output=True, text=True, timeout=60, check=False,
                                 stdin=subprocess.DEVNULL).stdout
        except (OSError, subprocess.TimeoutExpired):
            out = ""
        urls = re.findall(r"^[\w:-]*\.index-url='([^']*)'", out, re.M)
        url = urls[-1] if urls else DEFAULT_INDEX
    return url.rstrip("/")


@dataclass(frozen=True)
class DistRef:
    """Where a DIST's files are: `path` (a file or folder; the repository for a git revision),
    `label` (what reports call it), `commit` (the full sha of a git revision, else "") and
    `rev` (the revision as given)."""

    path: Path
    label: str
    commit: str = ""
    rev: str = ""

    @property
    def is_tree(self) -> bool:
        """A folder on disk, whose files must be read to know what it holds."""
        return not self.commit and self.path.is_dir()


def resolve(spec: str, index_url: str | None = None, cache: Path | None = None) -> DistRef:
    """Where DIST `spec` is: a path as given, the commit `REPO@REV` names, or the cached
    archive of `NAME==VERSION` (fetched on first use).

    Raises:
        DistError / InputError: no such commit, or a requirement that cannot be fetched.
    """
    revision = gitrev.split_spec(spec)
    if revision is not None:
        repo, rev = revision
        return DistRef(repo, spec, gitrev.commit_of(repo, rev), rev)
    path, label = locate(spec, index_url, cache)
    return DistRef(path, label)


def open_ref(ref: DistRef) -> Source:
    """The `Source` of a resolved DIST.

    Raises InputError when it cannot be read."""
    if ref.commit:
        return gitrev.source_at(ref.path, ref.commit, ref.label, ref.rev)
    source = open_release(ref.path)
    source.label = ref.label
    return source


def index_key(ref: DistRef, source: Source | None = None) -> str:
    """The key of a DIST's entries in `migrator.core.indexcache`: the sha256 of an archive's
    bytes, of the commit (and the version its revision states), or of a tree's files and
    stated version (`source`, already read, must be given for a tree).

    Raises InputError when an archive cannot be read."""
    if ref.commit:
        return indexcache.files_key({}, "git", ref.commit, gitrev.version_hint(ref.rev) or "")
    if source is not None and ref.is_tree:
        return indexcache.files_key(source.files, source.version or "")
    if not ref.path.exists():
        raise InputError(f"{ref.path}: no such file or directory")
    try:
        return indexcache.file_key(ref.path)
    except OSError as exc:
        raise InputError(f"{ref.path}: cannot read: {exc.strerror or exc}") from None


def no_package(label: str, path: Path) -> InputError:
    """The error for a DIST (`label`, read from `path`) that ships no Python package: a usage
    error, not a release with nothing in it. A git repository given without `@REV` is read
    as a folder, which holds no package when it is a bare clone: the message says so."""
    git = path.is_dir() and ((path / ".git").exists() or (
        (path / "HEAD").is_file() and (path / "objects").is_dir()))
    hint = f"; a git repository needs a revision: {label}@REV" if git else ""
    return InputError(f"{label} ships no Python package{hint}")


def stated_name(spec: str) -> str | None:
    """The distribution DIST `spec` states, normalized (PEP 503): NAME of `NAME==VERSION`, the
    project in an sdist's or wheel's file name, the `Name` of a tree's PKG-INFO or its
    pyproject's [project] name; None when it states none (a git revision, a bare folder)."""
    requirement = parse_requirement(spec)
    path = Path(spec)
    if requirement is not None and not path.exists():
        return normalize(requirement[0])
    if path.is_file():
        stem = path.name.removesuffix(".tar.gz").removesuffix(".tgz")
        project = (stem.rpartition("-")[0] if stem != path.name
                   else path.name.split("-")[0] if path.suffix == ".whl" else "")
        return normalize(project) if project else None
    return _tree_name(path) if path.is_dir() else None


def _tree_name(path: Path) -> str | None:
    try:
        if (path / "PKG-INFO").is_file():
            found = re.search(r"^Name:\s*(\S+)", (path / "PKG-INFO").read_text("utf-8", "replace"),
                              re.M)
            if found:
                return normalize(found.group(1))
        if (path / "pyproject.toml").is_file():
            name = tomllib.loads((path / "pyproject.toml").read_text("utf-8")).get(
                "project", {}).get("name")
            return normalize(name) if isinstance(name, str) else None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, AttributeError):
        return None
    return None


def open_dist(spec: str, index_url: str | None = None, cache: Path | None = None) -> Source:
    """Read DIST `spec`: a path (tree, sdist, wheel), `REPO@REV` or `NAME==VERSION` (fetched,
    cached).

    Raises:
        DistError / InputError: unreadable input, or a requirement that cannot be fetched.
    """
    return open_ref(resolve(spec, index_url, cache))


def locate(spec: str, index_url: str | None = None, cache: Path | None = None) -> tuple[Path, str]:
    """(the file or folder DIST `spec` names, the label it is reported under): a path as
    given, or the cached archive of `NAME==VERSION` (fetched on first use) labelled with it.

    Raises:
        DistError: a requirement that cannot be fetched (see `fetch`).
    """
    requirement = parse_requirement(spec)
    if requirement is None or Path(spec).exists():
        return Path(spec), str(Path(spec))
    return (fetch(*requirement, index_url=index_url, cache=cache),
            f"{requirement[0]}=={requirement[1]}")


def fetch(name: str, version: str, index_url: str | None = None,
          cache: Path | None = None) -> Path:
    """The archive of `name==version` in the cache, downloaded on first use: the sdist, else
    a pure-Python wheel (`py3-none-any`). A platform wheel is never downloaded (one per
    platform, often hundreds of MB), but one put in the cache by hand is read: vLLM 0.15.0
    shipped only those, and its Python files are what vam reads.

    Raises:
        DistError: the index cannot be read, lists no such file, or the sha256 differs.
    """
    folder = cache or cache_dir()
    for candidate in _cached(folder, name, version):
        return candidate
    index = (index_url or pip_index_url()).rstrip("/")
    files = list_files(index, name)
    chosen = pick(files, name, version)
    if chosen is None:
        listed = sorted({f.filename for f in files if _version_of(f.filename, name) == version})
        detail = (f" (only {', '.join(listed)}: put one in {folder} to read it)" if listed
                  else "")
        raise DistError(f"{index}/{normalize(name)}/ lists no sdist or pure-Python wheel of "
                        f"{name}=={version}{detail}")
    folder.mkdir(parents=True, exist_ok=True)
    return download(chosen, folder / chosen.filename)


def _cached(folder: Path, name: str, version: str) -> list[Path]:
    if not folder.is_dir():
        return []
    found = [p for p in sorted(folder.iterdir())
             if p.is_file() and _version_of(p.name, name) == version
             and (_wanted(p.name) or p.name.endswith(".whl"))]
    # The sdist first, then a pure-Python wheel, then a platform wheel placed by hand.
    return sorted(found, key=lambda p: (not p.name.endswith(".tar.gz"), not _wanted(p.name)))


def _wanted(filename: str) -> bool:
    return filename.endswith(".tar.gz") or filename.endswith("-none-any.whl")


def _version_of(filename: str, name: str) -> str | None:
    """The version in an sdist or wheel file name of project `name`, else None."""
    if filename.endswith(".tar.gz"):
        project, _, version = filename[: -len(".tar.gz")].rpartition("-")
    elif filename.endswith(".whl"):
        project, version = (filename.split("-") + [""])[:2]
    else:
        return None
    return version if project and normalize(project) == normalize(name) else None


def pick(files: list[IndexFile], name: str, version: str) -> IndexFile | None:
    """The sdist of `name==version` among `files`, else its pure-Python wheel, else None."""
    matching = [f for f in files if _version_of(f.filename, name) == version
                and _wanted(f.filename)]
    matching.sort(key=lambda f: not f.filename.endswith(".tar.gz"))
    return matching[0] if matching else None


class _Anchors(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self.hrefs += [value for key, value in attrs if key == "href" and value]


def list_files(index: str, name: str) -> list[IndexFile]:
    """The files the simple page of `name` lists (an `http(s)://` or `file://` index; a
    `file://` folder is read through its `index.html`, as pip does).

    Raises DistError when the page cannot be read."""
    page_url = f"{index}/{normalize(name)}/"
    url = page_url
    if page_url.startswith("file:"):
        local = Path(urllib.request.url2pathname(urllib.parse.urlparse(page_url).path))
        url = (local / "index.html").as_uri()
    try:
        with urllib.request.urlopen(url, timeout=60) as response:
            page = response.read().decode("utf-8", "replace")
    except (OSError, ValueError) as exc:
        raise DistError(f"cannot read {page_url}: {exc}") from None
    anchors = _Anchors()
    anchors.feed(page)
    found = []
    for href in anchors.hrefs:
        link, _, fragment = urllib.parse.urljoin(url, href).partition("#")
        filename = urllib.parse.unquote(link.rsplit("/", 1)[-1])
        digest = fragment[len("sha256="):] if fragment.startswith("sha256=") else ""
        found.append(IndexFile(filename, link, digest.lower()))
    return found


def download(file: IndexFile, target: Path) -> Path:
    """Stream `file` to `target` through a `.part` file, checking its sha256.

    Raises DistError on a network error or a hash mismatch (nothing is left behind)."""
    partial = target.with_name(target.name + ".part")
    digest = hashlib.sha256()
    try:
        with urllib.request.urlopen(file.url, timeout=_TIMEOUT_S) as response, \
                partial.open("wb") as out:
            while chunk := response.read(1 << 20):
                digest.update(chunk)
                out.write(chunk)
    except (OSError, ValueError) as exc:
        partial.unlink(missing_ok=True)
        raise DistError(f"cannot download {file.url}: {exc}") from None
    if file.sha256 and digest.hexdigest() != file.sha256:
        partial.unlink()
        raise DistError(f"sha256 mismatch for {file.url}: the index says {file.sha256}, "
                        f"the file is {digest.hexdigest()}")
    partial.replace(target)
    return target
