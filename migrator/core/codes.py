"""Every diagnostic code vam reports, in one registry: level, title and the rule doc.

`vam rule CODE` prints a code's doc, the `--help` code tables of `vam check` and
`vam verify-imports` are built from it, and so are `findings.CODE_TITLES` and the
verify-imports `SEVERITY`/`CODE_TITLES`. VAM codes come from `vam migrate`/`vam check`,
VAI codes from `vam verify-imports`.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass

ERROR = "error"
WARNING = "warning"
INFO = "info"

_WIDTH = 80  # help tables and rule docs stay readable in an 80-column terminal


@dataclass(frozen=True)
class Code:
    """One stable code. `bad`/`good` are source text (may span lines; "" when no example fits)."""

    code: str
    level: str  # ERROR, WARNING or INFO
    title: str
    means: str
    why: str
    fix: str
    bad: str = ""
    good: str = ""

    def doc(self) -> str:
        """The rule doc `vam rule` prints: title line, then what/why/example/fix sections."""
        out = [f"{self.code} ({self.level}): {self.title}"]
        out += _section("What it means", self.means)
        out += _section("Why it matters", self.why)
        if self.bad:
            out += ["", "Example", "  bad:", textwrap.indent(self.bad, "    ")]
            if self.good:
                out += ["  good:", textwrap.indent(self.good, "    ")]
        out += _section("Fix", self.fix)
        return "\n".join(out)


def _section(heading: str, prose: str) -> list[str]:
    return ["", heading, textwrap.fill(prose, _WIDTH, initial_indent="  ", subsequent_indent="  ")]


# One entry per code, separated by a blank line: `CODE level: title`, then the prose fields
# (`means:`, `why:`, `fix:`; indented lines continue them) and optional `bad:`/`good:`
# examples, whose lines are indented four spaces and kept as written.
_DOCS = """
VAM001 error: reference to a moved name
means: An import, attribute chain, string, comment or text-file line names a module or
    symbol that the move table says has moved.
why: The old path works only through the runtime shims, with a DeprecationWarning, and the
    shims are removed in a later release: then the reference breaks.
fix: Run `vam migrate` (it rewrites every VAM001 in place; `--diff` previews).
bad:
    from vllm_ascend.distributed.mooncake_connector import MooncakeConnector
good:
    from vllm_ascend.distributed.kv_transfer.kv_p2p.mooncake_connector import MooncakeConnector

VAM002 warning: reference that cannot be rewritten safely
means: A reference to a moved name in a form no tool can rewrite without guessing: a path
    split across adjacent string literals, a parent and child passed as separate arguments,
    a name completed at run time, a star import from a module that lost names, or a moved
    name reached through a local alias.
why: Left alone it breaks when the old path goes away, and rewriting it mechanically could
    change what the code means. A warning in CI annotations (a person decides), yet
    `vam check` and `vam migrate` still exit 1 on it.
fix: Edit it by hand to name the new path the message gives; `vam explain NAME` shows where
    a name went.
bad:
    patch("vllm_ascend.distributed." "mooncake_connector.X")
good:
    patch("vllm_ascend.distributed.kv_transfer.kv_p2p.mooncake_connector.X")

