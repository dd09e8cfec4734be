"""reStructuredText: the bodies of `.. code-block:: python` (and `.. code::`,
`.. sourcecode::`) directives are Python; everything else is text."""

from __future__ import annotations

import re

from migrator.core.findings import Finding
from migrator.rewrite.documents import Block, Rewrite, rewrite_blocks

_DIRECTIVE = re.compile(
    r"(?m)^(?P<indent>[ \t]*)\.\.[ \t]+(?:code-block|code|sourcecode)::[ \t]*"
    r"(?:python3?|py|ipython3?)[ \t]*$"
)
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")


def rewrite_rst(text: str, python: Rewrite, plain: Rewrite) -> tuple[str, list[Finding]]:
    """reST with its Python code blocks rewritten as Python and the rest as text."""
    return rewrite_blocks(text, code_blocks(text), python, plain)


def code_blocks(text: str) -> list[Block]:
    """(body start, body end, body indentation) of each Python code-block directive: the
    lines indented deeper than the directive after its `:option:` lines and a blank line;
    the body's indentation is that of its first line."""
    blocks = []
    for match in _DIRECTIVE.finditer(text):
        depth = len(match.group("indent"))
        lines = _LINE.finditer(text, match.end())  # from the directive's own line end
        body_start = body_end = None
        indent = ""
        for line in lines:
            content = line.group().rstrip("\r\n")
            stripped = content.lstrip(" \t")
            if stripped and len(content) - len(stripped) <= depth:
                break  # back at the directive's level: the block ended
            if body_start is None:
                if not stripped or stripped.startswith(":"):
                    continue  # options, and the blank line before the body
                body_start, indent = line.start(), content[: len(content) - len(stripped)]
            body_end = line.end()
        if body_start is not None and body_end is not None:
            blocks.append((body_start, _trim_blank_tail(text, body_start, body_end), indent))
    return blocks


def _trim_blank_tail(text: str, start: int, end: int) -> int:
    """`end` moved back over the blank lines that close a block (they belong to the text)."""
    body = text[start:end]
    kept = body.rstrip(" \t\r\n")
    newline = re.match(r"\r\n|\r|\n", body[len(kept):])
    return start + len(kept) + (len(newline.group()) if newline else 0)
