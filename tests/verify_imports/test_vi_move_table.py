"""issue 19: `verify-imports --against` names the move table's target before any guess by
name, says when the table removed a path, and labels a guess as one.

The release here is a small tree in the 0.30.0rc2 layout of vllm-ascend (what the bundled
`vllm_ascend` pack says of it is real): it has the P2P package `kv_transfer.kv_p2p.mooncake`,
a name-alike of the 0.11 *store* package `distributed.mooncake`, which the table follows to
`kv_transfer.kv_pool.ascend_store`.
"""

from __future__ import annotations

from pathlib import Path

from migrator.verify_imports import verify_against
from migrator.verify_imports.against import load_dist
from migrator.verify_imports.checker import GUESS
from tests.verify_imports.conftest import Tree

STORE = "vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store"
RELEASE = {
    "PKG-INFO": "Name: vllm_ascend\nVersion: 0.30.0rc2\n",
    "vllm_ascend/__init__.py": "",
    "vllm_ascend/distributed/__init__.py": "",
    "vllm_ascend/distributed/kv_transfer/__init__.py": "",
    "vllm_ascend/distributed/kv_transfer/kv_p2p/__init__.py": "",
    "vllm_ascend/distributed/kv_transfer/kv_p2p/mooncake/__init__.py": "",
    "vllm_ascend/distributed/kv_transfer/kv_p2p/mooncake/config_data.py": "class ReqMeta: ...\n",
    "vllm_ascend/distributed/kv_transfer/kv_pool/__init__.py": "",
    "vllm_ascend/distributed/kv_transfer/kv_pool/ascend_store/__init__.py": "",
    "vllm_ascend/distributed/kv_transfer/kv_pool/ascend_store/metadata.py": "class ReqMeta: ...\n",
    "vllm_ascend/distributed/kv_transfer/kv_pool/ascend_store/ascend_store_connector.py":
        "class AscendStoreConnector: ...\n",
}


def _check(tree: Tree, tmp_path: Path, code: str, drop: str = "") -> list[tuple[str, str, str]]:
    release = {rel: text for rel, text in RELEASE.items() if not drop or not rel.endswith(drop)}
    tree({**{f"release/{rel}": text for rel, text in release.items()},
          "plugin/__init__.py": "", "plugin/mod.py": code})
    found = verify_against(load_dist(str(tmp_path / "release")), ["plugin"]).findings
    return [(f.code, f.message, f.suggestion) for f in found]


def test_the_tables_target_comes_before_a_guess(tree: Tree, tmp_path: Path) -> None:
    [(code, message, suggestion)] = _check(
        tree, tmp_path, "from vllm_ascend.distributed.mooncake.config_data import ReqMeta\n")
    assert code == "VAI002"
    assert message.endswith(
        "; 'vllm_ascend.distributed.mooncake.config_data' moved to "
        f"{STORE}.metadata in 0.12.0rc1, 0.14.0 and 0.27.1rc1 (move table)")
    assert suggestion == f"{STORE}.metadata"
    assert "kv_p2p" not in message and "did you mean" not in message


def test_a_submodule_moved_out_of_a_removed_package(tree: Tree, tmp_path: Path) -> None:
    [(_, message, suggestion)] = _check(
        tree, tmp_path,
        "from vllm_ascend.distributed.mooncake import mooncake_store_connector_v1\n")
    assert message.endswith(
        "; 'vllm_ascend.distributed.mooncake.mooncake_store_connector_v1' moved to "
        f"{STORE}.ascend_store_connector in 0.12.0rc1 and 0.14.0 (move table)")
    assert suggestion == f"{STORE}.ascend_store_connector"


def test_a_missing_name_the_table_renamed(tree: Tree, tmp_path: Path) -> None:
    [(code, message, suggestion)] = _check(tree, tmp_path, f"from {STORE} import config_data\n")
    assert code == "VAI001"
    assert message.endswith(
        f"; '{STORE}.config_data' moved to {STORE}.metadata in 0.27.1rc1 (move table)")
    assert suggestion == f"{STORE}.metadata"


def test_removed_by_the_table_says_so_with_its_hint(tree: Tree, tmp_path: Path) -> None:
    [(code, message, suggestion)] = _check(
        tree, tmp_path, "import vllm_ascend.distributed.llmdatadist_c_mgr_connector\n")
    assert code == "VAI002"
    assert message.endswith(
        "; 'vllm_ascend.distributed.llmdatadist_c_mgr_connector' was removed in 0.12.0rc1 "
        "(move table): the LLMDataDist P2P connector was removed; use MooncakeConnectorV1 "
        "(vllm_ascend.distributed.mooncake_connector)")
    assert suggestion == ""


def test_a_guess_is_labelled_as_one(tree: Tree, tmp_path: Path) -> None:
    [(_, message, suggestion)] = _check(
        tree, tmp_path, "from vllm_ascend.elsewhere.config_data import ReqMeta\n")
    assert suggestion == "vllm_ascend.distributed.kv_transfer.kv_p2p.mooncake.config_data"
    assert message.endswith(f"; did you mean {suggestion}? {GUESS}")
    assert GUESS == "(a guess: same name elsewhere)"


def test_a_table_target_the_release_lacks_falls_back_to_a_guess(
    tree: Tree, tmp_path: Path
) -> None:
    [(_, message, suggestion)] = _check(
        tree, tmp_path, "from vllm_ascend.distributed.mooncake.config_data import ReqMeta\n",
        drop="ascend_store/metadata.py")
    assert "(move table)" not in message
    assert message.endswith(f"; did you mean {suggestion}? {GUESS}")


def test_the_rc_that_shipped_a_step_uses_it(tree: Tree, tmp_path: Path) -> None:
    """0.14.0rc1 shipped the step named 0.14.0 (its `first-release`), though PEP 440 sorts
    0.14.0rc1 before 0.14.0."""
    p2p = "vllm_ascend/distributed/kv_transfer/kv_p2p"
    tree({"release/PKG-INFO": "Name: vllm_ascend\nVersion: 0.14.0rc1\n",
          "release/vllm_ascend/__init__.py": "",
          "release/vllm_ascend/distributed/__init__.py": "",
          "release/vllm_ascend/distributed/kv_transfer/__init__.py": "",
          f"release/{p2p}/__init__.py": "",
          f"release/{p2p}/mooncake_connector.py": "class MooncakeConnector: ...\n",
          "plugin/__init__.py": "",
          "plugin/mod.py":
              "from vllm_ascend.distributed.mooncake_connector import MooncakeConnector\n"})
    [found] = verify_against(load_dist(str(tmp_path / "release")), ["plugin"]).findings
    assert found.message.endswith(
        f"moved to {p2p.replace('/', '.')}.mooncake_connector in 0.14.0 (move table)")
    assert found.suggestion == f"{p2p.replace('/', '.')}.mooncake_connector"