VAM003 error: reference to a removed name
means: The reference names something the table lists as removed, with no replacement.
why: The name no longer exists in the new layout: the code fails as soon as it runs.
fix: Follow the hint in the message (the table's `hint` for that name); vam never rewrites a
    removed name.

VAM004 info: compatibility pair kept
means: One name is bound from a moved path in one branch and from its new path in a sibling
    branch: try/except ImportError (or ModuleNotFoundError), if/else, or a conditional
    expression. Both branches are left exactly as they are.
why: That is code written to run against both layouts; rewriting the old branch would leave
    two copies of the new path and no fallback. Info only: it does not change the exit code
    and `vam check` does not count it as stale.
fix: Nothing while you support both layouts; when you drop the old one, delete the old
    branch by hand.

VAM005 info: pinned reference kept
means: A link pinned to a tag, release branch or commit (`/blob/v0.13.0/...`,
    `/tree/releases/v0.13.0/...`, raw.githubusercontent.com, gitee, a 7-40 digit sha), or a
    `-` line of a diff (a ```diff fence, a .patch or .diff file), names a moved module.
why: Both are history: at that tag the file lives at the old path, and a diff's removed
    lines must match the file it was made against. Rewriting them would break the link or
    the patch. Info only: it does not change the exit code and `vam check` does not count it
    as stale.
fix: Nothing. Links to main, master, HEAD or an unpinned branch are rewritten as usual.

VAM006 info: old branch of a version guard kept
means: A branch that runs only on versions older than the one the run migrates to, by its
    guard (`if vllm_version_is("0.11.0"):`, `not ...`, `and`/`or`, a conditional expression;
    the helpers are [tool.vam] version-guards), names a moved path. It is left as it is.
why: That branch runs only on the old version, where the old path is right; rewriting it
    would break the old version you still support. Info only: it does not change the exit
    code and `vam check` does not count it as stale.
fix: Nothing while you support that version; `vam migrate --drop-compat VERSION` removes
    the blocks of VERSION and older when you drop it.
bad:
    if vllm_version_is("0.11.0"):
        from vllm.utils import cdiv
    else:
        from vllm.utils.math_utils import cdiv

VAM007 info: compatibility block collapsed to its newer branch
means: `vam migrate --drop-compat VERSION` found a block guarded for VERSION or older (or a
    try/except ImportError fallback to a path that moved right after VERSION) and kept only
    the branch that still runs: header and old branch removed, the kept branch dedented.
why: Support for VERSION was dropped, so the old branch is dead code. Reported so the
    collapse can be reviewed in the diff.
fix: Nothing; review the diff. A condition that stays undecided (`vllm_version_is("0.11.0")
    or flag`) is reported as VAM002 instead and left for a human.
bad:
    if vllm_version_is("0.11.0"):
        from vllm.utils import cdiv
    else:
        from vllm.utils.math_utils import cdiv
good:
    from vllm.utils.math_utils import cdiv

VAM901 error: Python file that does not parse
means: A .py or .pyi file is not valid Python for the parser, so its imports cannot be
    rewritten.
why: The file is left untouched and the run exits 1, so stale references in it survive the
    migration.
fix: Fix the syntax error the message points at, then run vam again.

VAM902 error: file that cannot be read or decoded
means: A file could not be read, or its bytes do not decode in its declared or detected
    encoding.
why: Nothing in the file was checked or rewritten.
fix: Check the file's permissions and encoding (a PEP 263 cookie must match the bytes), or
    exclude it with --exclude or [tool.vam] exclude.

VAM903 error: file that cannot be written
means: A file needed rewriting, but the new content could not be written: the file is
    read-only to this process, the folder refuses the temporary file, or the new text cannot
    be encoded in the file's encoding.
why: The file still holds its old references; vam never replaces a file it may not write.
fix: Make the file (and its folder) writable, or fix the encoding the message names, and run
    `vam migrate` again.

VAM904 error: not a regular file
means: A path named on the command line is a FIFO, socket or device, not a file.
why: Reading it could block forever, so vam never opens it for reading. The same files met
    while walking a folder are skipped without a finding (`-v` lists them).
fix: Name regular files only, or leave the path off the command line.

VAM999 error: file vam failed on (a bug: please report it)
means: vam raised an unexpected error on this file; the file was left untouched and the run
    went on with the others.
why: The file was neither checked nor rewritten, and vam has a bug.
fix: Report it with the file (or a reduced copy) and the message; meanwhile migrate the file
    by hand or exclude it.

VAI001 error: cannot import name (not bound in the module, not a submodule)
means: `from pkg.mod import X` of a first-party module, where pkg.mod exists but binds no X
    (no def, class, assignment, import or star-import chain) and has no submodule X.
why: The import raises ImportError the moment the module is imported.
fix: Import X from the module that defines it (the message's 'did you mean' names one when X
    lives elsewhere), or add X to pkg.mod.
bad:
    from vllm_ascend.distributed import MooncakeConnector
good:
    from vllm_ascend.distributed.kv_transfer.kv_p2p.mooncake_connector import MooncakeConnector

VAI002 error: no such module, or a relative import above the top package
means: An import names a first-party module that has no file or package, or a relative
    import climbs above the top-level package.
why: The import raises ModuleNotFoundError or ImportError at import time.
fix: Import the module from where it lives now (the message suggests one when it can), or
    count the dots of the relative import again.
bad:
    import vllm_ascend.distributed.mooncake_connector
good:
    import vllm_ascend.distributed.kv_transfer.kv_p2p.mooncake_connector

VAI003 error: circular import that breaks at import time
means: Two or more modules import each other and, in the order Python runs them, one asks
    for a name the other has not bound yet.
why: The import fails with 'cannot import name ... from partially initialized module'
    depending on which module is imported first.
fix: Import the module instead of the name (`from pkg import mod`, use `mod.X` at call
    time), move the import into the function that needs it, or move the shared name into a
    module both can import.
bad:
    # a.py
    from pkg.b import helper
    VALUE = 1
    # b.py
    from pkg.a import VALUE
    def helper(): ...
good:
    # b.py
    from pkg import a
    def helper(): return a.VALUE

VAI004 error: file does not parse
means: A Python file of the package is not valid Python.
why: Importing the module raises SyntaxError, and none of its imports can be checked.
fix: Fix the syntax error at the position the message gives.

VAI005 error: folder without __init__.py inside a regular package
means: A first-party import reaches into a folder that has no __init__.py although its parent
    package has one, and the packaging config does not declare namespace packages. Reported
    at each importing line and at the folder.
why: From the source tree the folder imports as a namespace package, but setuptools'
    find_packages() skips it and everything below it: the modules are missing from the built
    wheel and the import fails only after install.
fix: Add an __init__.py to the folder, or declare namespace packages (find_namespace_packages(),
    packages = find_namespace: in setup.cfg, or [tool.setuptools.packages.find] namespaces =
    true).
bad:
    # pkg/__init__.py and pkg/models/__init__.py exist, pkg/models/layer/__init__.py does not
    from pkg.models.layer.attention import Attention
good:
    # with pkg/models/layer/__init__.py added
    from pkg.models.layer.attention import Attention

VAI100 warning: name served by a module __getattr__ (PEP 562): unknown
means: The imported name is not bound in the module, but the module defines a module-level
    __getattr__ that may provide it.
why: Whether the import works is decided at run time; a static check cannot tell.
fix: Nothing, if the __getattr__ serves the name; otherwise import it from its real module.
    `vam verify-imports --dynamic` imports the module to find out.

VAI101 warning: name unknown: third-party star import or globals() writes
means: The module may bind the name in a way that cannot be read from its source: a star
    import from a third-party module, or writes to globals().
why: The name is not checked; a typo or a moved name would go unnoticed.
fix: Import the name from where it is defined, or bind it explicitly in the module.

VAI102 warning: unresolvable first-party import guarded by except ImportError
means: An import that would be an error (VAI001-VAI003) sits inside try/except ImportError,
    so the program takes the fallback branch.
why: The guarded path never runs; often it is an old import left behind by a move.
fix: Point the import at the module's new home, or delete the dead branch.
bad:
    try:
        from vllm_ascend.distributed.mooncake_connector import X
    except ImportError:
        X = None
good:
    from vllm_ascend.distributed.kv_transfer.kv_p2p.mooncake_connector import X

VAI103 warning: name listed in __all__ that the module never binds
means: The name is imported from a module whose __all__ lists it, but the module never binds
    it.
why: `from mod import *` and `from mod import name` both fail with AttributeError or
    ImportError.
fix: Bind the name in the module (import it there) or drop it from __all__.

VAI104 warning: name served only by a deprecation __getattr__
means: The imported name is not bound in the module; the module's __getattr__ (PEP 562)
    serves it from another module and warns that it is deprecated (vLLM 0.11.1's vllm.utils
    forwards cdiv, get_open_port and others this way). The message and the suggestion name
    the module that defines it now.
why: The import works today with a DeprecationWarning, and breaks in the release that drops
    the forwarder.
fix: Import the name from its new home (`vam migrate --rules vllm` rewrites the ones the vllm
    pack knows).
bad:
    from vllm.utils import get_open_port
good:
    from vllm.utils.network_utils import get_open_port

VAI201 error: --dynamic: the import raised (first line of the error)
means: Importing the module in a fresh interpreter raised an exception.
why: Any code that imports the module fails the same way.
fix: Read the error and the line it was raised at (given in the message) and fix the import
    or the module-level code.

VAI202 error: --dynamic: the import did not finish within --timeout
means: Importing the module in a fresh interpreter took longer than the timeout.
why: Module-level code that blocks (network, locks, a long computation) stalls every process
    that imports it.
fix: Move the slow work out of module level, or raise --timeout (or
    [tool.vam.verify-imports] timeout) when the import is legitimately slow.

VAI203 info: --dynamic: skipped, an optional dependency is not installed
means: The module imports an optional third-party package (torch_npu, mooncake,
    memcache_hybrid, ucm or one given with --optional) that is not installed here.
why: The module was not checked in this run.
fix: Nothing; install the dependency to check the module.
"""

_HEADER = re.compile(r"(VA[MI]\d{3}) (error|warning|info): (.+)")
_FIELD = re.compile(r"(means|why|fix|bad|good):(?: (.*))?")
_EXAMPLES = ("bad", "good")


def _parse(docs: str) -> tuple[Code, ...]:
    """The registry from `_DOCS`; ValueError names an entry that does not follow the layout."""
    found = []
    for entry in docs.strip().split("\n\n"):
        header, *lines = entry.splitlines()
        head = _HEADER.fullmatch(header)
        if head is None:
            raise ValueError(f"bad code header: {header!r}")
        fields: dict[str, list[str]] = {}
        key = ""
        for line in lines:
            field = _FIELD.fullmatch(line)
            if field is not None:
                key = field[1]
                fields[key] = [field[2]] if field[2] else []
            elif key and line.startswith("    "):
                fields[key].append(line[4:] if key in _EXAMPLES else line.strip())
            else:
                raise ValueError(f"{head[1]}: bad line {line!r}")
        prose = {k: " ".join(v) for k, v in fields.items() if k not in _EXAMPLES}
        examples = {k: "\n".join(v) for k, v in fields.items() if k in _EXAMPLES}
        found.append(Code(head[1], head[2], head[3], **prose, **examples))
    return tuple(found)


CODES: tuple[Code, ...] = _parse(_DOCS)

BY_CODE: dict[str, Code] = {c.code: c for c in CODES}


def titles(prefix: str) -> dict[str, str]:
    """{code: title} of the codes starting with `prefix` ("VAM" or "VAI"), in registry order."""
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
            rows.append(textwrap.fill(c.title, _WIDTH - 2, initial_indent=head,
                                      subsequent_indent=" " * len(head)))
    return "\n".join(rows)
