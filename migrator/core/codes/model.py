"""One diagnostic code and its rule doc, as `vam rule CODE` prints it."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass

ERROR = "error"
WARNING = "warning"
INFO = "info"

WIDTH = 80  # help tables and rule docs stay readable in an 80-column terminal


@dataclass(frozen=True)
class Code:
    """One stable code and its doc.

    `level` is ERROR, WARNING or INFO; `title` is one line (it fits the `--help` tables).
    `means`, `why` and `fix` are prose, one paragraph each, wrapped to `WIDTH` when printed.
    `bad`/`good` are source text printed as written (lines joined by "\\n"; "" when no
    example fits).
    """

    code: str
    level: str
    title: str
    means: str
    why: str
    fix: str
    bad: str = ""
    good: str = ""

    def doc(self) -> str:
        """The rule doc `vam rule` prints: title line, then what/why/example/fix sections."""
        out = [f"{self.code} ({self.level}): {self.title}"]
        out += _section("What it means", self.means)
        out += _section("Why it matters", self.why)
        if self.bad:
            out += ["", "Example", "  bad:", textwrap.indent(self.bad, "    ")]
            if self.good:
                out += ["  good:", textwrap.indent(self.good, "    ")]
        out += _section("Fix", self.fix)
        return "\n".join(out)


def _section(heading: str, prose: str) -> list[str]:
    return ["", heading, textwrap.fill(prose, WIDTH, initial_indent="  ", subsequent_indent="  ")]
