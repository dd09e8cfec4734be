"""The bundled pack's early steps (0.7.3 to 0.13.0) against the released sdists, and what they
must leave alone: code written for 0.13.0 or later, whose paths these releases reused."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

import rules
from migrator.core.resolver import Resolver
from tests.migrator.conftest import REPO, rewrite, vam

# (OLD, NEW, step): NEW's predecessor in PEP 440 order, whatever branch it was released from.
EARLY_PAIRS = [("0.7.3rc2", "0.7.3", "0.7.3"), ("0.9.1rc1", "0.9.1rc2", "0.9.1rc2"),
               ("0.9.1", "0.9.2rc1", "0.9.2rc1"), ("0.9.2rc1", "0.10.0rc1", "0.10.0rc1"),
               ("0.10.1rc1", "0.10.2rc1", "0.10.2rc1"), ("0.11.0", "0.12.0rc1", "0.12.0rc1"),
               ("0.13.0rc1", "0.13.0rc2", "0.13.0rc2"), ("0.13.0rc3", "0.13.0", "0.13.0")]
# Releases with vllm_ascend.distributed (from 0.7.3; 0.7.1rc1 to 0.7.3rc2 had none) after
# which nothing a user imports there moved, was renamed or was removed.
NO_STEP = ["0.7.3.post1", "0.8.4rc1", "0.8.4rc2", "0.8.5rc1", "0.9.0rc1", "0.9.0rc2",
           "0.9.1rc1", "0.9.1rc3", "0.9.1", "0.10.1rc1", "0.11.0rc0", "0.11.0rc1", "0.11.0rc2",
           "0.11.0rc3", "0.11.0", "0.13.0rc1", "0.13.0rc3"]


def _sdist(version: str) -> Path:
    sys.path.insert(0, str(REPO / "benchmarks"))
    from sdists import sdist  # fetched from the configured index, cached outside the repo

    return sdist(version)


@pytest.mark.parametrize(("old", "new", "step"), EARLY_PAIRS)
def test_each_early_step_matches_its_sdists(old: str, new: str, step: str) -> None:
    result = vam("rules", "validate", "vllm_ascend", "--step", step,
                 "--against", str(_sdist(old)), str(_sdist(new)))
    assert result.returncode == 0, result.stderr
    assert "every name found" in result.stdout


def test_every_early_release_has_a_step_or_is_listed(pack: rules.Pack) -> None:
    early = [s.version for s in pack.steps if rules.version_key(s.version)
             <= rules.version_key("0.13.0")]
    assert early == [step for _, _, step in EARLY_PAIRS]
    header = (REPO / "rules" / "vllm_ascend.toml").read_text().split("[pack]")[0]
    listed = header.split("# Releases with no step")[1].split("\n#\n")[0]
    named = set(re.findall(r"\d+\.\d+\.\d+(?:rc\d+|\.post\d+)?", listed))
    assert set(NO_STEP) <= named and not named & {s.version for s in pack.steps}


def test_no_early_row_names_a_path_of_0_13_or_later(pack: rules.Pack) -> None:
    """With no `--from` every step applies: an early row whose `old` a later release has
    again would rewrite or report code written for that release."""
    from migrator.core.sources import open_release
    from migrator.infer.index import build_indexes

    later = ["0.13.0", "0.14.0rc1", "0.20.2rc1", "0.27.1rc1", "0.30.0rc2"]
    olds = [(s.version, old) for s in pack.steps
            if rules.version_key(s.version) <= rules.version_key("0.13.0") for old, _ in s.olds()]
    clashes = []
    for version in later:
        files = {path: data for path, data in open_release(_sdist(version)).files.items()
                 if path.startswith("vllm_ascend/distributed/") or path.count("/") == 1}
        index, _ = build_indexes(files, {}, ["vllm_ascend"])
        for step, old in olds:
            module, _, name = old.rpartition(".")
            held = index.modules.get(module)
            if index.has(old) or (held is not None and name in held.defs):
                clashes.append((step, old, version))
    assert clashes == []


def test_code_for_the_0_9_and_0_11_layouts_reaches_the_newest(pack: rules.Pack) -> None:
    source = ("from vllm_ascend.communicator import NPUCommunicator\n"
              "from vllm_ascend.distributed.mooncake.mooncake_store_connector_v1 import "
              "MooncakeConnectorV1\n"
              "from vllm_ascend.distributed.mooncake.config_data import ReqMeta\n")
    new, findings = rewrite(source, pack=pack)
    assert new == (
        "from vllm_ascend.distributed.device_communicators.npu_communicator import "
        "NPUCommunicator\n"
        "from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.ascend_store_connector "
        "import AscendStoreConnector as MooncakeConnectorV1\n"
        "from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.metadata import ReqMeta\n")
    resolver = Resolver(pack, "0.9.0rc2")
    gone = resolver.resolve("vllm_ascend.distributed.kv_transfer.simple_pipe.SimplePipe")
    assert gone.removed_step == "0.10.0rc1" and not gone.changed
    # 0.14's kv_transfer.utils package is not the 0.9 module of that name.
    kept = resolver.resolve("vllm_ascend.distributed.kv_transfer.utils.utils.align_memory")
    assert not kept.changed and kept.removed is None


def test_the_runtime_shims_start_after_shims_from(pack: rules.Pack, tmp_path: Path) -> None:
    from shims._targets import Installed, served

    assert pack.shims_from == "0.13.0"
    # A layout holding every target of both steps: only the step after the floor is served.
    for module in ("pkg/a_new.py", "pkg/b_new.py", "pkg/__init__.py"):
        (tmp_path / module).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / module).write_text("")
    table = {"pack": {"name": "t", "packages": ["pkg"], "shims-from": "1.0"}, "step": [
        {"version": "1.0", "module": [{"old": "pkg.a_old", "new": "pkg.a_new"}]},
        {"version": "2.0rc1", "module": [{"old": "pkg.b_old", "new": "pkg.b_new"}]}]}
    kept, fits = served(rules.parse(table), Installed([str(tmp_path)]))
    assert [len(s.modules) for s in kept.steps] == [0, 1]
    assert [f.verdict for f in fits] == [
        "not served: the shims start after 1.0 ([pack] shims-from)",
        "applies: every target is installed"]
    table["pack"]["shims-from"] = "one"  # type: ignore[index]
    with pytest.raises(rules.RulesError, match="malformed shims-from version 'one'"):
        rules.parse(table)
