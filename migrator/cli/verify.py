"""`vam verify-imports`: the import-only CI check (logic in migrator/verify_imports/)."""

from __future__ import annotations

import sys
import textwrap
import time

import click

from migrator.cli import options as opt
from migrator.cli.options import UsageFailure
from migrator.core import codes

_HELP = (
    """Import-only CI check: every first-party import resolves.

A target is a package directory, a directory of Python files, a single file (as
pre-commit passes them) or an importable package name [default: .]. The whole top-level
package a target belongs to is indexed, so one file gets the same findings as a full run.

Static mode (default) runs nothing and needs no third-party package: for every `import`
and `from ... import` of a first-party module (absolute or relative, in functions and
under TYPE_CHECKING too) the module must exist and each name must be a submodule or be
bound in it (def, class, assignment, import, star-import chains). --dynamic imports each
module in a fresh interpreter instead. --against DIST checks the imports of a third-party
distribution against one release of it ("what breaks if we upgrade to B?"): names a
deprecation __getattr__ still serves are warnings (VAI104) naming the new home; a missing
path is followed through the bundled move table ("moved to Y in V (move table)", or
removed, with the table's hint) before any guess by name ("(a guess: same name elsewhere)").
Lines DIST's version never runs are not checked: the branch of a version guard
([tool.vam] version-guards, e.g. `if vllm_version_is("0.13.0"):`) dead at that version,
as in the old lane `vam migrate --keep-compat` writes; the `except ImportError` fallback
of a `try` whose imports all resolve there (`--compat-style try`'s old lane).

\b
Codes (`vam rule CODE` explains one):
"""
    + textwrap.indent(codes.table("VAI"), "  ")
    + """

A line carrying `# vam: ignore` or `# vam: ignore[VAI001]` is not reported. The
report goes to stdout; one summary line (errors, warnings, the files with an error, the
files scanned) to stderr, in every format (-q: none).

\b
Exit status: 0 no errors (warnings allowed), 1 errors, 2 usage or configuration error.
"""
)


@click.command("verify-imports", help=_HELP)
@click.argument("targets", nargs=-1, metavar="[PACKAGE|PATH]...")
@click.option(
    "--dynamic",
    is_flag=True,
    help="Import every module in its own subprocess instead of the static check.",
)
@click.option(
    "--timeout",
    "timeout_s",
    type=float,
    metavar="S",
    help="Seconds one module may take to import in --dynamic mode. "
    "[default: 60, or [tool.vam.verify-imports] timeout]",
)
@opt.output_format(["text", "json", "github", "sarif"], "Output format.", dest="output_format")
@click.option(
    "--optional",
    multiple=True,
    metavar="MOD",
    help="Third-party module whose absence only skips a module in --dynamic mode "
    "(repeatable; added to torch_npu, mooncake, memcache_hybrid, ucm and "
    "[tool.vam.verify-imports] optional).",
)
@click.option(
    "--generated",
    multiple=True,
    metavar="MOD",
    help="First-party module the build creates (a compiled extension, a generated "
    "_build_info.py): it exists, its names are not checked (repeatable).",
)
@click.option(
    "--against",
    "against",
    metavar="DIST",
    help="Check the imports of a third-party distribution instead: every import and "
    "dotted-path string (mock.patch targets) naming one of DIST's packages must resolve in "
    "DIST, a source tree, an sdist, a wheel, a commit of a local git clone REPO@REV (read with "
    "git, never checked out) or NAME==VERSION (fetched from pip's index into "
    "~/.cache/vam-sdists, or $VAM_SDIST_CACHE). DIST's index is kept by its sha256 in "
    "~/.cache/vam-index ($VAM_INDEX_CACHE, or $XDG_CACHE_HOME/vam-index): delete it to clear.",
)
@opt.quiet("Print the report only, no summary line on stderr.")
@click.option(
    "--python",
    "python",
    metavar="PATH",
    help="Interpreter for --dynamic mode; it also locates targets given as package names. "
    "[default: the one running vam]",
)
def verify_imports(
    targets: tuple[str, ...],
    dynamic: bool,
    timeout_s: float | None,
    output_format: str,
    optional: tuple[str, ...],
    generated: tuple[str, ...],
    against: str | None,
    quiet: bool,
    python: str | None,
) -> None:
    import shutil
    from pathlib import Path

    from migrator import verify_imports as vi
    from migrator.core.config import ConfigError, load_config
    from migrator.core.sources import InputError

    if timeout_s is not None and not timeout_s > 0:
        raise UsageFailure(f"--timeout must be a positive number of seconds, got {timeout_s:g}")
    if python is not None and shutil.which(python) is None:
        raise UsageFailure(f"--python: no such interpreter: {python}")
    if against is not None:
        opt.dist_spec(against, "--against")
    if against is not None and dynamic:
        raise UsageFailure("--against checks statically; it cannot be combined with --dynamic")
    mode = "dynamic" if dynamic else "static"
    try:
        settings = vi.load_settings()
        paths = list(targets) or ["."]
        if against is not None:
            started = time.perf_counter()
            guards = load_config(Path(paths[0])).version_guards
            dist = vi.load_dist(against)
            mode = f"against {dist.label}"
            result = vi.verify_against(dist, paths, guards)
            result.seconds = time.perf_counter() - started  # reading the index counts too
        elif dynamic:
            result = vi.verify_dynamic(
                paths,
                timeout_s=timeout_s or settings.timeout_s,
                optional=(*settings.optional, *optional),
                python=python,
            )
        else:
            result = vi.verify_static(paths, generated=(*settings.generated, *generated))
    except (vi.TargetError, vi.SettingsError, InputError, ConfigError) as exc:
        raise UsageFailure(str(exc)) from None
    click.echo(vi.render(result.findings, output_format), nl=False)
    if not quiet:  # stderr in every format, as `vam check`: stdout stays the report
        click.echo(vi.summary(result.findings, result.checked, result.seconds, mode), err=True)
    sys.exit(1 if result.has_errors else 0)
