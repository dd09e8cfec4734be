"""`vam verify-api` and what the plugin does itself: an attribute it sets on an upstream
class's objects (VAP008), an override upstream calls only from methods the plugin replaces
too (VAP001-VAP004), an override of a method gone upstream that the plugin calls itself
(VAP100) are not breaks; the same shapes without the plugin's part still are."""

from __future__ import annotations

from migrator.core.config import Config
from migrator.verify_api import ApiRequest, verify_api
from rules import load_pack
from tests.verify_api.conftest import Tree


def _check(tree: Tree, old: str, new: str, plugin: dict[str, str]) -> list[tuple[str, int, str,
                                                                                  str]]:
    """Findings (file, line, code, object) of `plugin` between two releases whose module
    `vllm/mod.py` is `old` and `new`."""
    root = tree({"old/PKG-INFO": "Metadata-Version: 2.1\nName: vllm\nVersion: 0.30.0\n",
                 "new/PKG-INFO": "Metadata-Version: 2.1\nName: vllm\nVersion: 0.33.0\n",
                 "old/vllm/__init__.py": "", "new/vllm/__init__.py": "",
                 "old/vllm/mod.py": old, "new/vllm/mod.py": new,
                 "plugin/__init__.py": "", **plugin})
    request = ApiRequest(("plugin",), str(root / "new"), load_pack("vllm"), Config(),
                         str(root / "old"), ("vllm",))
    return [(f.path, f.line, f.code, f.obj) for f in verify_api(request).findings]


CONTEXT_OLD = """
    class ForwardContext:
        def __init__(self):
            self.pad_size = 0
            self.num_tokens = 0
            self.capturing = False
            self.dropped = None
            self.batch_size = 0


    class Other:
        pass


    class ModelRunner:
        def __init__(self):
            self.runner = None


    def get_forward_context() -> ForwardContext:
        return ForwardContext()
"""
CONTEXT_NEW = """
    class ForwardContext:
        def __init__(self):
            self.attn = None


    class Other:
        pass


    class ModelRunner:
        def __init__(self):
            self.device = None


    def get_forward_context() -> ForwardContext:
        return ForwardContext()
"""


def test_an_attribute_the_plugin_sets_on_upstream_objects_is_not_a_missing_one(
        tree: Tree) -> None:
    plugin = {
        "plugin/patch.py": """
            from vllm.mod import ForwardContext, ModelRunner, get_forward_context

            ForwardContext.capturing = False


            def pad(n):
                ctx = get_forward_context()
                ctx.pad_size = n
                setattr(ctx, "num_tokens", n)


            class NPURunner(ModelRunner):
                def __init__(self, runner):
                    super().__init__()
                    self.runner = runner
        """,
        "plugin/use.py": """
            from vllm.mod import ModelRunner, get_forward_context


            def sizes():
                ctx = get_forward_context()
                return ctx.pad_size, ctx.num_tokens, ctx.capturing


            def runner_of(model: ModelRunner):
                return model.runner
        """}
    assert _check(tree, CONTEXT_OLD, CONTEXT_NEW, plugin) == []
    assert _check(tree, CONTEXT_OLD, CONTEXT_NEW, plugin) == []  # warm: facts from the cache


def test_an_attribute_set_only_elsewhere_is_still_missing(tree: Tree) -> None:
    found = _check(tree, CONTEXT_OLD, CONTEXT_NEW, {
        "plugin/patch.py": """
            from vllm.mod import Other, get_forward_context


            def elsewhere(other: Other):
                other.dropped = 1  # another class's object
                ctx = get_forward_context()
                ctx.unrelated = 1  # another attribute
        """,
        "plugin/use.py": """
            from vllm.mod import get_forward_context


            def sizes():
                ctx = get_forward_context()
                ctx.flag = True  # setting an attribute leaves `ctx` typed
                return ctx.dropped, ctx.batch_size
        """})
    assert found == [
        ("plugin/use.py", 7, "VAP008", "vllm.mod.ForwardContext.dropped"),
        ("plugin/use.py", 7, "VAP008", "vllm.mod.ForwardContext.batch_size"),
    ]


