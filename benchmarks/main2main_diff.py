"""What a main2main commit of vllm-ascend changed, read from the Python files on both sides:
the import moves of `vllm.*` names, the lanes dropped, and each changed line's category.

Categories of a changed (added or removed, non-blank, non-comment) line, first match wins:
- `imports`: a line of an import of a `vllm` module;
- `gates`: version-gate bookkeeping: a line naming a version helper (`vllm_version_is`, ...),
  a line whose text appears on the other side of the same file (re-indented into or out of
  a lane), or a bare `else:`/`try:`/`except ImportError:`/`pass`;
- `signatures`: a line of the `def` header of a method of a class with a base imported from
  `vllm`, a `super().` call, or a call of a name imported from `vllm` (any line of it when
  the call spans several);
- `other`: anything else (the logic).

Import moves are read per file and per bound name: the `vllm.*` paths a name is imported from
before and after. A path that appears while another goes (or while the name was imported
from elsewhere) is a move old -> new, `dual` when the old path stays (a dual-lane block); a
path that goes while the new one already stood is a dropped lane, not a move.
"""

from __future__ import annotations

import ast
import difflib
import re
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field

CATEGORIES = ("imports", "gates", "signatures", "other")
GUARD = re.compile(r"\bvllm_version_(?:is|lt|le|gt|ge)\b")
_GATE_WORDS = {"else:", "try:", "except ImportError:", "except (ImportError, AttributeError):",
               "pass"}
_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


@dataclass(frozen=True, order=True)
class Move:
    """`name` (as bound in `path`) imported from `old` before and from `new` after."""

    path: str
    name: str
    old: str
    new: str
    dual: bool = False


@dataclass
class Side:
    """What one side of a file tells: {bound name: {vllm dotted source}}, the lines of vllm
    imports, of signature sites, and the names imported from vllm."""

    imports: dict[str, set[str]] = field(default_factory=dict)
    import_lines: dict[int, set[str]] = field(default_factory=dict)
    signature_lines: set[int] = field(default_factory=set)
    names: set[str] = field(default_factory=set)


@dataclass
class Hunk:
    """One hunk of a `-U0` diff: old and new line ranges and their texts by line number."""

    old_start: int
    old_count: int
    removed: dict[int, str] = field(default_factory=dict)
    added: dict[int, str] = field(default_factory=dict)


def read_side(source: str) -> Side:
    """The `Side` of one file's text; an empty one when it does not parse."""
    side = Side()
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return side
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and _is_vllm(node.module):
            for alias in node.names:
                _bind(side, alias.asname or alias.name, f"{node.module}.{alias.name}", node)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if _is_vllm(alias.name):
                    # `import vllm.a.b` binds `vllm` whatever else is imported: keyed by the
                    # module, another such import is not a move of `vllm`.
                    _bind(side, alias.asname or alias.name, alias.name, node)
                    side.names.add(alias.asname or alias.name.partition(".")[0])
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and any(_root(b) in side.names for b in node.bases):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    end = item.body[0].lineno - 1 if item.body else item.lineno
                    side.signature_lines.update(range(item.lineno, max(end, item.lineno) + 1))
        elif isinstance(node, ast.Call) and node.end_lineno and node.end_lineno > node.lineno \
                and (_root(node.func) in side.names or _is_super_call(node.func)):
            # A call spread over lines: an argument line alone names no vllm callable.
            side.signature_lines.update(range(node.lineno, node.end_lineno + 1))
    return side


def _is_super_call(func: ast.expr) -> bool:
    return (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Call)
            and isinstance(func.value.func, ast.Name) and func.value.func.id == "super")


def _is_vllm(module: str | None) -> bool:
    return bool(module) and (module == "vllm" or str(module).startswith("vllm."))


def _bind(side: Side, bound: str, dotted: str, node: ast.stmt) -> None:
    side.imports.setdefault(bound, set()).add(dotted)
    side.names.add(bound)
    for line in range(node.lineno, (node.end_lineno or node.lineno) + 1):
        side.import_lines.setdefault(line, set()).add(dotted)


def _root(expr: ast.expr) -> str:
    while isinstance(expr, (ast.Attribute, ast.Subscript, ast.Call)):
        expr = expr.value if not isinstance(expr, ast.Call) else expr.func
    return expr.id if isinstance(expr, ast.Name) else ""


