"""The bundled `vllm` pack (rules/vllm.toml) against vLLM's released sdists, and the moves
main2main commits of vllm-ascend made by hand, resolved through the whole chain.

Each step is checked with `vam rules validate --against OLD NEW`: every `old` must import in
OLD, every `new` in NEW. The sdists are fetched into the cache (`$VAM_SDIST_CACHE`, default
~/.cache/vam-sdists; migrator.core.dists), never into the repository. They are large (20-47 MB
each, ~1 GB for every release to 0.33.0), so by default only SAMPLE runs: the attention
reorganisation (0.14.0) and the flash-linear-attention move (0.26.0), 4 sdists. `VAM_VLLM_PACK_PAIRS=all` runs every step (benchmarks/vllm_pack.py
drafts them; this is how each was reviewed).
"""

from __future__ import annotations

import os

import pytest
import tomllib

import rules
from migrator.core.dists import fetch
from migrator.core.resolver import Resolver
from tests.migrator.conftest import vam

# (OLD sdist, NEW sdist, step). 0.15.0 and 0.15.1 have no sdist (platform wheels only): steps
# 0.15.0 and 0.16.0 are both checked against 0.14.1 -> 0.16.0, since nothing they name changed
# again in the other release (they were reviewed against the 0.15.0 wheel as well).
PAIRS = [("0.11.0", "0.11.1", "0.11.1"), ("0.11.2", "0.12.0", "0.12.0"),
         ("0.12.0", "0.13.0", "0.13.0"), ("0.13.0", "0.14.0", "0.14.0"), ("0.14.1", "0.16.0", "0.15.0"),
         ("0.14.1", "0.16.0", "0.16.0"), ("0.16.0", "0.17.0", "0.17.0"),
         ("0.17.1", "0.18.0", "0.18.0"), ("0.18.1", "0.19.0", "0.19.0"),
         ("0.19.1", "0.20.0", "0.20.0"), ("0.20.2", "0.21.0", "0.21.0"),
         ("0.21.0", "0.22.0", "0.22.0"), ("0.22.1", "0.23.0", "0.23.0"),
         ("0.23.0", "0.24.0", "0.24.0"), ("0.24.0", "0.25.0", "0.25.0"),
         ("0.25.1", "0.26.0", "0.26.0"), ("0.26.0", "0.27.0", "0.27.0"),
         ("0.27.1", "0.28.0", "0.28.0"), ("0.28.0", "0.29.0", "0.29.0"),
         ("0.29.0", "0.30.0", "0.30.0"), ("0.30.0", "0.31.0", "0.31.0"),
         ("0.31.0", "0.32.0", "0.32.0"), ("0.32.0", "0.33.0", "0.33.0")]
SAMPLE = {"0.14.0", "0.26.0"}
_ALL = os.environ.get("VAM_VLLM_PACK_PAIRS") == "all"


@pytest.mark.parametrize(("old", "new", "step"), [
    pytest.param(*pair, marks=() if _ALL or pair[2] in SAMPLE else pytest.mark.skip(
        reason="sdist pair outside the CI sample; VAM_VLLM_PACK_PAIRS=all runs it"))
    for pair in PAIRS])
def test_each_step_matches_its_sdists(old: str, new: str, step: str) -> None:
    result = vam("rules", "validate", "vllm", "--step", step, "--against",
                 str(fetch("vllm", old)), str(fetch("vllm", new)))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "every name found" in result.stdout


def test_every_step_is_checked_against_a_pair() -> None:
    versions = [step.version for step in rules.load_pack("vllm").steps]
    assert versions == [step for _, _, step in PAIRS]


