"""Comments: an import statement written in one (`# from m import x`) follows the import
rules; any other comment is text.

This module does not re-plan import statements itself: the caller passes the function that
does (`migrator.rewrite.transformer.rewrite_import_line`), so the transformer can rewrite the
comments inside the statements it rewrites without an import cycle.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from migrator.core import findings as F
from migrator.rewrite import text as T
from migrator.rewrite.import_plan import ImportContext
from migrator.rewrite.records import traceback_lines

# (lead, statement, context, finding kind) -> (new lines or None, findings), or None when
# the statement is not a single import statement.
ImportLineRewriter = Callable[
    [str, str, ImportContext, str], tuple[list[str] | None, list[F.Finding]] | None
]

_COMMENTED_IMPORT = re.compile(r"(#\s*)((?:from|import)\s.*)$", re.S)


def rewrite_comment(
    value: str, ctx: ImportContext, import_line: ImportLineRewriter
) -> tuple[list[str] | None, list[F.Finding]]:
    """New text of a comment (one entry per resulting line, None when nothing changes).

    Commented-out code counts as code: an import statement is re-planned by `import_line`;
    any other comment goes through the text rewriter. Findings carry no positions.
    """
    match = _COMMENTED_IMPORT.match(value)
    if match:
        result = import_line(match.group(1), match.group(2), ctx, "comment")
        if result is not None:
            return result
    new, edits = T.rewrite(value, ctx.resolver)
    if edits and traceback_lines([value]):  # a frame pasted in a comment: a record
        return None, [F.kept(edit, F.RECORD, F.RECORD_WHERE, "comment") for edit in edits]
    findings = [F.text_finding(edit, "comment") for edit in edits]
    return (None if new == value else [new]), findings
