"""What the `vam` commands share: the usage error, options declared once, loading a table."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import click

from migrator.cli.packs import load_packs
from migrator.core.config import ConfigError, version_guard_problem
from rules import Pack, RulesError, version_key

_F = TypeVar("_F", bound=Callable[..., Any])
# What only a requirement holds: a version operator (`==`, `>=`, `~=`, `!=`, `<`, `>`).
_OPERATOR = re.compile(r"[=<>!~]")
DIST_FORMS = "a source tree, an sdist, a wheel, NAME==VERSION or REPO@REV"


class UsageFailure(click.ClickException):
    """A user mistake: one line on stderr, exit code 2."""

    exit_code = 2

    def show(self, file=None) -> None:  # type: ignore[no-untyped-def]
        click.echo(f"vam: error: {self.format_message()}", err=True)


PATHS = click.argument("paths", nargs=-1, type=click.Path())
def _rules_given(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if value is not None and not value.strip():
        raise click.BadParameter("empty: give a bundled pack name or a TOML file")
    return value


RULES = click.option(
    "--rules",
    "rules_name",
    metavar="NAME|FILE[,...]",
    callback=_rules_given,
    help="Rule pack: a bundled name (see `vam rules list`) or a TOML file; several, "
    "comma-separated, run together in one pass (`vllm_ascend,vllm`). "
    "[default: vllm_ascend, or [tool.vam] rules]",
)


def versions(from_help: str, to_help: str) -> Callable[[_F], _F]:
    """`--from [PACK=]VERSION` and `--to [PACK=]VERSION`, repeatable (parameters
    `from_version`, `to_version`: tuples, empty when not given; `migrator.cli.packs`)."""
    from_option = click.option(
        "--from", "from_version", metavar="[PACK=]VERSION", multiple=True, help=from_help)
    to_option = click.option(
        "--to", "to_version", metavar="[PACK=]VERSION", multiple=True, help=to_help)
    return lambda f: from_option(to_option(f))


def jobs(help: str) -> Callable[[_F], _F]:
    """`-j/--jobs N`, at least 1; None when not given."""
    return click.option("--jobs", "-j", type=click.IntRange(min=1), metavar="N", help=help)


def exclude(help: str) -> Callable[[_F], _F]:
    """`--exclude GLOB`, repeatable (parameter `exclude`, a tuple)."""
    return click.option("--exclude", multiple=True, metavar="GLOB", help=help)


def verbose(f: _F) -> _F:
    """`-v/--verbose` (parameter `verbose`): list the files the walk passed over, and why."""
    return click.option(
        "--verbose", "-v", is_flag=True, help="List skipped files (FIFOs, sockets...) and why."
    )(f)


def quiet(help: str) -> Callable[[_F], _F]:
    """`-q/--quiet` (parameter `quiet`)."""
    return click.option("--quiet", "-q", is_flag=True, help=help)


def no_comments(help: str) -> Callable[[_F], _F]:
    return click.option("--no-comments", is_flag=True, help=help)


def version_guards(f: _F) -> _F:
    """`--version-guard NAME`, repeatable (parameter `version_guard`, a tuple; empty when not
    given)."""
    return click.option(
        "--version-guard",
        multiple=True,
        metavar="NAME",
        help="A version helper whose branches are told apart (`NAME_is`, `_lt`, `_le`, `_gt`, "
        "`_ge`; repeatable; replaces [tool.vam] version-guards). [default: vllm_version_is, "
        "vllm_version_lt/le/gt/ge]",
    )(f)


def keep_compat(f: _F) -> _F:
    """`--keep-compat VERSION` and `--compat-style if|try` (parameters `keep_compat`,
    `compat_style`; None when not given)."""
    keep = click.option(
        "--keep-compat",
        metavar="VERSION",
        help="Keep VERSION and older working: write each moved import as a dual-lane block "
        '(`if vllm_version_is("VERSION"): <old import> else: <new import>`, the first '
        "--version-guard; its import is added from [tool.vam] version-helper-module, else the "
        "pack's version-helper) and moved strings and chains as conditional expressions. "
        "`--drop-compat VERSION` later removes the old lane.",
    )
    style = click.option(
        "--compat-style",
        type=click.Choice(["if", "try"]),
        help="With --keep-compat: `if` (the version helper) or `try` (try the new import, "
        "except ImportError the old one; strings and chains still use the helper). "
        "[default: if]",
    )
    return keep(style(f))


def compat_problem(
    keep: str | None, drop: str | None, style: str | None, guards: tuple[str, ...]
) -> str | None:
    """What is wrong with `--keep-compat`/`--drop-compat`/`--compat-style` together (None:
    nothing)."""
    from migrator.core.settings import COMPARISONS

    if keep is not None and drop is not None:
        return "--keep-compat and --drop-compat cannot be combined: run them one after the other"
    if style is not None and keep is None:
        return "--compat-style needs --keep-compat VERSION"
    if keep is not None and COMPARISONS[guards[0].rpartition("_")[2]] in ("<", ">="):
        return (
            f"--keep-compat needs a version helper that is true on VERSION and older (_is, "
            f"_eq, _le) or only after it (_gt); {guards[0]!r} (the first --version-guard) "
            "is neither"
        )
    return None


def release_pins(f: _F) -> _F:
    """`--ignore-release-pins` (parameter `ignore_release_pins`)."""
    return click.option(
        "--ignore-release-pins",
        is_flag=True,
        help="Take text files that name the release they run (image tag `vllm-ascend:v0.12.0rc1`,"
        " `pip install vllm-ascend==0.11.0`, a requirement line) past that release too. "
        "[default: such a file is migrated up to its release; what lies beyond is kept and "
        "reported, VAM010]",
    )(f)


def guard_names(given: tuple[str, ...], configured: tuple[str, ...]) -> tuple[str, ...]:
    """The version helpers of a run: `--version-guard` if given, else [tool.vam].

    Raises UsageFailure for a name whose comparison cannot be read from its suffix."""
    for name in given:
        problem = version_guard_problem(name)
        if problem:
            raise UsageFailure(f"--version-guard {name!r}: {problem}")
    return given or configured


def output_format(choices: Sequence[str], help: str, dest: str = "fmt") -> Callable[[_F], _F]:
    """`--format`, one of `choices`, default text."""
    return click.option(
        "--format",
        dest,
        type=click.Choice(choices),
        default="text",
        show_default=True,
        help=help,
    )


def load_rules(rules_name: str | None) -> Pack:
    """The pack named by `--rules`, else the one [tool.vam] configures for the current folder,
    for a command that reads one table.

    Raises UsageFailure for an unknown pack, a bad table, a bad configuration, or several
    packs.
    """
    packs = load_rule_packs(rules_name)
    if len(packs) > 1:
        names = ", ".join(p.name for p in packs)
        where = "--rules names" if rules_name else "[tool.vam] rules lists"
        raise UsageFailure(f"{where} several packs ({names}); this command reads one: "
                           "name it with --rules NAME")
    return packs[0]


def load_rule_packs(rules_name: str | None) -> tuple[Pack, ...]:
    """The packs named by `--rules` (comma-separated), else those [tool.vam] configures for
    the current folder, in order. Raises UsageFailure as `load_rules` does."""
    try:
        return load_packs(rules_name)
    except (ConfigError, RulesError) as exc:
        raise UsageFailure(str(exc)) from None


def requirement(spec: str, what: str = "") -> tuple[str, str]:
    """(name, version) of `NAME==VERSION`; a usage error, before anything is fetched, for
    anything else or a VERSION that is not a PEP 440 version. `what` (`--against `) is put
    before the spec in the message."""
    from migrator.core.dists import parse_requirement

    wanted = parse_requirement(spec)
    if wanted is None:
        raise UsageFailure(f"{what}{spec!r}: expected NAME==VERSION, e.g. vllm==0.14.0")
    try:
        version_key(wanted[1])
    except RulesError:
        raise UsageFailure(f"{what}{spec!r}: {wanted[1]!r} is not a version "
                           "(expected NAME==VERSION, e.g. vllm==0.14.0)") from None
    return wanted


def dist_spec(spec: str, option: str, forms: str = DIST_FORMS) -> str:
    """`spec`, the DIST `option` gives (`--against`), checked before anything is read or
    fetched: a usage error when it is empty, or when it is not a path that exists nor
    `REPO@REV` and reads as a requirement other than `NAME==VERSION` (`vllm>=0.3`, `vllm==`,
    `vllm==banana`). Any other spec (a path that does not exist) is left for opening it to
    report. `forms`: what the option takes, for the message on an empty one."""
    from migrator.core.gitrev import split_spec

    if not spec.strip():
        raise UsageFailure(f"{option} is empty: give {forms}")
    if Path(spec).exists() or split_spec(spec) is not None:
        return spec
    if _OPERATOR.search(spec):
        requirement(spec, f"{option} ")
    return spec
