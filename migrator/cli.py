"""The `vam` command line (click).

Exit codes follow ruff and black: 0 nothing to report, 1 findings, changes or per-file
failures, 2 usage or configuration errors (one line on stderr, never a traceback).
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from migrator import __version__
from migrator.config import Config, ConfigError, load_config
from migrator.discover import SourceFile, iter_files
from migrator.engine import FileResult, Options, decode_python
from migrator.findings import Finding
from migrator.report import FORMATS, kind_counts, render, summary, text_line, unified_diff
from migrator.resolver import Resolver
from migrator.rules_tools import check_against, explain_name, export_ruff, show_pack
from migrator.runner import Job, default_jobs, run
from rules import Pack, RulesError, bundled, is_dotted, load_pack


class _Main(click.Group):
    """The command group; Ctrl-C ends a command with the shell's 130, not a findings exit."""

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            click.echo("vam: interrupted", err=True)
            ctx.exit(130)


class UsageFailure(click.ClickException):
    """A user mistake: one line on stderr, exit code 2."""

    exit_code = 2

    def show(self, file=None) -> None:  # type: ignore[no-untyped-def]
        click.echo(f"vam: error: {self.format_message()}", err=True)


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


# -- shared plumbing -------------------------------------------------------------------------

_PATHS = click.argument("paths", nargs=-1, type=click.Path())
_RULES = click.option(
    "--rules",
    "rules_name",
    metavar="NAME|FILE",
    help="Rule pack: a bundled name (see `vam rules list`) or a TOML file. "
    "[default: vllm_ascend, or [tool.vam] rules]",
)


def _setup(
    paths: tuple[str, ...],
    rules_name: str | None,
    from_version: str | None,
    to_version: str | None,
) -> tuple[list[Path], Config, Pack, Resolver]:
    """Configuration, table and resolver for a run; user mistakes become exit 2."""
    if any(not p for p in paths):
        raise UsageFailure("empty path given")
    targets = [Path(p) for p in paths] or [Path(".")]
    for target in targets:
        if not target.exists():
            raise UsageFailure(f"no such file or directory: {target}")
    try:
        config = load_config(targets[0])
        pack = load_pack(rules_name or config.rules)
        resolver = Resolver(
            pack, from_version or config.from_version, to_version or config.to_version
        )
    except (ConfigError, RulesError) as exc:
        raise UsageFailure(str(exc)) from None
    if not resolver.steps:
        window = f"after {from_version or config.from_version or 'the start'} and up to " \
                 f"{to_version or config.to_version or 'the end'}"
        steps = ", ".join(s.version for s in pack.steps)
        click.echo(f"vam: warning: no step of the {pack.name} table lies {window} "
                   f"(steps: {steps}); nothing to migrate", err=True)
    return targets, config, pack, resolver


def _sources(targets: list[Path], config: Config, exclude: tuple[str, ...]) -> list[SourceFile]:
    try:
        return list(iter_files(targets, (*config.exclude, *exclude), config.text_files))
    except FileNotFoundError as exc:
        raise UsageFailure(f"no such file or directory: {exc}") from None


def _execute(sources: list[SourceFile], job: Job, jobs: int | None) -> list[FileResult]:
    """Run the pipeline, with a progress bar on an interactive terminal for long runs."""
    workers = jobs or default_jobs()
    stream = sys.stderr
    if len(sources) < 200 or not stream.isatty():
        return list(run(sources, job, workers))
    with click.progressbar(length=len(sources), label="vam", file=stream, show_pos=True) as bar:
        return list(run(sources, job, workers, on_result=lambda _: bar.update(1)))


def _display_encoding(result: FileResult, old: bytes) -> str:
    if result.path.endswith((".py", ".pyi")):
        try:
            return decode_python(old)[0]
        except (SyntaxError, UnicodeDecodeError, LookupError):
            pass
    return "utf-8"


# -- vam migrate -------------------------------------------------------------------------------


