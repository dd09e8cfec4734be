"""The `vam-verify-imports` pre-commit hook: declared as pre-commit expects, and its entry
behaves as a hook when given file names the way pre-commit passes them."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]


def hook() -> dict:
    hooks = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())
    (found,) = [h for h in hooks if h["id"] == "vam-verify-imports"]
    return found


def test_hook_declaration() -> None:
    declared = hook()
    assert declared["entry"] == "vam verify-imports"
    assert declared["language"] == "python"
    assert declared["types"] == ["python"]
    assert declared["require_serial"] is True  # index the package once, not once per batch


def test_entry_with_staged_file_names(tree) -> None:
    root = tree({
        "pkg/__init__.py": "",
        "pkg/kv/__init__.py": "",
        "pkg/kv/impl.py": "class Connector: ...\n",
        "pkg/good.py": "from pkg.kv.impl import Connector\n",
        "pkg/bad.py": "from pkg.kv import Connector\n",
    })
    vam = shutil.which("vam", path=str(Path(sys.executable).parent))
    assert vam is not None
    command = [vam, *shlex.split(hook()["entry"])[1:]]

    def run(*files: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*command, *files], cwd=root, capture_output=True, text=True,
                              timeout=120)

    clean = run("pkg/good.py", "pkg/kv/impl.py")
    assert (clean.returncode, clean.stdout) == (0, "")
    dirty = run("pkg/good.py", "pkg/bad.py")
    assert dirty.returncode == 1
    assert dirty.stdout.startswith("pkg/bad.py:1:20: VAI001 ")
