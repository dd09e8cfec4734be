"""benchmarks/main2main.py's reading of a human main2main commit, on a tiny git repository:
import moves (dual-lane additions count), dropped lanes, line categories, signature hunks,
and the release read from the Dockerfile."""

from __future__ import annotations

import subprocess
import textwrap
from pathlib import Path

from benchmarks import main2main as bench
from benchmarks import main2main_diff as md

BEFORE = """
from vllm.old.place import Moved
from vllm.engine import Base, helper
from plugin.utils import vllm_version_is

if vllm_version_is("0.1.0"):
    from vllm.a import Lane
else:
    from vllm.b import Lane


class Mine(Base):
    def forward(self, x):
        return super().forward(x)


def logic():
    value = helper(1)
    return value + 1
"""

AFTER = """
from vllm.engine import Base, helper
from plugin.utils import vllm_version_is

if vllm_version_is("0.1.0"):
    from vllm.old.place import Moved
else:
    from vllm.new.place import Moved
from vllm.b import Lane


class Mine(Base):
    def forward(self, x, scale):
        return super().forward(x, scale=scale)


def logic():
    value = helper(1, strict=True)
    return value + 2
"""


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True).stdout


def _commit(repo: Path, files: dict[str, str], message: str) -> str:
    for rel, text in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    _git(repo, "add", "-A")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", message)
    return _git(repo, "rev-parse", "HEAD").strip()


