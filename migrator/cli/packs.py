"""Which packs a run uses and the versions each is given: `--rules vllm_ascend,vllm`,
`[tool.vam] rules = [...]`, `--to vllm=0.33.0`, `[tool.vam] to = { vllm = "0.33.0" }`.

Each pack has its own release axis (vllm-ascend 0.14.0 is not vLLM 0.14.0), so with several
packs a version always names its pack. Problems raise `RulesError` with the one-line message
the command prints (exit 2).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import combinations
from pathlib import Path

from migrator.core.config import Config, ConfigError, load_config, split_rules
from rules import Pack, RulesError, is_under, load_pack, version_key


def load_packs(rules_name: str | None, config: Config | None = None) -> tuple[Pack, ...]:
    """The packs `--rules` names (`NAME|FILE[,NAME|FILE...]`), else those [tool.vam] rules
    configures (`config`, else the current folder's), in that order.

    Raises:
        RulesError: an unknown pack, a bad table, an empty name, two packs of one name, or
            packs whose packages overlap.
        ConfigError: a bad configuration.
    """
    if rules_name is not None:
        try:
            given = split_rules(rules_name)
        except ValueError as exc:
            raise RulesError(f"--rules {exc}") from None
    else:
        given = (config or load_config(Path("."))).rules
    packs = tuple(load_pack(name) for name in given)
    _check_apart(packs)
    return packs


def _check_apart(packs: Sequence[Pack]) -> None:
    """Each name is moved by one table only: packs must not share a package, by whole
    components (`vllm` and `vllm_ascend` are apart; `vllm` and `vllm.attention` are not)."""
    for first, second in combinations(packs, 2):
        if first.name == second.name:
            where = "" if first.source == second.source else f" ({first.source}, {second.source})"
            raise RulesError(f"--rules: the pack {first.name!r} is given twice{where}")
        for a in first.packages:
            for b in second.packages:
                if is_under(a, b) or is_under(b, a):
                    shared = f"both cover {a!r}" if a == b else f"{a!r} and {b!r}"
                    raise RulesError(
                        f"--rules: the packs {first.name!r} and {second.name!r} overlap "
                        f"({shared}): a name must belong to one table; run them one after "
                        "the other")
        for pack, other in ((first, second), (second, first)):
            _check_writes_own(pack, other)


def _check_writes_own(pack: Pack, other: Pack) -> None:
    """No pack writes a name the other reads: a file goes through the packs in turn, so
    such a name would be moved again by the next run, or not, by the order given."""
    for step in pack.steps:
        for move in step.moves():
            if any(is_under(move.new, package) for package in other.packages):
                raise RulesError(
                    f"--rules: the pack {pack.name!r} moves {move.old!r} to {move.new!r} "
                    f"({step.version}), a name of the pack {other.name!r}: run them one after "
                    "the other")


def versions_by_pack(flag: str, values: Sequence[str], names: Sequence[str]) -> dict[str, str]:
    """{pack name: version} from `--from`/`--to` values (`VERSION` or `PACK=VERSION`); a bare
    VERSION only when one pack runs.

    Raises:
        RulesError: a bare version with several packs, an unknown pack, a pack given twice,
            a malformed version.
    """
    found: dict[str, str] = {}
    for value in values:
        pack, equals, version = value.rpartition("=")
        if not equals:
            if len(names) > 1:
                listed = " ".join(f"{flag} {n}={value}" for n in names)
                raise RulesError(
                    f"{flag} {value}: this run has several packs ({', '.join(names)}), each "
                    f"with its own releases; name the pack: {flag} PACK=VERSION (repeatable), "
                    f"e.g. {listed}")
            pack = names[0]
        elif pack not in names:
            raise RulesError(f"{flag} {value}: no pack {pack!r} in this run "
                             f"(packs: {', '.join(names)})")
        if pack in found:
            raise RulesError(f"{flag}: the version of {pack} is given twice")
        try:
            version_key(version)
        except RulesError:
            raise RulesError(f"{flag} {value}: {version!r} is not a version") from None
        found[pack] = version
    return found


def configured_windows(
    config: Config,
    names: Sequence[str],
    explicit: bool,
    flags: tuple[Mapping[str, str], Mapping[str, str]] = ({}, {}),
) -> dict[str, tuple[str | None, str | None]]:
    """{pack name: ([tool.vam] from, to)} for the packs of a run. `explicit`: the packs came
    from `--rules`, so a table may name packs this run leaves out. `flags`: the `--from` and
    `--to` versions by pack, which win (a bare configured version that no pack would use is
    no error).

    Raises:
        ConfigError: a bare version with several packs, or (packs from the configuration) a
            table that names a pack the configuration does not run.
    """
    where = config.source or "pyproject.toml"
    windows = {}
    for key, bare, table, given in (("from", config.from_version, config.from_by_pack, flags[0]),
                                    ("to", config.to_version, config.to_by_pack, flags[1])):
        unknown = [pack for pack, _ in table if pack not in names]
        if unknown and not explicit:
            raise ConfigError(f"{where}: [tool.vam] {key}: no pack {unknown[0]!r} in "
                              f"[tool.vam] rules (packs: {', '.join(names)})")
        if bare is not None and len(names) > 1 and not set(names) <= set(given):
            pairs = ", ".join(f'{n} = "{bare}"' for n in names)
            raise ConfigError(f'{where}: [tool.vam] {key} = "{bare}" with several packs '
                              f"({', '.join(names)}): write {key} = {{ {pairs} }} with each "
                              "pack's own release")
        windows[key] = {n: bare if bare is not None else dict(table).get(n) for n in names}
    return {n: (windows["from"][n], windows["to"][n]) for n in names}
