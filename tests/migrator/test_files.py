"""Non-Python files (form 9), notebooks, and byte-level preservation (docs/architecture.md, "Forms of reference")."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from tests.migrator.conftest import vam

OLD = "vllm_ascend.distributed.mooncake_connector"
NEW = "vllm_ascend.distributed.kv_transfer.kv_p2p.mooncake_connector"

TEXT_FILES = {
    "deploy.yaml": "kv_connector_module_path: {ref}\n",
    "config.json": '{{"kv_connector_module_path": "{ref}"}}\n',
    "settings.toml": 'connector = "{ref}"\n',
    "setup.cfg": "[vllm]\nconnector = {ref}\n",
    "tox.ini": "[testenv]\ncommands = python -c 'import {ref}'\n",
    "guide.md": "Use `{ref}` for P/D.\n",
    "guide.rst": "Use ``{ref}`` for P/D.\n",
    "serve.sh": "#!/bin/sh\nexec vllm serve m --kv-transfer-config \"{{\\\"kv_connector_module_path\\\": \\\"{ref}\\\"}}\"\n",
    "Dockerfile": "RUN python -c 'import {ref}'\n",
    "base.Dockerfile": "RUN python -c 'import {ref}'\n",
    "requirements.txt": "# plugin needs {ref}\n",
}


@pytest.mark.parametrize("name", sorted(TEXT_FILES))
def test_form9_text_files(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    path.write_text(TEXT_FILES[name].format(ref=OLD))
    result = vam("migrate", str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert path.read_text() == TEXT_FILES[name].format(ref=NEW)


def test_form9_notebook_code_cells_follow_the_import_rules(tmp_path: Path) -> None:
    notebook = {
        "cells": [
            {"cell_type": "markdown", "metadata": {}, "source": [f"Load `{OLD}`\n"]},
            {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
             "source": ["from vllm_ascend.distributed import communicator\n",
                        "%timeit communicator.NPUCommunicator\n"]},
            {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
             "source": ["from vllm_ascend.distributed import communicator, parallel_state\n",
                        "print(communicator)"]},
        ],
        "metadata": {}, "nbformat": 4, "nbformat_minor": 5,
    }
    path = tmp_path / "demo.ipynb"
    path.write_text(json.dumps(notebook, indent=1, ensure_ascii=False) + "\n")
    assert vam("migrate", str(path)).returncode == 0
    cells = json.loads(path.read_text())["cells"]
    assert cells[0]["source"] == [f"Load `{NEW}`\n"]
    # An IPython magic is set aside: the rest of the cell follows the Python rules.
    assert cells[1]["source"] == [
        "from vllm_ascend.distributed.device_communicators import npu_communicator as communicator\n",
        "%timeit communicator.NPUCommunicator\n",
    ]
    assert cells[2]["source"] == [  # one statement per module, in order of first appearance
        "from vllm_ascend.distributed.device_communicators import npu_communicator as communicator\n",
        "from vllm_ascend.distributed import parallel_state\n",
        "print(communicator)",
    ]
    assert path.read_text() == json.dumps(json.loads(path.read_text()), indent=1,
                                          ensure_ascii=False) + "\n"


def test_magic_cell_reported_by_check(tmp_path: Path) -> None:
    """A cell with a magic is Python once the magic is set aside: `vam check` reports its
    import at the cell's line."""
    path = tmp_path / "demo.ipynb"
    nb = {"cells": [{"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
                     "source": [f"import {OLD}\n", "%time 1\n"]}],
          "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    path.write_text(json.dumps(nb, indent=1) + "\n")
    result = vam("check", str(path))
    assert result.returncode == 1
    assert f"cell 1: '{OLD}' moved to '{NEW}'" in result.stdout


# -- preservation ---------------------------------------------------------------------------


def test_bom_crlf_and_missing_final_newline_are_kept(tmp_path: Path) -> None:
    path = tmp_path / "mod.py"
    path.write_bytes(b"\xef\xbb\xbfimport os\r\nfrom " + OLD.encode() + b" import X\r\nY = 1")
    assert vam("migrate", str(path)).returncode == 0
    assert path.read_bytes() == b"\xef\xbb\xbfimport os\r\nfrom " + NEW.encode() + b" import X\r\nY = 1"


def test_split_import_uses_the_file_line_endings(tmp_path: Path) -> None:
    path = tmp_path / "mod.py"
    path.write_bytes(b"if True:\r\n    from vllm_ascend.distributed import parallel_state, communicator\r\n")
    assert vam("migrate", str(path)).returncode == 0
    assert path.read_bytes() == (
        b"if True:\r\n    from vllm_ascend.distributed import parallel_state\r\n"
        b"    from vllm_ascend.distributed.device_communicators import npu_communicator as communicator\r\n")


def test_latin1_cookie_is_written_back_in_latin1(tmp_path: Path) -> None:
    path = tmp_path / "mod.py"
    source = f"# -*- coding: latin-1 -*-\n# Größe\nimport {OLD}\nX = 'ü'\n"
    path.write_bytes(source.encode("latin-1"))
    assert vam("migrate", str(path)).returncode == 0
    assert path.read_bytes() == source.replace(OLD, NEW).encode("latin-1")


def test_file_mode_is_kept_and_untouched_files_are_not_written(tmp_path: Path) -> None:
    script = tmp_path / "serve.sh"
    script.write_text(f"#!/bin/sh\npython -m {OLD}\n")
    script.chmod(0o750)
    untouched = tmp_path / "other.py"
    untouched.write_text("import vllm_ascend.distributed.parallel_state  # mooncake_connector\n")
    os.utime(untouched, (1_000_000_000, 1_000_000_000))
    assert vam("migrate", str(tmp_path)).returncode == 0
    assert stat.S_IMODE(script.stat().st_mode) == 0o750
    assert script.read_text() == f"#!/bin/sh\npython -m {NEW}\n"
    assert untouched.stat().st_mtime == 1_000_000_000
    assert not [p for p in tmp_path.iterdir() if "vam-tmp" in p.name]


def test_gitignored_venv_and_build_folders_are_skipped(tmp_path: Path) -> None:
    for folder in ("ignored", "venv", "build", "kept"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "a.py").write_text(f"import {OLD}\n")
    (tmp_path / "venv" / "pyvenv.cfg").write_text("home = /usr\n")
    (tmp_path / ".gitignore").write_text("ignored/\n")
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    # Folders named like build output that are not: a package, a folder of scripts.
    for folder in ("pkg/build", "tools/build"):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "a.py").write_text(f"import {OLD}\n")
    (tmp_path / "pkg" / "build" / "__init__.py").write_text("")
    assert vam("migrate", str(tmp_path)).returncode == 0
    for folder in ("kept", "pkg/build", "tools/build"):
        assert (tmp_path / folder / "a.py").read_text() == f"import {NEW}\n"
    for folder in ("ignored", "venv", "build"):
        assert (tmp_path / folder / "a.py").read_text() == f"import {OLD}\n"


