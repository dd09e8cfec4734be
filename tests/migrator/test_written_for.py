"""What `vam migrate` writes, a second resolution accepts: over every step of every bundled
pack, from every release, the new name of every old one is left alone by a resolver with no
`--from` (the `check` a pre-commit hook runs) and by one from the same `--from` (a second
`migrate`). A name that some step wrote tells the release it was written for (the resolver's
floor); an intermediate path that a later release re-created is no evidence."""

from __future__ import annotations

import pytest
import tomllib

import rules
from migrator.core.resolver import Resolver
from migrator.core.tables import export_ruff


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
