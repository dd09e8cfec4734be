"""--dynamic: every module imported in a real subprocess of its own."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
from pathlib import Path

from click.testing import CliRunner

from migrator.cli import main
from migrator.verify_imports import verify_dynamic
from tests.verify_imports.vi_helpers import codes


def test_failures_skips_and_clean_modules(tree) -> None:
    assert importlib.util.find_spec("torch_npu") is None  # the default-optional case below
    tree({
        "pkg/__init__.py": "",
        "pkg/clean.py": "import json\nprint('noise on stdout')\nVALUE = json.dumps(1)\n",
        "pkg/boom.py": "X = 1\n\nraise RuntimeError('boom\\nsecond line')\n",
        "pkg/kv/__init__.py": "",
        "pkg/kv/impl.py": "class Connector: ...\n",
        "pkg/caller.py": "import os\nfrom pkg.kv import Connector\n",
        "pkg/npu.py": "import torch_npu\n",
        "pkg/wrapped.py": """
            try:
                import vam_fake_optional_dep
            except ImportError as exc:
                raise RuntimeError("this backend needs vam_fake_optional_dep") from exc
        """,
        "pkg/needs_other.py": "import vam_fake_required_dep\n",
        "pkg/exits.py": "import sys\nsys.exit(3)\n",
        "pkg/hard_exit.py": "import os\nos._exit(7)\n",
        "pkg/__main__.py": "raise SystemExit('a CLI entry point is never imported')\n",
    })
    result = verify_dynamic(["pkg"], timeout_s=60, optional=["torch_npu", "vam_fake_optional_dep"])
    assert result.checked == 11  # every module but __main__
    by_path = {f.path: f for f in result.findings}
    assert codes(result.findings) == [
        ("pkg/boom.py", 3, 1, "VAI201"),
        ("pkg/caller.py", 2, 1, "VAI201"),
        ("pkg/exits.py", 2, 1, "VAI201"),
        ("pkg/hard_exit.py", 1, 1, "VAI201"),
        ("pkg/needs_other.py", 1, 1, "VAI201"),
        ("pkg/npu.py", 1, 1, "VAI203"),
        ("pkg/wrapped.py", 1, 1, "VAI203"),
    ]
    assert by_path["pkg/boom.py"].message == (
        "importing 'pkg.boom' failed: RuntimeError: boom (raised at pkg/boom.py:3)")
    assert by_path["pkg/caller.py"].message.startswith(
        "importing 'pkg.caller' failed: ImportError: cannot import name 'Connector' from 'pkg.kv'")
    assert "SystemExit: 3" in by_path["pkg/exits.py"].message
    assert "interpreter exited with code 7" in by_path["pkg/hard_exit.py"].message
    assert "No module named 'vam_fake_required_dep'" in by_path["pkg/needs_other.py"].message
    assert by_path["pkg/npu.py"].message == (
        "skipped 'pkg.npu': optional dependency 'torch_npu' is not installed")
    assert result.has_errors


def test_timeout_kills_the_import_and_its_children(tree, tmp_path: Path) -> None:
    pid_file = tmp_path / "grandchild.pid"
    tree({
        "pkg/__init__.py": "",
        "pkg/hangs.py": f"""
            import subprocess, time
            child = subprocess.Popen(["sleep", "300"])
            open({str(pid_file)!r}, "w").write(str(child.pid))
            time.sleep(300)
        """,
    })
    result = verify_dynamic(["pkg/hangs.py"], timeout_s=3)
    assert codes(result.findings) == [("pkg/hangs.py", 1, 1, "VAI202")]
    assert "did not finish within 3 s" in result.findings[0].message
    grandchild = int(pid_file.read_text())
    deadline = time.monotonic() + 30
    while _alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(grandchild)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = Path(f"/proc/{pid}/stat")
    return not (status.exists() and status.read_text().split(") ")[1].startswith("Z"))


def test_cli_dynamic_exit_codes_and_optional_flag(tree) -> None:
    tree({
        "pkg/__init__.py": "",
        "pkg/ok.py": "X = 1\n",
        "pkg/opt.py": "import vam_fake_optional_dep\n",
    })
    runner = CliRunner()
    failed = runner.invoke(main, ["verify-imports", "--dynamic", "pkg"])
    assert failed.exit_code == 1
    assert "pkg/opt.py:1:1: VAI201 importing 'pkg.opt' failed: ModuleNotFoundError" in failed.stdout
    skipped = runner.invoke(main, ["verify-imports", "--dynamic", "--optional",
                                   "vam_fake_optional_dep", "pkg"])
    assert skipped.exit_code == 0
    assert "VAI203 skipped 'pkg.opt'" in skipped.stdout
    assert "0 errors, 0 warnings, 1 skipped; 3 modules scanned" in skipped.stderr


def test_dynamic_and_static_agree_on_a_broken_cycle(tree) -> None:
    tree({
        "pkg/__init__.py": "from pkg.a import A\nB = 2\n",
        "pkg/a.py": "from pkg import B\nA = 1\n",
    })
    runner = CliRunner()
    static = runner.invoke(main, ["verify-imports", "pkg"])
    dynamic = runner.invoke(main, ["verify-imports", "--dynamic", "pkg"])
    assert static.stdout.startswith("pkg/a.py:1:17: VAI003 ")
    assert "partially initialized module 'pkg'" in dynamic.stdout
    assert (static.exit_code, dynamic.exit_code) == (1, 1)


def test_package_name_is_located_with_the_python_interpreter(tree, tmp_path: Path) -> None:
    """--python OTHER: a package importable only there is found there, and imported there."""
    other = tmp_path / "other-venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(other)], check=True,
                   capture_output=True, timeout=120)
    python = str(other / "bin" / "python")
    ask = "import sysconfig; print(sysconfig.get_path('purelib'))"
    purelib = subprocess.run([python, "-c", ask], check=True, capture_output=True, text=True,
                             timeout=60).stdout.strip()
    package = Path(purelib) / "vam_only_there"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    broken = "import sys\nraise RuntimeError(f'imported in {sys.prefix}')\n"
    (package / "broken.py").write_text(broken)
    tree({})
    assert importlib.util.find_spec("vam_only_there") is None
    result = verify_dynamic(["vam_only_there"], timeout_s=60, python=python)
    assert result.checked == 2
    [failure] = result.findings
    assert (failure.code, failure.module) == ("VAI201", "vam_only_there.broken")
    assert failure.message.startswith(
        f"importing 'vam_only_there.broken' failed: RuntimeError: imported in {other}")
    cli = CliRunner().invoke(main, ["verify-imports", "--dynamic", "--python", python,
                                    "vam_only_there.broken"])
    assert cli.exit_code == 1, cli.output
    assert "VAI201 importing 'vam_only_there.broken' failed" in cli.stdout
