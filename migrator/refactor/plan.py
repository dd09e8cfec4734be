"""The plan of one step under a source root: which files move where, which packages are
created, which definitions leave which modules. Computed and checked before anything is
written; nothing here writes.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from migrator.core.resolver import Resolver
from migrator.refactor.layout import dotted_of, module_path, package_files
from migrator.refactor.symbols import top_level_names
from rules import Step


class PlanError(ValueError):
    """The step cannot be carried out as asked (a usage error: exit 2); nothing was written."""


@dataclass(frozen=True)
class FileMove:
    """One file's rename, both paths relative to the root."""

    src: Path
    dst: Path


@dataclass
class SymbolGroup:
    """Definitions leaving `old_module` for `new_module`: old name -> new name."""

    old_module: str
    new_module: str
    renames: dict[str, str]


@dataclass
class Plan:
    """What carrying out `step` under `root` does. Paths are relative to `root`.

    `dropped` are sources merged away (their destination already holds the same content, or
    one of two merged `__init__.py` files is empty); `created` are new empty `__init__.py`
    files; `new_modules` are files symbol moves create.
    """

    root: Path
    step: Step
    moves: list[FileMove] = field(default_factory=list)
    dropped: list[Path] = field(default_factory=list)
    created: list[Path] = field(default_factory=list)
    new_modules: list[Path] = field(default_factory=list)
    symbols: list[SymbolGroup] = field(default_factory=list)
    modules: list[tuple[str, str]] = field(default_factory=list)

    def final(self, path: Path) -> Path:
        """Where the file now at `path` ends up (itself when it does not move)."""
        for move in self.moves:
            if move.src == path:
                return move.dst
        return path

    @property
    def empty(self) -> bool:
        return not self.moves and not self.symbols and not self.dropped


def make_plan(root: Path, step: Step, resolver: Resolver) -> Plan:
    """The plan for `step` under `root`; `resolver` applies that step alone.

    Raises:
        PlanError: two files with different content would land on one path, a destination
            exists with different content, or a file to move does not parse.
    """
    plan = Plan(root, step)
    targets: dict[Path, list[Path]] = defaultdict(list)
    for rule in sorted(step.modules, key=lambda m: m.old):
        where = module_path(root, rule.old)
        if where is None:
            continue
        plan.modules.append((rule.old, rule.new))
        for file in [where] if where.is_file() else list(package_files(where)):
            dst = _destination(root, file.relative_to(root), resolver)
            if dst is not None and file.relative_to(root) not in targets[dst]:
                targets[dst].append(file.relative_to(root))
    _plan_symbols(plan, root, step, targets)
    _settle(plan, root, targets)
    _add_packages(plan, root)
    _check_parses(plan, root)
    return plan


def _destination(root: Path, rel: Path, resolver: Resolver) -> Path | None:
    """Where the file at `rel` lands: its module (a data file: its folder) mapped by the step."""
    if rel.suffix in (".py", ".pyi"):
        dotted = dotted_of(root, root / rel)
        resolution = resolver.resolve_module(dotted)
        if resolution.removed or not resolution.changed:
            return None
        parts = resolution.new.split(".")
        if rel.stem == "__init__":
            return Path(*parts, rel.name)
        return Path(*parts[:-1], parts[-1] + rel.suffix)
    resolution = resolver.resolve_module(".".join(rel.parent.parts))
    if resolution.removed or not resolution.changed:
        return None
    return Path(*resolution.new.split("."), rel.name)


def _plan_symbols(plan: Plan, root: Path, step: Step, targets: dict[Path, list[Path]]) -> None:
    groups: dict[tuple[str, str], dict[str, str]] = defaultdict(dict)
    for row in step.symbols:
        where = module_path(root, row.old_module)
        if where is None:
            continue
        file = where / "__init__.py" if where.is_dir() else where
        tree = _parse(root, file.relative_to(root))
        if row.old_name not in top_level_names(tree):
            continue  # not defined here (already moved, or re-exported): nothing to carry
        groups[(row.old_module, row.new_module)][row.old_name] = row.new_name
        below = row.new_module.startswith(row.old_module + ".")
        if below and where.is_file():
            # A module that becomes a package of the same name: its file is the package's
            # `__init__.py` now (the name keeps importing; its anchor moves).
            rel = where.relative_to(root)
            dst = rel.with_suffix("") / "__init__.py"
            if rel not in targets[dst]:
                targets[dst].append(rel)
    plan.symbols = [SymbolGroup(old, new, renames) for (old, new), renames in groups.items()]


