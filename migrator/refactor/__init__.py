"""`vam refactor`: carry out one step of a move table in the package that owns the old paths.

plan (plan.py: which files move, which packages and modules are created, which definitions
leave which modules; refused before anything is written) -> contents (rewrite.py: every file's
bytes after the step, in memory, through the engine of `vam migrate`) -> disk (apply.py: `git
mv`, atomic writes) -> proof (`verify-imports` static mode, compared with a run before the
move so that only the step's own breakage fails it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from migrator.core import findings as F
from migrator.core.resolver import Resolver
from migrator.refactor import gitwork, shimline
from migrator.refactor.apply import ApplyError, apply
from migrator.refactor.layout import module_path
from migrator.refactor.plan import Plan, PlanError, make_plan
from migrator.refactor.rewrite import Change, Rewrite
from migrator.verify_imports import ImportFinding, verify_static
from rules import Pack, RulesError, Step

__all__ = ["ApplyError", "Change", "Outcome", "PlanError", "carry_out"]


@dataclass
class Outcome:
    """What a run did or would do. `status`: "done", "planned" (dry run) or "already" (the
    step was carried out before: nothing to do). `broken` are verify-imports findings the step
    caused (they fail the command); `preexisting` were there before it."""

    status: str
    plan: Plan | None = None
    changes: list[Change] = field(default_factory=list)
    findings: list[F.Finding] = field(default_factory=list)
    broken: list[ImportFinding] = field(default_factory=list)
    preexisting: list[ImportFinding] = field(default_factory=list)
    journal: list[str] = field(default_factory=list)


def carry_out(
    root: Path,
    pack: Pack,
    version: str,
    *,
    shims: bool = True,
    dry_run: bool = False,
    allow_dirty: bool = False,
    generated: Sequence[str] = (),
) -> Outcome:
    """Carry out step `version` of `pack` under source root `root`.

    Raises:
        PlanError: unknown step, nothing of the step under `root`, a dirty git work tree
            (without `allow_dirty`), a conflicting destination, a file to move that does not
            parse. Nothing was written.
        ApplyError: a write failed part way; its `journal` says what was done.
    """
    root = root.resolve()
    try:
        step = pack.step(version)
    except RulesError as exc:
        raise PlanError(str(exc)) from None
    git = gitwork.is_work_tree(root)
    if git and not allow_dirty and not dry_run:
        dirt = gitwork.dirty(root)
        if dirt:
            shown = "; ".join(dirt[:5]) + (" ..." if len(dirt) > 5 else "")
            raise PlanError(
                f"the git work tree at {root} has uncommitted changes ({shown}): commit or "
                "stash them, or pass --allow-dirty"
            )
    index = [s.version for s in pack.steps].index(version)
    previous = pack.steps[index - 1].version if index else None
    resolver = Resolver(pack, previous, version)
    plan = make_plan(root, step, resolver)
    if plan.empty:
        if _carried_out(root, step):
            return Outcome("already", plan)
        raise PlanError(f"nothing of step {version} lives under {root}")
    rewrite = Rewrite(plan, pack, resolver, shims)
    outcome = Outcome("planned", plan, rewrite.changes, rewrite.findings)
    if dry_run:
        return outcome
    targets = _packages(root, pack)
    before = verify_static(targets, generated).findings if targets else []
    outcome.journal = apply(plan, rewrite.changes, git)
    outcome.status = "done"
    after = verify_static(_packages(root, pack), generated).findings if targets else []
    seen = {_key(f, root, plan, resolver) for f in before}
    for finding in after:
        target = outcome.preexisting if _key(finding, root, plan, resolver, False) in seen \
            else outcome.broken
        target.append(finding)
    return outcome


def _carried_out(root: Path, step: Step) -> bool:
    """The step's new modules are there, or its shims are installed: a second run."""
    news = [m.new for m in step.modules if not m.intermediate]
    news += [s.new_module for s in step.symbols]
    if any(module_path(root, new) is not None for new in news):
        return True
    owner = shimline.owner_package(step)
    init = root.joinpath(*owner.split("."), "__init__.py") if owner else None
    return bool(init and init.is_file() and shimline.has_install(init.read_text(errors="replace")))


def _packages(root: Path, pack: Pack) -> list[str]:
    """The pack's top-level packages under `root`: what verify-imports checks."""
    return [str(root / name) for name in pack.packages if (root / name).is_dir()]


def _key(
    finding: ImportFinding, root: Path, plan: Plan, resolver: Resolver, before: bool = True
) -> tuple[str, str, str, str]:
    """What identifies a finding across the move: code, file, module and name, the file and
    module of a finding from before the move mapped to where they went."""
    path = Path(finding.path)
    try:
        rel = path.resolve().relative_to(root)
    except ValueError:
        rel = path
    module = finding.module
    if before:
        rel = plan.final(rel)
        module = resolver.resolve_module(module).new if module else module
    return finding.code, str(rel), module, finding.name
