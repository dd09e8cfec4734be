"""What a run reports: one `Finding` per reference, failure or hazard, with a stable code."""

from __future__ import annotations

from dataclasses import dataclass

from migrator.core import codes
from migrator.core.edits import TextEdit
from migrator.core.render import Located
from migrator.core.resolver import Resolution

# Stable codes, ruff-style. VAM0xx: references; VAM9xx: files that could not be processed.
MOVED = "VAM001"
NEEDS_HUMAN = "VAM002"
REMOVED = "VAM003"
COMPAT_PAIR = "VAM004"  # info: a try/except or if/else pair of old and new path, kept
PINNED = "VAM005"  # info: a link pinned to a tag or commit, or a diff's removed line, kept
GUARDED_BRANCH = "VAM006"  # info: the old branch of a version guard, kept
COMPAT_DROPPED = "VAM007"  # info: --drop-compat collapsed a block to its newer branch
OLD_FIRST = "VAM008"  # warning: try imports the old path, except ImportError the new one
BEFORE_BASELINE = "VAM009"  # info: a name only steps up to the pack's default-from know
HELD_BY_PIN = "VAM010"  # info: a rewrite past the release a text file pins, not made
PIN_LEFT_BEHIND = "VAM012"  # info: a file rewritten past the release it pins (its baseline)
KEPT_LANE = "VAM013"  # info: --keep-compat keeps a text file's old path (a text cannot branch)
RECORD = "VAM011"  # info: a reference in a traceback (a record of what ran), kept
RECORD_WHERE = "in a traceback, a record of what ran"
PATCH_TARGET = "VAM014"  # info: a patch target rewritten to where a moved symbol is defined
SYNTAX_ERROR = "VAM901"
UNREADABLE = "VAM902"
UNWRITABLE = "VAM903"
NOT_REGULAR = "VAM904"  # a FIFO, socket or device named on the command line: never read
INTERNAL_ERROR = "VAM999"

# {code: title}; titles and docs live in migrator/core/codes/vam.py.
CODE_TITLES = codes.titles("VAM")


@dataclass(frozen=True)
class Finding(Located):
    """One thing to report at `path:line:col` (fields `path, line, col, code` from `Located`),
    with its `kind` of reference; `step` names the release of the table that knows it, and
    `pack` that table (set by the run, `migrator.rewrite.lanes`)."""

    kind: str
    message: str
    old: str = ""
    new: str = ""
    step: str = ""
    pack: str = ""

    @property
    def fixable(self) -> bool:
        return self.code == MOVED


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


def patch_target(resolution: Resolution, line: int = 0, col: int = 0) -> Finding:
    """Info: a patch target a symbol row rewrites to where the name is defined (VAM014)."""
    message = (
        f"patch target '{resolution.name}' becomes '{resolution.new}', where the name is "
        f"defined: a patch there misses modules that imported it by name; patch the module "
        f"under test"
    )
    return Finding("", line, col, PATCH_TARGET, "string", message, resolution.name,
                   resolution.new, steps_of(resolution))


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


def kept(edit: TextEdit, code: str, where: str, kind: str = "text", line: int = 0, col: int = 0
         ) -> Finding:
    """An info finding for a reference left as it is `where` (in a pinned link, on a removed
    line of a diff, in a traceback): `code` says which."""
    new = edit.new if edit.fixable else "(removed)"
    message = f"'{edit.old}' kept {where} (today: '{new}')"
    return Finding("", line, col, code, kind, message, edit.old, edit.new)
