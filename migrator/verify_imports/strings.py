"""Module paths written as strings: `mock.patch("pkg.mod.name")`, `resolve_obj_by_qualname(...)`,
`importlib.import_module("pkg.mod")`. Read from the AST; f-string pieces are never paths."""

from __future__ import annotations

import ast
import re

_DOTTED = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+")


def dotted_strings(source: bytes, tops: frozenset[str]) -> list[tuple[str, int, int]]:
    """(text, line, 1-based column) of every string literal in `source` that is a dotted
    path starting with one of `tops` (`vllm.utils.cdiv`); [] when the file does not parse."""
    if not any(top.encode() + b"." in source for top in tops):
        return []  # the cheap textual test: most files name no such path
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []  # the import check reports the syntax error
    in_fstrings = {id(part) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr)
                   for part in node.values}
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
            continue
        if id(node) in in_fstrings or not _DOTTED.fullmatch(node.value):
            continue
        if node.value.partition(".")[0] in tops:
            found.append((node.value, node.lineno, node.col_offset + 1))
    return sorted(found, key=lambda f: (f[1], f[2]))