def moves(path: str, before: Side, after: Side) -> tuple[list[Move], list[Move]]:
    """(import moves, dropped lanes) of one file between two sides."""
    found: list[Move] = []
    dropped: list[Move] = []
    for name in sorted(set(before.imports) | set(after.imports)):
        old, new = before.imports.get(name, set()), after.imports.get(name, set())
        appeared, gone = new - old, old - new
        if appeared and old:
            for source in sorted(gone or old):
                for target in sorted(appeared):
                    found.append(Move(path, name, source, target, dual=source in new))
        elif gone and new:
            for source in sorted(gone):
                for target in sorted(new):
                    dropped.append(Move(path, name, source, target))
    return found, dropped


def hunks(diff: str) -> dict[str, list[Hunk]]:
    """{new path: hunks} of a `git diff -U0` text (a deleted file under its old path)."""
    files: dict[str, list[Hunk]] = {}
    current: list[Hunk] = []
    old_line = new_line = 0
    old_path = ""
    for raw in diff.splitlines():
        if raw.startswith("--- "):
            old_path = raw[6:] if raw.startswith("--- a/") else ""
        elif raw.startswith("+++ "):
            path = raw[6:] if raw.startswith("+++ b/") else old_path
            current = files.setdefault(path, [])
        elif (match := _HUNK.match(raw)) is not None:
            old_line, new_line = int(match.group(1)), int(match.group(3))
            count = 1 if match.group(2) is None else int(match.group(2))
            current.append(Hunk(old_line, count))
        elif raw.startswith("-") and current:
            current[-1].removed[old_line] = raw[1:]
            old_line += 1
        elif raw.startswith("+") and current:
            current[-1].added[new_line] = raw[1:]
            new_line += 1
    return files


def classify(file_hunks: list[Hunk], before: Side, after: Side,
             dropped: Sequence[Move] = ()) -> dict[str, int]:
    """{category: changed lines} of one file; the old imports of `dropped` lanes are gates."""
    counts = dict.fromkeys(CATEGORIES, 0)
    removed = {t.strip() for h in file_hunks for t in h.removed.values()}
    added = {t.strip() for h in file_hunks for t in h.added.values()}
    lanes = {m.old for m in dropped}
    for hunk in file_hunks:
        for lines, side, other in ((hunk.removed, before, added), (hunk.added, after, removed)):
            for number, text in lines.items():
                category = line_category(number, text, side, other, lanes)
                if category:
                    counts[category] += 1
    return counts


def line_category(number: int, text: str, side: Side, other_side: set[str],
                  lanes: AbstractSet[str] = frozenset()) -> str:
    """The category of one changed line ("" for a blank or comment line): a line that only
    moves (its text is on the other side) or names a helper, or imports only paths of dropped
    `lanes`, is gate bookkeeping before anything else."""
    stripped = text.strip()
    if not stripped or stripped.startswith("#"):
        return ""
    sources = side.import_lines.get(number)
    if GUARD.search(stripped) or stripped in other_side or stripped in _GATE_WORDS \
            or (sources and sources <= lanes):
        return "gates"
    if sources:
        return "imports"
    if number in side.signature_lines or "super()." in stripped or _calls_vllm(stripped, side):
        return "signatures"
    return "other"


def _calls_vllm(text: str, side: Side) -> bool:
    return any(re.search(rf"\b{re.escape(name)}\s*\(", text) for name in side.names)


def signature_sites(file_hunks: list[Hunk], before: Side, after: Side) -> list[tuple[int, int]]:
    """The old-side line ranges [first, last] of the hunks that follow a signature change:
    those with a line of the `signatures` category on either side, read as `classify` reads
    it (a call that only moves out of a dropped lane is gate bookkeeping, not a site)."""
    removed = {t.strip() for h in file_hunks for t in h.removed.values()}
    added = {t.strip() for h in file_hunks for t in h.added.values()}
    sites = []
    for hunk in file_hunks:
        pairs = [*((n, t, before, added) for n, t in hunk.removed.items()),
                 *((n, t, after, removed) for n, t in hunk.added.items())]
        if any(line_category(n, t, s, o) == "signatures" for n, t, s, o in pairs):
            last = hunk.old_start + max(hunk.old_count, 1) - 1
            sites.append((hunk.old_start, last))
    return sites


def line_before(before: str, after: str, line: int) -> int:
    """The line of `before` that line `line` of `after` comes from: the same line where the
    two texts agree, else the first line of the region of `before` it replaced."""
    matcher = difflib.SequenceMatcher(None, before.splitlines(), after.splitlines(),
                                      autojunk=False)
    for tag, i1, _i2, j1, j2 in matcher.get_opcodes():
        if j1 < line <= j2 or (j1 == j2 and line == j1 + 1):
            return i1 + (line - j1) if tag == "equal" else i1 + 1
    return line
