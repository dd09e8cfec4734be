"""`vam refactor`: carry out one step of a move table in the package that owns the old paths."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from migrator.cli import options as opt
from migrator.cli.options import UsageFailure
from migrator.core.report import text_line, unified_diff

if TYPE_CHECKING:  # the refactor machinery is imported when the command runs, not at `vam` start
    from migrator.refactor import Outcome


@click.command()
@click.argument("root", type=click.Path(file_okay=False), default=".")
@opt.RULES
@click.option("--step", "version", required=True, metavar="VERSION",
              help="The step of the table to carry out (`vam rules show` lists them).")
@click.option("--dry-run", is_flag=True,
              help="Print the plan (moves, created packages, edited files); write nothing.")
@click.option("--diff", is_flag=True,
              help="Print the plan as a patch with renames (git style); write nothing.")
@click.option("--no-shims", is_flag=True,
              help="Do not make the package install the shims for the old paths.")
@click.option("--allow-dirty", is_flag=True,
              help="Run even when the git work tree has uncommitted changes.")
@click.option("--generated", multiple=True, metavar="MODULE",
              help="A first-party module the build creates (for verify-imports; repeatable).")
def refactor(
    root: str,
    rules_name: str | None,
    version: str,
    dry_run: bool,
    diff: bool,
    no_shims: bool,
    allow_dirty: bool,
    generated: tuple[str, ...],
) -> None:
    """Carry out step VERSION in the source tree ROOT that owns its old paths: move the files
    (`git mv` in a git work tree), move the definitions symbol rows name, fix every reference
    below ROOT as `vam migrate` does (relative imports of moved files from their new place),
    make the package install the shims for the old paths, then run `vam verify-imports`.

    \b
    Examples:
      vam refactor --step 0.14.0 --dry-run ~/src/vllm-ascend
      vam refactor --step 0.14.0 --diff . > step.patch
      vam refactor --step 0.14.0 .

    Exit status: 0 done (or done before: nothing to do); 1 verify-imports found an import the
    step broke (the tree is left as moved, to inspect), or a write failed part way (what was
    done is listed); 2 usage error: unknown step, nothing of the step under ROOT, a dirty work
    tree, a destination that exists with other content, a file to move that does not parse
    (nothing written).
    """
    from migrator.refactor import ApplyError, PlanError, carry_out

    if not Path(root).is_dir():
        raise UsageFailure(f"no such directory: {root}")
    pack = opt.load_rules(rules_name)
    try:
        outcome = carry_out(
            Path(root), pack, version, shims=not no_shims, dry_run=dry_run or diff,
            allow_dirty=allow_dirty, generated=generated,
        )
    except PlanError as exc:
        raise UsageFailure(str(exc)) from None
    except ApplyError as exc:
        click.echo(f"vam: error: {exc}; done before it:", err=True)
        for line in exc.journal:
            click.echo(f"  {line}", err=True)
        sys.exit(1)
    if outcome.status == "already":
        click.echo(f"vam: step {version} is already carried out under {root}: nothing to do",
                   err=True)
        return
    for finding in outcome.findings:
        click.echo(text_line(finding), err=True)
    if diff:
        _patch(outcome)
    elif dry_run:
        _show_plan(outcome)
    else:
        _report(outcome)


def _show_plan(outcome: Outcome) -> None:
    plan = outcome.plan
    assert plan is not None
    for move in plan.moves:
        click.echo(f"move     {move.src} -> {move.dst}")
    for gone in plan.dropped:
        click.echo(f"drop     {gone} (its destination holds the same)")
    for init in plan.created:
        click.echo(f"create   {init}")
    for module in plan.new_modules:
        click.echo(f"create   {module} (definitions move here)")
    for group in plan.symbols:
        names = ", ".join(o if o == n else f"{o} as {n}" for o, n in group.renames.items())
        click.echo(f"symbols  {group.old_module} -> {group.new_module}: {names}")
    moved = {m.dst for m in plan.moves}
    listed = set(plan.created) | set(plan.new_modules)
    for change in outcome.changes:
        if change.old is None and change.path not in listed:
            click.echo(f"create   {change.path}")
        elif change.path not in moved and change.old is not None:
            click.echo(f"edit     {change.path}")
    click.echo(f"{len(plan.moves)} file(s) to move, {len(outcome.changes)} to write "
               "(dry run: nothing written)", err=True)


def _patch(outcome: Outcome) -> None:
    """A git-style patch: `rename from`/`rename to` for moves, then the content hunks."""
    out = sys.stdout
    for change in outcome.changes:
        src = change.src or change.path
        if change.old is None:
            out.write(f"diff --git a/{change.path} b/{change.path}\nnew file mode 100644\n")
            body = unified_diff(str(change.path), b"", change.new)
            out.write(body.replace(f"--- a/{change.path}", "--- /dev/null", 1))
            continue
        out.write(f"diff --git a/{src} b/{change.path}\n")
        if src != change.path:
            out.write(f"rename from {src}\nrename to {change.path}\n")
        if change.old != change.new:
            body = unified_diff(str(change.path), change.old, change.new)
            out.write(body.replace(f"--- a/{change.path}", f"--- a/{src}", 1))


def _report(outcome: Outcome) -> None:
    plan = outcome.plan
    assert plan is not None
    click.echo(f"vam: step {plan.step.version}: moved {len(plan.moves)} file(s), wrote "
               f"{len(outcome.changes)}", err=True)
    if outcome.preexisting:
        click.echo(f"vam: verify-imports: {len(outcome.preexisting)} finding(s) that were there "
                   "before the step (not counted)", err=True)
    if outcome.broken:
        from migrator.verify_imports import render as render_imports

        sys.stdout.write(render_imports(outcome.broken, "text"))
        click.echo(f"vam: verify-imports: {len(outcome.broken)} import(s) the step broke; the "
                   "tree is left as moved", err=True)
        sys.exit(1)
