"""The `vam` command line (click): one module per command group, gathered here.

Exit codes follow ruff and black: 0 nothing to report, 1 findings, changes or per-file
failures, 2 usage or configuration errors (one line on stderr, never a traceback).
"""

from __future__ import annotations

import click

from migrator import __version__
from migrator.cli.api import verify_api
from migrator.cli.migrate import check, explain, migrate
from migrator.cli.options import UsageFailure
from migrator.cli.refactor import refactor
from migrator.cli.rule import rule
from migrator.cli.rules import rules
from migrator.cli.shims import shims_group
from migrator.cli.upgrade import upgrade
from migrator.cli.verify import verify_imports

__all__ = ["UsageFailure", "main"]


class _Main(click.Group):
    """The command group; Ctrl-C ends a command with the shell's 130, not a findings exit,
    and click's usage errors (unknown option, bad choice, missing argument) end it as every
    other user mistake does: one `vam: error:` line, exit 2, no usage block."""

    def make_context(
        self, info_name: str | None, args: list[str], parent: click.Context | None = None,
        **extra: object,
    ) -> click.Context:
        try:
            return super().make_context(info_name, args, parent, **extra)
        except click.UsageError as exc:
            raise _one_line(exc) from None

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            click.echo("vam: interrupted", err=True)
            ctx.exit(130)
        except click.UsageError as exc:
            raise _one_line(exc) from None


def _one_line(exc: click.UsageError) -> click.ClickException:
    if isinstance(exc, click.exceptions.NoArgsIsHelpError):
        return exc  # a command run bare shows its help, as it asked to
    message = exc.format_message().replace("\n", " ")
    where = exc.ctx.command_path if exc.ctx is not None else "vam"
    return UsageFailure(f"{message} (see `{where} --help`)")


@click.group(cls=_Main, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="vam")
def main() -> None:
    """Migrate references to moved Python modules: imports, mock.patch strings, configs, docs.

    \b
    Start here:
      vam migrate --diff .          show what would change
      vam migrate .                 rewrite in place
      vam check .                   list stale references (pre-commit, CI)
      vam explain vllm_ascend.distributed.mooncake_connector
    """


for _command in (migrate, check, explain, rules, verify_imports, verify_api, shims_group, rule,
                 refactor, upgrade):
    main.add_command(_command)