def test_symlinks_are_not_followed_out_of_the_tree(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "a.py").write_text(f"import {OLD}\n")
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "link").symlink_to(outside, target_is_directory=True)
    (tree / "file.py").symlink_to(outside / "a.py")
    assert vam("migrate", str(tree)).returncode == 0
    assert (outside / "a.py").read_text() == f"import {OLD}\n"
    assert (tree / "file.py").is_symlink()


# -- line length --------------------------------------------------------------------------------


LONG = "from vllm_ascend.distributed.cpu_offload_manager.metadata import MetadataServer, MetadataServerProc\n"
# The wrapped targets are 0.14 homes (kv_pool.cpu_offload was removed in 0.24.0rc1, config_data
# renamed in 0.27.1rc1): these tests stop at 0.14.0, as a project running that release does.
WRAP_CONFIG = '[tool.ruff]\nline-length = 100\n\n[tool.vam]\nto = "0.14.0"\n'


@pytest.mark.parametrize(("existing", "expected"), [
    ("", "from vllm_ascend.distributed.kv_transfer.kv_pool.cpu_offload.metadata import (\n"
         "    MetadataServer,\n    MetadataServerProc,\n)\n"),
    ("from os.path import (\n    join, split)\n",
     "from vllm_ascend.distributed.kv_transfer.kv_pool.cpu_offload.metadata import (\n"
     "    MetadataServer, MetadataServerProc)\n"),
    ("from os.path import (join,\n                     split)\n",
     "from vllm_ascend.distributed.kv_transfer.kv_pool.cpu_offload.metadata import (MetadataServer,\n"
     + " " * len("from vllm_ascend.distributed.kv_transfer.kv_pool.cpu_offload.metadata import (")
     + "MetadataServerProc)\n"),
])
def test_long_import_is_wrapped_in_the_file_style(tmp_path: Path, existing: str, expected: str) -> None:
    (tmp_path / "pyproject.toml").write_text(WRAP_CONFIG)
    path = tmp_path / "mod.py"
    path.write_text(existing + LONG)
    assert vam("migrate", str(tmp_path)).returncode == 0
    assert path.read_text() == existing + expected
    assert vam("migrate", "--check", str(tmp_path)).returncode == 0


