"""Rewrites references inside plain text: configs, docs, scripts, and Python strings/comments.

A reference starts at a top-level package of the table (not preceded by an ASCII letter,
digit, `_` or `.`) and is either dotted (`pkg.mod.attr`, `pkg.mod:obj`) or a file path
(`pkg/mod.py`, `pkg/sub/`). It ends at the first character that is not an ASCII letter,
digit or `_`, so CJK text, quotes and backslash escapes all end it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import lru_cache

from migrator.core.edits import NEWLINE, TextEdit, splice
from migrator.core.resolver import Resolver

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
PRAGMA_FILE = "vam: ignore-file"
# `vam: ignore` silences a line; `vam: ignore[VAI001]` names codes (only VAM codes concern us).
_PRAGMA_LINE_RE = re.compile(r"vam:\s*ignore(?:\[([^\]]*)\])?(?![-\w])")


@lru_cache(maxsize=16)
def _reference_re(packages: tuple[str, ...]) -> re.Pattern[str]:
    tops = "|".join(map(re.escape, sorted(packages, key=len, reverse=True)))
    return re.compile(
        rf"(?<![A-Za-z0-9_.])(?:{tops})"
        rf"(?:(?P<dotted>(?:\.{IDENT})+)(?::(?P<obj>{IDENT}))?|(?P<slashed>(?:/{IDENT})+))"
    )


def find_references(text: str, resolver: Resolver) -> Iterator[TextEdit]:
    """Every reference in `text` that the active steps move or remove, in order, except
    those in links pinned to a tag or commit (see `pinned_references`)."""
    return (edit for edit, ref in _references(text, resolver) if ref is None)


def pinned_references(text: str, resolver: Resolver) -> Iterator[tuple[TextEdit, str]]:
    """(reference, the tag, branch or commit its link is pinned to) of each reference that
    `find_references` leaves alone: at that ref the file is at the old path."""
    return ((edit, ref) for edit, ref in _references(text, resolver) if ref is not None)


def _references(text: str, resolver: Resolver) -> Iterator[tuple[TextEdit, str | None]]:
    if not any(p in text for p in resolver.packages):
        return
    links = _Links(text)
    for match in _reference_re(resolver.packages).finditer(text):
        if match.group("slashed") is not None:
            edit = _path_edit(text, match, resolver)
        else:
            edit = _dotted_edit(match, resolver)
        if edit is not None:
            yield edit, links.pinned_ref(match.start())


# A link into a repository at a ref: GitHub/Gitee/GitLab `/blob|tree|raw|blame/<ref>/`,
# raw.githubusercontent.com `/<owner>/<repo>/<ref>/`; a release branch has a slash in it.
_REF = r"(releases?/[^/\s]+|[^/\s]+)"
_LINK_AT_REF = re.compile(
    rf"https?://(?:raw\.githubusercontent\.com/[^/\s]+/[^/\s]+/{_REF}/"
    rf"|[^/\s]+/[^\s]*?/(?:-/)?(?:blob|tree|raw|blame)/{_REF}/)"
)
# Pinned: a tag-like version (v0.13.0, 0.13.0rc1, v0.13.0-dev), a release branch, a sha.
_PINNED_REF = re.compile(r"v?\d+(?:\.\d+)+[-.\w]*|releases?/.+|[0-9a-f]{7,40}")


# What ends a URL; a newline among them, so no URL spans lines.
_URL_BREAK = re.compile(r"[\s<>\"'()\[\]]")


class _Links:
    """The links of one text that references sit in, asked in order of their offsets.

    Where a URL could start is tracked as the scan moves on (the last `http` and the last
    character that ends a URL before it), so each character is looked at once, however
    many references share a line: looking back to the line's start for each of them was
    quadratic on a long line (a generated `__all__`, a log line of paths).
    """

    def __init__(self, text: str):
        self.text = text
        self.scanned = 0  # text[:scanned] is accounted for below
        self.scheme = -1  # the last `http` that ends at or before `scanned`
        self.broken = -1  # the last URL break before `scanned`

    def pinned_ref(self, start: int) -> str | None:
        """The ref a URL reaching up to `start` (a reference inside its path) is pinned to,
        or None: no URL, or one at main, master, HEAD or another moving branch."""
        if start < self.scanned:  # out of order: the same answer, from scratch
            return _Links(self.text).pinned_ref(start)
        text = self.text
        for found in _URL_BREAK.finditer(text, self.scanned, start):
            self.broken = found.start()
        # An `http` may straddle the last boundary: look back 3 characters for its start.
        scheme = text.rfind("http", max(self.scanned - 3, 0), start)
        self.scheme = max(self.scheme, scheme)
        self.scanned = start
        if self.scheme <= self.broken:
            return None  # no URL runs unbroken up to the reference
        match = _LINK_AT_REF.match(text, self.scheme, start)
        if match is None:
            return None
        ref = match.group(1) or match.group(2)
        return ref if ref and _PINNED_REF.fullmatch(ref) else None


def _dotted_edit(match: re.Match[str], resolver: Resolver) -> TextEdit | None:
    obj = match.group("obj")
    dotted_end = match.end("dotted")
    name = match.string[match.start() : dotted_end]
    if obj is not None:
        # Entry-point form `pkg.mod:obj`: the object may itself be a moved symbol.
        as_symbol = resolver.resolve(f"{name}.{obj}")
        module = resolver.resolve_module(name)
        new_module, _, new_obj = as_symbol.new.rpartition(".")
        # The object may be a moved symbol, or `module.obj` may land on a path a later rule
        # moves on (an intermediate path): the entry point follows its dotted twin.
        if as_symbol.hits and (as_symbol.first.kind == "symbol" or new_module != module.new):
            return TextEdit(
                match.start(),
                match.end(),
                match.group(),
                f"{new_module}:{new_obj}",
                "entry-point",
                as_symbol,
            )
        if module.changed or module.removed:
            return TextEdit(match.start(), dotted_end, name, module.new, "entry-point", module)
        return None
    resolution = resolver.resolve(name)
    if resolution.changed or resolution.removed:
        return TextEdit(match.start(), dotted_end, name, resolution.new, "dotted", resolution)
    return None


def _path_edit(text: str, match: re.Match[str], resolver: Resolver) -> TextEdit | None:
    path = match.group()
    resolution = resolver.resolve_module(path.replace("/", "."))
    if not (resolution.changed or resolution.removed):
        return None
    if resolution.hits:
        rule_old = resolution.first.old
    else:
        assert resolution.removed is not None
        rule_old = resolution.removed.old
    if resolution.name == rule_old:
        # The path names the moved module itself: a file `mod.py`, a package `mod/`, or the
        # bare module path. `mod.json` is some other file that merely shares the stem.
        after = text[match.end() : match.end() + 5]
        if after.startswith(".") and not re.match(r"\.pyi?(?![A-Za-z0-9_])", after):
            return None
    new = resolution.new.replace(".", "/")
    return TextEdit(match.start(), match.end(), path, new, "path", resolution)


def ignored_lines(text: str) -> set[int]:
    """1-based numbers of the lines that carry a `vam: ignore` pragma."""
    if not _PRAGMA_LINE_RE.search(text):
        return set()
    lines = NEWLINE.split(text)
    return {number for number, line in enumerate(lines, start=1) if _silences_vam(line)}


def _silences_vam(line: str) -> bool:
    for match in _PRAGMA_LINE_RE.finditer(line):
        codes = match.group(1)
        if codes is None or any(c.strip().startswith("VAM") for c in codes.split(",")):
            return True
    return False


def ignores_file(text: str) -> bool:
    return re.search(r"vam:\s*ignore-file\b", text) is not None


def apply_edits(text: str, edits: list[TextEdit]) -> str:
    """`text` with every fixable edit applied (edits must not overlap, in any order)."""
    return splice(text, ((e.start, e.end, e.new) for e in edits if e.fixable))


def rewrite(text: str, resolver: Resolver) -> tuple[str, list[TextEdit]]:
    """Rewrite every reference in `text`; returns the new text and all references found."""
    edits = list(find_references(text, resolver))
    if not edits:
        return text, edits
    return apply_edits(text, edits), edits
