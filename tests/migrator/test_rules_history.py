"""What the move-table format grew for vllm-ascend's history: PEP 440 versions, renames
inside a moved module, a module that became a package of the same name, merges, removals
below moves, and the bundled pack's steps against the released sdists."""

from __future__ import annotations

import itertools
import random
import sys
from pathlib import Path

import pytest
from packaging.version import Version

import rules
from migrator.core import findings as F
from migrator.core.resolver import Resolver
from tests.migrator.conftest import REPO, rewrite, vam

# -- versions ---------------------------------------------------------------------------------


def _versions() -> list[str]:
    """Released vllm-ascend versions, every PEP 440 spelling the PEP normalises, and random
    combinations of epoch, release, pre, post, dev and local parts."""
    fixed = [
        "0.13.0", "0.14.0rc1", "0.14.0", "0.18.0rc1", "0.18.0", "0.23.0rc1", "0.23.0",
        "0.23.0.post1", "0.27.1rc1", "0.30.0rc2", "1.0", "1.0.0", "1.0.0.0", "1!0.5",
        "1.0.dev0", "1.0.dev1", "1.0a1.dev1", "1.0a1", "1.0alpha2", "1.0.a3", "1.0-b1",
        "1.0beta1", "1.0c1", "1.0pre1", "1.0preview2", "1.0RC3", "1.0rc", "1.0.post0.dev1",
        "1.0.post0", "1.0-1", "1.0.rev2", "1.0r3", "1.0post", "1.0+abc", "1.0+ABC.1",
        "1.0+1", "1.0+1.abc", "1.0+abc-2", "v1.1", "1.0rc1.post1.dev2", "2.0_rc1",
    ]  # fmt: skip
    rng = random.Random(440)
    for _ in range(400):
        text = f"{rng.choice(['', '', '1!'])}{'.'.join(str(rng.randint(0, 3)) for _ in range(rng.randint(1, 4)))}"
        if rng.random() < 0.4:
            text += rng.choice(["a", "b", "rc", "c", "alpha", ".rc", "-beta"]) + str(rng.randint(0, 2))
        if rng.random() < 0.3:
            text += rng.choice([".post", "-", "post", ".r"]) + str(rng.randint(0, 2))
        if rng.random() < 0.3:
            text += rng.choice([".dev", "dev"]) + str(rng.randint(0, 2))
        if rng.random() < 0.2:
            text += "+" + rng.choice(["abc", "1", "abc.2", "2.abc", "ubuntu-1", "10"])
        fixed.append(text)
    return fixed


def _sign(value: int) -> int:
    return (value > 0) - (value < 0)


def test_version_key_orders_exactly_as_packaging() -> None:
    versions = _versions()
    disagreements = []
    for left, right in itertools.combinations(versions, 2):
        a, b = Version(left), Version(right)
        ka, kb = rules.version_key(left), rules.version_key(right)
        expected = _sign((a > b) - (a < b))
        got = _sign((ka > kb) - (ka < kb))
        if expected != got:
            disagreements.append((left, right, expected, got))
    assert disagreements == []
    assert sorted(versions, key=rules.version_key) == sorted(versions, key=Version)


@pytest.mark.parametrize("bad", ["", "1.0.", "one", "1.0rc1rc2", "1.0+", "1.0 beta", "01-x"])
def test_a_malformed_version_is_rejected(bad: str) -> None:
    with pytest.raises(rules.RulesError, match="malformed version"):
        rules.version_key(bad)


def test_from_before_the_first_step_and_post_releases(pack: rules.Pack, tmp_path: Path) -> None:
    # `--from` is the version the code was written for: 0.7.1rc1 precedes every step, and
    # from 0.13.0 every step from 0.14.0 on applies.
    assert Resolver(pack, "0.7.1rc1").steps == pack.steps
    assert Resolver(pack, "0.13.0").steps == pack.steps[pack.steps.index(pack.step("0.14.0")):]
    assert [s.version for s in Resolver(pack, "0.23.0.post1", "0.27.1rc1").steps] == [
        "0.24.0rc1", "0.25.1rc1", "0.27.1rc1"]
    # A post release orders after its release and before the next pre-release.
    assert [s.version for s in Resolver(pack, "0.18.0rc1", "0.23.0.post1").steps] == []
    table = tmp_path / "t.toml"
    table.write_text('[pack]\nname = "t"\n[[step]]\nversion = "1.0.post1.dev2"\n'
                     '[[step]]\nversion = "1!0.1"\n')
    assert [s.version for s in rules.load(table).steps] == ["1.0.post1.dev2", "1!0.1"]
    source = tmp_path / "m.py"
    source.write_text("from vllm_ascend.distributed.kvpool.config_data import X\n")
    result = vam("check", "--from", "0.13.0", "--to", "0.14.0", str(source))
    assert result.returncode == 1 and "VAM001" in result.stdout


