"""Where a new statement goes in a module: the one answer the writers of new lines share
(`vam refactor`'s shim install and the imports of moved definitions, the migrate engine's
imports for rewritten attribute chains).

Three anchors, each with its rule:

- `PROLOGUE`: below the module docstring and the `from __future__` imports that open the
  module, before any other statement. Code that must run before the module's own imports
  (the shim install: those imports may use old paths) goes there.
- `IMPORTS`: below the docstring and the last top-level import, wherever it stands (an
  import after a definition counts). New imports of a module go there, where its imports
  are read.
- the span of one statement: on a line of its own after that statement, at its indentation,
  so the new line is exactly as conditional as the statement. A statement that shares its
  line with other code (`try: import m`, `import m; x = 1`, a backslash continuation)
  leaves no such place.

With `PROLOGUE` or `IMPORTS`, a module where nothing counts gets the new text below its
leading comment lines (a licence header, a shebang, an encoding cookie).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, overload

from migrator.core.edits import NEWLINE

PROLOGUE: Literal["prologue"] = "prologue"
IMPORTS: Literal["imports"] = "imports"
# PROLOGUE, IMPORTS, or the (start, end) offsets of a statement in the text.
Anchor = Literal["prologue", "imports"] | tuple[int, int]

_REST_IS_COMMENT = re.compile(r"[ \t\f]*(#[^\r\n]*)?")


@dataclass(frozen=True)
class Insertion:
    """Where new text goes in a module.

    `line`: how many lines of the module stay above it, as `str.splitlines` counts them for
    `PROLOGUE` and `IMPORTS` (the index of the line it goes before) and as ast counts them
    for a statement. `offset`: where it goes in the text - the start of that line for
    `PROLOGUE` and `IMPORTS` (the new text ends with its own line break), the end of the
    statement's last line, before its line break, for a statement (the new text starts with
    a line break: the last line may have none). `indent`: the indentation the new lines take.
    """

    line: int
    offset: int
    indent: str


@overload
def insertion(
    text: str, after: Literal["prologue", "imports"], body: Sequence[ast.stmt] = ()
) -> Insertion: ...


@overload
def insertion(
    text: str, after: tuple[int, int], body: Sequence[ast.stmt] = ()
) -> Insertion | None: ...


def insertion(text: str, after: Anchor, body: Sequence[ast.stmt] = ()) -> Insertion | None:
    """Where a new statement goes in the module `text` (see the module docstring).

    `body` is the module's top-level statements (`ast.parse(text).body`), read for
    `PROLOGUE` and `IMPORTS`. Returns None only for a statement that shares its line with
    other code.
    """
    if isinstance(after, tuple):
        return _after_statement(text, *after)
    lines = text.splitlines(keepends=True)
    line = _head_end(body, through_imports=after == IMPORTS)
    if not line:
        while line < len(lines) and lines[line].lstrip().startswith("#"):
            line += 1
    return Insertion(line, sum(len(x) for x in lines[:line]), "")


def comment_only_after(text: str, end: int) -> int | None:
    """The end of the line holding `end` (before its line break) when nothing but blanks
    and a comment follow `end` there; else None."""
    rest = _REST_IS_COMMENT.match(text, end)
    newline = NEWLINE.search(text, end)
    line_end = newline.start() if newline else len(text)
    return line_end if rest is not None and rest.end() == line_end else None


def _head_end(body: Sequence[ast.stmt], through_imports: bool) -> int:
    """The last line of the statements a new block goes below (0: none).

    The docstring counts as the first statement only. Without `through_imports`, the head
    is the run of docstring and `from __future__` imports that opens the module; with it,
    every top-level import counts, wherever it stands.
    """
    end = 0
    for index, node in enumerate(body):
        docstring = index == 0 and isinstance(node, ast.Expr) and isinstance(
            node.value, ast.Constant
        )
        if through_imports:
            counts = docstring or isinstance(node, ast.Import | ast.ImportFrom)
        else:
            counts = docstring or (isinstance(node, ast.ImportFrom) and node.module == "__future__")
        if counts:
            end = node.end_lineno or node.lineno
        elif not through_imports:
            break
    return end


def _after_statement(text: str, start: int, end: int) -> Insertion | None:
    line_start = max(text.rfind("\n", 0, start), text.rfind("\r", 0, start)) + 1
    indent = text[line_start:start]
    line_end = comment_only_after(text, end)
    if indent.strip() or line_end is None:
        return None
    return Insertion(len(NEWLINE.findall(text, 0, line_end)) + 1, line_end, indent)
