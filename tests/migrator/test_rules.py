"""The move table: the bundled pack, validation (naming the entry), resolution semantics,
and the scenarios S1-S4 of shared/SCENARIOS.md."""

from __future__ import annotations

import dataclasses
import textwrap
from pathlib import Path

import pytest

import rules
from migrator.core import findings as F
from migrator.core.resolver import Resolver
from tests.migrator.conftest import REPO, rewrite, vam

EXPECTED_MODULES = {
    "vllm_ascend.distributed.communicator":
        "vllm_ascend.distributed.device_communicators.npu_communicator",
    "vllm_ascend.distributed.mooncake_connector":
        "vllm_ascend.distributed.kv_transfer.kv_p2p.mooncake_connector",
    "vllm_ascend.distributed.mooncake_layerwise_connector":
        "vllm_ascend.distributed.kv_transfer.kv_p2p.mooncake_layerwise_connector",
    "vllm_ascend.distributed.kvpool": "vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store",
    "vllm_ascend.distributed.cpu_offload_manager":
        "vllm_ascend.distributed.kv_transfer.kv_pool.cpu_offload",
    "vllm_ascend.distributed.cpu_offload_connector":
        "vllm_ascend.distributed.kv_transfer.kv_pool.cpu_offload.cpu_offload_connector",
    "vllm_ascend.distributed.ucm_connector": "vllm_ascend.distributed.kv_transfer.kv_pool.ucm_connector",
    "vllm_ascend.distributed.mooncake_transfer_engine":
        "vllm_ascend.distributed.kv_transfer.utils.mooncake_transfer_engine",
    "vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.metadata":
        "vllm_ascend.distributed.kv_transfer.kv_pool.cpu_offload.metadata",
    "vllm_ascend.distributed.kv_transfer.ucm_connector":
        "vllm_ascend.distributed.kv_transfer.kv_pool.ucm_connector",
}
UTILS_NAMES = ("kv_alltoall_and_rearrange", "alltoall_and_rearrange", "rearrange_output",
               "align_memory", "get_transfer_timeout_value")


def test_bundled_pack_is_design_table(pack: rules.Pack) -> None:
    assert [s.version for s in pack.steps] == [
        "0.7.3", "0.9.1rc2", "0.9.2rc1", "0.10.0rc1", "0.10.2rc1", "0.12.0rc1", "0.13.0rc2",
        "0.13.0", "0.14.0", "0.18.0rc1", "0.24.0rc1", "0.25.1rc1", "0.27.1rc1", "0.28.0rc1", "0.29.0rc1",
        "0.30.0rc1"]
    step = pack.step("0.14.0")
    assert {m.old: m.new for m in step.modules} == EXPECTED_MODULES
    assert {m.old for m in step.modules if m.intermediate} == {
        "vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.metadata",
        "vllm_ascend.distributed.kv_transfer.ucm_connector"}
    symbols = {m.old: m.new for m in step.symbols}
    assert symbols == {
        "vllm_ascend.distributed.register_connector": "vllm_ascend.distributed.kv_transfer.register_connector",
        **{f"vllm_ascend.distributed.utils.{n}": f"vllm_ascend.distributed.kv_transfer.utils.utils.{n}"
           for n in UTILS_NAMES},
    }
    kvpool = next(m for m in step.modules if m.old == "vllm_ascend.distributed.kvpool")
    assert set(kvpool.submodules) == {
        "ascend_store_connector", "backend", "backend.backend", "backend.memcache_backend",
        "backend.mooncake_backend", "config_data", "kv_transfer", "pool_scheduler", "pool_worker"}
    assert step.stays("vllm_ascend.distributed.utils")
    assert step.stays("vllm_ascend.distributed.device_communicators.pyhccl_wrapper")
    assert not step.stays("vllm_ascend.distributed.utils.align_memory")


# -- validation names the entry at fault ---------------------------------------------------


def table(body: str, head: str = '[pack]\nname = "t"\n\n[[step]]\nversion = "1.0"\n') -> str:
    return head + textwrap.dedent(body)


