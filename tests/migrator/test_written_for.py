"""What `vam migrate` writes, a second resolution accepts: over every step of every bundled
pack, from every release, the new name of every old one is left alone by a resolver with no
`--from` (the `check` a pre-commit hook runs) and by one from the same `--from` (a second
`migrate`). A name that some step wrote tells the release it was written for (the resolver's
floor); an intermediate path that a later release re-created is no evidence."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest
import tomllib

import rules
from migrator.core import codes
from migrator.core import findings as F
from migrator.core.discover import SourceFile
from migrator.core.resolver import Resolver
from migrator.core.tables import export_ruff
from migrator.rewrite.engine import Engine, Options
from migrator.rewrite.lanes import Chain, Lane


def _names(pack: rules.Pack) -> list[str]:
    olds = sorted({old for step in pack.steps for old, _ in step.olds()})
    # A name below each old too: attributes and submodules follow their module.
    return olds + [f"{old}.below" for old in olds]


@pytest.mark.parametrize("pack_name", sorted(rules.bundled()))
def test_migrated_names_are_accepted_by_check_and_by_a_second_migrate(pack_name: str) -> None:
    pack = rules.load_pack(pack_name)
    versions: list[str | None] = [None, *(step.version for step in pack.steps)]
    problems = []
    for end in versions:
        plain = Resolver(pack, to_version=end)  # check with no --from (and the run's --to)
        for start in versions:
            if start is not None and end is not None and rules.version_key(start) > rules.version_key(end):
                continue
            first = Resolver(pack, from_version=start, to_version=end)
            again = Resolver(pack, from_version=start, to_version=end)
            for name in _names(pack):
                result = first.resolve(name)
                if result.removed is not None or not result.changed:
                    continue
                for label, resolver in (("check", plain), ("second migrate", again)):
                    later = resolver.resolve(result.new)
                    if later.changed or later.removed is not None:
                        fate = later.new if later.changed else f"removed in {later.removed_step}"
                        problems.append(f"--from {start} --to {end}: {name} -> {result.new}; "
                                        f"{label}: {fate}")
    assert not problems, "\n".join(problems[:20]) + f"\n({len(problems)} in all)"


def test_a_name_written_by_a_later_step_skips_the_earlier_ones() -> None:
    pack = rules.load_pack("vllm_ascend")
    resolver = Resolver(pack)
    written = "vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.metadata.ReqMeta"
    assert not resolver.resolve(written).changed
    assert resolver.resolve(written).removed is None
    # The 0.13 spelling still takes the whole path, and lands on that name.
    assert resolver.resolve("vllm_ascend.distributed.kvpool.config_data.ReqMeta").new == written


@pytest.mark.parametrize("pack_name", sorted(rules.bundled()))
def test_the_ruff_export_is_valid_toml_and_bans_no_name_a_later_step_wrote(pack_name: str) -> None:
    pack = rules.load_pack(pack_name)
    banned = tomllib.loads(export_ruff(pack, standalone=True))["lint"]["flake8-tidy-imports"]
    resolver = Resolver(pack)
    for name in banned["banned-api"]:
        assert resolver.resolve(name).changed or resolver.resolve(name).removed, name
    assert "vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.metadata" not in (
        banned["banned-api"])


# -- the same, on files: every old name valid at `--from`, in every form migrate fixes --------

_LEVELS = codes.levels("VAM")
# Every (--from, --to) pair of every pack by default: ~170 files, ~11 s of CPU in all (70 s
# of wall time on a 2-core machine shared by 7 jobs). VAM_PROPERTY_PAIRS=N caps it at the
# consecutive pairs, the ends and a seeded sample of the rest, N in all.
_SAMPLE = int(os.environ.get("VAM_PROPERTY_PAIRS", "0"))


def _pairs(pack: rules.Pack) -> list[tuple[str | None, str | None]]:
    versions: list[str | None] = [None, *(step.version for step in pack.steps)]
    every = [(a, b) for i, a in enumerate(versions) for b in versions[i + 1:]]
    every += [(None, None)]
    if not _SAMPLE or len(every) <= _SAMPLE:
        return every
    chosen = {(versions[i], versions[i + 1]) for i in range(len(versions) - 1)}
    chosen |= {(None, None), (versions[1], None), (versions[-2], None)}
    rest = sorted(set(every) - chosen, key=str)
    chosen |= set(random.Random(19).sample(rest, max(0, min(len(rest), _SAMPLE - len(chosen)))))
    return sorted(chosen, key=str)


def _old_names(pack: rules.Pack, start: str | None, end: str | None) -> list[str]:
    """The olds of the steps in (start, end]: names code written for `start` may spell."""
    resolver = Resolver(pack, start, end)
    olds = sorted({old for step in resolver.steps for old, _ in step.olds()})
    return [n for n in olds + [f"{o}.Below" for o in olds] if "." in n]


def _fixable(resolver: Resolver, name: str, bound: str | None = None) -> bool:
    """Whether migrate can rewrite `name` in place: not removed, no symbol taken to another
    module (a chain then needs an import a human chooses), and, reached through a local
    name for `bound`, still below where `bound` went. Other forms are reported (VAM002,
    VAM003) by migrate and check alike."""
    result = resolver.resolve(name)
    if result.removed is not None or any(
        hit.kind == "symbol" and hit.old.rpartition(".")[0] != hit.new.rpartition(".")[0]
        for hit in result.hits
    ):
        return False
    if bound is None:
        return True
    binding = resolver.resolve(bound)
    return binding.removed is None and result.new.startswith(binding.new + ".")


def _module_for(pack: rules.Pack, start: str | None, end: str | None, tag: str = "") -> str:
    """Every old name valid at `start`: imported, as a chain, through a local name for its
    parent, and as a `mock.patch` target (local names end in `tag`)."""
    resolver = Resolver(pack, start, end)
    lines = ["from unittest import mock", ""]
    body = []
    for i, name in enumerate(_old_names(pack, start, end)):
        if not _fixable(resolver, name):
            continue
        parent, _, leaf = name.rpartition(".")
        body.append(f'p{i}{tag} = mock.patch("{name}")')
        lines.append(f"from {parent} import {leaf} as n{i}{tag}")
        lines.append(f"import {name.partition('.')[0]}")
        body.append(f"c{i}{tag} = {name}")
        if "." in parent and _fixable(resolver, name, parent):
            grand, _, mid = parent.rpartition(".")
            lines.append(f"from {grand} import {mid} as a{i}{tag}")
            body.append(f"u{i}{tag} = a{i}{tag}.{leaf}")
    return "\n".join([*lines, "", *body]) + "\n"


def _stale(findings: list[F.Finding]) -> list[str]:
    return [f"{f.line}: {f.code} {f.message}" for f in findings
            if _LEVELS.get(f.code) in (codes.ERROR, codes.WARNING)]


@pytest.mark.parametrize("pack_name", sorted(rules.bundled()))
def test_the_file_migrate_writes_is_check_clean_and_settled(pack_name: str) -> None:
    """For every --from/--to: what migrate writes from a file of every old name valid at
    --from, a second migrate leaves as it is and check (no --from) finds no error or
    warning in (info findings, such as steps reported and not applied, do not count)."""
    pack = rules.load_pack(pack_name)
    problems = []
    for start, end in _pairs(pack):
        source = _module_for(pack, start, end)
        migrate = Engine(Resolver(pack, start, end), Options())
        once, _ = migrate.transform_python(source, None)
        again, _ = migrate.transform_python(once, None)
        check = Engine(Resolver(pack, None, end), Options(report_only=True))
        stale = _stale(check.transform_python(once, None)[1])
        if again != once:
            diff = [(a, b) for a, b in zip(once.splitlines(), again.splitlines(), strict=False)
                    if a != b]
            problems.append(f"--from {start} --to {end}: a second migrate changes {diff[:3]}")
        if stale:
            problems.append(f"--from {start} --to {end}: check finds {stale[:3]} "
                            f"({len(stale)} in all)")
    assert not problems, "\n".join(problems)


def test_both_packs_in_one_pass_write_what_check_accepts_and_settle() -> None:
    """`--rules vllm_ascend,vllm`: a file mixing the old names of both tables, each pack with
    its own --from/--to (the pairs of each pack in turn, the shorter list cycled), goes
    through both lanes at once; a second run changes nothing, and check (both packs, no
    --from) finds no error or warning; what it writes is what a run per pack writes."""
    ascend, vllm = rules.load_pack("vllm_ascend"), rules.load_pack("vllm")
    first, second = _pairs(ascend), _pairs(vllm)
    source = SourceFile(Path("mixed.py"), Path("."), "python")
    problems = []
    changed = 0
    for index in range(max(len(first), len(second))):
        (a_from, a_to), (v_from, v_to) = first[index % len(first)], second[index % len(second)]
        window = f"--from vllm_ascend={a_from} --to vllm_ascend={a_to} --from vllm={v_from} " \
                 f"--to vllm={v_to}"
        text = _module_for(ascend, a_from, a_to, "_a") + _module_for(vllm, v_from, v_to, "_v")
        lanes = (Lane(ascend, a_from, a_to), Lane(vllm, v_from, v_to))
        migrate = Chain(lanes, Options())
        once = migrate.process(source, text.encode()).new or text.encode()
        if migrate.process(source, once).new is not None:
            problems.append(f"{window}: a second migrate changes the file")
        plain = (Lane(ascend, None, a_to), Lane(vllm, None, v_to))
        stale = _stale(Chain(plain, Options(report_only=True)).process(source, once).findings)
        if stale:
            problems.append(f"{window}: check finds {stale[:3]} ({len(stale)} in all)")
        apart = text
        for lane in lanes:  # the same as two runs, one pack each
            apart = Engine(Resolver(lane.pack, lane.from_version, lane.to_version),
                           Options()).transform_python(apart, None)[0]
        if once.decode() != apart:
            problems.append(f"{window}: one pass differs from a run per pack")
        changed += once.decode() != text
    assert changed, "no window had a name to rewrite"
    assert not problems, "\n".join(problems[:20]) + f"\n({len(problems)} in all)"
