"""One file in, new bytes and findings out: the per-file pipeline.

bytes -> cheap trigger test -> decode (PEP 263 cookie, BOM) -> Python through the libcst
transformer, notebooks cell by cell, anything else through the text rewriter -> encode in
the original encoding. Nothing here touches the disk except reading the file.
"""

from __future__ import annotations

import io
import platform
import re
import tokenize
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeAlias

from migrator.core import findings as F
from migrator.core.decoding import as_utf8, wide_encoding
from migrator.core.discover import SourceFile
from migrator.core.modname import package_of
from migrator.core.resolver import Resolver
from migrator.core.settings import Options
from migrator.core.walk import NotRegularFile, read_regular
from migrator.rewrite import text as T
from migrator.rewrite.documents import rewrite_markdown, rewrite_notebook
from migrator.rewrite.pysource import PythonRewriter
from migrator.rewrite.rst import rewrite_rst
from migrator.rewrite.snippets import rewrite_snippet
from migrator.rewrite.textfile import rewrite_text

_MARKDOWN = (".md", ".markdown", ".mdx")
_RST = (".rst", ".rest")
_DIFF = (".diff", ".patch")
# Said with every syntax error: the parser is the running interpreter's.
_NEWER_PYTHON = (
    f"; if the file is written for a newer Python than Python {platform.python_version()} "
    "(the one running vam), run vam under that newer Python"
)

# What `Engine.screen` hands to `Engine.process`: the file's bytes, or the error reading it.
Read: TypeAlias = bytes | OSError


@dataclass
class FileResult:
    """What processing one file produced. `new` is None when the file stays as it is.

    `encoding` is the one the file was decoded with (PEP 263 cookie or BOM); `old` holds the
    bytes as read only where the caller keeps them for a diff (the runner sets it).
    """

    path: str
    new: bytes | None = None
    findings: list[F.Finding] = field(default_factory=list)
    failed: bool = False
    parsed: bool = False
    encoding: str = "utf-8"
    old: bytes | None = None


class Engine:
    """Processes files against one resolver; cheap to build once per worker process."""

    def __init__(self, resolver: Resolver, options: Options):
        self.resolver = resolver
        self.options = options
        self._prefilter = resolver.prefilter()
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

    def process(
        self, source: SourceFile, data: Read | None = None, screened: bool = False
    ) -> FileResult:
        """New bytes and findings for `source`; `data` is what `screen` read (read here when
        None), so a file is read once per run. `screened`: `screen` passed `data` already,
        so the byte tests are not made twice."""
        result = FileResult(str(source.path))
        if data is None:
            data = read(source)
        if isinstance(data, NotRegularFile):
            return self._fail(result, F.NOT_REGULAR, str(data))
        if isinstance(data, OSError):
            return self._fail(result, F.UNREADABLE, f"cannot read: {data.strerror or data}")
        if not screened and not self._may_refer(source, data):
            return result
        if source.kind == "python":
            return self._python(source, data, result)
        if source.kind == "notebook":
            return self._notebook(data, result)
        return self._text(source, data, result)

    def screen(self, source: SourceFile) -> Read | None:
        """What to pass `process` for `source`: its bytes when it may refer to a moved name,
        the error when it cannot be read (which `process` reports); None when it needs no
        processing."""
        data = read(source)
        if isinstance(data, OSError) or self._may_refer(source, data):
            return data
        return None

    def _may_refer(self, source: SourceFile, data: bytes) -> bool:
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
        return self._prefilter.may_refer(data, frozenset(parts) if inside else frozenset())

    # -- Python ----------------------------------------------------------------------------

    def _python(self, source: SourceFile, data: bytes, result: FileResult) -> FileResult:
        wide = wide_encoding(data)
        try:
            encoding, text = (wide.name, wide.decode(data)) if wide else decode_python(data)
        except (SyntaxError, UnicodeDecodeError, LookupError) as exc:
            return self._fail(result, F.UNREADABLE, f"cannot decode: {_reason(exc)}")
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
                line, col = _nul_position(text)
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
            return self._fail(result, F.UNREADABLE, f"not a readable notebook: {_reason(exc)}")
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
            return self._fail(result, F.UNREADABLE, f"cannot decode as {name}: {_reason(exc)}")
        result.encoding = wide.name if wide else encoding
        if T.ignores_file(text):
            return result
        suffix = source.path.suffix.lower()
        if suffix in _MARKDOWN:
            new_text, findings = rewrite_markdown(text, self._python_cell, self._text_findings)
        elif suffix in _RST:
            new_text, findings = rewrite_rst(text, self._python_cell, self._text_findings)
        else:
            new_text, findings = rewrite_text(
                text, self.resolver, diff=suffix in _DIFF, report_only=self.options.report_only
            )
        result.findings.extend(findings)
        if new_text != text:
            result.new = wide.encode(new_text) if wide else new_text.encode(encoding)
        return result

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


def read(source: SourceFile) -> Read:
    """The bytes of `source`, or the OSError reading them raised (`NotRegularFile` for a
    FIFO, socket or device: never blocks)."""
    try:
        return read_regular(source.path)
    except OSError as exc:
        return exc


def decode_python(data: bytes) -> tuple[str, str]:
    """(encoding, text) of Python source bytes per PEP 263 and the BOM.

    Raises:
        SyntaxError: a malformed or unknown coding cookie.
        UnicodeDecodeError: bytes invalid in the declared encoding.
    """
    encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    return encoding, data.decode(encoding)


def _nul_position(text: str) -> tuple[int, int]:
    """(line, column), both 1-based, of the first NUL in `text`."""
    offset = text.index("\x00")
    return text.count("\n", 0, offset) + 1, offset - (text.rfind("\n", 0, offset) + 1) + 1


def _reason(exc: BaseException) -> str:
    if isinstance(exc, UnicodeDecodeError):
        return f"invalid {exc.encoding} byte 0x{exc.object[exc.start]:02x} at offset {exc.start}"
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
