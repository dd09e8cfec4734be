"""What the matchers report: one candidate rule of the inferred step, with its evidence."""

from __future__ import annotations

from dataclasses import dataclass

# More equally good targets than this is no evidence at all: reported as a removal.
MAX_CANDIDATES = 3


@dataclass(frozen=True)
class Candidate:
    """A module move, symbol move or removal (`kind`), with a one-line `evidence`.

    `blocked` says why the entry is emitted commented out (an ambiguous target, or a name
    re-exported from a third-party package); `candidates` lists the possible targets then.
    """

    kind: str
    old: str
    new: str = ""
    evidence: str = ""
    submodules: tuple[str, ...] = ()
    intermediate: bool = False
    hint: str = ""
    blocked: str = ""
    candidates: tuple[str, ...] = ()

    @property
    def active(self) -> bool:
        return not self.blocked


def listing(names: list[str] | tuple[str, ...], limit: int = 4) -> str:
    """`a, b, c, d (+3 more)`: a bounded list of names for a one-line comment."""
    shown = ", ".join(names[:limit])
    return shown + (f" (+{len(names) - limit} more)" if len(names) > limit else "")