# -- renames inside a moved module ------------------------------------------------------------

RENAME_IN_MOVE = rules.parse({
    "pack": {"name": "t", "packages": ["pkg"]},
    "step": [{"version": "2.0", "module": [
        {"old": "pkg.recompute.manager", "new": "pkg.offload.preempt.manager"}],
        "symbol": [{"old": "pkg.recompute.manager.RecomputeScheduler",
                    "new": "pkg.offload.preempt.manager.PreemptScheduler"}]}],
})


def test_a_rename_inside_a_moved_module_wins_for_its_name() -> None:
    resolver = Resolver(RENAME_IN_MOVE)
    renamed = resolver.resolve("pkg.recompute.manager.RecomputeScheduler.schedule")
    assert renamed.new == "pkg.offload.preempt.manager.PreemptScheduler.schedule"
    assert [(h.kind, h.old) for h in renamed.hits] == [
        ("symbol", "pkg.recompute.manager.RecomputeScheduler")]
    assert resolver.resolve("pkg.recompute.manager.State").new == "pkg.offload.preempt.manager.State"
    assert resolver.resolve_module("pkg.recompute.manager").new == "pkg.offload.preempt.manager"
    assert not resolver.resolve("pkg.offload.preempt.manager.PreemptScheduler").changed


def test_a_rename_inside_a_moved_module_rewrites_imports() -> None:
    source = ("from pkg.recompute.manager import RecomputeScheduler, State\n"
              "import pkg.recompute.manager as m\n"
              "path = 'pkg.recompute.manager.RecomputeScheduler'\n")
    new, _ = rewrite(source, pack=RENAME_IN_MOVE)
    assert new == (
        "from pkg.offload.preempt.manager import PreemptScheduler as RecomputeScheduler, State\n"
        "import pkg.offload.preempt.manager as m\n"
        "path = 'pkg.offload.preempt.manager.PreemptScheduler'\n")
    assert rewrite(new, pack=RENAME_IN_MOVE)[0] == new


# -- a module that became a package of the same name -------------------------------------------


def _pack(step: dict[str, object]) -> rules.Pack:
    return rules.parse({"pack": {"name": "t", "packages": ["pkg"]}, "step": [
        {"version": "1.0", **step}]})


def test_a_module_that_became_a_package_moves_its_names_not_its_path() -> None:
    pack = _pack({"symbol": [{"old": "pkg.ucm", "new": "pkg.x.y"},
                             {"old": "pkg.kv.ucm.UCMConnectorV1",
                              "new": "pkg.kv.ucm.connector.UCMConnectorV1"}]})
    resolver = Resolver(pack)
    hit = resolver.resolve("pkg.kv.ucm.UCMConnectorV1")
    assert hit.new == "pkg.kv.ucm.connector.UCMConnectorV1"
    # Settled: the target is not taken again, and the package path is never rewritten.
    assert not resolver.resolve(hit.new).changed
    assert not resolver.resolve("pkg.kv.ucm").changed
    assert not resolver.resolve_module("pkg.kv.ucm.connector").changed
    new, _ = rewrite("import pkg.kv.ucm\nfrom pkg.kv.ucm import UCMConnectorV1\n", pack=pack)
    assert new == "import pkg.kv.ucm\nfrom pkg.kv.ucm.connector import UCMConnectorV1\n"


@pytest.mark.parametrize(("step", "message"), [
    ({"module": [{"old": "pkg.ucm", "new": "pkg.ucm.connector"}]},
     "a module that became a package of the same name keeps its path: move the names that "
     "left it with [[step.symbol]] rows (pkg.ucm.Name -> pkg.ucm.connector.Name)"),
    ({"symbol": [{"old": "pkg.m.X", "new": "pkg.m.X.Y"}]},
     "new 'pkg.m.X.Y' lies under old 'pkg.m.X' and would be rewritten again"),
    ({"module": [{"old": "pkg.a", "new": "pkg.gone.a"}],
      "removed": [{"old": "pkg.gone", "hint": "h"}]},
     "new 'pkg.gone.a' lies under 'pkg.gone', removed by"),
])  # fmt: skip
def test_targets_that_would_be_taken_again_are_rejected(step: dict[str, object], message: str) -> None:
    with pytest.raises(rules.RulesError) as err:
        _pack(step)
    assert message in str(err.value)


# -- merges and removals ----------------------------------------------------------------------