@pytest.mark.parametrize(("body", "message"), [
    ('[[step.module]]\nold = "a.b"\nnew = "a.c"\n[[step.module]]\nold = "a.b"\nnew = "a.c"\n',
     "t.toml: step 1.0: module[1] (a.b): duplicate old 'a.b' (first at step 1.0: module[0] (a.b))"),
    ('[[step.module]]\nold = "a.b"\nnew = "a.c"\n[[step.symbol]]\nold = "a.b"\nnew = "a.d"\n',
     "symbol[0] (a.b): conflicting old 'a.b'"),
    ('[[step.module]]\nold = "a.b"\nnew = "a.c"\n[[step.module]]\nold = "a.c"\nnew = "a.b"\n',
     "cycle in step 1.0: a.b -> a.c -> a.b"),
    ('[[step.module]]\nold = "a.b"\nnew = "a.c"\n[[step.module]]\nold = "a.c"\nnew = "a.d"\n',
     "module[0] (a.b): new 'a.c' is also an old in this step"),
    ('[[step.module]]\nold = "a.b"\nnew = "a.b.c"\n', "new 'a.b.c' lies under old 'a.b'"),
    ('[[step.module]]\nold = "a..b"\nnew = "a.c"\n', "module[0] (a..b): `old` is not a dotted name"),
    ('[[step.module]]\nold = "a.class"\nnew = "a.c"\n', "`old` is not a dotted name: 'a.class'"),
    ('[[step.module]]\nold = "a.b"\n', "module[0] (a.b): `new` is missing"),
    ('[[step.module]]\nold = "a.b"\nnew = "a.c"\ntarget = "x"\n', "unknown key 'target'"),
    ('[[step.symbol]]\nold = "a.b.f"\nnew = "a.d.f"\n[[step.module]]\nold = "a.b"\nnew = "a.d"\n',
     "symbol[0] (a.b.f): redundant: step 1.0: module[0] (a.b) already moves it to 'a.d.f'"),
    ('[[step.symbol]]\nold = "a.b.f"\nnew = "a.b.g"\n[[step.module]]\nold = "a.b"\nnew = "a.d"\n',
     "symbol[0] (a.b.f): new 'a.b.g' lies under old 'a.b' (step 1.0: module[0] (a.b)) and would be rewritten"),
    ('[[step.module]]\nold = "a.b"\nnew = "a.c"\n[step.stay]\nnames = ["a.b.keep"]\n',
     "stay-put name 'a.b.keep' would be rewritten"),
    ('[[step.removed]]\nold = "a.b"\n', "removed[0] (a.b): `hint` must be a non-empty string"),
    ('[[step.symbol]]\nold = "a"\nnew = "b.c"\n', "a symbol move needs `module.name`, got 'a'"),
])
def test_validation_names_the_entry(tmp_path: Path, body: str, message: str) -> None:
    path = tmp_path / "t.toml"
    path.write_text(table(body))
    with pytest.raises(rules.RulesError) as err:
        rules.load(path)
    assert message in str(err.value)
    result = vam("rules", "validate", str(path))
    assert result.returncode == 2
    assert message in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_an_old_outside_the_packages_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "t.toml"
    path.write_text(table('[[step.module]]\nold = "other.b"\nnew = "a.c"\n',
                          head='[pack]\nname = "t"\npackages = ["a"]\n\n[[step]]\nversion = "1.0"\n'))
    with pytest.raises(rules.RulesError, match="old 'other.b' is outside the pack's packages"):
        rules.load(path)
def test_removal_must_come_after_the_step(tmp_path: Path) -> None:
    path = tmp_path / "t.toml"
    path.write_text('[pack]\nname = "t"\n[[step]]\nversion = "2.0"\nremoval = "1.0"\n')
    with pytest.raises(rules.RulesError, match="removal 1.0 must come after"):
        rules.load(path)


def test_steps_must_be_ordered(tmp_path: Path) -> None:
    path = tmp_path / "t.toml"
    path.write_text('[pack]\nname = "t"\n[[step]]\nversion = "2.0"\n[[step]]\nversion = "1.0"\n')
    with pytest.raises(rules.RulesError, match="step 1.0 must come after step 2.0"):
        rules.load(path)


def test_bad_toml_and_unknown_pack() -> None:
    # Every bundled pack is named (another pack, rules/vllm.toml, sits next to ours).
    with pytest.raises(rules.RulesError, match="unknown rule pack 'nope' \\(bundled: ") as err:
        rules.load_pack("nope")
    assert set(str(err.value).partition("(bundled: ")[2].rstrip(")").split(", ")) == set(
        rules.bundled())


# -- resolution ---------------------------------------------------------------------------


