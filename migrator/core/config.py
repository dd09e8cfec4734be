"""`[tool.vam]` settings from the nearest `pyproject.toml`, with ruff/black's line length.

Keys mirror the CLI flags one to one (ruff's convention): `rules`, `from`, `to`, `exclude`,
`line-length`, `text-files`, `comments`, `version-guards`, `version-helper-module`. Flags
given on the command line win. `rules` is one pack or a list of packs run together; `from`
and `to` a version (one pack) or a table of versions by pack name
(`{ vllm = "0.13.0", vllm_ascend = "0.13.0" }`).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from migrator.core.discover import DEFAULT_TEXT_GLOBS
from migrator.core.settings import COMPARISONS, DEFAULT_VERSION_GUARDS
from migrator.core.walk import glob_problem
from rules import bundled

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

KEYS = (
    "rules",
    "from",
    "to",
    "exclude",
    "line-length",
    "text-files",
    "comments",
    "version-guards",
    "version-helper-module",
)
# Sub-tables other commands read (`vam verify-imports`).
SUBTABLES = ("verify-imports",)


class ConfigError(ValueError):
    """A configuration the run cannot use; the message names the file and the key."""


@dataclass(frozen=True)
class Config:
    """`rules`: bundled pack names and table paths (relative ones resolved against the
    pyproject's folder), in the order they apply. `from_version`/`to_version`: the string
    form; `from_by_pack`/`to_by_pack`: the table form, (pack name, version) pairs."""

    rules: tuple[str, ...] = ("vllm_ascend",)
    from_version: str | None = None
    to_version: str | None = None
    exclude: tuple[str, ...] = ()
    line_length: int | None = None
    text_files: tuple[str, ...] = DEFAULT_TEXT_GLOBS
    comments: bool = True
    version_guards: tuple[str, ...] = DEFAULT_VERSION_GUARDS
    # Where `migrate --keep-compat` imports the version helper from (None: the pack's).
    version_helper_module: str | None = None
    source: Path | None = None
    from_by_pack: tuple[tuple[str, str], ...] = ()
    to_by_pack: tuple[tuple[str, str], ...] = ()


def find_pyproject(start: Path) -> Path | None:
    """The closest `pyproject.toml` in `start` or its parents (as ruff and black look)."""
    folder = start.absolute()
    if not folder.is_dir():
        folder = folder.parent
    for candidate in (folder, *folder.parents):
        path = candidate / "pyproject.toml"
        if path.is_file():
            return path
    return None


def load_config(start: Path) -> Config:
    """Read the configuration that applies to files below `start`.

    Raises:
        ConfigError: unreadable TOML, an unknown key or a value of the wrong type.
    """
    path = find_pyproject(start)
    if path is None:
        return Config()
    data = _read(path)
    tool = data.get("tool", {})
    section: dict[str, Any] = tool.get("vam", {}) if isinstance(tool, dict) else {}
    if not isinstance(section, dict):
        raise ConfigError(f"{path}: [tool.vam] must be a table")
    unknown = sorted(set(section) - set(KEYS) - set(SUBTABLES))
    if unknown:
        raise ConfigError(
            f"{path}: [tool.vam] unknown key {unknown[0]!r} (valid: {', '.join(KEYS)})"
        )
    if "line-length" in section:
        line_length, where = section["line-length"], f"{path}: [tool.vam] line-length"
    else:
        line_length, where = _ruff_line_length(path, tool)
    from_version, from_by_pack = _versions(section, "from", path)
    to_version, to_by_pack = _versions(section, "to", path)
    return Config(
        rules=_rules(section, path),
        from_version=from_version,
        to_version=to_version,
        from_by_pack=from_by_pack,
        to_by_pack=to_by_pack,
        exclude=tuple(_globs(section, "exclude", path)),
        line_length=_line_length(line_length, where),
        text_files=_text_files(section, path),
        comments=_typed(section, "comments", bool, path, True),
        version_guards=_version_guards(section, path),
        version_helper_module=_helper_module(section, path),
        source=path,
    )


def _read(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None


def _ruff_line_length(path: Path, tool: Any) -> tuple[Any, str]:
    """ruff's or black's line length for the project, and where it was found."""
    for name in (".ruff.toml", "ruff.toml"):
        ruff_file = path.parent / name
        if ruff_file.is_file():
            value = _read(ruff_file).get("line-length")
            if value is not None:
                return value, f"{ruff_file}: line-length"
    if isinstance(tool, dict):
        for section in ("ruff", "black"):
            table = tool.get(section)
            if isinstance(table, dict) and table.get("line-length") is not None:
                return table["line-length"], f"{path}: [tool.{section}] line-length"
    return None, ""


def _line_length(value: Any, where: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{where} must be a positive integer, got {value!r}")
    return value


def _typed(section: dict[str, Any], key: str, kind: type, path: Path, default: Any) -> Any:
    value = section.get(key, default)
    if value is not None and not isinstance(value, kind):
        raise ConfigError(f"{path}: [tool.vam] {key} must be a {kind.__name__}, got {value!r}")
    return value


def split_rules(text: str) -> tuple[str, ...]:
    """`NAME|FILE[,NAME|FILE...]` as its parts, blanks around commas dropped.

    Raises:
        ValueError: an empty part (`vllm,`, `,vllm`).
    """
    parts = tuple(part.strip() for part in text.split(","))
    if not all(parts):
        raise ValueError(f"{text!r}: an empty pack name (give NAME or FILE, comma-separated)")
    return parts


def _rules(section: dict[str, Any], path: Path) -> tuple[str, ...]:
    """Bundled packs' names as written; tables' paths relative to the pyproject's folder,
    as `exclude` is, so a run from another folder reads the same tables."""
    value = section.get("rules", "vllm_ascend")
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        given = [part for v in value for part in _split(v, path)]
    elif isinstance(value, str):
        given = list(_split(value, path))
    else:
        raise ConfigError(f"{path}: [tool.vam] rules must be a pack name or table path, or a "
                          f"non-empty list of them, got {value!r}")
    return tuple(_rule_path(v, path) for v in given)


def _split(value: str, path: Path) -> tuple[str, ...]:
    try:
        return split_rules(value)
    except ValueError as exc:
        raise ConfigError(f"{path}: [tool.vam] rules: {exc}") from None


def _rule_path(value: str, path: Path) -> str:
    if value in bundled():
        return value
    near = path.parent / value
    # The tests `load_pack` uses to tell a path from a name; an unknown name stays a name.
    if value.endswith(".toml") or "/" in value or near.exists():
        return str(near)
    return value


def _versions(
    section: dict[str, Any], key: str, path: Path
) -> tuple[str | None, tuple[tuple[str, str], ...]]:
    """`from`/`to`: (the version, ()) or (None, the table's (pack, version) pairs)."""
    value = section.get(key)
    if value is None:
        return None, ()
    if isinstance(value, str):
        _check_version(value, key, path)
        return value, ()
    if isinstance(value, dict) and all(isinstance(v, str) for v in value.values()):
        for pack, version in value.items():
            _check_version(version, f"{key}.{pack}", path)
        return None, tuple(value.items())
    raise ConfigError(f'{path}: [tool.vam] {key} must be a version ("0.13.0") or a table of '
                      f'versions by pack ({{ vllm = "0.13.0" }}), got {value!r}')


def _check_version(value: str, key: str, path: Path) -> None:
    try:
        Version(value)
    except InvalidVersion:
        raise ConfigError(
            f"{path}: [tool.vam] {key}: malformed version {value!r} (want N.N[.N], e.g. 0.13.0)"
        ) from None


def _string_list(section: dict[str, Any], key: str, path: Path) -> list[str]:
    value = section.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{path}: [tool.vam] {key} must be a list of strings")
    return value


def _globs(section: dict[str, Any], key: str, path: Path) -> list[str]:
    globs = _string_list(section, key, path)
    for pattern in globs:
        problem = glob_problem(pattern)
        if problem:
            raise ConfigError(f"{path}: [tool.vam] {key}: {pattern!r}: {problem}")
    return globs


def _text_files(section: dict[str, Any], path: Path) -> tuple[str, ...]:
    if "text-files" not in section:
        return DEFAULT_TEXT_GLOBS
    globs = _globs(section, "text-files", path)
    if not globs:
        # An empty list would look at no file at all, and every run would pass.
        raise ConfigError(f"{path}: [tool.vam] text-files must list at least one glob")
    return tuple(globs)


def version_guard_problem(name: str) -> str | None:
    """Why `name` cannot be a version helper's name, or None: the comparison it makes is read
    from its suffix (`migrator.rewrite.sites.versions`)."""
    if not name.isidentifier():
        return "not a Python name"
    if name.rpartition("_")[2] not in COMPARISONS:
        return "must end in _is, _eq, _lt, _le, _gt or _ge (the comparison it makes)"
    return None


def _version_guards(section: dict[str, Any], path: Path) -> tuple[str, ...]:
    if "version-guards" not in section:
        return DEFAULT_VERSION_GUARDS
    names = _string_list(section, "version-guards", path)
    if not names:
        # No helper would leave every guarded block unread and `--keep-compat` no helper to
        # write; to recognise none, list one the project never calls.
        raise ConfigError(f"{path}: [tool.vam] version-guards must list at least one helper")
    for name in names:
        problem = version_guard_problem(name)
        if problem:
            raise ConfigError(f"{path}: [tool.vam] version-guards: {name!r}: {problem}")
    return tuple(names)


def _helper_module(section: dict[str, Any], path: Path) -> str | None:
    value = _typed(section, "version-helper-module", str, path, None)
    if value is not None and not all(part.isidentifier() for part in value.split(".")):
        raise ConfigError(
            f"{path}: [tool.vam] version-helper-module: {value!r} is not a dotted module name"
        )
    return value
