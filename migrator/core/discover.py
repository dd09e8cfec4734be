"""Which files a run looks at, and what each file is (Python, notebook, or text).

Directories are walked by `migrator.core.walk` (the walk `vam verify-imports` uses too):
`.gitignore`, `--exclude` globs, tool folders and build output are skipped, symlinks met during
the walk are never followed, and only regular files are looked at. A file named on the command
line is looked at unless an `exclude` glob matches it (pre-commit passes every file by name).
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from migrator.core.walk import glob_regex, hit, walk

DEFAULT_TEXT_GLOBS = (
    "*.py",
    "*.pyi",
    "*.ipynb",
    "*.md",
    "*.markdown",
    "*.rst",
    "*.txt",
    "*.yaml",
    "*.yml",
    "*.json",
    "*.jsonc",
    "*.toml",
    "*.ini",
    "*.cfg",
    "*.conf",
    "*.sh",
    "*.bash",
    "*.zsh",
    "*.env",
    "Dockerfile",
    "Dockerfile.*",
    "*.Dockerfile",
    "*.dockerfile",
    "Containerfile",
    "Makefile",
    "*.mk",
    "*.j2",
    "*.jinja",
    "*.jinja2",
    "*.tmpl",
    "*.gotmpl",
    "*.groovy",
    "*.hcl",
    "*.mdx",
    "*.adoc",
    "*.jsonl",
    "*.patch",
    "*.diff",
    "*.tpl",
    "*.properties",
    "*.pyx",
    "*.pxd",
    "*.html",
    "*.xml",
    "*.tf",
    "*.bat",
    "*.ps1",
    "*.in",
    "*.service",
    "*.po",  # gettext catalogs of translated docs quote module paths in msgid/msgstr
    "*.pot",
    "Jenkinsfile",
    "README",
)


@dataclass(frozen=True)
class SourceFile:
    """A file to process and the root it was found under (for relative imports)."""

    path: Path
    root: Path
    kind: str  # "python" | "notebook" | "text"


def kind_of(path: Path) -> str:
    """"python", "notebook" or "text", by the name; an extension-less script is Python when
    its shebang runs a python."""
    suffix = path.suffix.lower()
    if suffix in (".py", ".pyi"):
        return "python"
    if suffix == ".ipynb":
        return "notebook"
    if not suffix and b"python" in (shebang(str(path)) or b""):
        return "python"
    return "text"


def shebang(path: str) -> bytes | None:
    """The `#!` line of the regular file at `path`, None when it has none (or is no regular
    file, or cannot be read: opened without blocking, so a FIFO never stalls the walk)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        head = os.read(fd, 256)
    except OSError:
        return None
    finally:
        os.close(fd)
    return head.split(b"\n", 1)[0] if head.startswith(b"#!") else None


def _script(path: str, name: str) -> bool:
    """An extension-less file with a shebang: a script, looked at as text (or Python)."""
    return "." not in name and shebang(path) is not None


def iter_files(
    paths: Iterable[Path],
    exclude: Iterable[str] = (),
    text_globs: Iterable[str] = DEFAULT_TEXT_GLOBS,
    skipped: list[Path] | None = None,
) -> Iterator[SourceFile]:
    """Every file to look at below `paths`, each once, in a stable order: those `text_globs`
    match and extension-less scripts (a `#!` line). Files met in a walk that are not regular
    files (FIFOs, sockets, devices) are appended to `skipped`; one named in `paths` is yielded
    (reading it reports it, see `migrator.core.walk.read_regular`).

    Raises:
        FileNotFoundError: a path does not exist (a usage error for the CLI).
    """
    excluded = glob_regex(exclude)
    wanted = glob_regex(text_globs)
    seen: set[str] = set()
    for given in paths:
        if not given.exists() and not given.is_symlink():
            raise FileNotFoundError(str(given))
        if str(given) == "":
            raise FileNotFoundError("''")
        if given.is_symlink():
            # Named on the command line: follow it (writes then replace the target, not the
            # link). Symlinks met during a walk are never followed.
            given = Path(os.path.realpath(given))
        # The walk follows no symlink, so below the resolved root every path is real:
        # one realpath per root identifies files given twice (`.` and `./src`).
        real = os.path.realpath(given)
        if given.is_dir():
            for full, rel in walk(str(given), wanted, excluded, skipped, also=_script):
                key = os.path.join(real, rel)
                if key not in seen:
                    seen.add(key)
                    path = Path(full)
                    yield SourceFile(path, given, kind_of(path))
        elif not given.is_file() and real not in seen:
            # Named, but a FIFO, socket or device: the engine reports it, never reads it.
            seen.add(real)
            yield SourceFile(given, given.parent, "text")
        elif real not in seen and not _excluded_file(given, excluded):
            seen.add(real)
            yield SourceFile(given, given.parent, kind_of(given))


def _excluded_file(path: Path, excluded: re.Pattern[str] | None) -> bool:
    """An `exclude` glob matches a file named on the command line (as pre-commit names
    them), or one of the folders on its path, as it would have during a walk."""
    parts = Path(os.path.normpath(path)).parts
    return any(hit(excluded, part, "/".join(parts[: i + 1])) for i, part in enumerate(parts))