def resolver_for(text: str, tmp_path: Path, **window: str) -> Resolver:
    path = tmp_path / "pack.toml"
    path.write_text(textwrap.dedent(text))
    return Resolver(rules.load(path), window.get("from_version"), window.get("to_version"))


VERSIONED = """\
    [pack]
    name = "store"
    packages = ["pkg"]

    [[step]]
    version = "0.14.0"
    [[step.module]]
    old = "pkg.kvpool"
    new = "pkg.kv_pool.ascend_store"
    [[step.module]]
    old = "pkg.kv_pool.ascend_store.metadata"
    new = "pkg.kv_pool.cpu_offload.metadata"
    intermediate = true

    [[step]]
    version = "0.16.0"
    [[step.module]]
    old = "pkg.kv_pool.ascend_store.config_data"
    new = "pkg.kv_pool.ascend_store.metadata"
    """


def test_whole_component_longest_prefix(pack: rules.Pack) -> None:
    resolver = Resolver(pack, to_version="0.14.0")
    assert resolver.resolve("vllm_ascend.distributed.kvpool.backend.backend.Backend").new == (
        "vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.backend.backend.Backend")
    assert not resolver.resolve("vllm_ascend.distributed.kvpool_extra.x").changed
    assert not resolver.resolve("vllm_ascend.distributed.utils").changed
    assert not resolver.resolve("vllm_ascend.distributed.utils.align_memory_v2").changed
    assert resolver.resolve("vllm_ascend.distributed.utils.align_memory").first.kind == "symbol"
    assert resolver.resolve_module("vllm_ascend.distributed.utils.align_memory").new == (
        "vllm_ascend.distributed.utils.align_memory")  # a module path never takes symbol rules


def test_steps_compose_in_order_and_never_close_across_versions(tmp_path: Path) -> None:
    resolver = resolver_for(VERSIONED, tmp_path)
    # 0.13 -> 0.16: kvpool.config_data -> ascend_store.config_data -> ascend_store.metadata
    chain = resolver.resolve("pkg.kvpool.config_data.ChunkedTokenDatabase")
    assert chain.new == "pkg.kv_pool.ascend_store.metadata.ChunkedTokenDatabase"
    assert [h.step for h in chain.hits] == ["0.14.0", "0.16.0"]
    # ascend_store.metadata is what step 0.16.0 writes: code that spells it was written for
    # 0.16.0 or later, so the 0.14 intermediate row (a path 0.16.0 re-created) does not apply.
    assert not resolver.resolve("pkg.kv_pool.ascend_store.metadata").changed
    # Below it, the same: the name a migration wrote is left as it is by the next run.
    assert not resolver.resolve("pkg.kv_pool.ascend_store.metadata.ReqMeta").changed
    # Code already on 0.14 only takes the later step: its ascend_store.metadata is not touched...
    later = resolver_for(VERSIONED, tmp_path, from_version="0.14.0")
    assert not later.resolve("pkg.kv_pool.ascend_store.metadata").changed
    assert later.resolve("pkg.kv_pool.ascend_store.config_data").new == "pkg.kv_pool.ascend_store.metadata"
    # ...and --to stops before the later step.
    early = resolver_for(VERSIONED, tmp_path, to_version="0.14.0")
    assert early.resolve("pkg.kvpool.config_data").new == "pkg.kv_pool.ascend_store.config_data"


def test_second_run_from_the_target_version_is_a_no_op(tmp_path: Path) -> None:
    (tmp_path / "pack.toml").write_text(textwrap.dedent(VERSIONED))
    path = tmp_path / "src" / "m.py"
    path.parent.mkdir()
    path.write_text("from pkg.kvpool.config_data import X\n")
    assert vam("migrate", "--rules", str(tmp_path / "pack.toml"), str(path)).returncode == 0
    assert path.read_text() == "from pkg.kv_pool.ascend_store.metadata import X\n"
    again = vam("migrate", "--rules", str(tmp_path / "pack.toml"), "--from", "0.16.0", str(path))
    assert again.returncode == 0 and ", 0 changed," in again.stderr


# -- S1: third-party table, versioned removal ------------------------------------------------


