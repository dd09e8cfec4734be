"""One file in, new bytes and findings out: the per-file pipeline.

bytes -> cheap trigger test -> decode (PEP 263 cookie, BOM) -> Python through the libcst
transformer, notebooks cell by cell, anything else through the text rewriter -> encode in
the original encoding. Nothing here touches the disk except reading the file.
"""

from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass, field

from migrator import findings as F
from migrator import text as T
from migrator.discover import SourceFile, package_of
from migrator.documents import rewrite_markdown, rewrite_notebook
from migrator.pysource import PythonOptions, PythonRewriter
from migrator.resolver import Resolver


@dataclass(frozen=True)
class Options:
    """Per-run switches. `report_only` (check mode) wants findings, not new text: imports are
    judged without libcst, and files that do not parse are still scanned as text."""

    comments: bool = True
    line_length: int | None = None
    report_only: bool = False


@dataclass
class FileResult:
    """What processing one file produced. `new` is None when the file stays as it is."""

    path: str
    new: bytes | None = None
    findings: list[F.Finding] = field(default_factory=list)
    failed: bool = False
    parsed: bool = False


class Engine:
    """Processes files against one resolver; cheap to build once per worker process."""

    def __init__(self, resolver: Resolver, options: Options):
        self.resolver = resolver
        self.options = options
        self._trigger = re.compile(resolver.trigger_pattern())
        self._packages = tuple(p.encode() for p in resolver.packages)
        # ASCII word boundaries: `mooncake_connector中` still names the module.
        line_trigger = re.compile(resolver.trigger_pattern().decode(), re.ASCII)
        self._python_rewriter = PythonRewriter(resolver, line_trigger)

    def process(self, source: SourceFile) -> FileResult:
        result = FileResult(str(source.path))
        try:
            data = source.path.read_bytes()
        except OSError as exc:
            return self._fail(result, F.UNREADABLE, f"cannot read: {exc.strerror or exc}")
        if not self._may_refer(source, data):
            return result
        if source.kind == "python":
            return self._python(source, data, result)
        if source.kind == "notebook":
            return self._notebook(data, result)
        return self._text(source, data, result)

    def screen(self, source: SourceFile) -> bool:
        """Whether `source` needs processing: it may refer to a moved name (or is unreadable,
        which `process` reports)."""
        try:
            data = source.path.read_bytes()
        except OSError:
            return True
        return self._may_refer(source, data)

    def _may_refer(self, source: SourceFile, data: bytes) -> bool:
        """Cheap tests every file with a reference passes; most files fail the first.

        A reference spells a table package (`vllm_ascend`), unless it is a relative import,
        which only a file inside such a package can hold; and it spells the last component
        of a moved name (see `Resolver.trigger_pattern`).
        """
        if not any(package in data for package in self._packages) and not any(
            part in self.resolver.packages for part in source.path.parts
        ):
            return False
        if b"\x00" in data:
            return False  # a binary file, whatever its name says
        return self._trigger.search(data) is not None

    # -- Python ----------------------------------------------------------------------------

    def _python(self, source: SourceFile, data: bytes, result: FileResult) -> FileResult:
        try:
            encoding, text = decode_python(data)
        except (SyntaxError, UnicodeDecodeError, LookupError) as exc:
            return self._fail(result, F.UNREADABLE, f"cannot decode: {_reason(exc)}")
        if T.ignores_file(text):
            return result
        package = package_of(source.path, source.root, self.resolver.packages)
        result.parsed = True
        try:
            new_text, findings = self.transform_python(text, package)
        except (SyntaxError, RecursionError, MemoryError) as exc:
            if isinstance(exc, SyntaxError):
                line, col = exc.lineno or 0, exc.offset or 0
                reason = f"{exc.msg} (line {line}, column {col})"
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
                result.new = new_text.encode(encoding)
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
        options = PythonOptions(
            package, self.options.comments, self.options.line_length, not self.options.report_only
        )
        return self._python_rewriter.rewrite(text, options)

    # -- notebooks, Markdown and other text -------------------------------------------------

    def _python_cell(self, source: str) -> tuple[str, list[F.Finding]]:
        return self.transform_python(source, None)

    def _notebook(self, data: bytes, result: FileResult) -> FileResult:
        try:
            raw = data.decode("utf-8")
            new, findings = rewrite_notebook(raw, self._python_cell, self._text_findings)
        except (UnicodeDecodeError, ValueError) as exc:
            return self._fail(result, F.UNREADABLE, f"not a readable notebook: {_reason(exc)}")
        result.findings.extend(findings)
        if new != raw:
            result.new = new.encode("utf-8")
        return result

    def _text(self, source: SourceFile, data: bytes, result: FileResult) -> FileResult:
        encoding = "utf-8-sig" if data.startswith(b"\xef\xbb\xbf") else "utf-8"
        try:
            text = data.decode(encoding)
        except UnicodeDecodeError as exc:
            return self._fail(result, F.UNREADABLE, f"cannot decode as UTF-8: {_reason(exc)}")
        if T.ignores_file(text):
            return result
        if source.path.suffix.lower() in (".md", ".markdown"):
            new_text, findings = rewrite_markdown(text, self._python_cell, self._text_findings)
        else:
            new_text, findings = self._text_findings(text)
        result.findings.extend(findings)
        if new_text != text:
            result.new = new_text.encode(encoding)
        return result

    def _text_findings(self, text: str) -> tuple[str, list[F.Finding]]:
        edits = list(T.find_references(text, self.resolver))
        if not edits:
            return text, []
        index = T.LineIndex(text)
        ignored = T.ignored_lines(text)
        kept = [e for e in edits if not ignored or index.position(e.start)[0] not in ignored]
        findings = [F.text_finding(e, "text", *index.position(e.start)) for e in kept]
        return T.apply_edits(text, kept), findings

    @staticmethod
    def _fail(
        result: FileResult, code: str, message: str, line: int = 0, col: int = 0
    ) -> FileResult:
        result.failed = True
        result.new = None
        result.findings.append(F.failure(code, message, line, col))
        return result


def decode_python(data: bytes) -> tuple[str, str]:
    """(encoding, text) of Python source bytes per PEP 263 and the BOM.

    Raises:
        SyntaxError: a malformed or unknown coding cookie.
        UnicodeDecodeError: bytes invalid in the declared encoding.
    """
    encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    return encoding, data.decode(encoding)


def _reason(exc: BaseException) -> str:
    if isinstance(exc, UnicodeDecodeError):
        return f"invalid {exc.encoding} byte 0x{exc.object[exc.start]:02x} at offset {exc.start}"
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
