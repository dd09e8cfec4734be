"""The text rewrite of a file, or of the part of a document that is not Python: references
(see `migrator.rewrite.text`), import statements written on a line of text, and history kept.

- An import statement on a line (`python -c "from m import x"` in a shell script or a
  Dockerfile `RUN` line, a doctest `>>> from m import x`, Python that does not parse) is
  re-planned by the import rules, so a moved symbol follows its module.
- History is kept and reported at info level (VAM005): links pinned to a tag, release branch
  or commit, and the removed (`-`) lines of a diff (a .patch/.diff file, a ```diff fence, a
  hunk pasted anywhere).
- Records of what ran are kept and reported at info level (VAM011): the lines of a Python
  traceback (`migrator.rewrite.records`).
- Lines with a `vam: ignore` pragma are left alone.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from migrator.core import findings as F
from migrator.core.edits import NEWLINE, LineIndex, TextEdit
from migrator.core.resolver import Resolver
from migrator.rewrite import text as T
from migrator.rewrite.import_plan import ImportContext, judge_import_line
from migrator.rewrite.records import traceback_lines

# One import statement on one line, after the start of the line, blanks, a prompt, a `;`
# or a quote; it ends before `;`, a quote, a backtick, `#` or the end of the line.
_IMPORT = re.compile(
    r"(?<![\w.])(?:from[ \t]+[\w.]+[ \t]+import[ \t]+(?:\([^()\r\n]*\)|[\w \t,]+?)"
    r"|import[ \t]+[\w.]+(?:[ \t]+as[ \t]+\w+)?(?:[ \t]*,[ \t]*[\w.]+(?:[ \t]+as[ \t]+\w+)?)*)"
    r"(?=[ \t]*(?:[;\"'`#\r\n]|$))",
    re.M,
)
# What may stand before a statement that fills the rest of its line: each new statement
# of a split then gets its own line with the same lead (`>>> `, `# `, indentation).
_LEAD = re.compile(r"[ \t]*(?:(?:>>>|\.\.\.|#+)[ \t]*)?")
_DIFF_FENCE = re.compile(
    r"(?m)^[ \t]*(`{3,}|~{3,})[ \t]*(?:diff|patch|udiff)\b[^\r\n]*(?:\r\n|\r|\n)"
)
_HUNK = re.compile(r"@@ -\d+(?:,\d+)? \+\d+(?:,\d+)? @@")
_IN_HUNK = ("+", " ", "\\", "")  # how the lines of a hunk start


def rewrite_text(
    text: str,
    resolver: Resolver,
    *,
    diff: bool = False,
    report_only: bool = False,
    history: set[int] | None = None,
    records: set[int] | None = None,
) -> tuple[str, list[F.Finding]]:
    """(new text, findings with 1-based positions in `text`). `diff`: the whole text is a
    unified diff (a .patch or .diff file). `report_only` (check mode): import statements are
    judged from the `ast`, without libcst, and the text comes back unchanged. `history` and
    `records`: the removed lines of diffs and the lines of tracebacks, when the caller knows
    them (`text` is one line of a file read a piece at a time)."""
    if not any(p in text for p in resolver.packages):
        return text, []
    index = LineIndex(text)
    ignored = T.ignored_lines(text)
    lines = NEWLINE.split(text)
    if history is None:
        history = history_lines(lines, diff)
    if records is None:
        records = {i + 1 for i in traceback_lines(lines)} if 'File "' in text else set()
    edits: list[tuple[int, int, str]] = []
    findings: list[F.Finding] = []
    skipped = ignored | history | records
    covered = _imports(text, resolver, index, skipped, edits, findings, report_only)
    for edit in T.find_references(text, resolver):
        line, col = index.position(edit.start)
        if line in ignored or any(s <= edit.start < e for s, e in covered):
            continue
        if line in history:
            findings.append(_kept(edit, line, col, "on a removed line of a diff"))
            continue
        if line in records:
            findings.append(_kept(edit, line, col, F.RECORD_WHERE, F.RECORD))
            continue
        findings.append(F.text_finding(edit, "text", line, col))
        if edit.fixable:
            edits.append((edit.start, edit.end, edit.new))
    for edit, ref in T.pinned_references(text, resolver):
        line, col = index.position(edit.start)
        if line not in ignored:
            findings.append(_kept(edit, line, col, f"in a link pinned to {ref}"))
    findings.sort(key=lambda f: (f.line, f.col))
    return _apply(text, edits), findings


def history_lines(lines: list[str], diff: bool) -> set[int]:
    """1-based numbers of the removed lines of diffs in `lines` (all of them a diff when
    `diff`): inside a hunk (after an `@@ -a,b +c,d @@` line) or a ```diff fence, and the
    `--- a/path` line naming the old file."""
    return DiffLines(diff).removed(lines, 1)


class DiffLines:
    """`history_lines` a run of lines at a time, in order (a streamed file's pieces)."""

    def __init__(self, diff: bool):
        self.diff = diff
        self.in_diff = diff
        self.fence = ""

    @property
    def idle(self) -> bool:
        """Outside any diff, in a text that is not one: only a line that opens a diff (a
        fence, a hunk header, `diff --git`, a `+++ ` after `--- `) changes that."""
        return not self.in_diff

    def removed(self, lines: list[str], first: int, after: str = "") -> set[int]:
        """Numbers of the removed lines among `lines`, the first numbered `first`; `after`
        is the line that follows the last (empty at the end of the text)."""
        removed: set[int] = set()
        for index, line in enumerate(lines):
            number = first + index
            following = lines[index + 1] if index + 1 < len(lines) else after
            if self._removed(line, following):
                removed.add(number)
        return removed

    def _removed(self, line: str, following: str) -> bool:
        opened = _DIFF_FENCE.match(line + "\n")
        if opened and not self.in_diff:
            self.in_diff, self.fence = True, opened.group(1)
            return False
        if self.fence and line.strip().startswith(self.fence):
            self.in_diff, self.fence = self.diff, ""
            return False
        if _HUNK.match(line) or line.startswith("diff --git "):
            self.in_diff = True
        elif self.in_diff and line.startswith("-"):
            return True
        elif line.startswith("--- ") and following.startswith("+++ "):
            return True
        elif self.in_diff and not self.fence and not self.diff and line[:1] not in _IN_HUNK:
            self.in_diff = False  # the pasted hunk ended
        return False


def _imports(
    text: str,
    resolver: Resolver,
    index: LineIndex,
    skipped: set[int],
    edits: list[tuple[int, int, str]],
    findings: list[F.Finding],
    report_only: bool,
) -> list[tuple[int, int]]:
    """Re-plan each import statement written on a line of `text`; returns their spans."""
    covered: list[tuple[int, int]] = []
    ctx = ImportContext(resolver, None, comments=False)
    for match in _statements(text, resolver):
        line, col = index.position(match.start())
        if line in skipped:
            continue
        statement = match.group().rstrip()
        result = (
            judge_import_line("", statement, ctx, "text")
            if report_only
            else _import_line(statement, ctx)
        )
        if result is None:
            continue
        new_lines, statement_findings = result
        covered.append((match.start(), match.end()))
        findings.extend(
            F.Finding("", line, col, f.code, f.kind, f.message, f.old, f.new, f.step)
            for f in statement_findings
        )
        if new_lines is not None:
            edits.append((match.start(), match.start() + len(match.group().rstrip()),
                          _joined(text, match, new_lines, index)))
    return covered


def _statements(text: str, resolver: Resolver) -> Iterator[re.Match[str]]:
    for match in _IMPORT.finditer(text):
        if any(p in match.group() for p in resolver.packages):
            yield match


def _import_line(
    statement: str, ctx: ImportContext
) -> tuple[list[str] | None, list[F.Finding]] | None:
    # libcst is loaded only once some text holds an import statement of a table package.
    from migrator.rewrite.transformer import rewrite_import_line

    return rewrite_import_line("", statement, ctx, "text")


def _joined(text: str, match: re.Match[str], new_lines: list[str], index: LineIndex) -> str:
    """The new statements in place of one: one line each, with the old line's lead, where
    the statement filled its line; else on one line, joined with `; ` (`python -c "..."`)."""
    line, _ = index.position(match.start())
    lead = text[index.starts[line - 1] : match.start()]
    rest = text[match.end() :].split("\n", 1)[0].strip()
    if len(new_lines) == 1 or rest or _LEAD.fullmatch(lead) is None:
        return "; ".join(new_lines)
    newline = NEWLINE.search(text)
    return (newline.group() if newline else "\n").join(
        [new_lines[0], *(lead + statement for statement in new_lines[1:])]
    )


def _kept(
    edit: TextEdit, line: int, col: int, where: str, code: str = F.PINNED
) -> F.Finding:
    return F.kept(edit, code, where, "text", line, col)


def _apply(text: str, edits: list[tuple[int, int, str]]) -> str:
    out: list[str] = []
    pos = 0
    for start, end, new in sorted(edits):
        if start < pos:
            continue  # overlaps an edit already made
        out += [text[pos:start], new]
        pos = end
    out.append(text[pos:])
    return "".join(out)
