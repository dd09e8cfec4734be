"""VAM014: a patch target that a symbol row moves to where the name is defined is rewritten
and reported; module moves and renames in place keep the lookup site and are not."""

from __future__ import annotations

import textwrap

import pytest

import rules
from migrator.core import findings as F
from migrator.core.resolver import Resolver
from migrator.rewrite.engine import Engine, Options


def run(source: str, pack: str, **options: object) -> tuple[str, list[F.Finding]]:
    engine = Engine(Resolver(rules.load_pack(pack)), Options(**options))  # type: ignore[arg-type]
    return engine.transform_python(textwrap.dedent(source), None)


@pytest.mark.parametrize("call", [
    '@mock.patch("{}")\ndef test_it(m):\n    pass\n',
    'with patch("{}"):\n    pass\n',
    'mocker.patch("{}", return_value=1)\n',
    'monkeypatch.setattr("{}", object())\n',
])
def test_a_symbol_moved_to_another_module_is_rewritten_and_reported(call: str) -> None:
    old, new = "vllm.v1.spec_decode.eagle.CpuGpuBuffer", "vllm.v1.utils.CpuGpuBuffer"
    source = call.format(old)
    out, findings = run(source, "vllm")
    assert out == source.replace(old, new)
    [patch] = [f for f in findings if f.code == F.PATCH_TARGET]
    [moved] = [f for f in findings if f.code == F.MOVED]
    assert (patch.line, patch.col, patch.old, patch.new) == (moved.line, moved.col, old, new)
    assert "misses modules that imported it by name" in patch.message
    # The rewritten target is the new path: nothing left to say about it.
    assert run(out, "vllm")[1] == []


@pytest.mark.parametrize(("source", "pack"), [
    # A module move: the module's users read the name from it wherever it now lives.
    ('mock.patch("vllm.model_executor.layers.fla.ops.chunk_gated_delta_rule")\n', "vllm"),
    ('mock.patch("vllm_ascend.distributed.mooncake_connector.threading.Thread")\n',
     "vllm_ascend"),
    # A rename inside the same module: the lookup site is that module still.
    ('mock.patch("vllm_ascend.distributed.parallel_state.destory_ascend_model_parallel")\n',
     "vllm_ascend"),
    # Not a patch target: a plain string naming the moved symbol.
    ('NAME = "vllm.v1.spec_decode.eagle.CpuGpuBuffer"\n', "vllm"),
])
def test_module_moves_renames_and_other_strings_are_not_reported(source: str, pack: str) -> None:
    out, findings = run(source, pack)
    assert out != source
    assert [f.code for f in findings if f.code == F.PATCH_TARGET] == []


def test_the_old_lane_of_a_dual_lane_target_is_not_reported_again() -> None:
    source = 'mock.patch("vllm.v1.spec_decode.eagle.CpuGpuBuffer")\n'
    options = {"keep_compat": "0.19.0", "version_guards": ("vllm_version_is",),
               "version_helper_module": "vllm_ascend.utils"}
    out, findings = run(source, "vllm", **options)
    assert 'if vllm_version_is("0.19.0") else "vllm.v1.utils.CpuGpuBuffer"' in out
    assert [f.code for f in findings].count(F.PATCH_TARGET) == 1
    assert F.PATCH_TARGET not in [f.code for f in run(out, "vllm", **options)[1]]