@main.command()
@_PATHS
@_RULES
@click.option(
    "--from",
    "from_version",
    metavar="VERSION",
    help="Version the code was written for: only later steps apply. [default: all steps]",
)
@click.option(
    "--to",
    "to_version",
    metavar="VERSION",
    help="Version to migrate to: later steps are left out. [default: latest step]",
)
@click.option("--diff", is_flag=True, help="Print a unified diff instead of writing files.")
@click.option(
    "--check",
    is_flag=True,
    help="Write nothing; exit 1 if any file would change (combine with --diff to see it).",
)
@click.option(
    "--jobs",
    "-j",
    type=click.IntRange(min=1),
    metavar="N",
    help="Worker processes. [default: number of CPUs]",
)
@click.option(
    "--exclude",
    multiple=True,
    metavar="GLOB",
    help="Skip files and folders matching GLOB (repeatable; adds to [tool.vam] exclude).",
)
@click.option("--no-comments", is_flag=True, help="Leave comments and docstrings alone.")
@click.option("--quiet", "-q", is_flag=True, help="Print only diffs and problems, no summary.")
def migrate(
    paths: tuple[str, ...],
    rules_name: str | None,
    from_version: str | None,
    to_version: str | None,
    diff: bool,
    check: bool,
    jobs: int | None,
    exclude: tuple[str, ...],
    no_comments: bool,
    quiet: bool,
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

    Exit status: 0 done (or nothing to do), 1 with --check when files would change, or when
    some file failed (does not parse, cannot be decoded or written) or holds a reference
    that needs a human; 2 usage or configuration error.
    """
    targets, config, pack, resolver = _setup(paths, rules_name, from_version, to_version)
    sources = _sources(targets, config, exclude)
    dry_run = diff or check
    options = Options(comments=config.comments and not no_comments, line_length=config.line_length)
    job = Job(
        pack,
        from_version or config.from_version,
        to_version or config.to_version,
        options,
        write=not dry_run,
        keep_new=diff,
    )
    results = _execute(sources, job, jobs)
    out = sys.stdout
    problems: list[Finding] = []
    for result in results:
        if diff and result.new:
            old = Path(result.path).read_bytes()
            out.write(unified_diff(result.path, old, result.new, _display_encoding(result, old)))
        problems.extend(f for f in result.findings if not f.fixable)
    for finding in problems:
        click.echo(text_line(finding), err=True)
    changed = sum(1 for r in results if r.new is not None)
    failed = sum(1 for r in results if r.failed)
    if not quiet:
        kinds = kind_counts(f for r in results if r.new is not None for f in r.findings)
        click.echo(
            summary(len(results), sum(r.parsed for r in results), changed, failed, kinds, dry_run),
            err=True,
        )
    if problems or (check and changed):
        sys.exit(1)


# -- vam check ---------------------------------------------------------------------------------


@main.command()
@_PATHS
@_RULES
@click.option("--from", "from_version", metavar="VERSION", help="As for `vam migrate`.")
@click.option("--to", "to_version", metavar="VERSION", help="As for `vam migrate`.")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    default="text",
    show_default=True,
    help="text: path:line:col lines; json; github: workflow annotations; sarif 2.1.0.",
)
@click.option(
    "--jobs",
    "-j",
    type=click.IntRange(min=1),
    metavar="N",
    help="Worker processes. [default: number of CPUs]",
)
@click.option("--exclude", multiple=True, metavar="GLOB", help="Skip matching files (repeatable).")
@click.option("--no-comments", is_flag=True, help="Ignore comments and docstrings.")
def check(
    paths: tuple[str, ...],
    rules_name: str | None,
    from_version: str | None,
    to_version: str | None,
    fmt: str,
    jobs: int | None,
    exclude: tuple[str, ...],
    no_comments: bool,
) -> None:
    """Report stale references below PATHS without changing anything (the pre-commit hook).

    \b
    Codes:
      VAM001  reference to a moved name (fix: `vam migrate`)
      VAM002  reference a tool cannot rewrite safely (a path split across string
              literals, parent and child passed separately, a star import from a
              module that lost names, a moved name reached through a local alias)
      VAM003  reference to a name removed with no replacement
      VAM901  Python file that does not parse     VAM902  file that cannot be read
      VAM903  file that cannot be written         VAM999  a bug in vam (please report)

    Exit status: 0 clean, 1 findings, 2 usage or configuration error.
    """
    targets, config, pack, _ = _setup(paths, rules_name, from_version, to_version)
    sources = _sources(targets, config, exclude)
    options = Options(comments=config.comments and not no_comments, report_only=True)
    job = Job(
        pack,
        from_version or config.from_version,
        to_version or config.to_version,
        options,
        write=False,
        keep_new=False,
    )
    findings = [f for result in _execute(sources, job, jobs) for f in result.findings]
    sys.stdout.write(render(findings, fmt))
    if fmt == "text" and findings:
        # A file that does not parse is not rewritten: its references are not fixable (yet).
        failed = {f.path for f in findings if f.code.startswith("VAM9")}
        fixable = sum(f.fixable and f.path not in failed for f in findings)
        files = len({f.path for f in findings})
        click.echo(f"Found {len(findings)} stale reference(s) in {files} file(s); "
                   f"{fixable} fixable with `vam migrate`.", err=True)
    if findings:
        sys.exit(1)


# -- vam explain -------------------------------------------------------------------------------


@main.command()
@click.argument("name")
@_RULES
def explain(name: str, rules_name: str | None) -> None:
    """Say where NAME went, step by step: a dotted name or a file path.

    \b
    Examples:
      vam explain vllm_ascend.distributed.kvpool.backend.backend.Backend
      vam explain vllm_ascend/distributed/mooncake_connector.py

    Exit status: 0 the name moved, was removed or stays put; 1 the table does not know it.
    """
    pack = _load(rules_name)
    dotted = _as_dotted(name, pack.packages)
    if not is_dotted(dotted):
        raise UsageFailure(f"not a dotted name or module path: {name!r}")
    lines = explain_name(pack, dotted)
    if not lines:
        click.echo(
            f"{dotted}: not in the {pack.name} table (not moved, not removed, not listed "
            "as staying put)"
        )
        sys.exit(1)
    click.echo("\n".join(lines))


def _tree_root(tree: Path, packages: tuple[str, ...]) -> Path:
    """The folder that holds the packages: `tree` itself, or its parent when `tree` is the
    package folder (`.../vllm_ascend`)."""
    if not any((tree / package).is_dir() for package in packages) and tree.name in packages:
        return tree.parent
    return tree


def _as_dotted(name: str, packages: tuple[str, ...]) -> str:
    """`pkg.mod.obj` from the spellings users paste: a dotted name, `pkg.mod:obj`, or a file
    path (`./pkg/mod.py`, `/.../site-packages/pkg/sub/__init__.py`, `pkg/sub/`)."""
    text = name.strip().replace(":", ".")
    if "/" not in text and "\\" not in text:
        return text
    parts = [p for p in text.replace("\\", "/").split("/") if p and p != "."]
    starts = [i for i, part in enumerate(parts) if part in packages]
    if starts:
        parts = parts[starts[0] :]
    if parts and parts[-1].endswith((".py", ".pyi")):
        parts[-1] = parts[-1].rsplit(".", 1)[0]
    if parts and parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _load(rules_name: str | None) -> Pack:
    try:
        return load_pack(rules_name or load_config(Path(".")).rules)
    except (ConfigError, RulesError) as exc:
        raise UsageFailure(str(exc)) from None


# -- vam rules ---------------------------------------------------------------------------------


@main.group()
def rules() -> None:
    """List, show, validate and export move tables (rule packs)."""


@rules.command("list")
def rules_list() -> None:
    """The bundled rule packs and their steps."""
    for pack_name, path in bundled().items():
        try:
            pack = load_pack(pack_name)
        except RulesError as exc:
            raise UsageFailure(str(exc)) from None
        steps = ", ".join(s.version for s in pack.steps)
        click.echo(f"{pack.name}  steps: {steps}  ({path.name})")
        if pack.description:
            click.echo(f"  {pack.description}")


@rules.command("show")
@click.argument("pack_name", metavar="[NAME|FILE]", required=False)
def rules_show(pack_name: str | None) -> None:
    """Every rule of a pack, step by step (default: the configured pack)."""
    click.echo(show_pack(_load(pack_name)))


@rules.command("validate")
@click.argument("pack_name", metavar="NAME|FILE")
@click.option(
    "--against",
    nargs=2,
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    metavar="OLD_TREE NEW_TREE",
    help="Also check that every old name exists in OLD_TREE and every new name in "
    "NEW_TREE (source trees holding the packages).",
)
@click.option(
    "--step",
    "step_version",
    metavar="VERSION",
    help="The step --against checks. [default: the latest]",
)
def rules_validate(
    pack_name: str, against: tuple[Path, Path] | None, step_version: str | None
) -> None:
    """Check a table: syntax, duplicate or conflicting olds, cycles, malformed names.

    Exit status: 0 valid, 2 invalid (the message names the entry at fault).
    """
    pack = _load(pack_name)
    if against:
        try:
            step = pack.step(step_version) if step_version else pack.steps[-1]
        except RulesError as exc:
            raise UsageFailure(str(exc)) from None
        old_tree, new_tree = (_tree_root(tree, pack.packages) for tree in against)
        errors = check_against(step, old_tree, new_tree)
        if errors:
            raise UsageFailure(
                errors[0] + (f" (and {len(errors) - 1} more)" if len(errors) > 1 else "")
            )
    rule_count = sum(len(s.modules) + len(s.symbols) + len(s.removed) for s in pack.steps)
    where = f"; every name found in {against[0]} / {against[1]}" if against else ""
    click.echo(f"{pack.source}: ok ({len(pack.steps)} step(s), {rule_count} rules{where})")


@rules.command("export")
@click.argument("target", type=click.Choice(["ruff"]))
@_RULES
@click.option(
    "--standalone",
    is_flag=True,
    help="A complete ruff.toml selecting TID251, instead of a pyproject.toml section.",
)
def rules_export(target: str, rules_name: str | None, standalone: bool) -> None:
    """Export the table as another tool's configuration (ruff's TID251 banned-api)."""
    click.echo(export_ruff(_load(rules_name), standalone), nl=False)


# -- verify-imports (logic in migrator/verify_imports/) ---------------------------------------


@main.command("verify-imports")
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
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["text", "json", "github"]),
    default="text",
    show_default=True,
    help="Output format.",
)
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
    "--python",
    "python",
    metavar="PATH",
    help="Interpreter for --dynamic mode. [default: the one running vam]",
)
def verify_imports(
    targets: tuple[str, ...],
    dynamic: bool,
    timeout_s: float | None,
    output_format: str,
    optional: tuple[str, ...],
    generated: tuple[str, ...],
    python: str | None,
) -> None:
    """Import-only CI check: every first-party import resolves.

    A target is a package directory, a directory of Python files, a single file (as
    pre-commit passes them) or an importable package name [default: .]. The whole top-level
    package a target belongs to is indexed, so one file gets the same findings as a full run.

    Static mode (default) runs nothing and needs no third-party package: for every `import`
    and `from ... import` of a first-party module (absolute or relative, in functions and
    under TYPE_CHECKING too) the module must exist and each name must be a submodule or be
    bound in it (def, class, assignment, import, star-import chains). --dynamic imports each
    module in a fresh interpreter instead.

    \b
    Codes (a line carrying `# vam: ignore` or `# vam: ignore[VAI001]` is not reported):
      VAI001 error    cannot import name (module neither binds it nor has that submodule)
      VAI002 error    no such module, or a relative import beyond the top-level package
      VAI003 error    circular import that breaks at import time (name needed too early)
      VAI004 error    file does not parse
      VAI100 warning  name served by a module __getattr__ (PEP 562): unknown
      VAI101 warning  name unknown: star import from a third-party module, globals() writes
      VAI102 warning  unresolvable first-party import guarded by except ImportError
      VAI103 warning  name listed in __all__ that the module never binds
      VAI201 error    --dynamic: the import raised (first line of the error)
      VAI202 error    --dynamic: the import did not finish within --timeout
      VAI203 info     --dynamic: skipped, an optional dependency is not installed

    \b
    Exit status: 0 no errors (warnings allowed), 1 errors, 2 usage or configuration error.
    """
    import shutil

    from migrator import verify_imports as vi

    if timeout_s is not None and not timeout_s > 0:
        raise UsageFailure(f"--timeout must be a positive number of seconds, got {timeout_s:g}")
    if python is not None and shutil.which(python) is None:
        raise UsageFailure(f"--python: no such interpreter: {python}")
    try:
        settings = vi.load_settings()
        paths = list(targets) or ["."]
        if dynamic:
            result = vi.verify_dynamic(
                paths,
                timeout_s=timeout_s or settings.timeout_s,
                optional=(*settings.optional, *optional),
                python=python,
            )
        else:
            result = vi.verify_static(paths, generated=(*settings.generated, *generated))
    except (vi.TargetError, vi.SettingsError) as exc:
        raise UsageFailure(str(exc)) from None
    click.echo(vi.render(result.findings, output_format), nl=False)
    if output_format == "text":
        mode = "dynamic" if dynamic else "static"
        click.echo(vi.summary(result.findings, result.checked, result.seconds, mode), err=True)
    sys.exit(1 if result.has_errors else 0)


# -- vam shims ---------------------------------------------------------------------------------


@main.group("shims")
def shims_group() -> None:
    """Check the runtime shims that keep old import paths working."""


@shims_group.command("check")
@_RULES
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
    default=60.0,
    show_default=True,
    help="Seconds one probe may take.",
)
@click.option("--jobs", "-j", type=int, default=None, help="Probes run in parallel.")
def shims_check(
    rules_name: str | None, package_paths: tuple[str, ...], timeout_s: float, jobs: int | None
) -> None:
    """Probe every old name of the table in a fresh interpreter.

    For each old module path (rows and their listed submodules) and each moved symbol: it
    imports, it warns exactly once at the importing line, and it is the same object as the
    new name. A probe that needs a missing optional third-party module is skipped.

    Exit status: 0 every probe passed or was skipped, 1 a probe failed, 2 usage error.
    """
    from migrator import shims_check as sc

    pack = _load(rules_name)
    for path in package_paths:
        if not Path(path).is_dir():
            raise UsageFailure(f"--package-path: no such directory: {path}")
    if not timeout_s > 0:
        raise UsageFailure(f"--timeout must be a positive number of seconds, got {timeout_s:g}")
    if jobs is not None and jobs < 1:
        raise UsageFailure(f"--jobs must be at least 1, got {jobs}")
    results = sc.check(pack, package_paths, timeout=timeout_s, jobs=jobs)
    click.echo(sc.render(results))
    sys.exit(1 if any(r.failed for r in results) else 0)
