"""The switches of one run, shared by the engine and the site rewriters."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Options:
    """Per-run switches.

    `comments` False leaves comments and docstrings alone. `line_length` None never wraps a
    rewritten import. `report_only` (check mode) wants findings, not new text: imports are
    judged from the ast without libcst, and files that do not parse are still scanned as text.
    """

    comments: bool = True
    line_length: int | None = None
    report_only: bool = False
