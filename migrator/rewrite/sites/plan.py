"""The plan of `--drop-compat` in one module: what phase 1 decides (`drop.py`) and phase 3
carries out (`collapse.py`). Immutable, like everything phase 1 hands on."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from migrator.rewrite.sites.versions import Floor


@dataclass(frozen=True)
class Cut:
    """Replace `text[start:end]` with `new`, after the indentation `indent_line` will have
    (None: no indentation)."""

    start: int
    end: int
    new: str = ""
    indent_line: int | None = None


@dataclass(frozen=True)
class DropPlan:
    """The edits of `--drop-compat` in one module: `cuts`, and the columns of indentation
    each kept line loses (`dedent`, by line number). The spans of the cuts are protected:
    no rewriter edits or reports what they remove."""

    floor: Floor
    cuts: tuple[Cut, ...]
    dedent: Mapping[int, int]

    @property
    def removed(self) -> tuple[tuple[int, int], ...]:
        return tuple((cut.start, cut.end) for cut in self.cuts)
