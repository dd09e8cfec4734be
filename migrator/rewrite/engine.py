"""One file in, new bytes and findings out: the per-file pipeline.

bytes -> cheap trigger test -> decode (PEP 263 cookie, BOM) -> Python through the libcst
transformer, notebooks cell by cell, anything else through the text rewriter -> encode in
the original encoding. Nothing here touches the disk except reading the file.
"""

from __future__ import annotations

import os
import platform
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TypeAlias

from migrator.core import findings as F
from migrator.core.decoding import (
    as_text,
    as_utf8,
    decode_python,
    decode_reason,
    nul_position,
    wide_encoding,
)
from migrator.core.discover import SourceFile
from migrator.core.modname import package_of
from migrator.core.pins import distribution_names
from migrator.core.release_pins import ReleasePin
from migrator.core.resolver import Resolver
from migrator.core.settings import Options
from migrator.core.walk import NotRegularFile, read_regular
from migrator.rewrite import stream
from migrator.rewrite import text as T
from migrator.rewrite.documents import rewrite_markdown, rewrite_notebook
from migrator.rewrite.held import BelowBaseline, held_by_pin, pin_left_behind, text_pin
from migrator.rewrite.pysource import PythonRewriter
from migrator.rewrite.rst import rewrite_rst
from migrator.rewrite.snippets import rewrite_snippet
from migrator.rewrite.textfile import rewrite_text
from rules import version_key

_MARKDOWN = (".md", ".markdown", ".mdx")
_RST = (".rst", ".rest")
_DIFF = (".diff", ".patch")
# Said with every syntax error: the parser is the running interpreter's.
_NEWER_PYTHON = (
    f"; if the file is written for a newer Python than Python {platform.python_version()} "
    "(the one running vam), run vam under that newer Python"
)

# What `Engine.screen` hands to `Engine.process`: the file's bytes, the error reading it, or
# (a large text file) a note that it is to be streamed.
Read: TypeAlias = bytes | OSError | stream.Streamed


@dataclass
class FileResult:
    """What processing one file produced. `new` is None when the file stays as it is.

    `encoding` is the one the file was decoded with (PEP 263 cookie or BOM); `old` holds the
    bytes as read only where the caller keeps them for a diff (the runner sets it). A
    streamed file's `new` is empty and `edits` says what to write (`stream.write`).
    """

    path: str
    new: bytes | None = None
    findings: list[F.Finding] = field(default_factory=list)
    failed: bool = False
    parsed: bool = False
    encoding: str = "utf-8"
    old: bytes | None = None
    edits: stream.Edits | None = None