def test_nothing_is_wrapped_without_a_configured_line_length(tmp_path: Path) -> None:
    path = tmp_path / "mod.py"
    path.write_text(LONG)
    assert vam("migrate", "--to", "0.14.0", str(tmp_path)).returncode == 0
    assert path.read_text() == LONG.replace("cpu_offload_manager", "kv_transfer.kv_pool.cpu_offload")


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
def test_every_line_ending_survives_a_rewrite_and_a_split(tmp_path: Path, newline: str) -> None:
    lines = ["import os", "from vllm_ascend.distributed import parallel_state, communicator",
             f"import {OLD}", "x = 1"]
    path = tmp_path / "mod.py"
    path.write_bytes(newline.join(lines).encode() + newline.encode())
    assert vam("migrate", str(path)).returncode == 0
    assert path.read_bytes() == newline.join([
        "import os", "from vllm_ascend.distributed import parallel_state",
        "from vllm_ascend.distributed.device_communicators import npu_communicator as communicator",
        f"import {NEW}", "x = 1"]).encode() + newline.encode()


def test_a_wrapped_import_that_grows_is_reflowed_and_falls_back_to_a_hanging_indent(
    tmp_path: Path,
) -> None:
    (tmp_path / "pyproject.toml").write_text(WRAP_CONFIG)
    path = tmp_path / "mod.py"
    path.write_text(
        "if True:\n"
        "    from vllm_ascend.distributed.kvpool.config_data import (AscendConnectorMetadata, LoadSpec,\n"
        "                                                             ReqMeta)\n")
    assert vam("migrate", str(tmp_path)).returncode == 0
    # Aligned under the longer module path the names would pass column 100: they hang.
    assert path.read_text() == (
        "if True:\n"
        "    from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.config_data import (\n"
        "        AscendConnectorMetadata, LoadSpec, ReqMeta)\n")


