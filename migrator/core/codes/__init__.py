"""Every diagnostic code vam reports, in one registry: level, title and the rule doc.

`vam rule CODE` prints a code's doc, the `--help` code tables of `vam check` and
`vam verify-imports` are built from it, and so are `findings.CODE_TITLES` and the
verify-imports `SEVERITY`/`CODE_TITLES`. Each code is written with its doc as one `Code`
(`model.py`): VAM codes, from `vam migrate`/`vam check`, in `vam.py`; VAI codes, from
`vam verify-imports`, in `vai.py`; VAP codes, from `vam verify-api`, in `vap.py`.
"""

from __future__ import annotations

import textwrap

from migrator.core.codes.model import ERROR, INFO, WARNING, WIDTH, Code
from migrator.core.codes.vai import VAI_CODES
from migrator.core.codes.vam import VAM_CODES
from migrator.core.codes.vap import VAP_CODES

__all__ = ["BY_CODE", "CODES", "ERROR", "INFO", "WARNING", "Code", "levels", "table", "titles"]

CODES: tuple[Code, ...] = (*VAM_CODES, *VAI_CODES, *VAP_CODES)

BY_CODE: dict[str, Code] = {c.code: c for c in CODES}


def titles(prefix: str) -> dict[str, str]:
    """{code: title} of the codes starting with `prefix` ("VAM", "VAI" or "VAP"), in
    registry order."""
    return {c.code: c.title for c in CODES if c.code.startswith(prefix)}


def levels(prefix: str) -> dict[str, str]:
    """{code: level} of the codes starting with `prefix`, in registry order."""
    return {c.code: c.level for c in CODES if c.code.startswith(prefix)}


def table(prefix: str = "") -> str:
    """One row per code (`VAM001 error    title`), long titles wrapped under the title column."""
    rows = []
    for c in CODES:
        if c.code.startswith(prefix):
            head = f"{c.code} {c.level:<9}"
            rows.append(textwrap.fill(c.title, WIDTH - 2, initial_indent=head,
                                      subsequent_indent=" " * len(head)))
    return "\n".join(rows)
