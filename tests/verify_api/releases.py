"""Two releases of a fake `vllm`, shaped like the changes main2main commits follow: a hook
that gains a parameter, one that loses one, a rename, a keyword-only switch, a removed hook,
a function that drops a keyword and one that gains a required parameter, a config dataclass
that loses a field, a scheduler that loses an attribute."""

from __future__ import annotations

COMMON = {
    "vllm/__init__.py": "",
    "vllm/config/__init__.py": (
        "from vllm.config.vllm import ModelConfig, VllmConfig, get_current_vllm_config\n"),
    "vllm/lazy.py": """
        class Lazy:
            def __getattr__(self, name):
                return 1
    """,
}

OLD = {
    **COMMON,
    "PKG-INFO": "Metadata-Version: 2.1\nName: vllm\nVersion: 0.30.0\n",
    "vllm/layers.py": """
        class CustomOp:
            def forward_oot(self, x, residual=None):
                return x

            def load(self, path, strict):
                return path

            def lookup(self, layer):
                return layer

            def step(self, batch, size):
                return batch

            def old_hook(self):
                return None

            def __init__(self, prefix=""):
                self.prefix = prefix
                self.weight = None
    """,
    "vllm/utils.py": """
        def replace_parameter(layer, name, tensor, prefer_copy=False):
            return layer

        def make_table(size):
            return size
    """,
    "vllm/config/vllm.py": """
        from dataclasses import dataclass, field

        @dataclass
        class ModelConfig:
            max_model_len: int = 0
            dtype: str = "auto"

        @dataclass
        class SchedulerConfig:
            max_num_seqs: int = 128
            max_model_len: int = 0

        @dataclass
        class VllmConfig:
            model_config: ModelConfig = field(default_factory=ModelConfig)
            scheduler_config: SchedulerConfig = field(default_factory=SchedulerConfig)

        def get_current_vllm_config() -> VllmConfig:
            return VllmConfig()
    """,
    "vllm/sched.py": """
        class Scheduler:
            def __init__(self, config):
                self.config = config
                self.skipped_waiting = []
                self.running = []

            def schedule(self):
                return self.skipped_waiting
    """,
}

NEW = {
    **COMMON,
    "PKG-INFO": "Metadata-Version: 2.1\nName: vllm\nVersion: 0.33.0\n",
    "vllm/layers.py": """
        class CustomOp:
            def forward_oot(self, x, residual=None, scale=None):
                return x

            def load(self, path):
                return path

            def lookup(self, layer_name):
                return layer_name

            def step(self, batch, *, size):
                return batch

            def __init__(self, prefix="", *, tp=1):
                self.prefix = prefix
                self.weight = None
    """,
    "vllm/utils.py": """
        def replace_parameter(layer, name, tensor):
            return layer

        def make_table(size, device):
            return size
    """,
    "vllm/config/vllm.py": """
        from dataclasses import dataclass, field

        @dataclass
        class ModelConfig:
            max_model_len: int = 0
            dtype: str = "auto"

        @dataclass
        class SchedulerConfig:
            max_num_seqs: int = 128

        @dataclass
        class VllmConfig:
            model_config: ModelConfig = field(default_factory=ModelConfig)
            scheduler_config: SchedulerConfig = field(default_factory=SchedulerConfig)

        def get_current_vllm_config() -> VllmConfig:
            return VllmConfig()
    """,
    "vllm/sched.py": """
        class Scheduler:
            def __init__(self, config):
                self.config = config
                self.running = []

            def schedule(self):
                return self.running
    """,
}

# A plugin written for OLD: every marked line works there and breaks in NEW.
PLUGIN = {
    "plugin/__init__.py": "",
    "plugin/ops.py": """
        from vllm.layers import CustomOp


        class AscendOp(CustomOp):
            def forward_oot(self, x, residual=None):  # VAP001 scale
                return x

            def load(self, path, strict):  # VAP002 strict
                return path

            def lookup(self, layer):  # VAP003 layer -> layer_name
                return layer

            def step(self, batch, n):  # VAP004 size
                return batch

            def old_hook(self):  # VAP100
                return super().load("p", True)  # VAP005

            def helper(self):
                return self.weight, self.prefix
    """,
    "plugin/deep.py": """
        from plugin.ops import AscendOp


        class DeeperOp(AscendOp):
            def forward_oot(self, x, residual=None):  # VAP001 through a project base
                return x
    """,
    "plugin/calls.py": """
        import vllm.utils as vu
        from vllm.utils import make_table, replace_parameter
        from vllm.config import VllmConfig, get_current_vllm_config
        from vllm.config.vllm import SchedulerConfig


        def run(layer, t, args, kwargs):
            replace_parameter(layer, "w", t, prefer_copy=True)  # VAP006
            vu.replace_parameter(layer, "w", t, prefer_copy=True)  # VAP006 via the module
            make_table(4)  # VAP007 device
            make_table(*args)  # splat: not checked
            replace_parameter(layer, **kwargs)  # splat: not checked
            SchedulerConfig(max_num_seqs=1, max_model_len=2)  # VAP006 dataclass field


        def limits(config: VllmConfig):
            return config.scheduler_config.max_model_len  # VAP008 through a field type


        def current():
            cfg = get_current_vllm_config()
            return cfg.model_config.max_model_len, cfg.scheduler_config.max_model_len  # VAP008
    """,
    "plugin/sched.py": """
        from vllm.sched import Scheduler
        from vllm.lazy import Lazy
        from vllm_ascend_utils import vllm_version_is


        class AscendScheduler(Scheduler):
            def schedule(self):
                if hasattr(self, "skipped_waiting"):
                    return self.skipped_waiting  # probed: not read
                if vllm_version_is("0.30.0"):
                    return self.skipped_waiting  # the old lane: dead at 0.33.0
                try:
                    return self.skipped_waiting
                except AttributeError:
                    pass
                return self.skipped_waiting  # VAP008

            def mine(self):
                self.extra = 1
                return self.extra, self.running


        def lazy(x: Lazy):
            return x.anything


        def built():
            s = Scheduler(None)
            return s.skipped_waiting  # VAP008 via the constructor
    """,
}
