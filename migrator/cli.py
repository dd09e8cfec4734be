"""The `vam` command line (click).

Exit codes follow ruff and black: 0 nothing to report, 1 findings, changes or per-file
failures, 2 usage or configuration errors (one line on stderr, never a traceback).
"""

from __future__ import annotations

import click

from migrator import __version__


class UsageFailure(click.ClickException):
    """A user mistake: one line on stderr, exit code 2."""

    exit_code = 2

    def show(self, file=None) -> None:  # type: ignore[no-untyped-def]
        click.echo(f"vam: error: {self.format_message()}", err=True)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
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
