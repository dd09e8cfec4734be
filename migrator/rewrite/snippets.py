"""Python snippets that are not quite Python: IPython magics (`%load_ext`, `%%time`), shell
escapes (`!pip install`) and shell prompts (`$ pip install`) next to the code, as notebook
cells and documentation fences hold them.

Those lines are masked (each replaced by a comment line, so line numbers hold), the rest
follows the Python rules, and the masked lines come back as they were, through the text
rules (a `!python -c "from m import x"` still follows the import rules there).
"""

from __future__ import annotations

import re
from dataclasses import replace

from migrator.core import findings as F
from migrator.rewrite.documents import Rewrite

_SHELL_LINE = re.compile(r"(?m)^(?P<indent>[ \t]*)(?:%|!|\$[ \t]).*$")
_MASK = "# vam-masked-line-{}"
_MASKED = re.compile(r"(?m)^[ \t]*# vam-masked-line-(\d+)$")


def rewrite_snippet(source: str, python: Rewrite, plain: Rewrite) -> tuple[str, list[F.Finding]]:
    """`source` through `python`; when it does not parse, with its magics and shell lines
    masked, and those lines through `plain`.

    Raises:
        SyntaxError: not Python even with those lines masked (the caller treats it as text).
    """
    try:
        return python(source)
    except SyntaxError:
        if not _SHELL_LINE.search(source):
            raise
    originals: list[tuple[int, str]] = []  # (lines before it, the line)

    def mask(match: re.Match[str]) -> str:
        originals.append((source.count("\n", 0, match.start()), match.group()))
        return match.group("indent") + _MASK.format(len(originals) - 1)

    new, findings = python(_SHELL_LINE.sub(mask, source))  # SyntaxError: still not Python
    restored: list[str] = []
    for before, line in originals:
        new_line, line_findings = plain(line)
        restored.append(new_line)
        findings += [replace(f, line=f.line + before) for f in line_findings]
    findings.sort(key=lambda f: (f.line, f.col))
    return _MASKED.sub(lambda m: restored[int(m.group(1))], new), findings
