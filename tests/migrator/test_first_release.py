"""A step's `first-release`: the step named 0.14.0 shipped in 0.14.0rc1, which PEP 440 sorts
before 0.14.0, so every comparison of a release with the step uses 0.14.0rc1."""

from __future__ import annotations

from pathlib import Path

import pytest

import rules
from migrator.core import findings as F
from migrator.core.discover import SourceFile, kind_of
from migrator.core.resolver import Resolver
from migrator.rewrite.engine import Engine, Options
from tests.migrator.conftest import vam

P2P = "vllm_ascend.distributed.mooncake_connector"  # moved in 0.14.0 (first in 0.14.0rc1)
P2P_NEW = "vllm_ascend.distributed.kv_transfer.kv_p2p.mooncake_connector"


def _table(*steps: dict[str, str]) -> dict[str, object]:
    return {"pack": {"name": "t", "packages": ["pkg"]},
            "step": [{**step, "module": [{"old": f"pkg.m{i}", "new": f"pkg.n{i}"}]}
                     for i, step in enumerate(steps)]}


def test_first_release_is_read_and_validated() -> None:
    pack = rules.parse(_table({"version": "1.0"}, {"version": "2.0", "first-release": "2.0rc1"}))
    assert [(s.version, s.release) for s in pack.steps] == [("1.0", "1.0"), ("2.0", "2.0rc1")]
    assert rules.load_pack("vllm_ascend").step("0.14.0").release == "0.14.0rc1"
    with pytest.raises(rules.RulesError, match="step 2.0: malformed first-release version 'x'"):
        rules.parse(_table({"version": "2.0", "first-release": "x"}))
    with pytest.raises(rules.RulesError, match="step 2.0: first-release 2.1 must not come after"):
        rules.parse(_table({"version": "2.0", "first-release": "2.1"}))
    with pytest.raises(rules.RulesError,
                       match="step 2.0: first-release 1.0 must come after the previous step 1.0"):
        rules.parse(_table({"version": "1.0"}, {"version": "2.0", "first-release": "1.0"}))


def test_from_and_to_compare_with_the_first_release(pack: rules.Pack) -> None:
    assert Resolver(pack, "0.13.0", "0.14.0rc1").steps[-1].version == "0.14.0"
    assert Resolver(pack, "0.13.0", "0.14.0").steps[-1].version == "0.14.0"
    # Code written for 0.14.0rc1 already has the 0.14.0 paths.
    assert "0.14.0" not in [s.version for s in Resolver(pack, "0.14.0rc1").steps]
    assert Resolver(pack, "0.14.0rc1").resolve(P2P).new == P2P


def test_a_file_pinning_the_rc_that_shipped_a_step_gets_it(
    pack: rules.Pack, tmp_path: Path
) -> None:
    manifest = tmp_path / "deploy.yaml"
    manifest.write_text(
        "spec:\n  image: quay.io/ascend/vllm-ascend:v0.14.0rc1\n"
        f"  kv_connector_module_path: {P2P}\n"
    )
    engine = Engine(Resolver(pack, "0.13.0", "0.14.0"), Options(default_floor="0.13.0"))
    result = engine.process(SourceFile(manifest, kind_of(manifest), tmp_path))
    assert [f.code for f in result.findings] == [F.MOVED]
    assert result.new is not None and P2P_NEW.encode() in result.new


def test_migrate_to_the_rc_that_shipped_a_step(tmp_path: Path) -> None:
    module = tmp_path / "x.py"
    module.write_text(f"from {P2P} import MooncakeConnector\n")
    done = vam("migrate", "--from", "0.13.0", "--to", "0.14.0rc1", str(module))
    assert done.returncode == 0, done.stderr
    assert "nothing to migrate" not in done.stderr and "not a step" not in done.stderr
    assert module.read_text() == f"from {P2P_NEW} import MooncakeConnector\n"