def test_notebook_in_another_json_layout_is_written_back_in_that_layout(tmp_path: Path) -> None:
    notebook = {"cells": [{"cell_type": "code", "execution_count": None, "metadata": {},
                           "outputs": [], "source": ["from vllm_ascend.distributed import kvpool\n",
                                                     "print('ü')"]}],
                "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    path = tmp_path / "two.ipynb"
    path.write_text(json.dumps(notebook, indent=2, ensure_ascii=True))  # no final newline
    assert vam("migrate", str(path)).returncode == 0
    expected = json.loads(json.dumps(notebook))
    expected["cells"][0]["source"][0] = (
        "from vllm_ascend.distributed.kv_transfer.kv_pool import ascend_store as kvpool\n")
    assert path.read_text() == json.dumps(expected, indent=2, ensure_ascii=True)


@pytest.mark.parametrize("separators", [(",", ":"), (", ", ": ")], ids=["no spaces", "spaces"])
@pytest.mark.parametrize("tail", ["", "\n"], ids=["no newline", "newline"])
def test_a_one_line_notebook_is_migrated_and_stays_on_one_line(
    tmp_path: Path, separators: tuple[str, str], tail: str
) -> None:
    # Issue 19: a compact notebook (JSON on one line, as some tools write it) got VAM002.
    notebook = {"cells": [{"cell_type": "code", "execution_count": None, "metadata": {},
                           "outputs": [], "source": ["from vllm_ascend.distributed import kvpool\n",
                                                     "print('ü')"]}],
                "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    path = tmp_path / "compact.ipynb"
    path.write_text(json.dumps(notebook, separators=separators, ensure_ascii=False) + tail)
    result = vam("migrate", str(path))
    assert result.returncode == 0, result.stderr
    assert "VAM002" not in result.stderr
    notebook["cells"][0]["source"][0] = (  # type: ignore[index]
        "from vllm_ascend.distributed.kv_transfer.kv_pool import ascend_store as kvpool\n")
    assert path.read_text() == json.dumps(notebook, separators=separators, ensure_ascii=False) + tail


def test_notebook_whose_layout_cannot_be_reproduced_reports_python_only_forms(
    tmp_path: Path,
) -> None:
    path = tmp_path / "hand.ipynb"
    path.write_text('{"cells": [{"cell_type": "code", "metadata": {}, "outputs": [],\n'
                    '  "source": ["from vllm_ascend.distributed import kvpool\\n",\n'
                    '             "x = \\"vllm_ascend.distributed.kvpool\\""]}],\n'
                    ' "metadata": {}, "nbformat": 4, "nbformat_minor": 5}\n')
    result = vam("migrate", str(path))
    assert result.returncode == 1  # a reference needs a human
    assert "VAM002 cell 1: 'vllm_ascend.distributed.kvpool' moved to" in result.stderr
    assert "edit this cell by hand" in result.stderr
    text = path.read_text()
    assert 'x = \\"vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store\\"' in text
    assert "from vllm_ascend.distributed import kvpool" in text


def test_markdown_python_fences_follow_the_python_rules(tmp_path: Path) -> None:
    path = tmp_path / "guide.md"
    path.write_text(
        "Use `vllm_ascend.distributed.kvpool`:\n\n"
        "```python\n"
        "from vllm_ascend.distributed import communicator, parallel_state\n"
        "```\n\n"
        "- in a list:\n\n"
        "  ```py\n"
        "  from vllm_ascend.distributed import register_connector\n"
        "  ```\n\n"
        "```bash\n"
        "python -c 'from vllm_ascend.distributed import communicator'\n"
        "```\n")
    check = vam("check", str(path))
    assert [line.split(": VAM")[0] for line in check.stdout.splitlines()] == [
        f"{path}:1:6", f"{path}:4:1", f"{path}:10:3", f"{path}:14:12"]
    assert vam("migrate", str(path)).returncode == 0
    assert path.read_text() == (
        "Use `vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store`:\n\n"
        "```python\n"
        "from vllm_ascend.distributed.device_communicators import npu_communicator as communicator\n"
        "from vllm_ascend.distributed import parallel_state\n"
        "```\n\n"
        "- in a list:\n\n"
        "  ```py\n"
        "  from vllm_ascend.distributed.kv_transfer import register_connector\n"
        "  ```\n\n"
        "```bash\n"  # an import on a line of text follows the import rules too
        "python -c 'from vllm_ascend.distributed.device_communicators import npu_communicator"
        " as communicator'\n"
        "```\n")


@pytest.mark.parametrize("layout", ["float", "crlf"])
def test_a_notebook_the_text_pass_fully_migrates_gets_no_vam002(tmp_path: Path, layout: str) -> None:
    # A one-line notebook with a magic in its cell: rewritten, yet reported VAM002 and exit 1.
    notebook = {"cells": [{"cell_type": "code", "execution_count": None, "metadata": {},
                           "outputs": [], "source": [
                               "%load_ext autoreload\n",
                               "from vllm_ascend.distributed.mooncake_connector import MooncakeConnector\n",
                               "print(MooncakeConnector)"]}],
                "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    raw = json.dumps(notebook)
    # "1.50" reads back as 1.5: a layout json.dumps cannot write again.
    raw = raw[:-1] + ', "x": 1.50}' if layout == "float" else raw + "\r\n"
    path = tmp_path / "compact.ipynb"
    path.write_bytes(raw.encode())
    result = vam("migrate", str(path))
    assert "VAM002" not in result.stderr
    assert result.returncode == 0, result.stderr
    assert path.read_bytes() == raw.replace(
        "distributed.mooncake_connector", "distributed.kv_transfer.kv_p2p.mooncake_connector").encode()
    assert vam("check", str(path)).returncode == 0
