"""A table with a history: the shims serve only the rows whose targets the installed package
has, and the format's newer shapes (a merge, a rename inside a moved module, a module that
became a package of the same name) work at run time."""

from __future__ import annotations

import os
from pathlib import Path

from click.testing import CliRunner
from shims_helpers import Tree

from migrator.cli import main

# Step 1.0 is the installed layout; step 2.0's targets do not exist in it, and its olds are
# real modules of it (a later release renamed them).
HISTORY_TABLE = """
[pack]
name = "hist"
packages = ["hist"]
shims-env = "HIST_SHIMS"

[[step]]
version = "1.0"
[[step.module]]
old = "hist.legacy"
new = "hist.store.config_data"
[[step.module]]
old = "hist.cpu_a"
new = "hist.offload.simple"
[[step.module]]
old = "hist.cpu_b"
new = "hist.offload.simple"
[[step.module]]
old = "hist.recompute.manager"
new = "hist.preempt.manager"
[[step.symbol]]
old = "hist.recompute.manager.RecomputeScheduler"
new = "hist.preempt.manager.PreemptScheduler"
[[step.symbol]]
old = "hist.ucm.UCMConnectorV1"
new = "hist.ucm.connector.UCMConnectorV1"

[[step]]
version = "2.0"
[[step.module]]
old = "hist.store.config_data"
new = "hist.store.metadata"
[[step.symbol]]
old = "hist.store.config_data.Lasyer"
new = "hist.store.metadata.Layer"
"""

FILES = {
    "hist/rules.toml": HISTORY_TABLE,
    "hist/__init__.py": """
        import os

        import shims

        shims.install(os.path.join(os.path.dirname(__file__), "rules.toml"))
    """,
    "hist/store/__init__.py": "",
    "hist/store/config_data.py": "class Lasyer:\n    pass\n",
    "hist/offload/__init__.py": "",
    "hist/offload/simple.py": "NAME = 'simple'\n",
    "hist/preempt/__init__.py": "",
    "hist/preempt/manager.py": "class PreemptScheduler:\n    pass\n\n\nclass State:\n    pass\n",
    "hist/ucm/__init__.py": "",  # a package now, and it does not re-export the class
    "hist/ucm/connector.py": "class UCMConnectorV1:\n    pass\n",
}


def test_rows_whose_targets_are_missing_are_not_served(tree: Tree) -> None:
    tree.write(FILES)
    result = tree.run(
        """
        import sys
        import warnings

        warnings.simplefilter("error")
        import hist.store.config_data as real
        from hist.store.config_data import Lasyer

        # A real module of this layout, not an alias of the later step's missing target.
        assert real.__name__ == "hist.store.config_data", real
        assert real.__spec__.origin.endswith("config_data.py")
        assert Lasyer.__module__ == "hist.store.config_data"
        (finder,) = [f for f in sys.meta_path if type(f).__name__ == "ShimFinder"]
        print(finder.fit("1.0").verdict)
        print(finder.fit("2.0").verdict)
        """
    )
    assert result.stdout.splitlines() == [
        "applies: every target is installed",
        "does not apply: hist.store.metadata is not installed (nor any other target of the step)",
    ]


def test_merge_rename_in_move_and_module_become_package(tree: Tree) -> None:
    tree.write(FILES)
    result = tree.run(
        """
        import warnings

        import hist.cpu_a
        import hist.cpu_b
        import hist.offload.simple
        import hist.preempt.manager
        import hist.recompute.manager
        from hist.recompute.manager import RecomputeScheduler, State
        from hist.ucm import UCMConnectorV1
        from hist.ucm.connector import UCMConnectorV1 as New

        assert hist.cpu_a is hist.cpu_b is hist.offload.simple
        assert hist.recompute.manager is hist.preempt.manager
        assert RecomputeScheduler is hist.preempt.manager.PreemptScheduler
        assert State is hist.preempt.manager.State
        assert UCMConnectorV1 is New
        print("ok")
        """,
        env={"HIST_SHIMS": "ignore"},
    )
    assert result.stdout.strip() == "ok"


def test_shims_check_prints_one_section_per_step(tree: Tree, tmp_path: Path) -> None:
    tree.write(FILES)
    before = os.getcwd()
    os.chdir(tmp_path)
    try:
        result = CliRunner().invoke(
            main,
            ["shims", "check", "--rules", str(tree.root / "hist/rules.toml"),
             "--package-path", str(tree.root)],
            catch_exceptions=False,
        )  # fmt: skip
    finally:
        os.chdir(before)
    lines = result.output.splitlines()
    assert result.exit_code == 0, result.output
    assert lines[0] == "step 1.0: applies: every target is installed"
    assert "step 2.0: does not apply: hist.store.metadata is not installed" in result.output
    assert "  2 old name(s) not served: their targets are not installed" in lines
    assert lines[-1] == (
        "6 old names: 6 ok, 0 skipped, 0 failed; 2 not served (targets not installed)"
    )
