"""Versioned move tables ("rule packs"): the single source of truth for `vam` and the shims.

A pack is a TOML file; the bundled ones live next to this module. Stdlib only.
"""

from __future__ import annotations

from pathlib import Path

from .loader import load, parse
from .schema import (
    ModuleMove,
    Pack,
    Removal,
    RulesError,
    Step,
    SymbolMove,
    is_dotted,
    is_under,
    version_key,
)
from .validation import validate

__all__ = [
    "ModuleMove",
    "Pack",
    "Removal",
    "RulesError",
    "Step",
    "SymbolMove",
    "bundled",
    "is_dotted",
    "is_under",
    "load",
    "load_pack",
    "parse",
    "validate",
    "version_key",
]

_HERE = Path(__file__).resolve().parent
DEFAULT_PACK = "vllm_ascend"


def bundled() -> dict[str, Path]:
    """Names of the bundled packs and their files."""
    return {p.stem: p for p in sorted(_HERE.glob("*.toml"))}


def load_pack(name_or_path: str | Path) -> Pack:
    """Load a bundled pack by name, or a table from a file path.

    Raises:
        RulesError: unknown pack name, unreadable file, bad TOML or a table that fails
            validation; the message names the pack or the entry at fault.
    """
    text = str(name_or_path)
    packs = bundled()
    if text in packs:
        return load(packs[text])
    if text.endswith(".toml") or "/" in text or Path(text).exists():
        return load(Path(text))
    raise RulesError(f"unknown rule pack {text!r} (bundled: {', '.join(packs) or 'none'})")
