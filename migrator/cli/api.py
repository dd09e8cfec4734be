"""`vam verify-api`: the breaks an import rewrite cannot fix (logic in migrator/verify_api/)."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import click

from migrator.cli import options as opt
from migrator.cli.options import UsageFailure
from migrator.core import codes

_HELP = (
    """Static check of a project's use of an upstream package (vLLM first) against a target
release: what breaks that an import rewrite cannot fix.

Reported, each where the project's code fits the baseline release and not the target:
overrides of upstream methods whose signature changed (a parameter added, removed,
renamed, made keyword-only) and their super() calls; abstract methods upstream bases
gained that a subclass does not define; calls of upstream functions and
classes (imported by name, or `module.f`) with keywords the target no longer takes or
without a parameter it now requires; attributes read from upstream objects whose class
is known statically (annotations, `x = Cls(...)`, `self` in a subclass, config fields)
that the class no longer defines. Names an import takes that are gone are `vam
verify-imports --against`'s; this command does not repeat them.

DIST (--against, and --from when it is not a version) is a source tree, an sdist, a
wheel, NAME==VERSION (fetched into ~/.cache/vam-sdists) or a commit of a local git
clone, REPO@REV (`~/src/vllm@main`, `vllm.git@3f2a9c1`; read with git, never checked
out). Nothing is imported: the project and both releases are read with ast, and only
the upstream modules the project touches are parsed, kept by the release's sha256 (a
commit's sha) in ~/.cache/vam-index ($VAM_INDEX_CACHE).

The baseline: --from, else the project's pins of the upstream distribution, else the
installed release (`NAME==VERSION`, fetched when not cached). With none, or a pin that
cannot be fetched, uses are compared against the target alone (more false alarms; stderr
says so); a --from that cannot be opened, or that is a release of another distribution
than --against, is a usage error, as is a DIST that ships no Python package. The upstream
packages: --upstream, else those of the rule pack (--rules, [tool.vam] rules) that the
target ships, else all it ships. Branches of version guards dead at the target
(`if vllm_version_is("0.29.0"):` against 0.33.0) and code under hasattr() or in a try
that catches AttributeError are not read.

\b
Codes (`vam rule CODE` explains one):
"""
    + textwrap.indent(codes.table("VAP"), "  ")
    + """

\b
Examples:
  vam verify-api --against vllm==0.33.0 --upstream vllm vllm_ascend/
  vam verify-api --against ~/src/vllm@main --from ~/src/vllm@v0.30.0 vllm_ascend/
  vam verify-api --against vllm==0.33.0 --write-baseline api-baseline.json .
  vam verify-api --against vllm==0.33.0 --baseline api-baseline.json .   (CI)

\b
Exit status: 0 no errors (warnings allowed; findings in --baseline do not count),
1 errors, 2 usage or configuration error.
"""
)


@click.command("verify-api", help=_HELP)
@opt.PATHS
@click.option("--against", "against", metavar="DIST", required=True,
              help="The target release of the upstream distribution.")
@click.option("--from", "from_spec", metavar="VERSION|DIST",
              help="The baseline release: a version (NAME==VERSION of the upstream "
              "distribution) or a DIST. [default: the project's pin, else the installed one]")
@click.option("--upstream", multiple=True, metavar="PKG",
              help="Top-level package of the upstream distribution (repeatable). "
              "[default: the rule pack's packages the target ships]")
@opt.RULES
@opt.output_format(["text", "json", "github", "sarif"], "Output format.")
@click.option("--baseline", "baseline_file", type=click.Path(dir_okay=False), metavar="FILE",
              help="Findings recorded in FILE (by --write-baseline) are not reported.")
@click.option("--write-baseline", "write_file", type=click.Path(dir_okay=False),
              metavar="FILE", help="Record this run's findings in FILE and exit 0.")
@opt.exclude("Skip files and folders matching GLOB (repeatable; adds to [tool.vam] exclude).")
@opt.version_guards
@opt.quiet("Print the report only, no notes or summary on stderr.")
def verify_api(paths: tuple[str, ...], against: str, from_spec: str | None,
               upstream: tuple[str, ...], rules_name: str | None, fmt: str,
               baseline_file: str | None, write_file: str | None, exclude: tuple[str, ...],
               version_guard: tuple[str, ...], quiet: bool) -> None:
    from migrator import verify_api as va
    from migrator.core.config import ConfigError, load_config
    from migrator.core.sources import InputError
    from rules import RulesError

    opt.dist_spec(against, "--against")
    if from_spec is not None:
        opt.dist_spec(from_spec, "--from", f"a VERSION or a DIST ({opt.DIST_FORMS})")
    for name in upstream:
        if not name.isidentifier():
            raise UsageFailure(f"--upstream {name!r}: not a top-level package name")
    try:
        known = va.read_baseline(Path(baseline_file)) if baseline_file else None
    except ValueError as exc:
        raise UsageFailure(f"--baseline {exc}") from None
    try:
        config = load_config(Path(paths[0]) if paths else Path("."))
        request = va.ApiRequest(paths or (".",), against, opt.load_rules(rules_name), config,
                             from_spec, upstream, (*config.exclude, *exclude),
                             opt.guard_names(version_guard, config.version_guards))
        result = va.verify_api(request)
    except (ConfigError, InputError, RulesError) as exc:
        raise UsageFailure(str(exc)) from None
    except FileNotFoundError as exc:
        raise UsageFailure(f"no such file or directory: {exc}") from None
    if not quiet:
        for note in result.notes:
            click.echo(note, err=True)
    if write_file:
        try:
            va.write_baseline(Path(write_file), result.findings)
        except OSError as exc:
            raise UsageFailure(f"{write_file}: cannot write: {exc.strerror or exc}") from None
        if not quiet:
            click.echo(f"vam: {len(result.findings)} findings recorded in {write_file}",
                       err=True)
        return
    shown = va.new_only(result.findings, known) if known is not None else result.findings
    click.echo(va.render(shown, fmt), nl=False)
    if not quiet:
        mode = f"{result.baseline or 'no baseline'} -> {result.target}"
        click.echo(va.summary(shown, result.checked, result.seconds, mode,
                              len(result.findings) - len(shown)), err=True)
    sys.exit(1 if any(f.is_error for f in shown) else 0)