class Engine:
    """Processes files against one resolver; cheap to build once per worker process.

    `stream`: large text files are streamed (`migrator.rewrite.stream`): their results
    carry `edits`, not `new` bytes, so a caller that needs the bytes leaves it off.
    """

    def __init__(self, resolver: Resolver, options: Options, *, stream: bool = False):
        self.resolver = resolver
        self.options = options
        self.stream = stream
        self._prefilter = resolver.prefilter()
        self._trigger = re.compile(resolver.trigger_pattern())
        self._packages = tuple(p.encode() for p in resolver.packages)
        self._package_names = frozenset(resolver.packages)
        # Relative paths are taken from here; a tree checked from inside a package (`cd
        # vllm_ascend/distributed && vam check .`) is still inside it.
        try:
            self._cwd: tuple[str, ...] = Path.cwd().parts
        except OSError:  # the working directory was removed
            self._cwd = ()
        # ASCII word boundaries: `mooncake_connector中` still names the module.
        line_trigger = re.compile(resolver.trigger_pattern().decode(), re.ASCII)
        self._python_rewriter = PythonRewriter(resolver, line_trigger)
        # With --drop-compat, a module that calls a version helper is read even if it names
        # no moved path.
        guards = options.version_guards if options.drop_compat is not None else ()
        self._guards = tuple(g.encode() for g in guards)
        floor = options.default_floor
        self._below = BelowBaseline(resolver, floor) if floor else None
        self._distributions = distribution_names(resolver.packages)
        # Engines for the text files that pin a release, by release; one to report with.
        self._capped: dict[str, Engine] = {}
        self._reporter: Engine | None = None

    def process(
        self, source: SourceFile, data: Read | None = None, screened: bool = False
    ) -> FileResult:
        """New bytes and findings for `source`; `data` is what `screen` read (read here when
        None), so a file is read once per run. `screened`: `screen` passed `data` already,
        so the byte tests are not made twice."""
        result = FileResult(str(source.path))
        if data is None:
            data = read(source)
        if isinstance(data, stream.Streamed):
            return _streamed(self, source, result)
        if isinstance(data, NotRegularFile):
            return self._fail(result, F.NOT_REGULAR, str(data))
        if isinstance(data, OSError):
            return self._fail(result, F.UNREADABLE, f"cannot read: {data.strerror or data}")
        if not screened and not self.may_refer(source, data):
            return result
        if self._triggered(source, data):
            if source.kind == "python":
                self._python(source, data, result)
            elif source.kind == "notebook":
                self._notebook(data, result)
            else:
                self._text(source, data, result)
        if self._below is not None and not result.failed:
            text = as_text(data, result.encoding)
            if text is not None and not T.ignores_file(text):
                result.findings.extend(self._below.findings(text))
        return result

    def screen(self, source: SourceFile) -> Read | None:
        """What to pass `process` for `source`: its bytes when it may refer to a moved name
        (`Streamed` for a large text file that spells a package), the error when it cannot
        be read (which `process` reports); None when it needs no processing."""
        data: bytes | OSError
        if _streams(self, source):
            try:
                screened = stream.screen(source.path, self._packages)
            except OSError as exc:
                return exc
            if not isinstance(screened, bytes):
                return screened  # to stream, or nothing to do
            data = screened
        else:
            data = read(source)
        if isinstance(data, OSError) or self.may_refer(source, data):
            return data
        return None

    def may_refer(self, source: SourceFile, data: bytes) -> bool:
        """The byte tests of `migrator.core.prefilter`: every file with a reference passes
        them; most files fail the first (it spells no table package and lies in none)."""
        data = as_utf8(data)
        python = source.kind == "python"
        if python and b"\x00" not in data and any(g in data for g in self._guards):
            return True
        path = source.path
        parts = path.parts if path.is_absolute() else self._cwd + path.parts
        inside = not self._package_names.isdisjoint(parts)
        if not inside and not any(package in data for package in self._packages):
            return False
        # A NUL byte marks other text as binary; a Python file that spells a moved name is
        # parsed anyway, so the parser's refusal is reported (VAM901), never passed as clean.
        if b"\x00" in data and not python:
            return False
        # Only a file inside a package has relative imports, which take folders of its path.
        folders = frozenset(parts) if inside else frozenset()
        if self._prefilter.may_refer(data, folders):
            return True
        below = self._below.prefilter if self._below is not None else None
        return below is not None and below.may_refer(data, folders)

    def _triggered(self, source: SourceFile, data: bytes) -> bool:
        """Whether the run's own steps (not only those below the baseline) may see `data`."""
        if self._below is None:
            return True
        if source.kind == "python" and any(g in data for g in self._guards):
            return True
        return self._trigger.search(as_utf8(data)) is not None

    # -- Python ----------------------------------------------------------------------------

    def _python(self, source: SourceFile, data: bytes, result: FileResult) -> FileResult:
        wide = wide_encoding(data)
        try:
            encoding, text = (wide.name, wide.decode(data)) if wide else decode_python(data)
        except (SyntaxError, UnicodeDecodeError, LookupError) as exc:
            return self._fail(result, F.UNREADABLE, f"cannot decode: {decode_reason(exc)}")
        result.encoding = encoding
        if T.ignores_file(text):
            return result
        package = package_of(source.path, source.root, self.resolver.packages)
        result.parsed = True
        try:
            new_text, findings = self.transform_python(text, package)
        except (SyntaxError, RecursionError, MemoryError) as exc:
            if isinstance(exc, SyntaxError) and "\x00" in text:
                # No Python accepts a NUL byte: say where it is, not "newer Python".
                line, col = nul_position(text)
                reason = f"NUL byte at line {line}, column {col} (Python source cannot hold one)"
            elif isinstance(exc, SyntaxError):
                line, col = exc.lineno or 0, exc.offset or 0
                reason = f"{exc.msg} (line {line}, column {col}){_NEWER_PYTHON}"
            else:  # CPython's parser gives up on very deep nesting
                line = col = 0
                reason = f"too deeply nested for the parser ({type(exc).__name__})"
            self._fail(result, F.SYNTAX_ERROR, f"cannot parse: {reason}", line, col)
            if self.options.report_only:
                result.findings.extend(self._text_findings(text)[1])
            return result
        result.findings.extend(findings)
        if new_text != text:
            try:
                result.new = wide.encode(new_text) if wide else new_text.encode(encoding)
            except UnicodeEncodeError as exc:
                return self._fail(
                    result, F.UNWRITABLE, f"cannot encode as {encoding}: {exc.reason}"
                )
        return result

    def transform_python(self, text: str, package: str | None) -> tuple[str, list[F.Finding]]:
        """Rewrite one Python module's source.

        Raises:
            SyntaxError: `text` is not valid Python.
        """
        return self._python_rewriter.rewrite(text, package, self.options)

    # -- notebooks, Markdown and other text -------------------------------------------------

    def _python_cell(self, source: str) -> tuple[str, list[F.Finding]]:
        """A notebook cell or a documentation snippet: Python, magics and shell lines aside.

        Raises:
            SyntaxError: not Python even so (the caller treats it as text).
        """
        return rewrite_snippet(source, self._python_snippet, self._text_findings)

    def _python_snippet(self, source: str) -> tuple[str, list[F.Finding]]:
        return self.transform_python(source, None)

    def _notebook(self, data: bytes, result: FileResult) -> FileResult:
        try:
            raw = data.decode("utf-8")  # nbformat: always UTF-8
            new, findings = rewrite_notebook(raw, self._python_cell, self._text_findings)
        except (UnicodeDecodeError, ValueError) as exc:
            why = decode_reason(exc)
            return self._fail(result, F.UNREADABLE, f"not a readable notebook: {why}")
        result.findings.extend(findings)
        if new != raw:
            result.new = new.encode("utf-8")
        return result

    def _text(self, source: SourceFile, data: bytes, result: FileResult) -> FileResult:
        wide = wide_encoding(data)
        encoding = "utf-8-sig" if data.startswith(b"\xef\xbb\xbf") else "utf-8"
        try:
            text = wide.decode(data) if wide else data.decode(encoding)
        except UnicodeDecodeError as exc:
            name = wide.name.upper() if wide else "UTF-8"
            why = decode_reason(exc)
            return self._fail(result, F.UNREADABLE, f"cannot decode as {name}: {why}")
        result.encoding = wide.name if wide else encoding
        if T.ignores_file(text):
            return result
        suffix = source.path.suffix.lower()
        pin = text_pin(text, self.resolver, self._distributions, self.options)
        if pin is None:
            new_text, findings = self.rewrite_document(text, suffix)
            if self.options.release_pins:
                findings += pin_left_behind(text, self.resolver, self._distributions, findings)
        else:
            new_text, findings = _capped_engine(self, pin).rewrite_document(text, suffix)
            _, later = _reporting(self).rewrite_document(new_text, suffix)
            # In check mode both passes read the same text: a reference already reported as
            # stale for the pinned release is not reported twice.
            findings += held_by_pin(later, findings if self.options.report_only else [], pin)
        result.findings.extend(findings)
        if new_text != text:
            result.new = wide.encode(new_text) if wide else new_text.encode(encoding)
        return result

    def rewrite_document(self, text: str, suffix: str) -> tuple[str, list[F.Finding]]:
        """(new text, findings) of a text file whose name ends in `suffix` (lower case)."""
        if suffix in _MARKDOWN:
            return rewrite_markdown(text, self._python_cell, self._text_findings)
        if suffix in _RST:
            return rewrite_rst(text, self._python_cell, self._text_findings)
        return rewrite_text(
            text, self.resolver, diff=suffix in _DIFF, report_only=self.options.report_only
        )

    def _text_findings(self, text: str) -> tuple[str, list[F.Finding]]:
        return rewrite_text(text, self.resolver, report_only=self.options.report_only)

    @staticmethod
    def _fail(
        result: FileResult, code: str, message: str, line: int = 0, col: int = 0
    ) -> FileResult:
        result.failed = True
        result.new = None
        result.findings.append(F.failure(code, message, line, col))
        return result


