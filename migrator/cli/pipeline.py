"""From command-line arguments to results for `vam migrate` and `vam check`: the effective
settings (flags over [tool.vam]), the files to process, and the run over them."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import click

from migrator.cli.options import UsageFailure
from migrator.cli.packs import configured_windows, load_packs, versions_by_pack
from migrator.core.baseline import find_baseline
from migrator.core.config import Config, ConfigError, load_config
from migrator.core.discover import SourceFile, iter_files
from migrator.core.resolver import Resolver
from migrator.core.walk import glob_problem, skip_reason
from migrator.rewrite.engine import FileResult, Options
from migrator.rewrite.lanes import Lane
from migrator.rewrite.runner import Job, default_jobs, run
from rules import Pack, RulesError, Step, version_key


@dataclass(frozen=True)
class Setup:
    """One run's settings: its packs with their effective windows (`migrator.rewrite.lanes`),
    in the order they apply. Each window's `from` is the flag if given, else [tool.vam], else
    what `migrator.core.baseline` found for that pack; `to` the flag, else [tool.vam]; None
    leaves that end open."""

    targets: tuple[Path, ...]
    config: Config
    lanes: tuple[Lane, ...]

    def job(self, options: Options, *, write: bool, keep_new: bool) -> Job:
        return Job(self.lanes, options, write=write, keep_new=keep_new)

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
    from_versions: tuple[str, ...] = (),
    to_versions: tuple[str, ...] = (),
    quiet: bool = False,
) -> Setup:
    """Configuration (found from the first path), packs and windows for a run; says on
    stderr where each baseline came from when the project's pins or the installed
    distribution gave it (unless `quiet`; prefixed by the pack when several run), and warns
    when no step of a pack lies in its window. `from_versions`/`to_versions` are the
    `--from`/`--to` values (`VERSION` or `PACK=VERSION`). User mistakes raise UsageFailure
    (exit 2)."""
    if any(not p for p in paths):
        raise UsageFailure("empty path given")
    targets = tuple(Path(p) for p in paths) or (Path("."),)
    for target in targets:
        if not target.exists():
            raise UsageFailure(f"no such file or directory: {target}")
    try:
        config = load_config(targets[0])
        packs = load_packs(rules_name, config)
        names = tuple(pack.name for pack in packs)
        froms = versions_by_pack("--from", from_versions, names)
        tos = versions_by_pack("--to", to_versions, names)
        windows = configured_windows(config, names, rules_name is not None, (froms, tos))
        lanes = []
        for pack in packs:
            given_from, config_from = froms.get(pack.name), windows[pack.name][0]
            to_version = tos.get(pack.name) or windows[pack.name][1]
            baseline = find_baseline(given_from, replace(config, from_version=config_from),
                                     pack, targets[0], to_version)
            floor = baseline.version if baseline.is_pack_default else None
            lane = Lane(pack, baseline.version, to_version, floor)
            # Built for its check of the versions and its window; each worker builds its own.
            steps = Resolver(pack, lane.from_version, lane.to_version).steps
            if baseline.note and not quiet:
                click.echo(_for_pack(baseline.note, pack.name, len(packs)), err=True)
            _warn_window(lane, steps)
            lanes.append(lane)
    except (ConfigError, RulesError) as exc:
        raise UsageFailure(str(exc)) from None
    return Setup(targets, config, tuple(lanes))


def _for_pack(note: str, name: str, packs: int) -> str:
    return note if packs == 1 else f"vam: {name}: {note.removeprefix('vam: ')}"


def _warn_window(lane: Lane, steps: Sequence[Step]) -> None:
    pack = lane.pack
    listed = ", ".join(s.version for s in pack.steps)
    if not steps:
        window = f"after {lane.from_version or 'the start'} and up to " \
                 f"{lane.to_version or 'the end'}"
        click.echo(f"vam: warning: no step of the {pack.name} table lies {window} "
                   f"(steps: {listed}); nothing to migrate", err=True)
    elif lane.to_version and not _is_step(pack, lane.to_version):
        # A release between steps is a fair target, but a typo (0.41.0 for 0.14.0) looks alike.
        click.echo(f"vam: note: {lane.to_version} is not a step of the {pack.name} table; "
                   f"applying the steps up to {steps[-1].version} (steps: {listed})", err=True)


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