S1 = rules.parse({
    "pack": {"name": "vllm_utils", "packages": ["vllm"]},
    "step": [
        {"version": "0.11.0", "removal": "0.13.0", "symbol": [
            {"old": "vllm.utils.get_open_port", "new": "vllm.utils.network_utils.get_open_port"},
            {"old": "vllm.utils.STR_DTYPE_TO_TORCH_DTYPE",
             "new": "vllm.utils.torch_utils.STR_DTYPE_TO_TORCH_DTYPE"}]},
        {"version": "0.13.0", "removed": [
            {"old": "vllm.utils.make_async_legacy", "hint": "use vllm.utils.async_utils.make_async"}]},
    ],
})


def test_s1_third_party_table_splits_and_reports_removals() -> None:
    source = ("from vllm.utils import get_open_port, STR_DTYPE_TO_TORCH_DTYPE, other\n"
              "from vllm.utils import make_async_legacy\n")
    new, findings = rewrite(source, pack=S1)
    assert new == ("from vllm.utils.network_utils import get_open_port\n"
                   "from vllm.utils.torch_utils import STR_DTYPE_TO_TORCH_DTYPE\n"
                   "from vllm.utils import other\n"
                   "from vllm.utils import make_async_legacy\n")
    removed = [f for f in findings if f.code == F.REMOVED]
    assert [(f.line, f.message) for f in removed] == [
        (2, "'vllm.utils.make_async_legacy' was removed in 0.13.0, no replacement: "
            "use vllm.utils.async_utils.make_async")]
    again, findings = rewrite(new, pack=S1)
    assert again == new
    assert [f.code for f in findings] == [F.REMOVED]


# -- S2: table keys that never existed ----------------------------------------------------------


def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_s2_validate_against_trees_names_the_row(tmp_path: Path) -> None:
    old = _tree(tmp_path / "old", {"pkg/__init__.py": "", "pkg/mod.py": "X = 1\n",
                                   "pkg/utils.py": "def helper(): ...\n"})
    new = _tree(tmp_path / "new", {"pkg/__init__.py": "", "pkg/new/__init__.py": "",
                                   "pkg/new/mod.py": "X = 1\n", "pkg/new/utils.py": "def helper(): ...\n"})
    good = tmp_path / "good.toml"
    good.write_text(table('[[step.module]]\nold = "pkg.mod"\nnew = "pkg.new.mod"\n'
                          '[[step.symbol]]\nold = "pkg.utils.helper"\nnew = "pkg.new.utils.helper"\n'))
    assert vam("rules", "validate", str(good), "--against", str(old), str(new)).returncode == 0
    # A "submodule" that was really a module attribute never fires: rejected, naming the row.
    bad = tmp_path / "bad.toml"
    bad.write_text(table('[[step.module]]\nold = "pkg.mod.X"\nnew = "pkg.new.mod.X"\n'))
    result = vam("rules", "validate", str(bad), "--against", str(old), str(new))
    assert result.returncode == 2
    assert "module[0] (pkg.mod.X): old module 'pkg.mod.X' not found in" in result.stderr


def _star_tree(root: Path) -> Path:
    """vllm.distributed's shape: the package serves its getters only through star imports,
    one of a module with a literal `__all__`, one into a two-module star-import cycle."""
    return _tree(root, {
        "pkg/__init__.py": "from .state import *\nfrom .loop_a import *\n",
        "pkg/state.py": '__all__ = ["get_tp_group"]\n\ndef get_tp_group(): ...\n\n'
                        "def get_hidden(): ...\n",
        "pkg/loop_a.py": "from .loop_b import *\n\ndef in_a(): ...\n",
        "pkg/loop_b.py": "from .loop_a import *\n\ndef in_b(): ...\n\n_private = 1\n",
    })


