"""`vam verify-api`: each kind of break a release of a fake `vllm` makes, found statically,
and only where the plugin's code fits the baseline release."""

from __future__ import annotations

from pathlib import Path

from migrator.core.config import Config
from migrator.verify_api import ApiRequest, verify_api
from rules import load_pack
from tests.verify_api.conftest import Tree, write
from tests.verify_api.releases import NEW, OLD, PLUGIN


def _run(root: Path, baseline: str | None = "old", paths: tuple[str, ...] = ("plugin",),
         **plugin: str) -> list[tuple[str, int, str, str]]:
    write(root, {k: v for k, v in plugin.items()})
    request = ApiRequest(paths, str(root / "new"), load_pack("vllm"), Config(),
                      str(root / baseline) if baseline else None, ("vllm",))
    result = verify_api(request)
    return [(f.path, f.line, f.code, f.obj) for f in result.findings]


def _releases(tree: Tree) -> Path:
    root = tree({f"old/{k}": v for k, v in OLD.items()})
    write(root, {f"new/{k}": v for k, v in NEW.items()})
    return write(root, PLUGIN)


def test_every_kind_of_break_is_found_where_it_is(tree: Tree) -> None:
    root = _releases(tree)
    found = _run(root)
    assert found == [
        ("plugin/calls.py", 8, "VAP006", "vllm.utils.replace_parameter(prefer_copy)"),
        ("plugin/calls.py", 9, "VAP006", "vllm.utils.replace_parameter(prefer_copy)"),
        ("plugin/calls.py", 10, "VAP007", "vllm.utils.make_table(device)"),
        ("plugin/calls.py", 13, "VAP006", "vllm.config.vllm.SchedulerConfig(max_model_len)"),
        ("plugin/calls.py", 17, "VAP008", "vllm.config.vllm.SchedulerConfig.max_model_len"),
        ("plugin/calls.py", 22, "VAP008", "vllm.config.vllm.SchedulerConfig.max_model_len"),
        ("plugin/deep.py", 5, "VAP001", "vllm.layers.CustomOp.forward_oot(scale)"),
        ("plugin/ops.py", 5, "VAP001", "vllm.layers.CustomOp.forward_oot(scale)"),
        ("plugin/ops.py", 8, "VAP002", "vllm.layers.CustomOp.load(strict)"),
        ("plugin/ops.py", 11, "VAP003", "vllm.layers.CustomOp.lookup(layer_name)"),
        ("plugin/ops.py", 14, "VAP004", "vllm.layers.CustomOp.step(size)"),
        ("plugin/ops.py", 17, "VAP100", "vllm.layers.CustomOp.old_hook"),
        ("plugin/ops.py", 18, "VAP005", "vllm.layers.CustomOp.load(positional)"),
        ("plugin/sched.py", 16, "VAP008", "vllm.sched.Scheduler.skipped_waiting"),
        ("plugin/sched.py", 29, "VAP008", "vllm.sched.Scheduler.skipped_waiting"),
    ]


def test_a_use_already_wrong_at_the_baseline_is_not_reported(tree: Tree) -> None:
    root = _releases(tree)
    found = _run(root, **{"plugin/extra.py": """
        from vllm.utils import make_table
        from vllm.layers import CustomOp

        make_table(1, 2, 3)  # wrong at both releases: not this upgrade's break

        class Other(CustomOp):
            def load(self):  # lacks `path` at both
                return 1
    """})
    assert not [f for f in found if f[0] == "plugin/extra.py"]


def test_without_a_baseline_the_target_alone_is_the_judge(tree: Tree) -> None:
    root = _releases(tree)
    found = _run(root, baseline=None, paths=("plugin/extra.py",), **{"plugin/extra.py": """
        from vllm.utils import make_table

        make_table(1, 2, 3)
    """})
    assert found == [("plugin/extra.py", 3, "VAP006", "vllm.utils.make_table(positional)")]


def test_a_fresh_override_and_unknown_bases_are_left_alone(tree: Tree) -> None:
    root = _releases(tree)
    found = _run(root, paths=("plugin/mixed.py",), **{"plugin/mixed.py": """
        from vllm.layers import CustomOp
        from torch.nn import Module

        class Mixed(Module, CustomOp):
            def helper(self):
                return self.training  # from a base outside vllm: not judged

        class Fresh(CustomOp):
            def brand_new(self, a):
                return a

            def __init__(self, prefix=""):  # upstream's gained `tp=1`: we build it ourselves
                super().__init__(prefix)
    """})
    assert found == []


def test_a_class_whose_decorator_may_write_the_constructor_is_not_judged(tree: Tree) -> None:
    """A decorator other than a dataclass maker may write the constructor: with no `__init__`
    of its own, such a class's constructor is unknown, not `()`; a plain class still is `()`."""
    root = _releases(tree)
    write(root, {"new/vllm/cfg.py": """
        def frozen_attrs(cls):
            return cls

        @frozen_attrs
        class CompilationConfig:
            level: int = 0

        class Plain:
            pass
    """})
    found = _run(root, baseline=None, paths=("plugin/cfg_use.py",), **{"plugin/cfg_use.py": """
        from vllm.cfg import CompilationConfig, Plain

        CompilationConfig(level=3)
        Plain(1)
    """})
    assert [(f[1], f[2]) for f in found] == [(4, "VAP006")]


def test_a_config_class_made_a_dataclass_by_vllms_config_decorator_keeps_its_fields(
        tree: Tree) -> None:
    # vLLM 0.16.0 dropped `@dataclass` under `@config` (a pydantic dataclass maker): the
    # fields are still the constructor's keywords, and a removed one is still a break.
    maker = "def config(cls=None, **kw):\n    return cls\n"
    old = ("from dataclasses import dataclass\nfrom vllm.cu import config\n\n"
           "@config\n@dataclass\nclass KVTransferConfig:\n    kv_connector: str = ''\n"
           "    kv_role: str = ''\n")
    new = ("from vllm.cu import config\n\n@config\nclass KVTransferConfig:\n"
           "    kv_connector: str = ''\n")
    root = tree({"old/PKG-INFO": "Metadata-Version: 2.1\nName: vllm\nVersion: 0.15.0\n",
                 "new/PKG-INFO": "Metadata-Version: 2.1\nName: vllm\nVersion: 0.16.0\n",
                 "old/vllm/__init__.py": "", "new/vllm/__init__.py": "",
                 "old/vllm/cu.py": maker, "new/vllm/cu.py": maker,
                 "old/vllm/kv.py": old, "new/vllm/kv.py": new})
    found = _run(root, **{"plugin/__init__.py": "", "plugin/use.py": (
        "from vllm.kv import KVTransferConfig\n\n"
        "KVTransferConfig(kv_connector='x')\nKVTransferConfig(kv_connector='x', kv_role='y')\n")})
    assert found == [("plugin/use.py", 4, "VAP006", "vllm.kv.KVTransferConfig(kv_role)")]
