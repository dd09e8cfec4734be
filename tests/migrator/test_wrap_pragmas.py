"""A trailing pragma stays where tools read it when a rewritten import is wrapped: on the
first line of the statement (mypy reports an import's error at its `from` line, and ruff
reads a multi-line import's `# noqa` there; after `)` neither silences anything)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import rules
from migrator.core.resolver import Resolver
from migrator.rewrite.engine import Engine, Options

PACK = rules.load_pack("vllm_ascend")
STORE = "vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store"
OLD = "from vllm_ascend.distributed.kvpool.pool_worker import "


def _migrate(source: str) -> str:
    engine = Engine(Resolver(PACK, to_version="0.14.0"), Options(line_length=79))
    new, _ = engine.transform_python(source, None)
    again, _ = engine.transform_python(new, None)
    assert again == new
    return new


@pytest.mark.parametrize("pragma", [
    "# type: ignore[attr-defined]", "# noqa: F401", "# pragma: no cover", "# type: ignore",
])
def test_a_wrapped_import_keeps_its_pragma_on_the_first_line(pragma: str) -> None:
    new = _migrate(f"{OLD}KVPoolWorker, Foo  {pragma}\n")
    assert new == (f"from {STORE}.pool_worker import (  {pragma}\n"
                   "    KVPoolWorker,\n    Foo,\n)\n")


def test_a_parenthesised_import_filled_in_the_file_style_keeps_it_there_too() -> None:
    style = "from a import (\n    b, c)\n"
    new = _migrate(f"{style}{OLD}(KVPoolWorker, Foo)  # type: ignore[attr-defined]\n")
    assert new == (f"{style}from {STORE}.pool_worker import (  # type: ignore[attr-defined]\n"
                   "    KVPoolWorker, Foo)\n")


def test_the_first_statement_of_a_split_keeps_it() -> None:
    source = ("from vllm_ascend.distributed.utils import align_memory, parallel_config"
              "  # type: ignore\n")
    assert _migrate(source) == (
        "from vllm_ascend.distributed.kv_transfer.utils.utils import (  # type: ignore\n"
        "    align_memory,\n)\nfrom vllm_ascend.distributed.utils import parallel_config\n")


RUFF = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")


@pytest.mark.skipif(RUFF is None, reason="needs ruff")
def test_ruff_honours_the_noqa_where_it_is_left(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(_migrate(f"{OLD}KVPoolWorker, Foo  # noqa: F401\n"))
    result = subprocess.run([str(RUFF), "check", "--no-cache", "--isolated", "--select", "F401",
                             str(module)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout
