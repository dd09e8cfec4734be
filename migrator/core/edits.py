"""Edits at offsets of a text, and offsets as lines: the basics every rewriter and the findings
share (the reference search that makes `TextEdit`s lives in `migrator.rewrite.text`)."""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import accumulate, count
from operator import add

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


def splice(text: str, edits: Iterable[tuple[int, int, str]]) -> str:
    """`text` with each `(start, end, new)` of `edits` made: `text[start:end]` (offsets of
    the original text) becomes `new`.

    Precedence when edits overlap: they are taken in order of their start, and at one start
    in the order given (the sort is stable). An edit that starts before the end of the last
    one taken is dropped whole, so overlapping edits never corrupt the text; an insertion
    (an empty span) blocks nothing, not even an edit at its own offset.
    """
    out, pos = [], 0
    for start, end, new in sorted(edits, key=lambda e: e[0]):
        if start < pos:
            continue
        out.append(text[pos:start])
        out.append(new)
        pos = end
    out.append(text[pos:])
    return "".join(out)


class LineIndex:
    """Maps offsets in a text to 1-based (line, column) pairs."""

    def __init__(self, text: str):
        if "\r" in text:
            self.starts = [0, *(m.end() for m in NEWLINE.finditer(text))]
        else:  # the common case, without a Python-level step per line
            lengths = accumulate(map(len, text.split("\n")[:-1]), initial=0)
            self.starts = list(map(add, lengths, count()))  # + one newline per line

    def position(self, offset: int) -> tuple[int, int]:
        line = bisect_right(self.starts, offset)
        return line, offset - self.starts[line - 1] + 1
