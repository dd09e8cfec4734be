"""The version a run takes the code to be written for (`--from`), when the command line names
none: `[tool.vam] from`, else the project's pins, else the installed distribution, else the
pack's `default-from` (DESIGN.md section 9)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from migrator.core.config import Config
from migrator.core.pins import distribution_names, installed_version, project_pin
from rules import Pack, RulesError, version_key

FLAG = "flag"
CONFIG = "config"
PINS = "pins"
INSTALLED = "installed"
PACK = "pack"


@dataclass(frozen=True)
class Baseline:
    """`version` None applies every step up to `--to`. `source` is one of FLAG, CONFIG, PINS,
    INSTALLED, PACK, or "" when none applies; `note` is the stderr line that says where it was
    found ("" for the flag, `[tool.vam] from` and the pack's default: the first two the user
    wrote, the third is reported where it matters, by VAM009)."""

    version: str | None
    source: str = ""
    note: str = ""

    @property
    def is_pack_default(self) -> bool:
        return self.source == PACK


def find_baseline(
    given: str | None, config: Config, pack: Pack, start: Path, to_version: str | None
) -> Baseline:
    """The baseline of a run whose first path is `start`.

    A found version after `to_version` is clamped to it (nothing to apply, which the run's
    window warning says); the pack's default is dropped then, as the user asked for an older
    release than it.

    Raises:
        RulesError: a version that is not PEP 440 (from `--from`, the config or a pin).
    """
    if given:
        return Baseline(given, FLAG)
    if config.from_version:
        return Baseline(config.from_version, CONFIG)
    names = distribution_names(pack.packages)
    pin = project_pin(start, names)
    if pin is not None:
        disagree = "".join(f"; {other}" for other in pin.others)
        found = Baseline(pin.version, PINS,
                         f"vam: --from {pin.version} ({pin.where}: {pin.text}{disagree})")
    else:
        installed = installed_version(names)
        if installed is not None:
            found = Baseline(installed, INSTALLED,
                             f"vam: --from {installed} (installed {names[0]} {installed})")
        elif pack.default_from:
            found = Baseline(pack.default_from, PACK)
        else:
            return Baseline(None)
    return _clamped(found, to_version)


def _clamped(found: Baseline, to_version: str | None) -> Baseline:
    assert found.version is not None
    if to_version is None:
        return found
    try:
        low, high = version_key(found.version), version_key(to_version)
    except RulesError as exc:
        where = found.note.removeprefix("vam: ") or f"[pack] default-from {found.version}"
        raise RulesError(f"{where}: {exc}") from None
    if found.is_pack_default and low >= high:
        return Baseline(None)  # `--to` at or before the default: the user wants early steps
    if low <= high:
        return found
    return Baseline(to_version, found.source, f"{found.note}, after --to {to_version}")
