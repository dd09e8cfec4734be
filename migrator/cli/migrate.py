"""`vam migrate`, `vam check` and `vam explain`: rewrite, report, and say where a name went."""

from __future__ import annotations

import sys
import textwrap
import time
from dataclasses import replace

import click

from migrator.cli import options as opt
from migrator.cli.options import UsageFailure
from migrator.cli.packs import versions_by_pack
from migrator.cli.pipeline import Setup, execute, setup
from migrator.cli.stdin import process_stdin, stdin_filename, wants_stdin
from migrator.core import codes
from migrator.core.findings import Finding
from migrator.core.report import (
    FORMATS,
    is_info,
    kind_counts,
    render,
    summary,
    text_line,
    unified_diff,
)
from migrator.core.resolver import Resolver
from migrator.core.tables import as_dotted, explain_name
from migrator.rewrite.engine import FileResult, Options
from migrator.rewrite.lanes import Lane
from migrator.rewrite.runner import Job
from rules import RulesError, is_dotted, version_key

_WORKERS = "Worker processes. [default: number of CPUs]"


@click.command()
@opt.PATHS
@opt.RULES
@opt.versions(
    "Version the code was written for: only later steps apply. With several packs, "
    "PACK=VERSION, once per pack. [default: [tool.vam] from, else the project's pin of the "
    "pack's distribution (vllm-ascend, vllm), else the installed release, else the table's"
    " default-from (0.13.0 for vllm_ascend; earlier names are reported, VAM009)]",
    "Version to migrate to: later steps are left out. With several packs, PACK=VERSION "
    "(repeatable). [default: [tool.vam] to, else the latest step]",
)
@click.option("--diff", is_flag=True, help="Print a unified diff instead of writing files.")
@click.option(
    "--check",
    is_flag=True,
    help="Write nothing; exit 1 if any file would change (combine with --diff to see it).",
)
@opt.jobs(_WORKERS)
@opt.exclude("Skip files and folders matching GLOB (repeatable; adds to [tool.vam] exclude).")
@opt.no_comments("Leave comments and docstrings alone.")
@click.option(
    "--drop-compat",
    metavar="VERSION",
    help="Collapse every compatibility block guarded for VERSION or older to its newer "
    "branch (support for VERSION is dropped).",
)
@opt.keep_compat
@opt.version_guards
@opt.release_pins
@opt.quiet("Print only diffs and problems, no summary.")
@opt.verbose
@stdin_filename
def migrate(
    paths: tuple[str, ...],
    rules_name: str | None,
    from_version: tuple[str, ...],
    to_version: tuple[str, ...],
    diff: bool,
    check: bool,
    jobs: int | None,
    exclude: tuple[str, ...],
    no_comments: bool,
    drop_compat: str | None,
    keep_compat: str | None,
    compat_style: str | None,
    version_guard: tuple[str, ...],
    ignore_release_pins: bool,
    quiet: bool,
    verbose: bool,
    stdin_filename: str | None,
) -> None:
    """Rewrite every reference to a moved name below PATHS (default: the current folder).

    Imports (absolute and relative), attribute chains, mock.patch targets and other strings,
    comments and docstrings in Python; YAML, JSON, TOML, shell, Dockerfiles, Markdown, reST
    and notebooks as text. Files with nothing to change are not written; writes are atomic.

    \b
    Examples:
      vam migrate --diff src/          preview, write nothing
      vam migrate .                    rewrite in place
      vam migrate --check .            CI: exit 1 if anything is stale
      vam migrate --rules my_table.toml --from 0.12.0 src/
      vam migrate --rules vllm --drop-compat 0.11.0 .   also drop vLLM 0.11.0 support
      vam migrate --rules vllm --keep-compat 0.13.0 .   dual lane: 0.13.0 and the newest
      vam migrate --rules vllm_ascend,vllm --to vllm=0.13.0 .   both tables, one pass
      vam migrate - --stdin-filename pkg/mod.py < mod.py   migrated text on stdout

    Exit status: 0 done (or nothing to do), 1 with --check when files would change, or when
    some file failed (does not parse, cannot be decoded or written) or holds a reference
    that needs a human; 2 usage or configuration error.
    """
    from_stdin = wants_stdin(paths, stdin_filename)
    run = setup(() if from_stdin else paths, rules_name, from_version, to_version, quiet)
    dry_run = diff or check
    options = _options(run, no_comments, drop_compat, version_guard, ignore_release_pins)
    run, options = _lanes(run, options, keep_compat, compat_style)
    if from_stdin:
        _migrate_stdin(stdin_filename, run.job(options, write=False, keep_new=True), diff, check,
                       quiet)
        return
    sources = run.sources(exclude, verbose)
    results = execute(sources, run.job(options, write=not dry_run, keep_new=diff), jobs)
    failing, changed = _report(results, diff, quiet, dry_run)
    if failing or (check and changed):
        sys.exit(1)


