"""Records of what ran: the lines of a Python traceback pasted into a log, an issue, a doc.

A traceback names the files and modules as they were when it was printed; rewriting it would
make the record say something that never ran (as rewriting a diff's removed lines would
break the patch). Its references are kept and reported at info level (VAM011):

    Traceback (most recent call last):                      <- (not needed)
      File "/site-packages/pkg/old/x.py", line 120, in f     <- a frame
        from pkg.old.y import z                              <- its source line
    ModuleNotFoundError: No module named 'pkg.old.y'        <- the exception line

A frame line is one that holds `File "...", line N` (after any prefix a logger puts on every
line, such as `(Worker pid=12)`); the lines under it indented deeper (its source line, the
`^^^^` markers) and the exception line that ends the traceback are records too.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

_FRAME = re.compile(r'File "[^"\r\n]+", line \d+')
_EXCEPTION = re.compile(r"[A-Za-z_][\w.]*(?:Error|Exception|Warning|Exit|Interrupt)\b")
# How many lines a traceback's exception line may sit below its last frame line.
LOOKBACK = 16


def traceback_lines(lines: Sequence[str]) -> set[int]:
    """0-based indexes of the lines of `lines` that belong to a Python traceback: frame
    lines, the lines indented under each, and the exception line after the last."""
    records: set[int] = set()
    lead: str | None = None  # what stands before `File` on the last frame line
    for index, line in enumerate(lines):
        frame = _FRAME.search(line) if 'File "' in line else None
        if frame is not None:
            records.add(index)
            lead = line[: frame.start()]
            continue
        if lead is None:
            continue
        prefix, column = lead.rstrip(), len(lead)
        if line[:column].rstrip() == prefix and line[column : column + 1] in (" ", "\t"):
            records.add(index)  # the frame's source line, or a `^^^^` line under it
            continue
        if line.startswith(prefix) and _EXCEPTION.match(line[len(prefix) :].lstrip()):
            records.add(index)
        lead = None
    return records


def is_record(lines: Sequence[str]) -> bool:
    """Whether the last of `lines` belongs to a traceback, given up to `LOOKBACK` lines
    before it (the caller's window of a file it reads a piece at a time)."""
    window = lines[-LOOKBACK - 1 :]
    return len(window) - 1 in traceback_lines(window)
