"""From command-line arguments to results for `vam migrate` and `vam check`: the effective
settings (flags over [tool.vam]), the files to process, and the run over them."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import click

from migrator.cli.options import UsageFailure
from migrator.core.baseline import Baseline, find_baseline
from migrator.core.config import Config, ConfigError, load_config
from migrator.core.discover import SourceFile, iter_files
from migrator.core.resolver import Resolver
from migrator.core.walk import glob_problem, skip_reason
from migrator.rewrite.engine import FileResult, Options
from migrator.rewrite.runner import Job, default_jobs, run
from rules import Pack, RulesError, load_pack, version_key


@dataclass(frozen=True)
class Setup:
    """One run's settings. `from_version`/`to_version` are the effective window: the flag if
    given, else [tool.vam], else (`from` only) what `baseline` found; None leaves that end
    open."""

    targets: tuple[Path, ...]
    config: Config
    pack: Pack
    from_version: str | None
    to_version: str | None
    baseline: Baseline = Baseline(None)

    @property
    def default_floor(self) -> str | None:
        """The pack's `default-from` when it is the run's baseline: the steps up to it are
        reported (VAM009), not applied."""
        return self.from_version if self.baseline.is_pack_default else None

    def job(self, options: Options, *, write: bool, keep_new: bool) -> Job:
        return Job(
            pack=self.pack,
            from_version=self.from_version,
            to_version=self.to_version,
            options=options,
            write=write,
            keep_new=keep_new,
        )

    def sources(self, exclude: tuple[str, ...], verbose: bool = False) -> list[SourceFile]:
        """The files below the targets, less [tool.vam] exclude and `exclude` globs; with
        `verbose`, one stderr line per file the walk passed over (FIFOs, sockets, devices).
        A bad glob raises UsageFailure."""
        for pattern in exclude:
            problem = glob_problem(pattern)
            if problem:
                raise UsageFailure(f"--exclude {pattern!r}: {problem}")
        patterns = (*self.config.exclude, *exclude)
        skipped: list[Path] = []
        try:
            found = list(iter_files(list(self.targets), patterns, self.config.text_files, skipped))
        except FileNotFoundError as exc:
            raise UsageFailure(f"no such file or directory: {exc}") from None
        if verbose:
            for path in skipped:
                click.echo(f"vam: skipped {path}: {skip_reason(path)}", err=True)
        return found


def setup(
    paths: tuple[str, ...],
    rules_name: str | None,
    from_version: str | None,
    to_version: str | None,
    quiet: bool = False,
) -> Setup:
    """Configuration (found from the first path) and table for a run; says on stderr where
    the baseline came from when the project's pins or the installed distribution gave it
    (unless `quiet`), and warns when no step lies in the window. User mistakes raise
    UsageFailure (exit 2)."""
    if any(not p for p in paths):
        raise UsageFailure("empty path given")
    targets = tuple(Path(p) for p in paths) or (Path("."),)
    for target in targets:
        if not target.exists():
            raise UsageFailure(f"no such file or directory: {target}")
    try:
        config = load_config(targets[0])
        pack = load_pack(rules_name or config.rules)
        to_version = to_version or config.to_version
        baseline = find_baseline(from_version, config, pack, targets[0], to_version)
        found = Setup(targets, config, pack, baseline.version, to_version, baseline)
        # Built for its check of the versions and its window; each worker builds its own.
        steps = Resolver(pack, found.from_version, found.to_version).steps
    except (ConfigError, RulesError) as exc:
        raise UsageFailure(str(exc)) from None
    if baseline.note and not quiet:
        click.echo(baseline.note, err=True)
    listed = ", ".join(s.version for s in pack.steps)
    if not steps:
        window = f"after {found.from_version or 'the start'} and up to " \
                 f"{found.to_version or 'the end'}"
        click.echo(f"vam: warning: no step of the {pack.name} table lies {window} "
                   f"(steps: {listed}); nothing to migrate", err=True)
    elif found.to_version and not _is_step(pack, found.to_version):
        # A release between steps is a fair target, but a typo (0.41.0 for 0.14.0) looks alike.
        click.echo(f"vam: note: {found.to_version} is not a step of the {pack.name} table; "
                   f"applying the steps up to {steps[-1].version} (steps: {listed})", err=True)
    return found


def _is_step(pack: Pack, version: str) -> bool:
    key = version_key(version)
    return any(key in (version_key(s.version), version_key(s.release)) for s in pack.steps)


def execute(sources: list[SourceFile], job: Job, jobs: int | None) -> list[FileResult]:
    """Run the pipeline, with a progress bar on an interactive terminal for long runs."""
    workers = jobs or default_jobs()
    stream = sys.stderr
    if len(sources) < 200 or not stream.isatty():
        return list(run(sources, job, workers))
    with click.progressbar(length=len(sources), label="vam", file=stream, show_pos=True) as bar:
        return list(run(sources, job, workers, on_result=lambda _: bar.update(1)))
