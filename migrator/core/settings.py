"""The switches of one run, shared by the engine and the site rewriters."""

from __future__ import annotations

from dataclasses import dataclass

# What the suffix of a version helper's name says: how the running version compares to the
# helper's argument.
COMPARISONS = {"is": "==", "eq": "==", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}

# The version helpers vllm-ascend and other vLLM plugins guard compatibility code with; the
# suffix says the comparison (see `migrator.rewrite.sites.versions`).
DEFAULT_VERSION_GUARDS = (
    "vllm_version_is",
    "vllm_version_lt",
    "vllm_version_le",
    "vllm_version_gt",
    "vllm_version_ge",
)


@dataclass(frozen=True)
class Options:
    """Per-run switches.

    `comments` False leaves comments and docstrings alone. `line_length` None never wraps a
    rewritten import. `report_only` (check mode) wants findings, not new text: imports are
    judged from the ast without libcst, and files that do not parse are still scanned as text.
    `version_guards` are the names of the version helpers whose branches are told apart
    (`migrator.rewrite.sites.guards`); `drop_compat`, a version, collapses every block guarded for
    that version or older to its newer branch (`migrator.rewrite.sites.drop`).
    `default_floor`, the pack's `default-from` when it is the run's baseline, has the names
    only the steps up to it know reported (VAM009), not rewritten. `release_pins` False
    rewrites text files that pin a release past it (VAM010 otherwise).
    `keep_compat`, a version, writes each moved import in dual-lane form instead of replacing
    it: the path of that version and older under the first of `version_guards`, the new one
    for later releases (`migrator.rewrite.sites.lanes`); `compat_style` "if" (the version
    helper) or "try" (`try` the new import, `except ImportError` the old one);
    `version_helper_module` is where the helper's import is taken from when a module does not
    bind it (None: the pack's `version-helper`; neither: such a module is reported).
    """

    comments: bool = True
    line_length: int | None = None
    report_only: bool = False
    version_guards: tuple[str, ...] = DEFAULT_VERSION_GUARDS
    drop_compat: str | None = None
    default_floor: str | None = None
    release_pins: bool = True
    keep_compat: str | None = None
    compat_style: str = "if"
    version_helper_module: str | None = None
