"""Plans the rewrite of one import statement, independent of syntax trees.

`from M import a, b as c` is a list of (name, alias) pairs below a module. Each pair is
resolved as the dotted name `M.name`; pairs that land in the same module stay together, in
order of first appearance. When a binding's last name changes and it has no alias, the old
name is kept as the alias so code below the import still works.
"""

from __future__ import annotations

import ast
import enum
import re
from dataclasses import dataclass, field, replace

from migrator.core import findings as F
from migrator.core.modname import RelativeImportError, resolve_relative
from migrator.core.resolver import Resolution, Resolver
from rules import is_under


@dataclass
class PlannedName:
    """One `name [as alias]` of a from-import; `resolution` is set when the name moved."""

    name: str
    alias: str | None
    resolution: Resolution | None = None
    index: int = 0  # position in the original statement


@dataclass
class TargetStatement:
    """One resulting `from <module> import <names>` (module absolute; dots computed later)."""

    module: str
    names: list[PlannedName] = field(default_factory=list)


@dataclass
class FromImportPlan:
    """The rewrite of a from-import: one target per resulting module, plus what fired."""

    targets: list[TargetStatement]
    resolutions: list[Resolution]
    removed: list[Resolution]

    @property
    def changed(self) -> bool:
        return bool(self.resolutions)

    @property
    def split(self) -> bool:
        return len(self.targets) > 1


def plan_from_import(
    module: str, names: list[tuple[str, str | None]], resolver: Resolver
) -> FromImportPlan:
    """Resolve `from module import names` (module absolute) into target statements.

    A star import follows its module; it cannot follow names that left a module that stays,
    which the caller reports.
    """
    targets: dict[str, TargetStatement] = {}
    resolutions: list[Resolution] = []
    removed: list[Resolution] = []
    for index, (name, alias) in enumerate(names):
        if name == "*":
            resolution = resolver.resolve_module(module)
            new_module, new_name = resolution.new, "*"
        else:
            resolution = resolver.resolve(f"{module}.{name}")
            new_module, _, new_name = resolution.new.rpartition(".")
        if resolution.removed is not None:
            removed.append(resolution)
        moved = resolution.changed
        if moved:
            resolutions.append(resolution)
        if moved and new_name != name and alias is None and name != "*":
            alias = name
        entry = PlannedName(new_name, alias, resolution if moved else None, index)
        targets.setdefault(new_module, TargetStatement(new_module)).names.append(entry)
    return FromImportPlan(list(targets.values()), resolutions, removed)


def import_findings(names: list[str], resolver: Resolver) -> list[F.Finding]:
    """What `import a.b, c.d as e` refers to: one finding per moved or removed module."""
    found = []
    for name in names:
        if not resolver.is_ours(name):
            continue
        resolution = resolver.resolve_module(name)
        if resolution.removed:
            found.append(F.removed("import", resolution))
        if resolution.changed:
            found.append(F.moved("import", resolution))
    return found


def from_import_findings(
    module: str, relative: bool, star: bool, plan: FromImportPlan, resolver: Resolver
) -> list[F.Finding]:
    """What `from module import ...` refers to, given its plan (`module` absolute).

    One finding for the module when the whole statement follows it, else one per moved
    name; removed names; and a star import from a module that lost names, which no tool can
    rewrite (the names it bound are unknown to the table).
    """
    kind = "relative-import" if relative else "from-import"
    found = [F.removed(kind, r) for r in plan.removed]
    if star and module in resolver.symbol_sources():
        moved = sorted(
            m.old_name for s in resolver.steps for m in s.symbols if m.old_module == module
        )
        found.append(
            F.needs_human(
                kind,
                f"star import from '{module}', whose names {', '.join(moved)} moved: import "
                "them from their new module explicitly",
                old=module,
            )
        )
    if not plan.changed:
        return found
    module_res = resolver.resolve_module(module)
    if module_res.changed and not plan.split:
        return [*found, F.moved(kind, module_res)]
    for resolution in plan.resolutions:
        moved_kind = "symbol-import" if resolution.first.kind == "symbol" else "submodule-import"
        found.append(F.moved(kind if relative else moved_kind, resolution))
    return found


