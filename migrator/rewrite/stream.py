"""Large text files (logs, dumps) a piece at a time, so they cost what `grep` costs.

A reference in text never spans lines, so a file is read in pieces that end at a line feed
(`CHUNK` bytes each, or one whole line where a line is longer), each piece is searched for
the table's package names as bytes, and only the lines that hold one are decoded and go
through the text rewriter (`line_rewrite`, `migrator.rewrite.textfile.rewrite_text` on one
line). The removed lines of diffs are tracked across pieces (`DiffLines`), and only over
pieces that can open or hold a diff. Edits are byte spans of the file; writing copies the
file through a temporary file with them made (`write`), so memory is bounded by a piece,
whatever the file's size. Files in UTF-16/32 are read whole (`screen` says so).
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import BinaryIO

from migrator.core import findings as F
from migrator.core.decoding import wide_encoding
from migrator.core.edits import NEWLINE
from migrator.core.walk import open_regular
from migrator.core.writer import atomic_fill
from migrator.rewrite.records import is_record
from migrator.rewrite.textfile import DiffLines

CHUNK = 1 << 20
# Text files at least this big are streamed; smaller ones are read whole (same result).
STREAM_MIN = 4 << 20
_BOM = b"\xef\xbb\xbf"
_EOL = re.compile(rb"\r\n|\r|\n")
# What a line that opens a diff (a ``` or ~~~ fence, an `@@` hunk header, `diff --git`), or
# the `+++ ` line after a removed `--- ` line, holds: a piece without any of them cannot
# open a diff. Single bytes first: a one-byte search is memchr, far faster than any other.
_DIFF_BYTES = (b"`", b"~", b"@", b"+")
_DIFF_MARKS = (b"```", b"~~~", b"@@ -", b"\n+++ ", b"\r+++ ")
_IGNORE_FILE = re.compile(rb"vam:\s*ignore-file\b")

# (a line of text with its line ending, whether it is a removed line of a diff, whether it
# is a line of a traceback) -> (new line, findings)
LineRewrite = Callable[[str, bool, bool], tuple[str, list[F.Finding]]]
# Bytes before a line that tell whether it belongs to a traceback (`records.LOOKBACK` lines).
_CONTEXT = 8192


@dataclass(frozen=True)
class Streamed:
    """What `Engine.screen` hands `Engine.process` for a large text file: a package name
    is in it somewhere; `process` streams it."""

    size: int


@dataclass
class Edits:
    """Byte spans of a file to replace, in order, and the file's (size, mtime) when read."""

    spans: list[tuple[int, int, bytes]]
    stamp: tuple[int, int]


@dataclass
class StreamResult:
    """What streaming one file found: `failure` is why it could not be decoded, if so."""

    findings: list[F.Finding] = field(default_factory=list)
    edits: Edits | None = None
    encoding: str = "utf-8"
    failure: str | None = None


def pieces(handle: BinaryIO, size: int | None = None) -> Iterator[tuple[int, bytes, bytes]]:
    """(offset, piece, the first bytes after it) over the whole file: every piece but the
    last ends with a line feed; a line longer than `size` (default `CHUNK`) is one piece."""
    size = size or CHUNK
    offset = 0
    held: list[bytes] = []
    block = handle.read(size)
    while block:
        following = handle.read(size)
        cut = block.rfind(b"\n") + 1 if following else len(block)
        if cut == 0:
            held.append(block)
            block = following
            continue
        piece = b"".join([*held, block[:cut]])
        held = [block[cut:]] if cut < len(block) else []
        yield offset, piece, (block[cut:] + following[:4])[:4]
        offset += len(piece)
        block = following


def screen(path: Path, packages: tuple[bytes, ...]) -> Streamed | bytes | None:
    """`Streamed` when the file spells a package and holds no NUL byte before it, None when
    it spells none; its bytes when it is UTF-16/32 (such a file is read whole).

    Raises:
        OSError: it cannot be opened or read (`NotRegularFile` for a FIFO or device).
    """
    with open_regular(path) as handle:
        size = os.fstat(handle.fileno()).st_size
        if wide_encoding(handle.read(4)):
            handle.seek(0)
            return handle.read()
        handle.seek(0)
        for _, piece, _ in pieces(handle):
            if b"\x00" in piece:
                return None  # binary, as a NUL byte anywhere makes any other text file
            if any(package in piece for package in packages):
                return Streamed(size)
    return None


