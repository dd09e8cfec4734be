"""The release a text file says it runs: a container image tag, a pip pin or a requirement
line on the table's distribution (`vllm-ascend:v0.12.0rc1`, `pip install vllm-ascend==0.11.0`,
`vllm_ascend==0.11.0`).

A deployment file runs the release it names, so a path that release does not have would break
it: `migrator.rewrite.engine` takes such a file only up to that release (VAM010).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from rules import RulesError, version_key

# A PEP 440 release as tags and pins spell it; an image tag may go on (`v0.11.0rc0-a3`).
_VERSION = r"\d+(?:\.\d+)*(?:(?:a|b|rc)\d+)?(?:\.post\d+)?(?:\.dev\d+)?"


@dataclass(frozen=True)
class ReleasePin:
    """`version` of `distribution` named on 1-based `line`."""

    version: str
    line: int
    distribution: str


@lru_cache(maxsize=8)
def _pin_re(distribution: str) -> re.Pattern[str]:
    name = r"[-_.]".join(map(re.escape, re.split(r"[-_.]", distribution)))
    # An image is one where it is pulled (`FROM`, `image:`) or behind a registry path; prose
    # that names a tag ("first supported in `vllm-ascend:v0.9.1rc3`") pins nothing.
    image = rf"(?:(?:^|\s)FROM\s+(?:--\S+\s+)*|image:\s*[\"']?|[\w.:-]/){name}:v?"
    pip = rf"(?<![\w.-]){name}\s*(?:\[[^\]\n]*\])?\s*===?\s*v?"
    return re.compile(
        rf"(?:{image}|{pip})(?P<version>{_VERSION})(?!\.?\d|\.\*)", re.IGNORECASE | re.MULTILINE
    )


def release_pin(text: str, distributions: tuple[str, ...]) -> ReleasePin | None:
    """The release of one of `distributions` (normalized names) that `text` pins, or None.
    Where a file names several, the oldest: no path it gets is one a release it runs lacks."""
    if not distributions:
        return None
    found: ReleasePin | None = None
    for distribution in distributions:
        pattern = _pin_re(distribution)
        for match in pattern.finditer(text):
            if _in_comment(text, match.start()):
                continue
            version = match.group("version")
            try:
                key = version_key(version)
            except RulesError:
                continue
            if found is None or key < version_key(found.version):
                line = text.count("\n", 0, match.start("version")) + 1
                found = ReleasePin(version, line, distribution)
    return found


# A `#` that opens a comment (shell, YAML, Dockerfile, requirements): at a line's start or
# after a blank, not one inside a word or a URL fragment (`repo.git#egg=...`).
_COMMENT = re.compile(r"(?:^|(?<=\s))#")


def _in_comment(text: str, at: int) -> bool:
    """Whether `at` lies in the comment of its line. A comment runs nothing: prose ("upgrade
    from vllm-ascend==0.11.0") and commented-out lines alike (a `# vllm-ascend==0.11.0` the
    file no longer installs) are no release the file runs."""
    start = text.rfind("\n", 0, at) + 1
    return _COMMENT.search(text, start, at) is not None
