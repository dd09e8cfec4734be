"""`vam upgrade NAME==VERSION`: the whole upgrade to one release of a third-party package
(logic in migrator/upgrade/)."""

from __future__ import annotations

import sys

import click

from migrator.cli import options as opt
from migrator.cli.options import UsageFailure
from migrator.cli.pipeline import setup
from migrator.core.dists import normalize, stated_name
from migrator.core.pins import distribution_names
from migrator.core.report import unified_diff
from migrator.rewrite.engine import Options
from migrator.upgrade import Item, Upgrade, UpgradePlan, as_json, as_text
from migrator.upgrade.api import checker
from rules import Pack, RulesError, version_key

_STYLES = ("if", "try")


@click.command("upgrade")
@click.argument("requirement", metavar="NAME==VERSION")
@opt.PATHS
@click.option("--rules", "rules_name", metavar="NAME|FILE", default="vllm", show_default=True,
              help="Move table of the package: a bundled name or a TOML file.")
@click.option("--from", "from_version", metavar="VERSION",
              help="Version the code is written for: its imports stay in the old lane. "
              "[default: [tool.vam] from, else the project's pins, else the installed "
              "release; the command says which]")
@click.option("--dist", "dist_spec", metavar="DIST",
              help="Read the release from DIST (a source tree, sdist, wheel) instead of "
              "fetching NAME==VERSION into ~/.cache/vam-sdists; a DIST that states another "
              "version or distribution, or ships no package, is refused.")
@click.option("--write", is_flag=True, help="Apply the migration. [default: show the diff]")
@click.option("--compat-style", type=click.Choice(_STYLES), default="if", show_default=True,
              help="Dual-lane form: `if vllm_version_is(OLD): <old> else: <new>`, or try the "
              "new import and fall back to the old one on ImportError.")
@opt.output_format(("text", "json"), "Report format (json: no diff on stdout).")
@opt.jobs("Worker processes for the migration. [default: number of CPUs]")
@opt.exclude("Skip matching files (repeatable; adds to [tool.vam] exclude).")
@opt.version_guards
@opt.quiet("No baseline line on stderr.")
def upgrade(requirement: str, paths: tuple[str, ...], rules_name: str, from_version: str | None,
            dist_spec: str | None, write: bool, compat_style: str, fmt: str, jobs: int | None,
            exclude: tuple[str, ...], version_guard: tuple[str, ...], quiet: bool) -> None:
    """Upgrade the code below PATHS to NAME==VERSION (e.g. vllm==0.14.0) in one command.

    \b
    1. verify-imports --against NAME==VERSION and verify-api --against NAME==VERSION:
       what breaks at VERSION;
    2. migrate --rules vllm --to VERSION --keep-compat BASELINE: each import move in
       dual-lane form, the old import kept for the baseline (plain migrate when no
       baseline is known; the report says so);
    3. the same checks on the result (in memory unless --write);
    4. what is left for a person, grouped by failure pattern: imports that still fail,
       signature changes of overridden methods, calls with changed parameters, moved or
       removed attributes, removed names (with the table's hint), files not processed.

    \b
    Examples:
      vam upgrade vllm==0.14.0 vllm_ascend/            diff and report
      vam upgrade vllm==0.14.0 --write .               apply, then report
      vam upgrade vllm==0.14.0 --dist ~/src/vllm --format json .

    NAME must be the distribution the pack (--rules) describes: its steps are versions of
    it.

    Exit status: 0 nothing left for a person, 1 items left (or a file failed), 2 usage or
    configuration error.
    """
    from migrator import upgrade as up
    from migrator.core.sources import InputError
    from migrator.verify_imports import TargetError, load_dist

    wanted = opt.requirement(requirement)
    _pack_describes(requirement, wanted[0], opt.load_rules(rules_name))
    if dist_spec is not None:
        opt.dist_spec(dist_spec, "--dist")
        _same_distribution(dist_spec, wanted[0])
    try:
        dist = load_dist(dist_spec or requirement)
    except InputError as exc:
        raise UsageFailure(str(exc)) from None
    _same_release(dist.version, wanted[1], dist_spec)
    plan = _plan(requirement, dist_spec, paths, rules_name, from_version, wanted[1],
                 exclude, version_guard, quiet)
    try:
        done = up.upgrade(plan, dist, wanted[1], write=write, style=compat_style, jobs=jobs,
                          reload=lambda: load_dist(dist_spec or requirement))
    except (InputError, TargetError, RulesError) as exc:
        raise UsageFailure(str(exc)) from None
    items = up.left(done)
    _show(done, requirement, items, write, fmt)
    sys.exit(1 if items or any(r.failed for r in done.results) else 0)


