"""Building small releases on disk and running `vam rules infer` on them."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

from click.testing import CliRunner, Result

from migrator.cli.infer import infer_command

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

# A function body long enough for infer to pair by similarity; `{name}` is its name.
FUNCTION = """
def {name}(items, factor):
    total = 0
    for item in items:
        if item.ready:
            total += item.size * factor
        else:
            total -= 1
    return total
"""

PKG_INFO = "Metadata-Version: 2.1\nName: pkg\nVersion: {version}\n"


def release(root: Path, files: dict[str, str], version: str = "1.0") -> Path:
    """A source tree at `root` with a PKG-INFO stating `version`."""
    root.mkdir(parents=True)
    (root / "PKG-INFO").write_text(PKG_INFO.format(version=version))
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


def infer(*args: str | Path) -> Result:
    return CliRunner().invoke(infer_command, [str(a) for a in args])


def table(result: Result) -> dict:
    assert result.exit_code == 0, result.output + result.stderr
    return tomllib.loads(result.stdout)


def pairs(data: dict, kind: str) -> set[tuple[str, str]]:
    return {(e["old"], e["new"]) for e in data["step"][0].get(kind, [])}
