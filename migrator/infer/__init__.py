"""`vam rules infer`: a move-table step inferred statically (with `ast`) from two releases.

`migrator.core.sources` (shared with verify-imports' `--against`) and `gitsource` read
releases into file maps, `index` lists their modules and definitions (`binding`: what is
bound at run time; `calls`: signatures and registrations), `modules`, `symbols` and
`renames` match them into `candidate`s, `emit` writes the TOML, `pipeline` runs it all and
checks the result with the rules loader and `check_against`.
"""

from migrator.core.sources import InputError, Source, open_release
from migrator.infer.gitsource import open_git
from migrator.infer.pipeline import Inference, choose_packages, file_count, infer, step_version

__all__ = [
    "Inference",
    "InputError",
    "Source",
    "choose_packages",
    "file_count",
    "infer",
    "open_git",
    "open_release",
    "step_version",
]
