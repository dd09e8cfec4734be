"""Documents with Python inside: Jupyter notebooks (code cells) and Markdown (python fences);
reST code blocks come through `rewrite_blocks` too (see `migrator.rewrite.rst`).

The Python they hold follows the Python rules (imports re-planned, split, aliased); the
rest is text. Both functions take the two rewriters as callables, so this module knows
nothing of resolvers or syntax trees:

    python(source) -> (new source, findings)   raises SyntaxError for code that is not Python
    plain(text)    -> (new text, findings)

Findings come back with lines relative to the document (Markdown) or to the cell
(notebooks, whose messages name the cell).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from migrator.core import findings as F

Rewrite = Callable[[str], tuple[str, list[F.Finding]]]

# Kinds of reference only the Python rules can rewrite (a text pass leaves them as they are).
_PYTHON_ONLY = {"import", "from-import", "submodule-import", "symbol-import", "relative-import"}
_FENCE_OPEN = re.compile(
    r"(?m)^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?:python3?|py)\b[^\r\n]*(?:\r\n|\r|\n)"
)


# -- notebooks ---------------------------------------------------------------------------------


def rewrite_notebook(raw: str, python: Rewrite, plain: Rewrite) -> tuple[str, list[F.Finding]]:
    """The notebook `raw` (JSON text) with its cells rewritten, and the findings.

    Written back exactly as it was formatted (indentation, ASCII escapes) when that format
    can be reproduced; otherwise its text is rewritten in place, and the Python-only
    references of the code cells that pass leaves short of the Python rules are reported for
    a human (VAM002), never those of a cell it rewrote as they would.

    Raises:
        ValueError: `raw` is not JSON.
    """
    notebook = json.loads(raw)
    dump = _dumper(raw, notebook)
    if dump is None:
        new, findings = plain(raw)
        done = _cells_of(new) if new != raw else {}
        for number, text in _code_cells(notebook):
            try:
                rewritten, cell_findings = python(text)
            except (SyntaxError, RecursionError, MemoryError):
                continue
            if done.get(number) == rewritten:
                continue  # the text pass did all the Python rules would: nothing is left to a human
            findings.extend(_in_cell(number, f, human=True) for f in cell_findings
                            if f.kind in _PYTHON_ONLY)
        return new, findings
    findings = []
    changed = False
    for number, cell in enumerate(notebook.get("cells", []), start=1):
        source = cell.get("source")
        text = "".join(source) if isinstance(source, list) else source
        if not isinstance(text, str):
            continue
        new, cell_findings = _cell(text, cell.get("cell_type") == "code", python, plain)
        findings.extend(_in_cell(number, f) for f in cell_findings)
        if new != text:
            changed = True
            cell["source"] = new.splitlines(keepends=True) if isinstance(source, list) else new
    return (dump(notebook) if changed else raw), findings


# (indent, separators) of the layouts notebooks are written in: nbformat's (indent 1), other
# indents, and one line, with Python's spaces or none at all (as JavaScript tools write).
_LAYOUTS: tuple[tuple[int | None, tuple[str, str]], ...] = (
    (1, (",", ": ")),
    (2, (",", ": ")),
    (4, (",", ": ")),
    (None, (",", ":")),
    (None, (", ", ": ")),
)


def _dumper(raw: str, notebook: Any) -> Callable[[Any], str] | None:
    """A `json.dumps` setting that writes `notebook` back as `raw` byte for byte, if any."""
    tail = raw[len(raw.rstrip("\r\n")):]
    for indent, separators in _LAYOUTS:
        for ascii_only in (False, True):
            def dump(
                nb: Any,
                indent: int | None = indent,
                separators: tuple[str, str] = separators,
                ascii_only: bool = ascii_only,
            ) -> str:
                text = json.dumps(nb, indent=indent, separators=separators, ensure_ascii=ascii_only)
                return text + tail

            if dump(notebook) == raw:
                return dump
    return None


def _cells_of(raw: str) -> dict[int, str]:
    try:
        return dict(_code_cells(json.loads(raw)))
    except ValueError:
        return {}


def _code_cells(notebook: Any) -> list[tuple[int, str]]:
    cells = []
    for number, cell in enumerate(notebook.get("cells", []), start=1):
        source = cell.get("source")
        text = "".join(source) if isinstance(source, list) else source
        if cell.get("cell_type") == "code" and isinstance(text, str):
            cells.append((number, text))
    return cells


def _cell(text: str, code: bool, python: Rewrite, plain: Rewrite) -> tuple[str, list[F.Finding]]:
    if code:
        try:
            return python(text)
        except (SyntaxError, RecursionError, MemoryError):
            pass  # IPython magics and shell escapes: the cell is text
    return plain(text)


def _in_cell(number: int, finding: F.Finding, human: bool = False) -> F.Finding:
    message = f"cell {number}: {finding.message}"
    code = finding.code
    if human and finding.fixable:
        code = F.NEEDS_HUMAN
        message += " (the notebook's JSON layout cannot be reproduced: edit this cell by hand)"
    return replace(finding, path="", code=code, message=message)


# -- Markdown ----------------------------------------------------------------------------------


def rewrite_markdown(text: str, python: Rewrite, plain: Rewrite) -> tuple[str, list[F.Finding]]:
    """Markdown with its ```python fences rewritten as Python and the rest as text.

    A fence whose body does not parse (a shell session, pseudo-code) is text like the rest.
    """
    return rewrite_blocks(text, _python_fences(text), python, plain)


Block = tuple[int, int, str]  # (body start, body end, indentation of its lines)


def rewrite_blocks(
    text: str, blocks: list[Block], python: Rewrite, plain: Rewrite
) -> tuple[str, list[F.Finding]]:
    """`text` with the Python `blocks` (in order, not overlapping) rewritten as Python and
    the rest as text; a block whose body does not parse is text like the rest."""
    pieces: list[str] = []
    findings: list[F.Finding] = []
    pos = 0
    for start, end, indent in blocks:
        body = _dedent(text[start:end], indent)
        if body is None:
            continue
        try:
            new_body, body_findings = python(body)
        except (SyntaxError, RecursionError, MemoryError):
            continue
        new_before, before_findings = _plain_at(text, pos, start, plain)
        pieces += [new_before, _indent(new_body, indent) if new_body != body else text[start:end]]
        findings += before_findings
        first_line = len(re.findall(r"\r\n|\r|\n", text[:start]))
        findings += [_shifted(f, first_line, len(indent)) for f in body_findings]
        pos = end
    new_rest, rest_findings = _plain_at(text, pos, len(text), plain)
    pieces.append(new_rest)
    findings += rest_findings
    return "".join(pieces), findings


def _python_fences(text: str) -> list[Block]:
    """(body start, body end, indentation) of every ```python / ~~~py fenced block."""
    fences = []
    pos = 0
    for match in _FENCE_OPEN.finditer(text):
        if match.start() < pos:
            continue
        fence = match.group("fence")
        close = re.compile(
            rf"(?m)^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}[ \t]*(?:\r\n|\r|\n|$)"
        ).search(text, match.end())
        if close is None:
            break
        fences.append((match.end(), close.start(), match.group("indent")))
        pos = close.end()
    return fences


def _plain_at(text: str, start: int, end: int, plain: Rewrite) -> tuple[str, list[F.Finding]]:
    """`plain` over `text[start:end]`, with finding lines made relative to all of `text`."""
    if start >= end:
        return "", []
    new, findings = plain(text[start:end])
    first_line = len(re.findall(r"\r\n|\r|\n", text[:start]))
    column = start - max(text.rfind("\n", 0, start), text.rfind("\r", 0, start)) - 1
    return new, [_shifted(f, first_line, column if f.line == 1 else 0) for f in findings]


def _shifted(finding: F.Finding, lines: int, columns: int) -> F.Finding:
    return replace(finding, path="", line=finding.line + lines, col=finding.col + columns)


def _dedent(body: str, indent: str) -> str | None:
    if not indent:
        return body
    lines = body.splitlines(keepends=True)
    if any(line.strip() and not line.startswith(indent) for line in lines):
        return None
    return "".join(line[len(indent):] if line.strip() else line for line in lines)


def _indent(body: str, indent: str) -> str:
    if not indent:
        return body
    return "".join(indent + line if line.strip() else line
                   for line in body.splitlines(keepends=True))
