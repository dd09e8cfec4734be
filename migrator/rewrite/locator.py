"""Where the references of a Python module are: CPython's `ast`, on the lines that matter.

`SourceMap` converts between ast positions (1-based lines, UTF-8 byte columns) and offsets in
the decoded text. `Locator` walks only the parts of a tree that cover a line spelling a moved
name and collects the sites an edit may touch: import statements, attribute chains headed by a
table package (or a local alias of one), string literals, f-strings and calls.
"""

from __future__ import annotations

import ast
from bisect import bisect_left
from dataclasses import dataclass, field

from migrator.core.edits import NEWLINE, LineIndex
from migrator.rewrite.import_plan import absolute_module

_DOCSTRING_OWNERS = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)


class SourceMap(LineIndex):
    """Offsets of a text by (line, column): ast reports UTF-8 byte columns, we edit str."""

    def __init__(self, text: str):
        super().__init__(text)
        self.text = text
        # line number -> where its non-ASCII characters start (UTF-8 byte columns), and the
        # bytes they add beyond one each, running total: made once per line asked for.
        self._wide: dict[int, tuple[list[int], list[int]]] = {}

    def line(self, number: int) -> str:
        end = self.starts[number] if number < len(self.starts) else len(self.text)
        return self.text[self.starts[number - 1] : end]

    def offset(self, lineno: int, col_bytes: int) -> int:
        """The text offset of a UTF-8 byte column: a lookup, never a copy of the line (a
        long line with thousands of sites would be copied once per site)."""
        start = self.starts[lineno - 1]
        if self.text.isascii():
            return start + col_bytes
        wide = self._wide.get(lineno)
        if wide is None:
            wide = self._wide[lineno] = _wide_chars(self.line(lineno))
        columns, extra = wide
        before = bisect_left(columns, col_bytes)  # wide characters that start before it
        return start + col_bytes - (extra[before - 1] if before else 0)

    def span(self, node: ast.expr | ast.stmt) -> tuple[int, int]:
        end_line, end_col = node.end_lineno or node.lineno, node.end_col_offset or 0
        return self.offset(node.lineno, node.col_offset), self.offset(end_line, end_col)

    def line_end(self, offset: int) -> int:
        """Offset of the newline that ends the line holding `offset` (or end of text)."""
        match = NEWLINE.search(self.text, offset)
        return match.start() if match else len(self.text)

    def indentation(self, offset: int) -> str | None:
        """Leading whitespace of the line holding `offset`, or None if code precedes it."""
        number, column = self.position(offset)
        before = self.line(number)[: column - 1]
        return before if not before.strip() else None


@dataclass
class Sites:
    """What the locator found on the lines worth looking at."""

    imports: list[ast.stmt] = field(default_factory=list)
    chains: list[tuple[ast.Attribute, str]] = field(default_factory=list)
    strings: list[ast.Constant] = field(default_factory=list)
    fstrings: list[ast.JoinedStr] = field(default_factory=list)
    calls: list[ast.Call] = field(default_factory=list)
    # The operands, left to right, of each `a + b + c` with a string among them.
    concatenations: list[list[ast.expr]] = field(default_factory=list)
    # try/if statements and conditional expressions: where compatibility pairs live.
    branches: list[ast.Try | ast.If | ast.IfExp] = field(default_factory=list)
    docstrings: set[int] = field(default_factory=set)


class Locator:
    """Walks only the parts of the tree that cover a trigger line."""

    def __init__(self, lines: set[int], packages: tuple[str, ...], aliases: dict[str, str]):
        self.lines = lines
        self.first, self.last = min(lines), max(lines)
        self.heads = set(packages) | set(aliases)
        self.sites = Sites()

    def _covers(self, node: ast.AST) -> bool:
        start = getattr(node, "lineno", None)
        if start is None:
            return True
        decorators = getattr(node, "decorator_list", None)
        if decorators:
            start = min(start, *(d.lineno for d in decorators))
        end = node.end_lineno or start  # type: ignore[attr-defined]
        if end < self.first or start > self.last:
            return False
        return any(line in self.lines for line in range(start, end + 1))

    def visit(self, node: ast.AST) -> None:
        if isinstance(node, _DOCSTRING_OWNERS):
            body = node.body
            if (
                body
                and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)
            ):
                self.sites.docstrings.add(id(body[0].value))
        for child in ast.iter_child_nodes(node):
            if self._covers(child) and self._take(child):
                self.visit(child)

    def _take(self, node: ast.AST) -> bool:
        """Record `node` if it is a site; True to look inside it."""
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            self.sites.imports.append(node)
            return False
        if isinstance(node, ast.Attribute):
            name = dotted_name(node)
            if name is None:
                return True
            if name.partition(".")[0] in self.heads:
                self.sites.chains.append((node, name))
            return False
        if isinstance(node, ast.Constant):
            if isinstance(node.value, (str, bytes)):
                self.sites.strings.append(node)
            return False
        if isinstance(node, ast.JoinedStr):
            self.sites.fstrings.append(node)
            return False
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            operands = _added(node)
            if any(isinstance(o, ast.Constant) and isinstance(o.value, str) for o in operands):
                self.sites.concatenations.append(operands)
            for operand in operands:  # not the nested `+` nodes: each sum is recorded once
                if self._covers(operand) and self._take(operand):
                    self.visit(operand)
            return False
        if isinstance(node, (ast.Try, ast.If, ast.IfExp)):
            self.sites.branches.append(node)
        elif isinstance(node, ast.Call):
            self.sites.calls.append(node)
        return True


def _wide_chars(line: str) -> tuple[list[int], list[int]]:
    """(byte column of each non-ASCII character of `line`, the extra bytes up to and
    including it)."""
    columns: list[int] = []
    extra: list[int] = []
    added = 0
    for index, char in enumerate(line):
        if char > "\x7f":
            columns.append(index + added)
            added += len(char.encode("utf-8", "surrogatepass")) - 1
            extra.append(added)
    return columns, extra


def _added(node: ast.BinOp) -> list[ast.expr]:
    """The operands of a chain of `+` (`a + b + c` parses as `(a + b) + c`), left to right."""
    left = node.left
    head = _added(left) if isinstance(left, ast.BinOp) and isinstance(left.op, ast.Add) else [left]
    return [*head, node.right]


def dotted_name(node: ast.expr) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def top_level_aliases(tree: ast.Module, package: str | None) -> dict[str, str]:
    """Local names bound by module-level imports to a dotted path (`import a.b as m`).

    `package` anchors relative imports; without it they bind nothing known.
    """
    aliases: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.Import):
            aliases.update({a.asname: a.name for a in node.names if a.asname})
        elif isinstance(node, ast.ImportFrom):
            base = absolute_module(package, node.level, node.module)
            if base is None:
                continue  # relative to a package that is unknown
            for alias in node.names:
                if alias.name != "*":
                    aliases[alias.asname or alias.name] = f"{base}.{alias.name}"
    return aliases
