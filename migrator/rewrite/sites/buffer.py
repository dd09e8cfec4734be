"""The edit buffer the site rewriters of one module share.

Edits are spans of the original text, applied once at the end, so bytes outside them never
change. Findings get their positions here, from offsets in the decoded text.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from migrator.core import findings as F
from migrator.core.edits import NEWLINE
from migrator.rewrite import text as T
from migrator.rewrite.locator import SourceMap

if TYPE_CHECKING:
    from migrator.rewrite.sites.plan import DropPlan


@dataclass
class Edit:
    """Replace `text[start:end]` (offsets in the decoded text) with `new`."""

    start: int
    end: int
    new: str


# (new module, old module) -> attribute-chain edits, with their findings, that need
# `import new.module` to work.
HeldChains = dict[tuple[str, str], list[tuple[Edit, F.Finding]]]


class EditBuffer:
    """The edits and findings of one rewrite, and the lines no site rewriter may touch.

    `import_lines` are the lines of import statements (their comments are the import
    rewriter's); `held` are chain edits that wait for `sites.imports.add_imports`; `kept`
    holds the ids of the ast nodes (statements, chains, literals) of compatibility pairs,
    which no rewriter touches. `frozen` are spans of the text no rewriter edits or reports
    on: the old branches of version guards, the code `--drop-compat` removes. `drops` is
    the plan of `--drop-compat`, carried out last.
    """

    def __init__(self, smap: SourceMap):
        self.smap = smap
        self.ignored = T.ignored_lines(smap.text)
        self.edits: list[Edit] = []
        self.findings: list[F.Finding] = []
        self.import_lines: set[int] = set()
        self.held: HeldChains = {}
        self.kept: set[int] = set()
        self.frozen: list[tuple[int, int]] = []
        self.drops: DropPlan | None = None
        nl = NEWLINE.search(smap.text)
        self.newline = nl.group() if nl else "\n"

    def skip(self, start: int, end: int) -> bool:
        """Whether `text[start:end]` touches a line the user told vam to ignore, or a frozen
        span."""
        if self.is_frozen(start, end):
            return True
        if not self.ignored:
            return False
        first = self.smap.position(start)[0]
        last = self.smap.position(max(start, end - 1))[0]
        return any(line in self.ignored for line in range(first, last + 1))

    def freeze(self, start: int, end: int) -> None:
        self.frozen.append((start, end))

    def is_frozen(self, start: int, end: int) -> bool:
        """Whether `text[start:end]` overlaps a frozen span (a point: lies inside one)."""
        end = max(end, start + 1)
        return any(a < end and start < b for a, b in self.frozen)

    def at(self, finding: F.Finding, offset: int) -> F.Finding:
        """`finding` positioned at `offset` of the text."""
        line, col = self.smap.position(offset)
        return replace(finding, path="", line=line, col=col)

    def report(self, finding: F.Finding, offset: int) -> None:
        self.findings.append(self.at(finding, offset))

    def edit(self, start: int, end: int, new: str) -> None:
        self.edits.append(Edit(start, end, new))

    def hold(
        self, modules: tuple[str, str], start: int, end: int, new: str, finding: F.Finding
    ) -> None:
        """Keep a chain edit until it is known whether `import <modules[0]>` can be added."""
        self.held.setdefault(modules, []).append((Edit(start, end, new), finding))

    def commit(self, chains: list[tuple[Edit, F.Finding]]) -> None:
        for edit, finding in chains:
            self.edits.append(edit)
            self.findings.append(finding)

    def apply(self) -> str:
        """The text with every edit made, in order of position."""
        text = self.smap.text
        out, pos = [], 0
        for edit in sorted(self.edits, key=lambda e: e.start):
            if edit.start < pos:
                continue  # overlapping sites cannot happen; never corrupt text if they do
            out.append(text[pos : edit.start])
            out.append(edit.new)
            pos = edit.end
        out.append(text[pos:])
        return "".join(out)
