"""`vam rules infer OLD NEW`: write a move-table step inferred from two releases.

Exit codes: 0 the table was written and passed its checks; 1 it was written but failed
parsing, validation or `check_against` (each failure on stderr, naming the entry);
2 bad input (one line on stderr, nothing written).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import click

from migrator.cli.options import UsageFailure

if TYPE_CHECKING:  # the inference machinery is imported when the command runs, not at `vam` start
    from migrator.infer import Source
    from migrator.infer.gitsource import Interim


@click.command("infer")
@click.argument("old")
@click.argument("new")
@click.option(
    "--git",
    "git_repo",
    type=click.Path(path_type=Path, file_okay=False),
    metavar="REPO",
    help="OLD and NEW are revisions of this git repository; paths that existed only "
    "between them become `intermediate = true` rules.",
)
@click.option(
    "--package",
    "packages",
    multiple=True,
    metavar="NAME",
    help="Top-level package to compare (repeatable). [default: every package in both, "
    "except tests, test, benchmarks, examples, docs]",
)
@click.option(
    "--under", metavar="DOTTED", help="Keep only moves out of, into or inside this package."
)
@click.option("--version", metavar="V", help="The step's version. [default: NEW's version]")
@click.option(
    "-o",
    "--output",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Write the table here. [default: stdout]",
)
def infer_command(
    old: str,
    new: str,
    git_repo: Path | None,
    packages: tuple[str, ...],
    under: str | None,
    version: str | None,
    output: Path | None,
) -> None:
    """Infer the step from OLD to NEW statically: source trees, sdists, wheels, NAME==VERSION
    (fetched into the sdist cache, as `verify-imports --against` does) or revisions.

    \b
    vam rules infer vllm_ascend-0.13.0.tar.gz vllm_ascend-0.14.0rc1.tar.gz \\
        --package vllm_ascend --under vllm_ascend.distributed -o step.toml
    vam rules infer --git ~/src/vllm-ascend v0.13.0 v0.14.0rc1
    """
    from migrator.infer import InputError, choose_packages, file_count, infer, step_version

    try:
        old_source, new_source, interims = _open(old, new, git_repo)
        chosen = choose_packages(old_source, new_source, packages)
        step = step_version(new_source, version)
        total = file_count(old_source, chosen) + file_count(new_source, chosen)
        with _progress(total) as tick:
            result = infer(old_source, new_source, chosen, step, under, interims, tick)
    except InputError as exc:
        raise UsageFailure(str(exc)) from None
    for skipped in result.skipped:
        click.echo(f"vam: skipped, does not parse: {skipped}", err=True)
    if output is None:
        click.echo(result.text, nl=False)
    else:
        try:
            output.write_text(result.text, encoding="utf-8")
        except OSError as exc:
            raise UsageFailure(f"{output}: cannot write: {exc.strerror or exc}") from None
    for error in result.errors:
        click.echo(f"vam: inferred table fails its check: {error}", err=True)
    if result.errors:
        sys.exit(1)


def _open(old: str, new: str, git_repo: Path | None) -> tuple[Source, Source, list[Interim]]:
    from migrator.core.dists import open_dist
    from migrator.infer import open_git

    if git_repo is not None:
        return open_git(git_repo, old, new)
    return open_dist(old), open_dist(new), []


@contextmanager
def _progress(total: int) -> Iterator[Callable[[], None]]:
    """A progress bar on stderr when it is a terminal; otherwise a silent tick."""
    if not sys.stderr.isatty():
        yield lambda: None
        return
    with click.progressbar(length=total, label="indexing", file=sys.stderr) as bar:
        yield lambda: bar.update(1)