def test_human_change_of_a_synthetic_main2main_commit(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    _commit(repo, {"plugin/mod.py": BEFORE, "Dockerfile": "ARG VLLM_TAG=v0.1.0\n"}, "start")
    sha = _commit(repo, {"plugin/mod.py": AFTER, "Dockerfile": "ARG VLLM_TAG=v0.2.0\n"},
                  "[Main2Main] Upgrade vLLM to v0.2.0")
    gitdir = repo / ".git"
    assert bench.find_commits(gitdir, "0.1.0") == [
        {"sha": sha, "title": "[Main2Main] Upgrade vLLM to v0.2.0", "before": "0.1.0",
         "after": "0.2.0"}]
    change = bench.human_change(gitdir, sha)
    assert change["moves"] == [md.Move("plugin/mod.py", "Moved", "vllm.old.place.Moved",
                                       "vllm.new.place.Moved", dual=True)]
    assert change["dropped"] == [md.Move("plugin/mod.py", "Lane", "vllm.a.Lane", "vllm.b.Lane")]
    # imports: the new lane's import only; gates: the old import moved into its lane (both
    # sides), the dropped lane, the kept import moved out of its lane (both sides);
    # signatures: the def header, the super() call, the call of helper (both sides);
    # other: the one line of logic on each side.
    assert change["lines"] == {"imports": 1, "gates": 5, "signatures": 6, "other": 2}
    # The parent's lines of the def/super() hunk and of helper's call.
    assert change["sites"]["plugin/mod.py"] == [(12, 13), (17, 18)]


def test_vam_moves_are_scored_against_the_human_ones() -> None:
    human = [md.Move("a.py", "X", "vllm.o.X", "vllm.n.X", dual=True),
             md.Move("a.py", "Y", "vllm.o.Y", "vllm.n.Y")]
    made = [md.Move("a.py", "X", "vllm.o.X", "vllm.n.X", dual=True),
            md.Move("a.py", "Y", "vllm.o.Y", "vllm.elsewhere.Y"),
            md.Move("b.py", "Z", "vllm.o.Z", "vllm.n.Z")]
    from migrator.core.resolver import Resolver
    from rules import load_pack

    scored = bench.score_moves(human, made, {"a.py"}, Resolver(load_pack("vllm"), "0.26.0"))
    assert [m["name"] for m in scored["reproduced"]] == ["X"]
    assert scored["reproduced"][0]["dual"] is True
    assert [(m["name"], m["why"]) for m in scored["wrong"]] == [
        ("Y", "the human moved it to vllm.n.Y"), ("Z", "the human left this file alone")]
    assert [(m["name"], m["why"]) for m in scored["missed"]] == [("Y", "not in the vllm pack")]


def test_pack_knowledge_of_a_move_is_read_in_the_commit_window() -> None:
    from migrator.core.resolver import Resolver
    from rules import load_pack

    cdiv = md.Move("a.py", "cdiv", "vllm.utils.cdiv", "vllm.utils.math_utils.cdiv")
    assert bench.known(Resolver(load_pack("vllm"), "0.11.0", "0.13.0"), [cdiv]) == 1
    assert bench.known(Resolver(load_pack("vllm"), "0.12.0", "0.13.0"), [cdiv]) == 0


def test_api_findings_inside_signature_hunks_are_flagged_others_are_alarms() -> None:
    found = [{"path": "a.py", "line": 12, "col": 5, "code": "VAP001", "message": "m"},
             {"path": "a.py", "line": 40, "col": 1, "code": "VAP002", "message": "m"}]
    scored = bench.score_api(found, {"a.py": [(11, 13), (20, 20)]},
                             {"a.py": [(11, 13), (20, 20), (30, 31)]})
    assert scored is not None
    assert (scored["flagged"], scored["missed"], scored["false_alarms"]) == (1, 1, 1)
    assert bench.score_api(None, {}, {}) is None


def test_a_move_whose_old_import_fails_at_the_target_is_a_fix_not_a_wrong_rewrite() -> None:
    # vllm-ascend's kv_offload/ kept `vllm.v1.kv_offload.mediums` after 0.21.0 removed it:
    # vam's move there fixes an import the human left broken.
    from migrator.core.resolver import Resolver
    from rules import load_pack

    made = [md.Move("k.py", "CPULoadStoreSpec", "vllm.v1.kv_offload.mediums.CPULoadStoreSpec",
                    "vllm.v1.kv_offload.cpu.common.CPULoadStoreSpec", dual=True),
            md.Move("k.py", "Z", "vllm.o.Z", "vllm.n.Z")]
    scored = bench.score_moves([], made, set(), Resolver(load_pack("vllm"), "0.20.2"),
                               broken=lambda old: old.startswith("vllm.v1.kv_offload.mediums"))
    assert [(m["name"], m["dual"]) for m in scored["extra"]] == [("CPULoadStoreSpec", True)]
    assert [(m["name"], m["why"]) for m in scored["wrong"]] == [
        ("Z", "the human left this file alone")]
    row = {"sha": "0" * 40, "title": "t", "before": "0.20.2", "after": "0.21.0", "files": 1,
           "lines": dict.fromkeys(md.CATEGORIES, 0), "human_moves": [], "lanes_dropped": [],
           "known": 0, "moves": scored, "api": None, "signature_hunks": 0, "left": [],
           "error": "", "seconds": 1.0}
    assert "| 1 (+1) | 0 |" in bench.markdown([row])


def test_fails_at_reads_the_release_sdist() -> None:
    # The cached sdist of vLLM 0.21.0 (benchmarks/sdists.py fetches it): mediums is gone.
    broken = bench.fails_at("0.21.0")
    assert broken("vllm.v1.kv_offload.mediums.CPULoadStoreSpec")
    assert not broken("vllm.v1.kv_offload.cpu.common.CPULoadStoreSpec")


def test_a_missed_move_a_later_release_makes_says_so() -> None:
    # "Upgrade vLLM to 0226" (0.15.0 -> 0.16.0) followed vLLM main into 0.17.0's eagle package.
    from migrator.core.resolver import Resolver
    from rules import load_pack

    move = md.Move("p.py", "prepare_eagle_decode",
                   "vllm.v1.worker.gpu.spec_decode.eagle.prepare_eagle_decode",
                   "vllm.v1.worker.gpu.spec_decode.eagle.speculator.prepare_eagle_decode")
    scored = bench.score_moves([move], [], {"p.py"},
                               Resolver(load_pack("vllm"), "0.15.0", "0.16.0"))
    assert scored["missed"][0]["why"] == (
        "the pack moves it to vllm.v1.worker.gpu.spec_decode.eagle.speculator."
        "prepare_eagle_decode at 0.17.0, after the commit's release (the human followed vLLM "
        "main)")


def test_a_call_that_only_leaves_a_dropped_lane_is_not_a_signature_site() -> None:
    # The gate goes, the call is re-indented out of it: bookkeeping, as classify() says.
    before = md.read_side("from vllm.x import f\nif vllm_version_is('1'):\n    f(1, k=2)\n")
    after = md.read_side("from vllm.x import f\nf(1, k=2)\n")
    diff = ("--- a/m.py\n+++ b/m.py\n@@ -2,2 +2 @@\n-if vllm_version_is('1'):\n"
            "-    f(1, k=2)\n+f(1, k=2)\n")
    hunks = md.hunks(diff)["m.py"]
    assert md.classify(hunks, before, after)["signatures"] == 0
    assert md.signature_sites(hunks, before, after) == []
    changed = md.hunks(diff.replace("+f(1, k=2)", "+f(1, k=3)"))["m.py"]
    assert md.signature_sites(changed, before, after) == [(2, 3)]


def test_another_plain_import_of_a_vllm_module_is_not_a_move() -> None:
    # `import vllm.a` and `import vllm.b` both bind `vllm`; adding one is no move of the other.
    before = md.read_side("import vllm.model_executor.layers.mamba.ops.causal_conv1d\n")
    after = md.read_side("import vllm.model_executor.layers.fla.ops\n"
                         "import vllm.model_executor.layers.mamba.ops.causal_conv1d\n"
                         "vllm.model_executor.layers.fla.ops.f(\n    1,\n)\n")
    assert md.moves("p.py", before, after) == ([], [])
    assert {3, 4, 5} <= after.signature_lines


def test_a_lane_added_for_the_old_release_is_not_a_missed_move() -> None:
    # 72797cfa15: the parent imported gdn.base alone; the human wrote the 0.21.0 lane back.
    from migrator.core.resolver import Resolver
    from rules import load_pack

    added = md.Move("t.py", "GatedDeltaNetAttention",
                    "vllm.model_executor.layers.mamba.gdn.base.GatedDeltaNetAttention",
                    "vllm.model_executor.layers.mamba.gdn_linear_attn.GatedDeltaNetAttention",
                    dual=True)
    scored = bench.score_moves([added], [], {"t.py"},
                               Resolver(load_pack("vllm"), "0.21.0", "0.22.1"))
    assert scored["missed"][0]["why"].startswith("the human added the old lane")


def test_a_line_of_the_written_file_maps_back_to_the_parent() -> None:
    before = "a\nb\nc\nd\n"
    after = "a\nif x:\n    b1\nelse:\n    b2\nc\nd\n"
    assert [md.line_before(before, after, n) for n in (1, 2, 4, 6, 7)] == [1, 2, 2, 3, 4]