def _settle(plan: Plan, root: Path, targets: dict[Path, list[Path]]) -> None:
    """Resolve each destination to one source, or refuse."""
    leaving = {src for sources in targets.values() for src in sources}
    for dst, sources in sorted(targets.items()):
        keep = sources[0]
        for other in sources[1:]:
            keep = _merge(root, keep, other, dst, plan)
        on_disk = root / dst
        if on_disk.exists() and dst not in leaving:
            same = on_disk.read_bytes() == (root / keep).read_bytes()
            if same or _blank(root / keep):
                plan.dropped.append(keep)  # the destination already says it all
            elif _blank(on_disk):
                plan.moves.append(FileMove(keep, dst))  # replaces an empty `__init__.py`
            else:
                raise PlanError(
                    f"destination {on_disk} already exists with content different from "
                    f"{root / keep}"
                )
            continue
        plan.moves.append(FileMove(keep, dst))


def _merge(root: Path, first: Path, second: Path, dst: Path, plan: Plan) -> Path:
    """Two sources for one destination (a merge): fine when equal or one is empty."""
    if not _same_or_blank(root / first, root / second):
        raise PlanError(
            f"{root / first} and {root / second} would both become {root / dst} "
            "with different content"
        )
    if _blank(root / first):
        plan.dropped.append(first)
        return second
    plan.dropped.append(second)
    return first


def _same_or_blank(a: Path, b: Path) -> bool:
    return a.read_bytes() == b.read_bytes() or _blank(a) or _blank(b)


def _blank(path: Path) -> bool:
    """Only comments and blank lines (an empty `__init__.py`, a licence header)."""
    if path.name != "__init__.py":
        return False
    text = path.read_text(encoding="utf-8", errors="replace")
    return all(not line.strip() or line.lstrip().startswith("#") for line in text.splitlines())


def _add_packages(plan: Plan, root: Path) -> None:
    """Symbol targets' files and the `__init__.py` of every new folder on the way."""
    leaving = {m.src for m in plan.moves} | set(plan.dropped)
    final = {m.dst for m in plan.moves}
    dirs_after = {p.parent for p in final}

    def exists_after(rel: Path) -> bool:
        return rel in final or ((root / rel).is_file() and rel not in leaving)

    def package_after(parts: list[str]) -> bool:
        folder = Path(*parts)
        return exists_after(folder / "__init__.py") or any(
            d == folder or folder in d.parents for d in dirs_after
        )

    for group in plan.symbols:
        parts = group.new_module.split(".")
        below = group.new_module.startswith(group.old_module + ".")
        if package_after(parts):
            file = Path(*parts, "__init__.py")
        else:
            file = Path(*parts[:-1], parts[-1] + ".py")
        if not exists_after(file) and file not in plan.new_modules:
            plan.new_modules.append(file)
        if below:
            dirs_after.add(file.parent)
    for file in [*final, *plan.new_modules]:
        for folder in file.parents:
            if folder == Path(".") or len(folder.parts) < 2:
                break  # the top-level package exists; ROOT itself is no package
            init = folder / "__init__.py"
            if not exists_after(init) and init not in plan.created and init not in plan.new_modules:
                plan.created.append(init)
    plan.created.sort()


def _check_parses(plan: Plan, root: Path) -> None:
    bad: list[str] = []
    for rel in [m.src for m in plan.moves if m.src.suffix in (".py", ".pyi")]:
        try:
            _parse(root, rel)
        except PlanError as exc:
            bad.append(str(exc))
    if bad:
        raise PlanError("; ".join(bad) + " (the plan refuses to move a file that does not parse)")


def _parse(root: Path, rel: Path) -> ast.Module:
    try:
        return ast.parse((root / rel).read_bytes())
    except (SyntaxError, ValueError) as exc:
        line = getattr(exc, "lineno", 0) or 0
        raise PlanError(f"{root / rel}:{line}: cannot parse: {getattr(exc, 'msg', exc)}") from None