def _options(
    run: Setup,
    no_comments: bool,
    drop_compat: str | None,
    version_guard: tuple[str, ...],
    ignore_release_pins: bool,
) -> Options:
    """The engine's options from the command line over `[tool.vam]`; UsageFailure for a
    `--drop-compat` that is not a version."""
    if drop_compat is not None:
        try:
            version_key(drop_compat)
        except RulesError:
            raise UsageFailure(f"--drop-compat {drop_compat!r}: not a version") from None
    return Options(
        comments=run.config.comments and not no_comments,
        line_length=run.config.line_length,
        version_guards=opt.guard_names(version_guard, run.config.version_guards),
        drop_compat=drop_compat,
        release_pins=not ignore_release_pins,
    )


def _lanes(
    run: Setup, options: Options, keep: str | None, style: str | None
) -> tuple[Setup, Options]:
    """`run` and `options` with `--keep-compat` (`VERSION`, or `PACK=VERSION` when several
    packs run: only that pack's imports get two lanes) and `--compat-style`; UsageFailure for
    a bad mix."""
    problem = opt.compat_problem(keep, options.drop_compat, style, options.version_guards)
    if problem:
        raise UsageFailure(problem)
    if keep is None:
        return run, options
    names = [lane.pack.name for lane in run.lanes]
    try:
        kept = versions_by_pack("--keep-compat", (keep,), names)
    except RulesError as exc:
        raise UsageFailure(str(exc)) from None
    lanes = tuple(replace(lane, keep_compat=kept.get(lane.pack.name)) for lane in run.lanes)
    for lane in lanes:
        late = _keep_too_late(lane, len(lanes) > 1)
        if late:
            raise UsageFailure(late)
    return replace(run, lanes=lanes), replace(
        options,
        keep_compat=next(iter(kept.values())),
        compat_style=style or "if",
        version_helper_module=run.config.version_helper_module,
    )


def _keep_too_late(lane: Lane, named: bool) -> str | None:
    """Why `lane`'s `--keep-compat` version has no old lane to keep (None: it has one): it is
    at or after `--to`, or at or after the release of the last step the lane applies."""
    version = lane.keep_compat
    if version is None:
        return None
    steps = Resolver(lane.pack, lane.from_version, lane.to_version).steps
    end = lane.to_version or (steps[-1].version if steps else None)
    key = version_key(version)
    late = lane.to_version is not None and key >= version_key(lane.to_version)
    if steps and key >= version_key(steps[-1].release):
        late = True
    if not late:
        return None
    pack = f"{lane.pack.name}=" if named else ""
    return (
        f"--keep-compat {pack}{version} is not before --to {pack}{end}: no step after it is "
        "applied, so there is no old lane to keep (give the release the code still supports)"
    )


def _report(
    results: list[FileResult], diff: bool, quiet: bool, dry_run: bool
) -> tuple[bool, int]:
    """Diffs on stdout (with --diff), problems and the summary on stderr; returns (whether a
    problem other than info was found, how many files changed)."""
    out = sys.stdout
    problems: list[Finding] = []
    for result in results:
        if diff and result.new and result.old is not None:
            out.write(unified_diff(result.path, result.old, result.new, result.encoding))
        problems.extend(f for f in result.findings if not f.fixable)
    for finding in problems:
        click.echo(text_line(finding), err=True)
    problems = [f for f in problems if not is_info(f)]
    changed = sum(1 for r in results if r.new is not None)
    failed = sum(1 for r in results if r.failed)
    if not quiet:
        kinds = kind_counts(f for r in results if r.new is not None for f in r.findings)
        click.echo(
            summary(len(results), sum(r.parsed for r in results), changed, failed, kinds, dry_run),
            err=True,
        )
    return bool(problems), changed


def _migrate_stdin(filename: str | None, job: Job, diff: bool, check: bool, quiet: bool) -> None:
    """`vam migrate -`: the migrated text (or the diff; nothing with --check) on stdout,
    problems on stderr, exit as for a file."""
    data, result = process_stdin(filename, job)
    if check and not diff:
        # Nothing goes to stdout, so the summary is all a --check run has to say: as for files.
        failing, changed = _report([result], False, quiet, True)
        if failing or changed:
            sys.exit(1)
        return
    new = data if result.new is None else result.new
    if diff:
        if result.new is not None:
            sys.stdout.write(unified_diff(result.path, data, new, result.encoding))
    elif not check:
        sys.stdout.flush()
        sys.stdout.buffer.write(new)
    problems = [f for f in result.findings if not f.fixable]
    for finding in problems:
        click.echo(text_line(finding), err=True)
    if any(not is_info(f) for f in problems) or (check and result.new is not None):
        sys.exit(1)


