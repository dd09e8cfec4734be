"""References a run finds but does not rewrite, for want of evidence of the release the code is
written for: names only the steps before the pack's default baseline know (VAM009), and
rewrites past the release a text file pins (VAM010); and the pin of a file that is rewritten
past it, the run's own baseline (VAM012); and what a text file keeps for `--keep-compat`
(VAM013): a text cannot branch."""

from __future__ import annotations

from dataclasses import replace

from migrator.core import findings as F
from migrator.core.release_pins import ReleasePin, release_pin
from migrator.core.resolver import Resolver
from migrator.core.settings import Options
from migrator.rewrite.textfile import rewrite_text
from rules import version_key


class BelowBaseline:
    """The steps up to `floor` (the pack's `default-from`, the run's baseline) and what they
    alone know.

    Their names are read from the text of any file (imports on a line, dotted names, file
    paths), as `migrator.rewrite.textfile` reads them; a name that the run's own steps move or
    remove is theirs to report. The floor of names written by a later step holds (see
    `Resolver`): a path that 0.14.0 re-created is no 0.9 name.
    """

    def __init__(self, resolver: Resolver, floor: str):
        to = resolver.to_version
        top = floor if to is None or version_key(floor) <= version_key(to) else to
        self.main = resolver
        self.floor = floor
        self.early = Resolver(resolver.pack, None, top, written_to=to or resolver.pack.latest)
        # The same byte tests as the run's own steps (`migrator.core.prefilter`), so a file
        # that only spells a generic last component of an early name is not decoded.
        self.prefilter = self.early.prefilter() if self.early.steps else None
        steps = resolver.pack.steps
        self._before = {s.version: steps[i - 1].version if i else "0" for i, s in enumerate(steps)}

    def findings(self, text: str) -> list[F.Finding]:
        """VAM009 for each reference in `text` that only the early steps move or remove."""
        _, found = rewrite_text(text, self.early, report_only=True)
        out = []
        for finding in found:
            if finding.code not in (F.MOVED, F.REMOVED):
                continue
            name = finding.old.replace("/", ".").replace(":", ".")
            ours = self.main.resolve(name)
            if ours.changed or ours.removed:
                continue
            out.append(self._finding(finding))
        return out

    def _finding(self, finding: F.Finding) -> F.Finding:
        step = finding.step.split(",")[0].strip()
        if finding.code == F.MOVED:
            what, act = f"moved to '{finding.new}'", "migrate it"
        else:
            what, act = "was removed", "have it reported (VAM003)"
        message = (
            f"'{finding.old}' {what} in {step}, before {self.floor}, the {self.main.pack.name} "
            f"table's default baseline: left as is (for code written for an older release, "
            f"run with --from {self._before[step]} to {act})"
        )
        return replace(finding, code=F.BEFORE_BASELINE, message=message)


def held_by_pin(later: list[F.Finding], made: list[F.Finding], pin: ReleasePin) -> list[F.Finding]:
    """VAM010 (VAM013 for `--keep-compat`'s VERSION, a pin on line 0) for each reference in
    `later` (what the whole run would still do to a pinned
    file's text once taken up to its pin) that `made` (what check mode reported up to the pin,
    on the same text) does not already cover at the same place."""
    seen = {(f.line, f.col) for f in made}
    out = []
    for finding in later:
        if finding.code not in (F.MOVED, F.REMOVED) or (finding.line, finding.col) in seen:
            continue
        step = finding.step.split(",")[0].strip()
        if not pin.line:  # --keep-compat's VERSION, not a pin
            message = (
                f"'{finding.old}' kept: a text cannot hold two lanes and --keep-compat "
                f"{pin.version} keeps releases without '{finding.new}' (moved in {step}); pin a "
                "release that has it, or run --drop-compat later"
            )
            out.append(replace(finding, code=F.KEPT_LANE, message=message))
            continue
        where = f"{pin.distribution} {pin.version}, pinned at line {pin.line},"
        if finding.code == F.MOVED:
            fate = f"{where} does not have '{finding.new}' (moved in {step})"
        else:
            fate = f"removed in {step}, after {where.rstrip(',')}"
        message = f"'{finding.old}' kept: {fate}; --ignore-release-pins rewrites it"
        out.append(replace(finding, code=F.HELD_BY_PIN, message=message))
    return out


def text_pin(
    text: str, resolver: Resolver, distributions: tuple[str, ...], options: Options
) -> ReleasePin | None:
    """The release a text file is taken only up to: the one it pins (`pin_past`, unless
    `release_pins` is off), else `--keep-compat`'s VERSION as a pin on line 0 - a text has
    no branches, so the old lane wins until the file pins a release with the new path."""
    pin = pin_past(text, resolver, distributions) if options.release_pins else None
    keep = options.keep_compat
    if pin is not None or keep is None or release_pin(text, distributions) is not None:
        return pin
    last = resolver.steps[-1].release if resolver.steps else None
    return ReleasePin(keep, 0, "") if last and version_key(keep) < version_key(last) else None


def pin_past(text: str, resolver: Resolver, distributions: tuple[str, ...]) -> ReleasePin | None:
    """The release `text` pins, when `resolver` would take it past that release.

    A file that pins the very release the run migrates from (`--from`, found or given) is
    part of the code being migrated, and is rewritten with it (shared cases 07 and 18: a
    v0.13.0 image beside 0.13 paths, taken to 0.14) though its pin stays as written:
    `pin_left_behind` says so. Any other release is that of a deployment, which the run must
    not break."""
    pin = release_pin(text, distributions)
    if pin is None:
        return None
    key = version_key(pin.version)
    low = resolver.from_version
    if low is not None and key == version_key(low):
        return None
    # A release has a step's paths from the step's first release on (0.14.0rc1 has 0.14.0's).
    last = resolver.steps[-1].release if resolver.steps else None
    return pin if last and key < version_key(last) else None


def pin_left_behind(
    text: str, resolver: Resolver, distributions: tuple[str, ...], made: list[F.Finding]
) -> list[F.Finding]:
    """VAM012 at the pin's line when `text` pins the release the run migrates from and `made`
    (the file's findings) moves references past it: the pin, which vam never edits, names a
    release without those paths. The release to move it to is the newest step among them."""
    low = resolver.from_version
    steps = [part.strip() for f in made if f.code == F.MOVED for part in f.step.split(",")]
    if low is None or not steps:
        return []
    pin = release_pin(text, distributions)
    if pin is None or version_key(pin.version) != version_key(low):
        return []
    first = max(steps, key=version_key)
    message = (
        f"this file pins {pin.distribution} {pin.version} (line {pin.line}), which does not "
        f"have the rewritten paths: move the pin to {first} or later"
    )
    return [F.Finding("", pin.line, 1, F.PIN_LEFT_BEHIND, "text", message, pin.version, first,
                      first)]