def _streams(engine: Engine, source: SourceFile) -> bool:
    """Whether `source` is a text file big enough to stream (Markdown and reST files
    hold Python blocks: those are read whole)."""
    if not engine.stream or source.kind != "text":
        return False
    if source.path.suffix.lower() in _MARKDOWN + _RST:
        return False
    try:
        return os.stat(source.path).st_size >= stream.STREAM_MIN
    except OSError:
        return False  # reading it says why


def _streamed(engine: Engine, source: SourceFile, result: FileResult) -> FileResult:
    def line(text: str, removed: bool, record: bool) -> tuple[str, list[F.Finding]]:
        return rewrite_text(
            text,
            engine.resolver,
            report_only=engine.options.report_only,
            history={1} if removed else set(),
            records={1} if record else set(),
        )

    diff = source.path.suffix.lower() in _DIFF
    try:
        outcome = stream.rewrite(source.path, engine._packages, line, diff=diff)
    except OSError as exc:
        return Engine._fail(result, F.UNREADABLE, f"cannot read: {exc.strerror or exc}")
    if outcome.failure is not None:
        return Engine._fail(result, F.UNREADABLE, f"cannot decode as UTF-8: {outcome.failure}")
    result.encoding = outcome.encoding
    result.findings.extend(outcome.findings)
    if outcome.edits is not None:
        result.new, result.edits = b"", outcome.edits
    return result


def _capped_engine(engine: Engine, pin: ReleasePin) -> Engine:
    """An engine for the run's steps up to `pin` (none when the baseline is after it)."""
    capped = engine._capped.get(pin.version)
    if capped is None:
        low = engine.resolver.from_version
        top = pin.version
        if low is not None and version_key(low) > version_key(top):
            top = low
        pack = engine.resolver.pack
        written = engine.resolver.to_version or pack.latest
        resolver = Resolver(pack, low, top, written_to=written)
        options = replace(engine.options, release_pins=False, default_floor=None)
        capped = engine._capped[pin.version] = Engine(resolver, options)
    return capped


def _reporting(engine: Engine) -> Engine:
    """`engine`'s steps in check mode, for what a pinned file keeps."""
    if engine._reporter is None:
        options = replace(engine.options, report_only=True, release_pins=False, default_floor=None)
        engine._reporter = Engine(engine.resolver, options)
    return engine._reporter


def read(source: SourceFile) -> bytes | OSError:
    """The bytes of `source`, or the OSError reading them raised (`NotRegularFile` for a
    FIFO, socket or device: never blocks)."""
    try:
        return read_regular(source.path)
    except OSError as exc:
        return exc