@pytest.mark.parametrize(("start", "old", "new", "steps"), [
    # The moves issue 20 names, each confirmed in the sdists (0.25.1 has layers/fla, 0.26.0
    # third_party/flash_linear_attention; 0.21.0 has mamba/gdn_linear_attn.py, 0.22.0 mamba/gdn/).
    ("0.25.1", "vllm.model_executor.layers.fla.ops.chunk.chunk_gated_delta_rule",
     "vllm.third_party.flash_linear_attention.ops.chunk.chunk_gated_delta_rule", ["0.26.0"]),
    ("0.21.0", "vllm.model_executor.layers.mamba.gdn_linear_attn.GatedDeltaNetAttention",
     "vllm.model_executor.layers.mamba.gdn.base.GatedDeltaNetAttention", ["0.22.0"]),
    ("0.21.0", "vllm.model_executor.layers.fused_moe.layer.determine_expert_map",
     "vllm.model_executor.layers.fused_moe.expert_map_manager.determine_expert_map", ["0.22.0"]),
    # Chains: a name moved twice reaches its last home from where the code started (up to
    # 0.30.0 for this one: 0.31.0 removed it, test_a_name_a_step_wrote_can_be_removed_later).
    ("0.18.1", "vllm.model_executor.models.qwen3_next.fused_gdn_gating",
     "vllm.model_executor.layers.mamba.gdn.qwen_gdn_linear_attn.fused_gdn_gating",
     ["0.19.0", "0.22.0"]),
    ("0.11.0", "vllm.attention.AttentionBackend", "vllm.v1.attention.backend.AttentionBackend",
     ["0.12.0", "0.14.0"]),
    # Moved in 0.11.1 but served by vllm.utils' deprecation __getattr__ until 0.14.0 removed it:
    # code written for 0.13.0 may still spell the old path, and is migrated by 0.14.0's row.
    ("0.13.0", "vllm.utils.get_open_port", "vllm.utils.network_utils.get_open_port", ["0.14.0"]),
    ("0.11.0", "vllm.utils.get_open_port", "vllm.utils.network_utils.get_open_port", ["0.11.1"]),
])  # fmt: skip
def test_the_known_moves_resolve_through_the_chain(start: str, old: str, new: str,
                                                   steps: list[str]) -> None:
    chain = Resolver(rules.load_pack("vllm"), start, "0.30.0").resolve(old)
    assert chain.new == new
    assert [hit.step for hit in chain.hits] == steps


def test_a_name_a_step_wrote_can_be_removed_later() -> None:
    chain = Resolver(rules.load_pack("vllm"), "0.18.1").resolve(
        "vllm.model_executor.models.qwen3_next.fused_gdn_gating")
    assert chain.removed_step == "0.31.0" and not chain.changed


def test_a_removed_name_says_what_replaced_it() -> None:
    chain = Resolver(rules.load_pack("vllm"), "0.19.1").resolve(
        "vllm.model_executor.layers.fused_moe.shared_fused_moe.SharedFusedMoE")
    assert chain.removed_step == "0.20.0" and not chain.changed
    assert chain.removed is not None
    assert "FusedMoE(..., shared_experts=...)" in chain.removed.hint


def test_a_getter_the_package_served_through_a_star_import_is_removed_too() -> None:
    # vllm.distributed served it by `from .parallel_state import *` until 0.23.0 removed it;
    # validate --against follows star imports, so the row is checked in 0.22.1 like any other.
    chain = Resolver(rules.load_pack("vllm"), "0.22.1").resolve(
        "vllm.distributed.get_decode_context_model_parallel_world_size")
    assert chain.removed_step == "0.23.0" and not chain.changed
    assert chain.removed is not None and "get_dcp_group().world_size" in chain.removed.hint


def test_the_ruff_export_keeps_a_hint_that_quotes_code() -> None:
    # 0.19.0's hint spells `cache_policy="lru"`: the export escaped no quote before.
    exported = vam("rules", "export", "ruff", "--rules", "vllm", "--standalone").stdout
    banned = tomllib.loads(exported)["lint"]["flake8-tidy-imports"]["banned-api"]
    assert banned["vllm.v1.kv_offload.lru_manager"]["msg"].endswith('cache_policy="lru")')