def test_the_subclass_sets_what_a_sibling_reads_from_self(tree: Tree) -> None:
    found = _check(tree, CONTEXT_OLD, CONTEXT_NEW, {"plugin/runners.py": """
        from vllm.mod import ModelRunner


        class Setter(ModelRunner):
            def __init__(self):
                setattr(self, "runner", 1)


        class Reader(ModelRunner):
            def go(self):
                return self.runner
    """})
    assert found == []


BUILDER_OLD = """
    class Builder:
        def build(self, x):
            return self.prepare(x, 1)

        def prepare(self, a, b):
            return a

        def run(self, x):
            return self.forward(x)

        def forward(self, x):
            return x

        def plan(self, x):
            return x

        def setup(self, x):
            return x
"""
BUILDER_NEW = """
    class Base:
        def setup(self, x, y):
            return x


    class Builder(Base):
        def build(self, x):
            return self.prepare(x, 1, 2)

        def prepare(self, a, b, c):
            return a

        def run(self, x):
            return self.forward(x, 2)

        def forward(self, x, scale):
            return x

        def plan(self, x, y):
            return x

        def boot(self, x):
            return super().setup(x, 1)
"""


def test_an_override_upstream_calls_only_from_replaced_methods_is_not_a_break(
        tree: Tree) -> None:
    plugin = {"plugin/build.py": """
        from vllm.mod import Builder


        class MyBuilder(Builder):
            def build(self, x):
                return self.prepare(x, 1)

            def prepare(self, a, b):  # upstream's only caller is `build`, replaced
                return a


        class DeepBuilder(MyBuilder):
            def prepare(self, a, b):  # `build` replaced by the project base
                return a
    """}
    assert _check(tree, BUILDER_OLD, BUILDER_NEW, plugin) == []
    assert _check(tree, BUILDER_OLD, BUILDER_NEW, plugin) == []  # warm: the target's calls cached


def test_an_override_upstream_still_calls_is_a_break(tree: Tree) -> None:
    found = _check(tree, BUILDER_OLD, BUILDER_NEW, {"plugin/build.py": """
        from vllm.mod import Builder


        class MyBuilder(Builder):
            def forward(self, x):  # upstream's `run` calls it, not replaced
                return x

            def plan(self, x):  # no upstream caller: called from elsewhere
                return x

            def setup(self, x):  # upstream's `boot` calls it through super()
                return x


        class UpBuilder(Builder):
            def build(self, x):
                return super().build(x)  # upstream's `build` still runs

            def prepare(self, a, b):
                return a
    """})
    assert found == [
        ("plugin/build.py", 5, "VAP001", "vllm.mod.Builder.forward(scale)"),
        ("plugin/build.py", 8, "VAP001", "vllm.mod.Builder.plan(y)"),
        ("plugin/build.py", 11, "VAP001", "vllm.mod.Base.setup(y)"),
        ("plugin/build.py", 19, "VAP001", "vllm.mod.Builder.prepare(c)"),
    ]


WORKER_OLD = """
    class Worker:
        def execute(self):
            return None

        def hook(self):
            return None

        def probe(self):
            return None

        def sync(self):
            return None

        def dead(self):
            return None
"""
WORKER_NEW = """
    class Worker:
        def execute(self):
            return None
"""


def test_an_override_of_a_gone_method_the_plugin_calls_is_its_own_api(tree: Tree) -> None:
    found = _check(tree, WORKER_OLD, WORKER_NEW, {
        "plugin/worker.py": """
            from vllm.mod import Worker


            class NPUWorker(Worker):
                def hook(self):  # called below through self
                    return 1

                def probe(self):  # called by a project subclass
                    return 2

                def sync(self):  # called on an object typed as the upstream base
                    return 3

                def dead(self):  # VAP100: only itself calls it
                    return self.dead()

                def execute(self):
                    return self.hook()


            class Deeper(NPUWorker):
                def go(self):
                    return self.probe()
        """,
        "plugin/use.py": """
            from vllm.mod import Worker


            def run(worker: Worker):
                return worker.sync()
        """})
    assert found == [("plugin/worker.py", 14, "VAP100", "vllm.mod.Worker.dead")]
