"""What the version-guard rewriters share with the edit buffer: the version floor a run
migrates to, and the plan of `--drop-compat` (cuts and dedents), carried out last."""

from __future__ import annotations

from dataclasses import dataclass, field

from rules import version_key


@dataclass(frozen=True)
class Floor:
    """The versions code may still run on: `version` and later (`inclusive`), or only the
    versions after it."""

    version: str
    inclusive: bool

    def excludes(self, version: str) -> bool:
        """Whether `version` itself can no longer run."""
        key, floor = version_key(version), version_key(self.version)
        return key < floor or (key == floor and not self.inclusive)

    def at_or_above(self, version: str) -> bool:
        """Whether every version that can still run is `version` or later."""
        return version_key(version) <= version_key(self.version)


@dataclass
class Cut:
    """Replace `text[start:end]` with `new`, after the indentation `indent_line` will have
    (None: no indentation)."""

    start: int
    end: int
    new: str = ""
    indent_line: int | None = None


@dataclass
class DropPlan:
    """The edits of `--drop-compat` in one module: `cuts`, and the columns of indentation
    each kept line loses (`dedent`, by line number)."""

    floor: Floor
    cuts: list[Cut] = field(default_factory=list)
    dedent: dict[int, int] = field(default_factory=dict)
