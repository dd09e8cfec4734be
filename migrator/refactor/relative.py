"""Relative imports of a file whose package changes: spelled out before the move, and spelled
relative again, from the new package, after it.

`vam migrate` keeps a relative import's anchor (the file's package), which is right for every
file that stays. A file that moves takes its anchor along, so its relative imports are first
made absolute (resolved from the OLD package), mapped through the table like any absolute
import, and then made relative to the NEW package with as few dots as possible. Only the
module between `from` and `import` is replaced; names, parentheses, comments and line breaks
are left as written.
"""

from __future__ import annotations

import ast
import io
import tokenize
from collections.abc import Iterator
from dataclasses import dataclass


@dataclass(frozen=True)
class Origin:
    """One relative import made absolute: its absolute module and the names it imports."""

    module: str
    names: tuple[str, ...]


@dataclass(frozen=True)
class _Span:
    start: tuple[int, int]  # (line, column) of the first token after `from`
    end: tuple[int, int]  # end of the last token before `import`
    dots: int
    module: str


def absolutize(text: str, package: str) -> tuple[str, list[Origin]]:
    """`text` with each relative `from` import (anywhere in the file) spelled absolute as seen
    from `package`, and what each became, in source order.

    An import with more dots than `package` has components stays as it is (it was broken
    before the move too).

    Raises:
        SyntaxError: `text` is not valid Python.
    """
    nodes = sorted(
        (n for n in ast.walk(ast.parse(text)) if isinstance(n, ast.ImportFrom) and n.level),
        key=lambda n: (n.lineno, n.col_offset),
    )
    spans = [s for s in _from_spans(text) if s.dots]
    parts = package.split(".") if package else []
    edits: list[tuple[_Span, str]] = []
    origins: list[Origin] = []
    for node, span in zip(nodes, spans, strict=False):
        if span.dots - 1 > len(parts) or (span.dots - 1 == len(parts) and not span.module):
            continue
        base = parts[: len(parts) - (span.dots - 1)]
        module = ".".join([*base, *([span.module] if span.module else [])])
        if not module:
            continue
        edits.append((span, module))
        origins.append(Origin(module, tuple(alias.name for alias in node.names)))
    return _apply(text, edits), origins


def relativize(text: str, package: str, modules: set[str]) -> str:
    """`text` with each absolute `from M import ...` whose `M` is in `modules` spelled
    relative to `package` (minimal dots). `M` outside `package`'s top-level package stays
    absolute."""
    parts = package.split(".") if package else []
    edits: list[tuple[_Span, str]] = []
    for span in _from_spans(text):
        if span.dots or span.module not in modules:
            continue
        relative = relative_name(parts, span.module.split("."))
        if relative:
            edits.append((span, relative))
    return _apply(text, edits)


def relative_name(package: list[str], target: list[str]) -> str:
    """How `target` is spelled relative to `package` ("" when they share no top level)."""
    common = 0
    while common < min(len(package), len(target)) and package[common] == target[common]:
        common += 1
    if not common:
        return ""
    return "." * (len(package) - common + 1) + ".".join(target[common:])


def _from_spans(text: str) -> Iterator[_Span]:
    """The module part of every `from ... import` statement, in source order."""
    try:
        tokens = [
            t
            for t in tokenize.generate_tokens(io.StringIO(text).readline)
            if t.type not in (tokenize.NL, tokenize.COMMENT)
        ]
    except (tokenize.TokenError, SyntaxError):
        return
    for index, token in enumerate(tokens):
        if token.type != tokenize.NAME or token.string != "from":
            continue
        dots, cursor = 0, index + 1
        names: list[str] = []
        while cursor < len(tokens):
            t = tokens[cursor]
            if t.type == tokenize.OP and t.string in (".", "..."):
                if not names:  # leading dots: the level; later ones separate components
                    dots += len(t.string)
            elif t.type == tokenize.NAME and t.string != "import":
                names.append(t.string)
            else:
                break
            cursor += 1
        last = tokens[cursor - 1]
        after = tokens[cursor] if cursor < len(tokens) else None
        if cursor == index + 1 or after is None or after.string != "import":
            continue  # `yield from x`, `raise E from exc`: no import
        yield _Span(tokens[index + 1].start, last.end, dots, ".".join(names))


def _apply(text: str, edits: list[tuple[_Span, str]]) -> str:
    if not edits:
        return text
    lines = text.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))

    def offset(position: tuple[int, int]) -> int:
        return starts[position[0] - 1] + position[1]

    out = text
    for span, new in sorted(edits, key=lambda e: e[0].start, reverse=True):
        out = out[: offset(span.start)] + new + out[offset(span.end) :]
    return out
