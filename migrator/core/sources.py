"""Release inputs -> file maps: a source tree, an sdist, a wheel (a commit of a git repository:
`migrator.core.gitrev`). `rules infer`, `verify-imports --against`, `verify-api` and `dists`
read releases through it.

A `Source` holds the `.py` files of its top-level packages as bytes, keyed by their
POSIX path relative to the directory that holds the packages (`vllm_ascend/utils.py`),
plus the release's version when the input states one. Nothing is imported or executed.
"""

from __future__ import annotations

import email.parser
import re
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

_SDIST_NAME_RE = re.compile(r"^(?P<name>.+?)-(?P<version>\d[^-]*?)\.(?:tar\.gz|tgz)$")
_SETUP_VERSION_RE = re.compile(r"""\bversion\s*=\s*["']([^"']+)["']""")


class InputError(Exception):
    """An input that cannot be read as a release (reported as one line, exit 2)."""


@dataclass
class Source:
    """One release: `files` maps `pkg/mod.py` to its bytes; `root` is a directory on disk
    holding the same packages when the input is one (else None)."""

    label: str
    files: dict[str, bytes] = field(default_factory=dict)
    version: str | None = None
    root: Path | None = None

    def packages(self) -> set[str]:
        """Top-level packages: first path components that have an `__init__.py`."""
        inits = (p for p in self.files if p.count("/") == 1 and p.endswith("/__init__.py"))
        return {p.split("/")[0] for p in inits}


def open_release(path: Path) -> Source:
    """Read a source tree, an sdist (`.tar.gz`) or a wheel (`.whl`).

    Raises:
        InputError: missing or unreadable path, a tarball without a `PKG-INFO`, a bad wheel.
    """
    if not path.exists():
        raise InputError(f"{path}: no such file or directory")
    if path.is_dir():
        return _open_tree(path)
    name = path.name
    if name.endswith((".tar.gz", ".tgz")):
        return _open_sdist(path)
    if name.endswith(".whl"):
        return _open_wheel(path)
    raise InputError(f"{path}: not a source tree, an sdist (.tar.gz) or a wheel (.whl)")


def _open_tree(path: Path) -> Source:
    root = path
    if not _has_package(root) and _has_package(root / "src"):
        root = root / "src"  # the src layout
    source = Source(label=str(path), root=root)
    try:
        for child in sorted(root.iterdir()):
            if (child / "__init__.py").is_file():
                for file in sorted(child.rglob("*.py")):
                    source.files[file.relative_to(root).as_posix()] = file.read_bytes()
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from None
    source.version = tree_version(
        {n: _read(path / n) for n in ("PKG-INFO", "pyproject.toml", "setup.py")}
    )
    return source


def _has_package(root: Path) -> bool:
    return root.is_dir() and any((c / "__init__.py").is_file() for c in root.iterdir())


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:
        return None


_META = ("PKG-INFO", "pyproject.toml", "setup.py")


def _open_sdist(path: Path) -> Source:
    try:
        with tarfile.open(path) as tar:
            members, data = _read_members(tar)
    except (OSError, tarfile.TarError, EOFError) as exc:
        raise InputError(f"{path}: cannot read the sdist: {exc}") from None
    top = _sdist_top(path, members)
    source = Source(label=str(path))
    for name in sorted(members):
        rel = name[len(top) + 1 :]
        if (rel.endswith(".py") or rel in _META) and name in data:
            source.files[rel] = data[name]
    meta = {n: source.files.pop(n, None) for n in _META}
    _keep_packages(source)
    match = _SDIST_NAME_RE.match(path.name)
    source.version = tree_version(meta) or (match.group("version") if match else None)
    return source


def _read_members(tar: tarfile.TarFile) -> tuple[dict[str, tarfile.TarInfo], dict[str, bytes]]:
    """({name: member} of the regular files, {name: bytes} of those `_open_sdist` may keep),
    read in one pass in the archive's order: a compressed archive is not seekable backwards
    at no cost, so reading in any other order decompresses it again."""
    members: dict[str, tarfile.TarInfo] = {}
    data: dict[str, bytes] = {}
    for member in tar:
        if not member.isfile():
            continue
        members[member.name] = member
        data.pop(member.name, None)
        if member.name.endswith(".py") or member.name.rpartition("/")[2] in _META:
            extracted = tar.extractfile(member)
            if extracted is not None:
                data[member.name] = extracted.read()
    return members, data


def _sdist_top(path: Path, members: Mapping[str, tarfile.TarInfo]) -> str:
    tops = {PurePosixPath(n).parts[0] for n in members}
    if len(tops) != 1 or f"{next(iter(tops))}/PKG-INFO" not in members:
        raise InputError(f"{path}: not an sdist (no single top directory with a PKG-INFO)")
    return next(iter(tops))


def _open_wheel(path: Path) -> Source:
    try:
        with zipfile.ZipFile(path) as wheel:
            names = sorted(wheel.namelist())
            metadata = [n for n in names if re.fullmatch(r"[^/]+\.dist-info/METADATA", n)]
            if len(metadata) != 1:
                raise InputError(f"{path}: not a wheel (no single *.dist-info/METADATA)")
            source = Source(label=str(path))
            for name in names:
                if name.endswith(".py"):
                    source.files[name] = wheel.read(name)
            source.version = _metadata_version(wheel.read(metadata[0]))
    except (OSError, zipfile.BadZipFile) as exc:
        raise InputError(f"{path}: cannot read the wheel: {exc}") from None
    _keep_packages(source)
    return source


def _keep_packages(source: Source) -> None:
    """Drop files outside top-level packages (setup.py, scripts, examples)."""
    packages = source.packages()
    source.files = {n: b for n, b in source.files.items() if n.split("/")[0] in packages}


def tree_version(meta: Mapping[str, bytes | None]) -> str | None:
    """The version a release states: PKG-INFO, then pyproject's [project], then setup.py."""
    if meta.get("PKG-INFO"):
        version = _metadata_version(meta["PKG-INFO"] or b"")
        if version:
            return version
    if meta.get("pyproject.toml"):
        try:
            project = tomllib.loads((meta["pyproject.toml"] or b"").decode("utf-8"))
            version = project.get("project", {}).get("version")
            if isinstance(version, str):
                return version
        except (UnicodeDecodeError, tomllib.TOMLDecodeError, AttributeError):
            pass
    found = _SETUP_VERSION_RE.search((meta.get("setup.py") or b"").decode("utf-8", "replace"))
    return found.group(1) if found else None


def _metadata_version(raw: bytes) -> str | None:
    message = email.parser.BytesHeaderParser().parsebytes(raw)
    version = message.get("Version")
    return str(version).strip() if version else None


@contextmanager
def on_disk(source: Source) -> Iterator[Path]:
    """A directory holding `source`'s packages: its own, or a temporary copy (an sdist or
    wheel is read in memory; `check_against` looks at files)."""
    if source.root is not None:
        yield source.root
        return
    with tempfile.TemporaryDirectory(prefix="vam-release-") as tmp:
        root = Path(tmp)
        for rel, data in source.files.items():
            path = root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        yield root
