"""Module paths written as strings: `mock.patch("pkg.mod.name")`, `resolve_obj_by_qualname(...)`,
`importlib.import_module("pkg.mod")`. Read from the AST; f-string pieces are never paths."""

from __future__ import annotations

import ast
import functools
import re

_DOTTED = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+")


def dotted_strings(source: bytes, tops: frozenset[str]) -> list[tuple[str, int, int]]:
    """(text, line, 1-based column) of every string literal in `source` that is a dotted
    path starting with one of `tops` (`vllm.utils.cdiv`); [] when the file does not parse."""
    if not tops or not _quoted(tops).search(source):
        return []  # the cheap textual test: most files quote no such path (imports are not)
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []  # the import check reports the syntax error
    in_fstrings: set[int] = set()
    constants: list[tuple[ast.Constant, str]] = []
    for node in ast.walk(tree):  # one walk: most of the cost is visiting the nodes
        if isinstance(node, ast.JoinedStr):
            in_fstrings.update(id(part) for part in node.values)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            constants.append((node, node.value))
    found = []
    for node, text in constants:
        if id(node) in in_fstrings or not _DOTTED.fullmatch(text):
            continue
        if text.partition(".")[0] in tops:
            found.append((text, node.lineno, node.col_offset + 1))
    return sorted(found, key=lambda f: (f[1], f[2]))


@functools.lru_cache(maxsize=16)
def _quoted(tops: frozenset[str]) -> re.Pattern[bytes]:
    """A quote right before `top.`: every literal that is a whole dotted path has one (a
    prefixed, raw or triple-quoted one too); a path split across implicitly joined literals
    before its first dot is not looked for."""
    names = b"|".join(re.escape(top.encode()) for top in sorted(tops))
    return re.compile(rb"['\"](?:" + names + rb")\.")