def rewrite(
    path: Path, packages: tuple[bytes, ...], line_rewrite: LineRewrite, *, diff: bool
) -> StreamResult:
    """The findings and edits of the text file at `path`, read a piece at a time. `diff`:
    the file is a unified diff. Nothing at all when it holds a NUL byte (binary) or a
    `vam: ignore-file` pragma, as for a file read whole.

    Raises:
        OSError: it cannot be read.
    """
    outcome = StreamResult()
    spans: list[tuple[int, int, bytes]] = []
    tracker = DiffLines(diff)
    line, tail = 1, b""
    with open_regular(path) as handle:
        info = os.fstat(handle.fileno())
        for offset, piece, after in pieces(handle):
            if b"\x00" in piece or _ignores_file(tail, piece):
                return StreamResult(encoding=outcome.encoding)
            before, tail = tail, piece[-_CONTEXT:]
            try:
                text = piece.decode("utf-8")
            except UnicodeDecodeError as exc:
                at = offset + exc.start
                outcome.failure = f"invalid utf-8 byte 0x{piece[exc.start]:02x} at offset {at}"
                return outcome
            skip = len(_BOM) if offset == 0 and piece.startswith(_BOM) else 0
            if skip:
                outcome.encoding, text = "utf-8-sig", text[1:]
            removed = _removed_lines(tracker, piece, text, line, after)
            number, pos = line, 0
            for start, end in _lines_naming(piece, packages):
                number += _breaks(piece, pos, start)
                pos = start
                old = piece[max(start, skip) : end].decode("utf-8")
                removed_line = old.startswith("-") if diff else number in removed
                record = _in_traceback(before, piece, max(start, skip), end)
                new, found = line_rewrite(old, removed_line, record)
                outcome.findings += [replace(f, line=f.line + number - 1) for f in found]
                if new != old:
                    spans.append((offset + max(start, skip), offset + end, new.encode("utf-8")))
            line = number + _breaks(piece, pos, len(piece))
    if spans:
        outcome.edits = Edits(spans, (info.st_size, info.st_mtime_ns))
    return outcome


def _removed_lines(
    tracker: DiffLines, piece: bytes, text: str, first: int, after: bytes
) -> set[int]:
    """The removed lines of diffs in `piece` (decoded: `text`, its first line `first`)."""
    marked = (
        after.startswith(b"+++ ")
        or b"diff --git " in piece
        or (
            any(byte in piece for byte in _DIFF_BYTES)
            and any(mark in piece for mark in _DIFF_MARKS)
        )
    )
    if tracker.diff or (tracker.idle and not marked):
        return set()  # in a .diff every `-` line is one: the caller tests its line
    lines = NEWLINE.split(text)
    if lines and lines[-1] == "" and text:
        lines.pop()  # the piece ends with its last line's line feed
    return tracker.removed(lines, first, after.decode("utf-8", errors="replace"))


def _in_traceback(before: bytes, piece: bytes, start: int, end: int) -> bool:
    """Whether the line `piece[start:end]` belongs to a traceback, by the lines before it
    (`before`: the end of the previous piece)."""
    window = piece[max(0, start - _CONTEXT) : end]
    if b'File "' not in window and b'File "' not in before:
        return False
    if start < _CONTEXT:
        window = before + window
    lines = NEWLINE.split(window.decode("utf-8", errors="replace").rstrip("\r\n"))
    return is_record(lines)


def _ignores_file(tail: bytes, piece: bytes) -> bool:
    """A `vam: ignore-file` pragma in `piece` (or across from the previous piece's `tail`)."""
    if b"ignore-file" not in piece and b"ignore-file" not in tail + piece[:16]:
        return False
    return _IGNORE_FILE.search(tail + piece) is not None


def _lines_naming(piece: bytes, packages: tuple[bytes, ...]) -> list[tuple[int, int]]:
    """(start, end after its line ending) of each line of `piece` spelling a package."""
    spans: set[tuple[int, int]] = set()
    for package in packages:
        found = piece.find(package)
        while found >= 0:
            start = max(piece.rfind(b"\n", 0, found), piece.rfind(b"\r", 0, found)) + 1
            eol = _EOL.search(piece, found)
            end = eol.end() if eol else len(piece)
            spans.add((start, end))
            found = piece.find(package, end)
    return sorted(spans)


def _breaks(piece: bytes, start: int, end: int) -> int:
    """Line breaks (CRLF, CR or LF) in `piece[start:end]`, both ends at line starts."""
    if piece.find(b"\r", start, end) < 0:
        return piece.count(b"\n", start, end)
    crlf = piece.count(b"\r\n", start, end)
    return piece.count(b"\n", start, end) + piece.count(b"\r", start, end) - crlf


def write(path: Path, edits: Edits) -> None:
    """Replace `path` with its bytes with `edits` made, copied a piece at a time through a
    temporary file in its folder and a rename (`migrator.core.writer.atomic_fill`).

    Raises:
        WriteRefused: the file is read-only.
        OSError: it cannot be written, or it changed since it was read (it is left as is).
    """

    def fill(out: BinaryIO) -> None:
        with open_regular(path) as source:
            info = os.fstat(source.fileno())
            if (info.st_size, info.st_mtime_ns) != edits.stamp:
                raise OSError("the file changed while vam read it; run vam again")
            pos = 0
            for start, end, new in edits.spans:
                _copy(source, out, start - pos)
                out.write(new)
                source.seek(end)
                pos = end
            shutil.copyfileobj(source, out, CHUNK)

    atomic_fill(path, fill)


def _copy(source: BinaryIO, out: BinaryIO, count: int) -> None:
    while count > 0:
        block = source.read(min(CHUNK, count))
        if not block:
            raise OSError("the file shrank while vam wrote it")
        out.write(block)
        count -= len(block)
