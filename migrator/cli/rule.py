"""`vam rule`: the doc of a diagnostic code, like `ruff rule` (texts in migrator/core/codes/)."""

from __future__ import annotations

import click

from migrator.cli.options import UsageFailure
from migrator.core import codes


@click.command()
@click.argument("code", required=False)
@click.option("--all", "list_all", is_flag=True, help="List every code with its level and title.")
def rule(code: str | None, list_all: bool) -> None:
    """Explain a diagnostic code: what it means, why it matters, an example, the fix.

    \b
    Examples:
      vam rule VAM002
      vam rule --all

    Exit status: 0 shown, 2 unknown code.
    """
    if list_all:
        click.echo(codes.table())
        return
    if code is None:
        raise UsageFailure("give a CODE (such as VAM001), or --all to list them")
    entry = codes.BY_CODE.get(code.strip().upper())
    if entry is None:
        raise UsageFailure(f"unknown code {code!r} (`vam rule --all` lists them)")
    click.echo(entry.doc())