_CHECK_HELP = (
    "Report stale references below PATHS without changing anything (the pre-commit hook).\n\n"
    "\b\nCodes (`vam rule CODE` explains one):\n"
    + textwrap.indent(codes.table("VAM"), "  ")
    + "\n\nExit status: 0 clean, 1 findings, 2 usage or configuration error.\n"
)


@click.command(help=_CHECK_HELP)
@opt.PATHS
@opt.RULES
@opt.versions("As for `vam migrate`.", "As for `vam migrate`.")
@opt.output_format(
    FORMATS, "text: path:line:col lines; json; github: workflow annotations; sarif 2.1.0."
)
@opt.jobs(_WORKERS)
@opt.exclude("Skip matching files (repeatable).")
@opt.no_comments("Ignore comments and docstrings.")
@click.option(
    "--keep-compat",
    metavar="VERSION",
    help="As for `vam migrate`: the old paths a text file keeps for VERSION are not stale "
    "(VAM013).",
)
@opt.version_guards
@opt.release_pins
@opt.quiet("Print findings only, no summary line.")
@opt.verbose
@stdin_filename
def check(
    paths: tuple[str, ...],
    rules_name: str | None,
    from_version: tuple[str, ...],
    to_version: tuple[str, ...],
    fmt: str,
    quiet: bool,
    verbose: bool,
    stdin_filename: str | None,
    jobs: int | None,
    exclude: tuple[str, ...],
    no_comments: bool,
    keep_compat: str | None,
    version_guard: tuple[str, ...],
    ignore_release_pins: bool,
) -> None:
    started = time.monotonic()
    from_stdin = wants_stdin(paths, stdin_filename)
    run = setup(() if from_stdin else paths, rules_name, from_version, to_version, quiet)
    options = Options(
        comments=run.config.comments and not no_comments,
        report_only=True,
        version_guards=opt.guard_names(version_guard, run.config.version_guards),
        release_pins=not ignore_release_pins,
    )
    run, options = _lanes(run, options, keep_compat, None)
    job = run.job(options, write=False, keep_new=False)
    if from_stdin:
        results = [process_stdin(stdin_filename, job)[1]]
    else:
        results = execute(run.sources(exclude, verbose), job, jobs)
    shown = [f for result in results for f in result.findings]
    sys.stdout.write(render(shown, fmt))
    # Info findings are printed but are not stale: they neither count nor fail the check.
    findings = [f for f in shown if not is_info(f)]
    if not quiet:
        click.echo(_check_summary(findings, len(results), time.monotonic() - started), err=True)
    if findings:
        sys.exit(1)


def _check_summary(findings: list[Finding], scanned: int, seconds: float) -> str:
    if not findings:
        return f"vam: {scanned} files scanned, 0 stale references ({seconds:.2f} s)"
    # A file that does not parse is not rewritten: its references are not fixable (yet).
    problems = [f for f in findings if f.code.startswith("VAM9")]
    failed = {f.path for f in problems}
    references = [f for f in findings if not f.code.startswith("VAM9")]
    fixable = sum(f.fixable and f.path not in failed for f in references)
    files = len({f.path for f in references})
    text = (f"Found {len(references)} stale reference(s) in {files} file(s); {fixable} fixable "
            f"with `vam migrate`")
    if problems:
        text += f"; {len(failed)} file(s) could not be checked (VAM9xx)"
    return f"{text} ({scanned} files scanned, {seconds:.2f} s)."


@click.command()
@click.argument("name")
@opt.RULES
def explain(name: str, rules_name: str | None) -> None:
    """Say where NAME went, step by step: a dotted name or a file path.

    \b
    Examples:
      vam explain vllm_ascend.distributed.kvpool.backend.backend.Backend
      vam explain vllm_ascend/distributed/mooncake_connector.py
      vam explain --rules vllm_ascend,vllm vllm.utils.get_open_port

    Exit status: 0 the name moved, was removed or stays put; 1 no table knows it.
    """
    packs = opt.load_rule_packs(rules_name)
    found = False
    for pack in packs:
        dotted = as_dotted(name, pack.packages)
        if not is_dotted(dotted):
            raise UsageFailure(f"not a dotted name or module path: {name!r}")
        lines = explain_name(pack, dotted)
        if lines:
            click.echo("\n".join(lines))
            found = True
    if not found:
        tables = " or ".join(f"the {pack.name} table" for pack in packs)
        click.echo(
            f"{dotted}: not in {tables} (not moved, not removed, not listed as staying put)"
        )
        sys.exit(1)
