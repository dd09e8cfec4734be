"""`vam shims check`: probe the runtime shims of a table (logic in migrator/shims_check.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from migrator.cli import options as opt
from migrator.cli.options import UsageFailure


@click.group("shims")
def shims_group() -> None:
    """Check the runtime shims that keep old import paths working."""


@shims_group.command("check")
@opt.RULES
@click.option(
    "--package-path",
    "package_paths",
    multiple=True,
    metavar="DIR",
    help="Put DIR first on each probe's sys.path (the package under test); repeatable.",
)
@click.option(
    "--timeout",
    "timeout_s",
    type=float,
    default=300.0,
    show_default=True,
    help="Seconds one probe may take (and, after it, the import of what it needed).",
)
@opt.jobs("Probes run in parallel.")
def shims_check(
    rules_name: str | None, package_paths: tuple[str, ...], timeout_s: float, jobs: int | None
) -> None:
    """Probe every old name of the table in a fresh interpreter.

    Each probe runs in a child forked from an interpreter holding the third-party modules
    (vLLM, torch) earlier probes imported, never a first-party one. For each old module
    path (rows and their listed submodules) and each moved symbol: it imports, it warns
    exactly once at the importing line, and it is the same object as the new name. A probe
    that needs a missing optional third-party module is skipped.

    Exit status: 0 every probe passed or was skipped, 1 a probe failed, 2 usage error
    (including: the table's package is not importable here, so nothing can be checked).
    """
    from migrator import shims_check as sc

    pack = opt.load_rules(rules_name)
    for path in package_paths:
        if not Path(path).is_dir():
            raise UsageFailure(f"--package-path: no such directory: {path}")
    if not timeout_s > 0:
        raise UsageFailure(f"--timeout must be a positive number of seconds, got {timeout_s:g}")
    missing = sc.not_importable(pack, package_paths)
    if pack.packages and len(missing) == len(pack.packages):
        # Every probe would fail the same way (one FAIL per module): say it once. Exit 2, as
        # ruff and pre-commit use it: the check could not run here, which is not a finding.
        raise UsageFailure(
            f"{', '.join(missing)}, the package{'s' if len(missing) > 1 else ''} the table "
            f"moves, {'are' if len(missing) > 1 else 'is'} not importable in this environment: "
            "nothing to check (install it, or pass --package-path DIR)"
        )
    results = sc.check(pack, package_paths, timeout=timeout_s, jobs=jobs)
    click.echo(sc.render(results))
    sys.exit(1 if any(r.failed for r in results) else 0)
