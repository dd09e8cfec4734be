"""Relative imports of a moving file: spelled absolute from the old package, relative again
from the new one, layout kept."""

from __future__ import annotations

from migrator.refactor.relative import absolutize, relative_name, relativize
from migrator.refactor.runtime import init_text
from migrator.refactor.shimline import add_install, owner_package
from rules import load_pack

SOURCE = """\
from . import a
from ..x.y import (b,  # keep me
   c)
raise E from exc
def f():
    from ... import w
"""


def test_absolutize_then_relativize_from_a_new_package() -> None:
    text, origins = absolutize(SOURCE, "p.q.r")
    assert text.splitlines()[:2] == ["from p.q.r import a", "from p.q.x.y import (b,  # keep me"]
    assert "raise E from exc" in text and "    from p import w" in text
    assert [o.module for o in origins] == ["p.q.r", "p.q.x.y", "p"]
    back = relativize(text, "p.q.r.s", {o.module for o in origins})
    assert back == SOURCE.replace("from . import a", "from .. import a").replace(
        "from ..x.y", "from ...x.y").replace("from ... import w", "from .... import w")


def test_relative_names_are_minimal() -> None:
    assert relative_name(["p", "q"], ["p", "q", "m"]) == ".m"
    assert relative_name(["p", "q"], ["p", "z"]) == "..z"
    assert relative_name(["p", "q"], ["other", "m"]) == ""


def test_too_many_dots_stay() -> None:
    text, origins = absolutize("from .... import x\n", "p")
    assert text == "from .... import x\n" and not origins


def test_shims_owner_table_and_install_line() -> None:
    pack = load_pack("vllm_ascend")
    assert owner_package(pack.step("0.14.0")) == "vllm_ascend.distributed"
    cut = init_text(pack, "0.14.0")
    assert cut.startswith("# vam: ignore-file") and "version='0.14.0'" in cut
    assert "'0.18.0rc1'" not in cut
    init = add_install('"""Doc."""\nfrom __future__ import annotations\nimport os\n', "0.14.0")
    lines = init.splitlines()
    assert lines[:2] == ['"""Doc."""', "from __future__ import annotations"]
    assert lines[3].startswith("# vam refactor --step 0.14.0") and lines[-1] == "import os"
    assert lines[4:8] == [
        "from ._vam_shims import install as _vam_install_shims", "", "_vam_install_shims()",
        "del _vam_install_shims"]
    assert add_install(init, "0.14.0") == init
