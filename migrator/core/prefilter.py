"""Which files may hold a reference, decided from their bytes before anything is decoded or
parsed; most files of a tree fail the first, cheapest test.

A reference to a moved or removed name `pkg.a.b.leaf` spells every component of it: dotted
(`pkg.a.b.leaf`), as an import (`from pkg.a.b import leaf`, `import pkg.a.b as m` then
`m.leaf`), as a file path (`pkg/a/b/leaf.py`) - except the components a relative import
takes from the file's own package, which only a file inside the package has (they are
folders of its path). So a file may refer to the name only if

1. it spells a table package (`vllm_ascend`) or lies inside one;
2. it spells a last component of some moved name as a word (`Resolver.trigger_pattern`);
3. for one such last component, some moved name that ends in it has every other component
   spelled in the file or among the folders of the file's path.

Test 3 is what keeps a table of many releases cheap: its last components include common
words (`metadata`, `state`, `backend`) that most files of the package spell without naming
anything that moved. Two forms spell no last component, and pass on their own (a star
import from a module that lost names, a name completed at run time); a file that may spell
a component in pieces (adjacent string literals, a backslash escape or line continuation
inside a literal) skips test 3, so such spellings are still found and reported.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

# A component spelled in pieces: a word character, a closing quote, then (across spaces,
# line continuations and comments) an opening quote with its prefix and a word character;
# an escape that can stand for a word character or a dot; a backslash line continuation
# right after a word character (inside a literal it joins the lines). Each alternative
# starts with a quote or a backslash (the lookbehinds come after it), so `re` skips to
# those characters instead of trying every position.
_IN_PIECES = re.compile(
    rb"""["'](?<=\w["'])(?:\s|\\\r?\n|\#[^\r\n]*)*[rRbBuUfF]{0,2}["']\w"""
    rb"""|\\(?:x[0-9a-fA-F]{2}|[0-7]{1,3}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|N\{|(?<=\w\\)\r?\n)"""
)
# Where the two references that spell no last component end (`Resolver.special_pattern`):
# a star import, and a format field right after a dot. The word before is checked apart.
_STAR_IMPORT = re.compile(rb"import[\s\\(]+\*")
_FORMAT_FIELD = re.compile(rb"\.[{%]")
_SPACE = frozenset(b" \t\n\r\f\v\\")
_WORD = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")


def word_alternation(words: Iterable[str]) -> str:
    """A regex (no anchors, no boundaries) that matches exactly the strings of `words`,
    written as a trie: `(?:back(?:end|up)|state)`. Python's `re` tries the branches of an
    alternation one by one at every position; sharing prefixes makes that one branch per
    first character, whatever the number of words."""
    trie: dict[str, dict] = {}
    for word in words:
        node = trie
        for char in word:
            node = node.setdefault(char, {})
        node[""] = {}
    return _emit(trie)


def _emit(node: dict[str, dict]) -> str:
    branches = [re.escape(char) + _emit(child) for char, child in sorted(node.items()) if char]
    if not branches:
        return ""
    body = branches[0] if len(branches) == 1 else f"(?:{'|'.join(branches)})"
    if "" in node:  # a word ends here, and longer ones go on
        return f"(?:{body})?" if len(branches) == 1 else f"{body}?"
    return body


class Prefilter:
    """Tests 2 and 3 of the module docstring for one table.

    `olds`: every moved or removed name of the active steps. `star_sources`: the modules
    that lost names (a star import from one needs a human).
    """

    def __init__(self, olds: Iterable[str], star_sources: Iterable[str]):
        # last component -> the other components of each name ending in it
        self._rest: dict[bytes, list[tuple[str, ...]]] = {}
        for old in set(olds):
            *rest, leaf = old.split(".")
            self._rest.setdefault(leaf.encode(), []).append(tuple(rest))
        words = word_alternation(leaf.decode() for leaf in self._rest)
        self._leaves = re.compile(rb"\b(?:" + words.encode() + rb")\b") if words else None
        self._stars = frozenset(m.rpartition(".")[2].encode() for m in star_sources)
        self._parents = frozenset(rest[-1].encode() for v in self._rest.values() for rest in v
                                  if rest)

    def may_refer(self, data: bytes, folders: frozenset[str] = frozenset()) -> bool:
        """Whether `data` (UTF-8 or ASCII-compatible bytes) passes tests 2 and 3; `folders`
        are the path components a relative import of the file can take (empty for a file
        outside every table package)."""
        seen: set[bytes] = set()
        for match in self._leaves.finditer(data) if self._leaves is not None else ():
            leaf = match.group()
            if leaf in seen:
                continue
            seen.add(leaf)
            for rest in self._rest[leaf]:
                if all(part in folders or part.encode() in data for part in rest):
                    return True
        if self._special(data):
            return True
        return bool(seen) and _IN_PIECES.search(data) is not None

    def _special(self, data: bytes) -> bool:
        """Whether `Resolver.special_pattern` matches `data`: a star import from a module
        that lost names, or a dot and a format field after a parent of a moved name."""
        for match in _STAR_IMPORT.finditer(data) if self._stars else ():
            start = match.start()
            gap = start
            while gap > 0 and data[gap - 1] in _SPACE:
                gap -= 1
            if gap < start and _word_before(data, gap) in self._stars:
                return True
        for match in _FORMAT_FIELD.finditer(data) if self._parents else ():
            if _word_before(data, match.start()) in self._parents:
                return True
        return False


def _word_before(data: bytes, end: int) -> bytes:
    """The run of word characters that ends at `end` (empty when none does)."""
    start = end
    while start > 0 and data[start - 1] in _WORD:
        start -= 1
    return data[start:end]