def test_a_merge_sends_two_packages_to_one() -> None:
    pack = _pack({"module": [{"old": "pkg.simple_cpu", "new": "pkg.offload.simple"},
                             {"old": "pkg.simple_kv", "new": "pkg.offload.simple"}]})
    resolver = Resolver(pack)
    assert resolver.resolve("pkg.simple_cpu.connector.C").new == "pkg.offload.simple.connector.C"
    assert resolver.resolve("pkg.simple_kv.worker").new == "pkg.offload.simple.worker"
    new, _ = rewrite("from pkg.simple_cpu.connector import C\nfrom pkg.simple_kv import worker\n",
                     pack=pack)
    assert new == ("from pkg.offload.simple.connector import C\n"
                   "from pkg.offload.simple import worker\n")


def test_the_longest_row_wins_between_removals_and_moves() -> None:
    pack = _pack({
        "module": [{"old": "pkg.recompute.manager", "new": "pkg.preempt.manager"},
                   {"old": "pkg.config_data", "new": "pkg.metadata"}],
        "removed": [{"old": "pkg.recompute", "hint": "the rest of the package is gone"},
                    {"old": "pkg.config_data.infer_ratio", "hint": "inline it"}],
    })
    resolver = Resolver(pack)
    assert resolver.resolve("pkg.recompute.manager.S").new == "pkg.preempt.manager.S"
    assert resolver.resolve("pkg.recompute.connector").removed is not None
    assert resolver.resolve("pkg.config_data.Meta").new == "pkg.metadata.Meta"
    gone = resolver.resolve("pkg.config_data.infer_ratio")
    assert gone.removed is not None and gone.removed.hint == "inline it" and not gone.changed


def test_a_path_moved_then_removed_is_reported_never_rewritten() -> None:
    pack = rules.parse({"pack": {"name": "t", "packages": ["pkg"]}, "step": [
        {"version": "0.14.0", "module": [{"old": "pkg.cpu_offload_manager",
                                          "new": "pkg.kv_pool.cpu_offload"}]},
        {"version": "0.24.0rc1", "removed": [{"old": "pkg.kv_pool.cpu_offload",
                                              "hint": "use pkg.kv_offload"}]},
    ]})
    source = "from pkg.cpu_offload_manager.metadata import MLAConfig\n"
    new, findings = rewrite(source, pack=pack)
    assert new == source
    assert [(f.code, f.message) for f in findings] == [
        (F.REMOVED, "'pkg.cpu_offload_manager.metadata.MLAConfig' was removed in 0.24.0rc1, "
                    "no replacement: use pkg.kv_offload")]
    # Stopping at the release the code runs keeps the move.
    early = Resolver(pack, to_version="0.14.0")
    assert early.resolve("pkg.cpu_offload_manager.metadata").new == "pkg.kv_pool.cpu_offload.metadata"


# -- the bundled pack against the released sdists ------------------------------------------------

PAIRS = [("0.13.0", "0.14.0rc1", "0.14.0"), ("0.17.0rc1", "0.18.0rc1", "0.18.0rc1"),
         ("0.23.0.post1", "0.24.0rc1", "0.24.0rc1"), ("0.24.0rc1", "0.25.1rc1", "0.25.1rc1"),
         ("0.26.0rc1", "0.27.1rc1", "0.27.1rc1"), ("0.27.1rc1", "0.28.0rc1", "0.28.0rc1"),
         ("0.28.0rc1", "0.29.0rc1", "0.29.0rc1"), ("0.29.0rc1", "0.30.0rc1", "0.30.0rc1")]


@pytest.mark.parametrize(("old", "new", "step"), PAIRS)
def test_each_bundled_step_matches_its_sdists(old: str, new: str, step: str) -> None:
    sys.path.insert(0, str(REPO / "benchmarks"))
    from sdists import sdist  # fetched from the configured index, cached outside the repo

    result = vam("rules", "validate", "vllm_ascend", "--step", step,
                 "--against", str(sdist(old)), str(sdist(new)))
    assert result.returncode == 0, result.stderr
    assert "every name found" in result.stdout


def test_the_whole_bundled_path(pack: rules.Pack) -> None:
    resolver = Resolver(pack, "0.13.0")
    chain = resolver.resolve("vllm_ascend.distributed.kvpool.config_data.ChunkedTokenDatabase")
    assert chain.new == ("vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.metadata."
                         "ChunkedTokenDatabase")
    assert [h.step for h in chain.hits] == ["0.14.0", "0.27.1rc1"]
    gone = resolver.resolve("vllm_ascend.distributed.cpu_offload_manager.metadata")
    assert gone.removed_step == "0.24.0rc1" and not gone.changed
    renamed = resolver.resolve(
        "vllm_ascend.distributed.kv_transfer.kv_pool.recompute_cpu_offload.metadata."
        "RecomputeCPUOffloadMetadata")
    assert renamed.new == ("vllm_ascend.distributed.kv_transfer.kv_pool.kv_offload."
                           "preempt_offload.metadata.PreemptOffloadMetadata")
