"""What a run reports: one `Finding` per reference, failure or hazard, with a stable code."""

from __future__ import annotations

from dataclasses import dataclass

from migrator.resolver import Resolution
from migrator.text import TextEdit

# Stable codes, ruff-style. VAM0xx: references; VAM9xx: files that could not be processed.
MOVED = "VAM001"
NEEDS_HUMAN = "VAM002"
REMOVED = "VAM003"
SYNTAX_ERROR = "VAM901"
UNREADABLE = "VAM902"
UNWRITABLE = "VAM903"
INTERNAL_ERROR = "VAM999"

CODE_TITLES = {
    MOVED: "reference to a moved name",
    NEEDS_HUMAN: "reference that cannot be rewritten safely",
    REMOVED: "reference to a removed name",
    SYNTAX_ERROR: "Python file that does not parse",
    UNREADABLE: "file that cannot be read or decoded",
    UNWRITABLE: "file that cannot be written",
    INTERNAL_ERROR: "file vam failed on (a bug: please report it)",
}


@dataclass(frozen=True)
class Finding:
    """One thing to report at `path:line:col`. `line`/`col` are 1-based (0 when unknown)."""

    path: str
    line: int
    col: int
    code: str
    kind: str
    message: str
    old: str = ""
    new: str = ""
    step: str = ""

    @property
    def fixable(self) -> bool:
        return self.code == MOVED

    def with_path(self, path: str) -> Finding:
        return Finding(
            path,
            self.line,
            self.col,
            self.code,
            self.kind,
            self.message,
            self.old,
            self.new,
            self.step,
        )


def steps_of(resolution: Resolution) -> str:
    return ", ".join(dict.fromkeys(hit.step for hit in resolution.hits))


def moved(
    kind: str,
    resolution: Resolution,
    line: int = 0,
    col: int = 0,
    old: str | None = None,
    new: str | None = None,
) -> Finding:
    """A fixable reference; `old`/`new` default to the whole resolved name."""
    old = old if old is not None else resolution.name
    new = new if new is not None else resolution.new
    step = steps_of(resolution)
    return Finding("", line, col, MOVED, kind, f"'{old}' moved to '{new}' ({step})", old, new, step)


def removed(kind: str, resolution: Resolution, line: int = 0, col: int = 0) -> Finding:
    rule = resolution.removed
    assert rule is not None
    message = (
        f"'{resolution.name}' was removed in {resolution.removed_step}, no replacement: {rule.hint}"
    )
    return Finding(
        "", line, col, REMOVED, kind, message, resolution.name, "", resolution.removed_step
    )


def needs_human(kind: str, message: str, line: int = 0, col: int = 0, old: str = "") -> Finding:
    return Finding("", line, col, NEEDS_HUMAN, kind, message, old)


def failure(code: str, message: str, line: int = 0, col: int = 0) -> Finding:
    return Finding("", line, col, code, "file", message)


def text_finding(edit: TextEdit, kind: str, line: int = 0, col: int = 0) -> Finding:
    """The finding for a reference the text rewriter found (`path` kind for file paths)."""
    kind = "path" if edit.form == "path" else kind
    if edit.resolution.removed is not None and not edit.fixable:
        return removed(kind, edit.resolution, line, col)
    return moved(kind, edit.resolution, line, col, edit.old, edit.new)