def _same_release(stated: str | None, wanted: str, dist_spec: str | None) -> None:
    """A usage error when DIST states a version other than the requirement's: the report
    would check one release and migrate to another. Unknown or unreadable: accepted."""
    try:
        differs = stated is not None and version_key(stated) != version_key(wanted)
    except RulesError:
        return
    if differs:
        raise UsageFailure(f"--dist {dist_spec}: it is version {stated}, not {wanted}; "
                           f"give the DIST of that release, or NAME=={stated}")


def _later(version: str, than: str) -> bool:
    try:
        return version_key(version) > version_key(than)
    except RulesError:  # malformed: setup names it
        return False


def _same_distribution(dist_spec: str, name: str) -> None:
    """A usage error when DIST states another distribution than NAME (PEP 503 names)."""
    stated = stated_name(dist_spec)
    if stated is not None and stated != normalize(name):
        raise UsageFailure(f"--dist {dist_spec}: it is a release of {stated}, not of "
                           f"{normalize(name)}; give a DIST of {name}")


def _pack_describes(requirement: str, name: str, pack: Pack) -> None:
    """A usage error when NAME is not the distribution the pack's steps are versions of:
    its steps would be applied up to a version of another project."""
    described = distribution_names(pack.packages)
    if normalize(name) not in described:
        raise UsageFailure(f"{requirement}: the {pack.name} pack describes "
                           f"{', '.join(described)}, not {normalize(name)}; give "
                           f"{described[0]}==VERSION, or --rules for {name}")


def _plan(requirement: str, dist_spec: str | None, paths: tuple[str, ...], rules_name: str,
          from_version: str | None, version: str, exclude: tuple[str, ...],
          version_guard: tuple[str, ...], quiet: bool) -> UpgradePlan:
    """The run's inputs: migrate's setup for one pack up to `version`, and verify-api
    against the same release."""
    if from_version is not None and _later(from_version, version):
        raise UsageFailure(f"--from {from_version} is after the target {requirement}")
    run = setup(paths, rules_name, (from_version,) if from_version else (), (version,), quiet)
    if len(run.lanes) != 1:
        raise UsageFailure("vam upgrade takes one move table: --rules NAME")
    lane = run.lanes[0]
    guards = opt.guard_names(version_guard, run.config.version_guards)
    options = Options(comments=run.config.comments, line_length=run.config.line_length,
                      version_guards=guards,
                      version_helper_module=run.config.version_helper_module)
    check_api = checker(dist_spec or requirement, lane.pack, run.config, guards, exclude)
    return UpgradePlan(run.targets, lane.from_version, run.sources(exclude), options,
                       lambda o, w: run.job(o, write=w, keep_new=True), check_api)


def _show(done: Upgrade, requirement: str, items: list[Item], write: bool, fmt: str) -> None:
    """The report on stdout: JSON, or the diff (unless written) and the text report."""
    if fmt == "json":
        click.echo(as_json(done, requirement, items, write), nl=False)
        return
    if not write:
        for result in done.changed:
            if result.old is not None and result.new is not None:
                sys.stdout.write(unified_diff(result.path, result.old, result.new,
                                              result.encoding))
    click.echo(as_text(done, requirement, items, write), nl=False)
