"""`vam rules`: list, show, validate and export move tables."""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path

import click

from migrator.cli import options as opt
from migrator.cli.infer import infer_command
from migrator.cli.options import UsageFailure
from migrator.core.tables import check_against, export_ruff, show_pack, tree_root
from rules import Pack, RulesError, Step, bundled, load_pack, version_key


@click.group()
def rules() -> None:
    """List, show, validate and export move tables (rule packs)."""


@rules.command("list")
def rules_list() -> None:
    """The bundled rule packs and their steps."""
    for pack_name, path in bundled().items():
        try:
            pack = load_pack(pack_name)
        except RulesError as exc:
            raise UsageFailure(str(exc)) from None
        steps = ", ".join(s.version for s in pack.steps)
        click.echo(f"{pack.name}  steps: {steps}  ({path.name})")
        if pack.description:
            click.echo(f"  {pack.description}")


@rules.command("show")
@click.argument("pack_name", metavar="[NAME|FILE[,...]]", required=False)
def rules_show(pack_name: str | None) -> None:
    """Every rule of a pack, step by step (default: the configured packs; several,
    comma-separated, one after the other)."""
    click.echo("\n\n".join(show_pack(pack) for pack in opt.load_rule_packs(pack_name)))


@rules.command("validate")
@click.argument("pack_name", metavar="NAME|FILE")
@click.option(
    "--against",
    nargs=2,
    metavar="OLD NEW",
    help="Also check that every old name exists in OLD and every new name in NEW: source "
    "trees holding the packages, sdists, wheels or NAME==VERSION (as `rules infer` reads them).",
)
@click.option(
    "--step",
    "step_version",
    metavar="VERSION",
    help="The step --against checks. [default: the step of NEW's version when NEW states "
    "one and the pack has it, else the latest]",
)
def rules_validate(
    pack_name: str, against: tuple[str, str] | None, step_version: str | None
) -> None:
    """Check a table: syntax, duplicate or conflicting olds, cycles, malformed names.

    Exit status: 0 valid, 2 invalid (the message names the entry at fault; with --against,
    every name not found, one per line).
    """
    pack = opt.load_rules(pack_name)
    if against:
        errors = _check_against(pack, step_version, against)
        if len(errors) == 1:
            raise UsageFailure(errors[0])
        if errors:
            listed = "".join(f"\n  {error}" for error in errors)
            raise UsageFailure(f"{len(errors)} rows do not match {against[0]} / "
                               f"{against[1]}:{listed}")
    rule_count = sum(len(s.modules) + len(s.symbols) + len(s.removed) for s in pack.steps)
    where = f"; every name found in {Path(against[0])} / {Path(against[1])}" if against else ""
    click.echo(f"{pack.source}: ok ({len(pack.steps)} step(s), {rule_count} rules{where})")


def _pick_step(pack: Pack, step_version: str | None, new_version: str | None) -> Step:
    """`--step`, else the step of NEW's stated version, else the latest.

    Raises UsageFailure for a `--step` the pack lacks."""
    try:
        if step_version:
            return pack.step(step_version)
        if new_version:
            wanted = version_key(new_version)
            for step in pack.steps:
                if version_key(step.version) == wanted:
                    return step
    except RulesError as exc:
        if step_version:
            raise UsageFailure(str(exc)) from None
    return pack.steps[-1]


def _check_against(pack: Pack, step_version: str | None,
                   against: tuple[str, str]) -> list[str]:
    """`check_against` on two DISTs, for the step `_pick_step` chooses: a directory is read in
    place (it may be the package folder itself); anything else through `open_dist`. Errors
    name each DIST as the user typed it, never a temp copy."""
    from migrator.core.dists import open_dist, parse_requirement
    from migrator.core.sources import InputError, on_disk
    from migrator.verify_imports.treenames import TreeNames

    if step_version:
        _pick_step(pack, step_version, None)  # an unknown --step before anything is read
    with ExitStack() as stack:
        roots: list[Path] = []
        new_version: str | None = None
        for spec in against:
            if Path(spec).is_dir():
                roots.append(tree_root(Path(spec), pack.packages))
                new_version = _tree_version(Path(spec))
                continue
            try:
                source = open_dist(spec)
            except InputError as exc:
                raise UsageFailure(str(exc)) from None
            roots.append(stack.enter_context(on_disk(source)))
            requirement = parse_requirement(spec)
            new_version = source.version or (requirement[1] if requirement else None)
        step = _pick_step(pack, step_version, new_version)
        errors = check_against(step, roots[0], roots[1], TreeNames())
    for root, spec in zip(roots, against, strict=True):
        errors = [e.replace(f" in {root}", f" in {spec}") for e in errors]
    return errors


def _tree_version(path: Path) -> str | None:
    """The version a source tree states (PKG-INFO, pyproject, setup.py), else None."""
    from migrator.core.sources import tree_version

    meta: dict[str, bytes | None] = {}
    for name in ("PKG-INFO", "pyproject.toml", "setup.py"):
        try:
            meta[name] = (path / name).read_bytes()
        except OSError:
            meta[name] = None
    return tree_version(meta)


@rules.command("export")
@click.argument("target", type=click.Choice(["ruff"]))
@opt.RULES
@click.option(
    "--standalone",
    is_flag=True,
    help="A complete ruff.toml selecting TID251, instead of a pyproject.toml section.",
)
def rules_export(target: str, rules_name: str | None, standalone: bool) -> None:
    """Export the table as another tool's configuration (ruff's TID251 banned-api)."""
    click.echo(export_ruff(opt.load_rules(rules_name), standalone), nl=False)


rules.add_command(infer_command)