def test_validate_against_follows_star_imports(tmp_path: Path) -> None:
    """A name a package serves only through `from .x import *` exists (x's `__all__` when it
    has one, else its public names, followed through a cycle); one it does not serve is still
    reported, naming the row."""
    old = _star_tree(tmp_path / "old")
    new = _tree(tmp_path / "new", {"pkg/__init__.py": "from .groups import *\n",
                                   "pkg/groups.py": "def get_tp_group(): ...\n\ndef in_b(): ...\n"})
    good = tmp_path / "good.toml"
    good.write_text(table(
        '[[step.symbol]]\nold = "pkg.get_tp_group"\nnew = "pkg.groups.get_tp_group"\n'
        '[[step.symbol]]\nold = "pkg.in_b"\nnew = "pkg.groups.in_b"\n'
        '[[step.removed]]\nold = "pkg.in_a"\nhint = "gone"\n'))
    result = vam("rules", "validate", str(good), "--against", str(old), str(new))
    assert result.returncode == 0, result.stderr
    assert "every name found" in result.stdout
    for row, message in [
        # Left out of state's __all__: the star import does not bind it.
        ('[[step.removed]]\nold = "pkg.get_hidden"\nhint = "x"\n',
         "removed[0] (pkg.get_hidden): removed name 'pkg.get_hidden' not found in"),
        ('[[step.removed]]\nold = "pkg._private"\nhint = "x"\n',
         "removed[0] (pkg._private): removed name 'pkg._private' not found in"),
        ('[[step.symbol]]\nold = "pkg.absent"\nnew = "pkg.groups.get_tp_group"\n',
         "symbol[0] (pkg.absent): old module 'pkg' defines no 'absent' in"),
        ('[[step.symbol]]\nold = "pkg.get_tp_group"\nnew = "pkg.in_a"\n',
         "symbol[0] (pkg.get_tp_group): new module 'pkg' defines no 'in_a' in"),
    ]:
        bad = tmp_path / "bad.toml"
        bad.write_text(table(row))
        result = vam("rules", "validate", str(bad), "--against", str(old), str(new))
        assert result.returncode == 2, result.stdout
        assert message in result.stderr


def test_star_imports_are_followed_to_a_bounded_depth(tmp_path: Path) -> None:
    from migrator.verify_imports.project import MAX_STAR_DEPTH
    from migrator.verify_imports.treenames import TreeNames

    # pkg star-imports m0, m0 star-imports m1, ...: m<i> is i + 1 star imports deep.
    deep = MAX_STAR_DEPTH + 8
    files = {"pkg/__init__.py": "from .m0 import *\n"}
    for i in range(deep):
        after = f"from .m{i + 1} import *\n" if i + 1 < deep else ""
        files[f"pkg/m{i}.py"] = f"{after}def f{i}(): ...\n"
    tree = _tree(tmp_path, files)
    names = TreeNames()(tree, "pkg")
    assert {"f0", f"f{MAX_STAR_DEPTH - 1}"} <= set(names)
    assert not {f"f{MAX_STAR_DEPTH}", f"f{deep - 1}"} & set(names)
    assert TreeNames()(tree, "pkg.nothing") == ()


def _sdist(path: Path, files: dict[str, str], version: str) -> Path:
    import io
    import tarfile
    top = path.name[: -len(".tar.gz")]
    files = {"PKG-INFO": f"Metadata-Version: 2.1\nName: pkg\nVersion: {version}\n", **files}
    with tarfile.open(path, "w:gz") as tar:
        for rel, text in files.items():
            info = tarfile.TarInfo(f"{top}/{rel}")
            info.size = len(text.encode())
            tar.addfile(info, io.BytesIO(text.encode()))
    return path


def test_validate_against_takes_sdists_wheels_and_requirements(tmp_path: Path) -> None:
    """issue 19: `validate --against` reads the DIST forms `rules infer` and `verify-imports
    --against` read: an sdist, a wheel, `NAME==VERSION` (here from a pre-filled cache)."""
    import os
    import zipfile
    old_files = {"pkg/__init__.py": "", "pkg/mod.py": "X = 1\n"}
    new_files = {"pkg/__init__.py": "", "pkg/new/__init__.py": "", "pkg/new/mod.py": "X = 1\n"}
    cache = tmp_path / "cache"
    cache.mkdir()
    old = _sdist(cache / "pkg-1.0.tar.gz", old_files, "1.0")
    wheel = tmp_path / "pkg-2.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("pkg-2.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: pkg\nVersion: 2.0\n")
        for rel, text in new_files.items():
            zf.writestr(rel, text)
    good = tmp_path / "good.toml"
    good.write_text(table('[[step.module]]\nold = "pkg.mod"\nnew = "pkg.new.mod"\n'))
    bad = tmp_path / "bad.toml"
    bad.write_text(table('[[step.module]]\nold = "pkg.mod"\nnew = "pkg.gone.mod"\n'))
    env = {**os.environ, "VAM_SDIST_CACHE": str(cache), "PIP_INDEX_URL": "file:///nonexistent"}
    for olds in (str(old), "pkg==1.0"):
        result = vam("rules", "validate", str(good), "--against", olds, str(wheel), env=env)
        assert result.returncode == 0, result.stderr
        assert "every name found" in result.stdout
        result = vam("rules", "validate", str(bad), "--against", olds, str(wheel), env=env)
        assert result.returncode == 2
        assert "new module 'pkg.gone.mod' not found in" in result.stderr
    missing = vam("rules", "validate", str(good), "--against", str(tmp_path / "nope"), str(wheel))
    assert missing.returncode == 2
    assert "nope: no such file or directory" in missing.stderr


