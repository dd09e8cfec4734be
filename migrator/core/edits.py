"""Edits at offsets of a text, and offsets as lines: the basics every rewriter and the findings
share (the reference search that makes `TextEdit`s lives in `migrator.rewrite.text`)."""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass

from migrator.core.resolver import Resolution

NEWLINE = re.compile(r"\r\n|\r|\n")


@dataclass(frozen=True)
class TextEdit:
    """One reference found in a text: `text[start:end]` is `old`, to become `new`.

    `form` is "dotted", "entry-point" or "path". `new` equals `old` for references that
    cannot be rewritten (removed names): those carry `resolution.removed`.
    """

    start: int
    end: int
    old: str
    new: str
    form: str
    resolution: Resolution

    @property
    def fixable(self) -> bool:
        return self.new != self.old


class LineIndex:
    """Maps offsets in a text to 1-based (line, column) pairs."""

    def __init__(self, text: str):
        self.starts = [0, *(m.end() for m in NEWLINE.finditer(text))]

    def position(self, offset: int) -> tuple[int, int]:
        line = bisect_right(self.starts, offset)
        return line, offset - self.starts[line - 1] + 1
