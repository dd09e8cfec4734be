"""The release a project declares it runs: a requirement on a distribution in its packaging
files, read as ruff reads `requires-python` (the lower bound is the version written for).

Looked at, in this order, in the project's folder (that of the nearest `pyproject.toml`, else
the nearest folder with a `setup.cfg` or a `requirements*.txt`): `pyproject.toml` `[project]`
dependencies then optional-dependencies, `requirements*.txt` (sorted; `-r`/`--requirement`
includes followed one level), `setup.cfg` `[options] install_requires`. Of the requirements
on one of the distributions that give a version, the oldest version wins (the first of equals),
whatever the files' order: code that must run on every release its project pins is written for
the oldest, as a text file that names several releases is (`migrator.core.release_pins`).
"""

from __future__ import annotations

import configparser
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from rules import RulesError, version_key

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

_INCLUDE = re.compile(r"^\s*(?:-r|--requirement)(?:\s+|=)(\S+)")


@dataclass(frozen=True)
class Pin:
    """A version the project declares: `where` is `file:line` (line 0 when the format keeps
    none), `text` the requirement as written, `others` the pins elsewhere that name another
    version (`requirements-dev.txt pins 0.13.0`)."""

    version: str
    where: str
    text: str
    others: tuple[str, ...] = ()


def distribution_names(packages: tuple[str, ...]) -> tuple[str, ...]:
    """The distributions of a pack's top-level packages, normalized (PEP 503):
    `vllm_ascend` -> `vllm-ascend`."""
    return tuple(re.sub(r"[-_.]+", "-", p).lower() for p in packages)


def project_pin(start: Path, distributions: tuple[str, ...]) -> Pin | None:
    """The oldest version that a requirement on one of `distributions` (normalized names)
    gives, in the project that holds `start`, with the pins that disagree; None when there is
    none. Unreadable or malformed files and lines are passed over: they are the project's,
    not vam's input."""
    root = _project_root(start)
    if root is None:
        return None
    pins = []
    for where, line, text in _requirements(root):
        version = _version_of(text, distributions)
        if version is not None:
            pins.append((version, where, Pin(version, f"{where}:{line}" if line else where,
                                             text.strip())))
    if not pins:
        return None
    oldest = min(pins, key=lambda pin: _sort_key(pin[0]))
    others = tuple(dict.fromkeys(
        f"{where} pins {version}" for version, where, _ in pins
        if _sort_key(version) != _sort_key(oldest[0])
    ))
    return Pin(oldest[2].version, oldest[2].where, oldest[2].text, others)


def _sort_key(version: str) -> tuple[int, object]:
    """Orders PEP 440 versions; one vam cannot order sorts last (the baseline reports it)."""
    try:
        return (0, version_key(version))
    except RulesError:
        return (1, version)


def installed_version(distributions: tuple[str, ...]) -> str | None:
    """The version of the first of `distributions` installed beside vam, or None."""
    for name in distributions:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return None


def _project_root(start: Path) -> Path | None:
    folder = start.absolute()
    if not folder.is_dir():
        folder = folder.parent
    chain = (folder, *folder.parents)
    for candidate in chain:
        if (candidate / "pyproject.toml").is_file():
            return candidate
    for candidate in chain:
        if (candidate / "setup.cfg").is_file() or any(candidate.glob("requirements*.txt")):
            return candidate
    return None


def _requirements(root: Path) -> Iterator[tuple[str, int, str]]:
    """(file, line or 0, requirement text) of every requirement the project declares."""
    yield from _pyproject(root / "pyproject.toml")
    for path in sorted(root.glob("requirements*.txt")):
        yield from _requirements_file(path, root, depth=1)
    yield from _setup_cfg(root / "setup.cfg")


def _pyproject(path: Path) -> Iterator[tuple[str, int, str]]:
    try:
        project = tomllib.loads(path.read_text(encoding="utf-8")).get("project", {})
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return
    if not isinstance(project, dict):
        return
    groups = [project.get("dependencies", [])]
    extras = project.get("optional-dependencies", {})
    if isinstance(extras, dict):
        groups += list(extras.values())
    for group in groups:
        for text in group if isinstance(group, list) else []:
            if isinstance(text, str):
                yield "pyproject.toml", 0, text


def _requirements_file(path: Path, root: Path, depth: int) -> Iterator[tuple[str, int, str]]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return
    name = path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)
    for number, line in enumerate(lines, start=1):
        include = _INCLUDE.match(line)
        if include and depth > 0:
            yield from _requirements_file(path.parent / include.group(1), root, depth - 1)
        elif not line.lstrip().startswith(("-", "#")):
            yield name, number, line.split(" #", 1)[0]


def _setup_cfg(path: Path) -> Iterator[tuple[str, int, str]]:
    parser = configparser.ConfigParser()
    try:
        parser.read_string(path.read_text(encoding="utf-8"))
        value = parser.get("options", "install_requires", fallback="")
    except (OSError, UnicodeDecodeError, configparser.Error):
        return
    for text in value.splitlines():
        yield "setup.cfg", 0, text


def _version_of(text: str, distributions: tuple[str, ...]) -> str | None:
    """X of `==X` (or `===X`), else of the lower bound `>=X` / `~=X`, when `text` is a
    requirement on one of `distributions`; None otherwise (`<X` alone says nothing of the
    version the code is written for, nor does `==X.*`)."""
    # Loaded here: only a run that looks for the project's pins needs it.
    from packaging.requirements import InvalidRequirement, Requirement

    text = text.strip()
    if not text:
        return None
    try:
        requirement = Requirement(text)
    except InvalidRequirement:
        return None
    if re.sub(r"[-_.]+", "-", requirement.name).lower() not in distributions:
        return None
    exact = [s.version for s in requirement.specifier if s.operator in ("==", "===")]
    lower = [s.version for s in requirement.specifier if s.operator in (">=", "~=")]
    for version in (*exact, *lower):
        if "*" not in version:
            return version
    return None