def test_s2_bundled_table_matches_the_real_sdists() -> None:
    import sys
    sys.path.insert(0, str(REPO / "benchmarks"))
    from sdists import sdist  # fetched from the configured index, cached outside the repo

    old, new = sdist("0.13.0"), sdist("0.14.0rc1")
    result = vam("rules", "validate", "vllm_ascend", "--step", "0.14.0",
                 "--against", str(old), str(new))
    assert result.returncode == 0, result.stderr
    assert "every name found" in result.stdout


# -- S3 / S4 ------------------------------------------------------------------------------------


def test_s3_reexport_of_an_old_path_is_flagged_on_the_reexport_line(tmp_path: Path) -> None:
    _tree(tmp_path, {
        "plugin/__init__.py": "from vllm_ascend.distributed.mooncake_connector import MooncakeConnector\n",
        "plugin/use.py": "from plugin import MooncakeConnector\n",
    })
    result = vam("check", str(tmp_path))
    assert result.returncode == 1
    assert result.stdout.splitlines() == [
        f"{tmp_path}/plugin/__init__.py:1:1: VAM001 'vllm_ascend.distributed.mooncake_connector' "
        "moved to 'vllm_ascend.distributed.kv_transfer.kv_p2p.mooncake_connector' (0.14.0)"]


def test_s4_type_checking_imports_are_rewritten(pack: rules.Pack) -> None:
    step_014 = dataclasses.replace(pack, steps=(pack.step("0.14.0"),))
    new, _ = rewrite(pack=step_014, source=textwrap.dedent("""\
        from typing import TYPE_CHECKING

        if TYPE_CHECKING:
            from vllm_ascend.distributed.kvpool.config_data import ReqMeta
            from vllm_ascend.distributed import communicator
        """))
    assert new == textwrap.dedent("""\
        from typing import TYPE_CHECKING

        if TYPE_CHECKING:
            from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.config_data import ReqMeta
            from vllm_ascend.distributed.device_communicators import npu_communicator as communicator
        """)


def test_validate_against_checks_the_step_of_news_version_and_lists_every_error(
        tmp_path: Path) -> None:
    """`--against OLD NEW` with no --step checks the step of NEW's stated version, not the
    latest one; errors name each DIST as typed (never the temp folder an sdist is unpacked
    to) and every one is listed, one per line."""
    old = _sdist(tmp_path / "pkg-1.0.tar.gz", {"pkg/__init__.py": "", "pkg/a.py": "X = 1\n"},
                 "1.0")
    new = _sdist(tmp_path / "pkg-2.0.tar.gz", {"pkg/__init__.py": "", "pkg/b.py": "X = 1\n"},
                 "2.0")
    steps = ('[pack]\nname = "t"\n\n[[step]]\nversion = "2.0"\n'
             '[[step.symbol]]\nold = "pkg.a.X"\nnew = "pkg.b.X"\n'
             '[[step]]\nversion = "3.0"\n'
             '[[step.symbol]]\nold = "pkg.b.Y"\nnew = "pkg.c.Y"\n'
             '[[step.symbol]]\nold = "pkg.b.Z"\nnew = "pkg.c.Z"\n'
             '[[step.removed]]\nold = "pkg.b.W"\nhint = "gone"\n')
    path = tmp_path / "two.toml"
    path.write_text(steps)
    result = vam("rules", "validate", str(path), "--against", str(old), str(new))
    assert result.returncode == 0, result.stderr
    latest = vam("rules", "validate", str(path), "--step", "3.0", "--against", str(old),
                 str(new))
    assert latest.returncode == 2
    lines = latest.stderr.splitlines()
    assert lines[0] == f"vam: error: 5 rows do not match {old} / {new}:"
    assert len(lines) == 6 and "more" not in latest.stderr
    assert lines[1].endswith(f"symbol[0] (pkg.b.Y): old module 'pkg.b' defines no 'Y' in {old}")
    assert all(line.endswith((f" in {old}", f" in {new}")) for line in lines[1:])