def statement_findings(node: ast.stmt, resolver: Resolver, package: str | None) -> list[F.Finding]:
    """The findings re-planning the import statement `node` would report, judged from the
    `ast` alone (check mode: no libcst). `package` anchors relative imports."""
    if isinstance(node, ast.Import):
        return import_findings([alias.name for alias in node.names], resolver)
    assert isinstance(node, ast.ImportFrom)
    module = absolute_module(package, node.level, node.module)
    if module is None or not resolver.is_ours(module):
        return []
    if node.level and within_moved_package(package, module, resolver):
        return []
    names = [(alias.name, alias.asname) for alias in node.names]
    star = names == [("*", None)]
    plan = plan_from_import(module, names, resolver)
    return from_import_findings(module, node.level > 0, star, plan, resolver)


def judge_import_line(
    lead: str, code: str, ctx: ImportContext, kind: str = "comment"
) -> tuple[list[str] | None, list[F.Finding]] | None:
    """The findings re-planning an import statement written in text (`code`, after `lead`:
    `# `, `>>> `) would report, judged from the `ast` alone, with the signature and results
    of `migrator.rewrite.transformer.rewrite_import_line` less the new lines (always None):
    check mode needs no libcst. None when `code` is not a single import statement."""
    try:
        body = ast.parse(code).body
    except (SyntaxError, ValueError):
        return None
    if len(body) != 1 or not isinstance(body[0], (ast.Import, ast.ImportFrom)):
        return None
    found = statement_findings(body[0], ctx.resolver, ctx.package)
    return None, [replace(f, kind=kind) for f in found]


def absolute_module(anchor_package: str | None, level: int, module: str | None) -> str | None:
    """The absolute module a relative import names, or None when it cannot be known (no
    anchor package, or more dots than it has): `core.modname.resolve_relative` without the
    error.

    `anchor_package` is the package of the importing file (`a.b` for `a/b/c.py` and for
    `a/b/__init__.py`); `level` is the number of leading dots.
    """
    if level == 0:
        return module
    try:
        return resolve_relative(anchor_package or "", level, module)
    except RelativeImportError:
        return None


def within_moved_package(package: str | None, module: str, resolver: Resolver) -> bool:
    """Whether a relative import of `module` (absolute) from a file of `package` stays inside
    a package the table moves: the file and that module then move (or stay) together, so
    the import is left as it is."""
    if not package:
        return False
    moved = resolver.resolve_module(package)
    if not moved.changed:
        return False
    return is_under(module, moved.first.old)


def relative_module(anchor: str, level: int, target: str) -> tuple[int, str | None]:
    """Write absolute `target` relative to the package `level` dots name from `anchor`.

    Keeps `level` dots when `target` lies under that package; otherwise climbs with more
    dots to the nearest common package. Returns (dots, module or None), or (0, target) when
    the two share no package and the import has to become absolute.
    """
    parts = anchor.split(".")
    base = parts[: len(parts) - (level - 1)]
    goal = target.split(".")
    dots = level
    while base and goal[: len(base)] != base:
        base = base[:-1]
        dots += 1
    if not base:
        return 0, target
    rest = goal[len(base) :]
    return dots, ".".join(rest) or None


class ImportStyle(enum.Enum):
    BLACK = "black"
    HANGING = "hanging"
    ALIGNED = "aligned"


_STYLE_PATTERNS = {
    ImportStyle.BLACK: re.compile(r"import \([ \t]*\r?\n[^()]*,[ \t]*\r?\n[ \t]*\)"),
    ImportStyle.HANGING: re.compile(r"import \([ \t]*\r?\n[^()]*[A-Za-z0-9_][ \t]*\)"),
    ImportStyle.ALIGNED: re.compile(r"import \([A-Za-z_]"),
}


def detect_style(source: str) -> ImportStyle:
    """The most common parenthesized from-import layout in `source` (BLACK if none)."""
    counts = {style: len(pattern.findall(source)) for style, pattern in _STYLE_PATTERNS.items()}
    best = max(counts, key=lambda s: counts[s])
    return best if counts[best] else ImportStyle.BLACK


@dataclass(frozen=True)
class ImportContext:
    """What an import rewrite needs besides the statement.

    `package` anchors relative imports (None when the file's package is unknown: they are
    left alone); `anchor_at_new_home` writes them relative to where the table moves that
    package instead (for a file that moves with it). `line_length` is None when the project
    configures none. `indent` is the width of the indentation the statement sits at.
    """

    resolver: Resolver
    package: str | None = None
    line_length: int | None = None
    style: ImportStyle = ImportStyle.BLACK
    indent: int = 0
    comments: bool = True
    anchor_at_new_home: bool = False
