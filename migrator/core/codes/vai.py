"""The VAI codes, those `vam verify-imports` reports, each with its rule doc.

Constants naming them are in `migrator.verify_imports.findings`; the docs live in the kernel
because `vam rule`, the renderer and the `--help` tables read them and the kernel imports no
command package. VAI0xx: errors of a static check; VAI1xx: warnings; VAI2xx: `--dynamic`. A
new code is one more `Code` here, in the order `vam rule --all` lists it.
"""

from __future__ import annotations

from migrator.core.codes.model import ERROR, INFO, WARNING, Code

VAI_CODES: tuple[Code, ...] = (
    Code(
        "VAI001", ERROR, "cannot import name (not bound in the module, not a submodule)",
        means=(
            "`from pkg.mod import X` of a first-party module, where pkg.mod exists but binds no X "
            "(no def, class, assignment, import or star-import chain) and has no submodule X."
        ),
        why="The import raises ImportError the moment the module is imported.",
        fix=(
            "Import X from the module that defines it, or add X to pkg.mod. With --against, "
            "the message says where a bundled move table took X by that release ('moved to Y "
            "in V (move table)') or that it removed X, with its hint; otherwise a 'did you mean' "
            "is a guess by name, labelled '(a guess: same name elsewhere)'."
        ),
        bad="from vllm_ascend.distributed import MooncakeConnector",
        good=(
            "from vllm_ascend.distributed.kv_transfer.kv_p2p.mooncake_connector import "
            "MooncakeConnector"
        ),
    ),
    Code(
        "VAI002", ERROR, "no such module, or a relative import above the top package",
        means=(
            "An import names a first-party module that has no file or package, or a relative "
            "import climbs above the top-level package."
        ),
        why="The import raises ModuleNotFoundError or ImportError at import time.",
        fix=(
            "Import the module from where it lives now, or count the dots of the relative import "
            "again. With --against, the message names the module's new home from a bundled move "
            "table, or the release that removed it with the table's hint; a suggestion found by "
            "name alone is labelled '(a guess: same name elsewhere)'."
        ),
        bad="import vllm_ascend.distributed.mooncake_connector",
        good="import vllm_ascend.distributed.kv_transfer.kv_p2p.mooncake_connector",
    ),
    Code(
        "VAI003", ERROR, "circular import that breaks at import time",
        means=(
            "Two or more modules import each other and, in the order Python runs them, one asks "
            "for a name the other has not bound yet."
        ),
        why=(
            "The import fails with 'cannot import name ... from partially initialized module' "
            "depending on which module is imported first."
        ),
        fix=(
            "Import the module instead of the name (`from pkg import mod`, use `mod.X` at call "
            "time), move the import into the function that needs it, or move the shared name into "
            "a module both can import."
        ),
        bad=(
            "# a.py\n"
            "from pkg.b import helper\n"
            "VALUE = 1\n"
            "# b.py\n"
            "from pkg.a import VALUE\n"
            "def helper(): ..."
        ),
        good=(
            "# b.py\n"
            "from pkg import a\n"
            "def helper(): return a.VALUE"
        ),
    ),
    Code(
        "VAI004", ERROR, "file does not parse",
        means="A Python file of the package is not valid Python.",
        why="Importing the module raises SyntaxError, and none of its imports can be checked.",
        fix="Fix the syntax error at the position the message gives.",
    ),
    Code(
        "VAI005", ERROR, "folder without __init__.py inside a regular package",
        means=(
            "A first-party import reaches into a folder that has no __init__.py although its "
            "parent package has one, and the packaging config does not declare namespace packages. "
            "Reported at each importing line and at the folder."
        ),
        why=(
            "From the source tree the folder imports as a namespace package, but setuptools' "
            "find_packages() skips it and everything below it: the modules are missing from the "
            "built wheel and the import fails only after install."
        ),
        fix=(
            "Add an __init__.py to the folder, or declare namespace packages "
            "(find_namespace_packages(), packages = find_namespace: in setup.cfg, or "
            "[tool.setuptools.packages.find] namespaces = true)."
        ),
        bad=(
            "# pkg/__init__.py and pkg/models/__init__.py exist, "
            "pkg/models/layer/__init__.py does not\n"
            "from pkg.models.layer.attention import Attention"
        ),
        good=(
            "# with pkg/models/layer/__init__.py added\n"
            "from pkg.models.layer.attention import Attention"
        ),
    ),
    Code(
        "VAI100", WARNING, "name served by a module __getattr__ (PEP 562): unknown",
        means=(
            "The imported name is not bound in the module, but the module defines a module-level "
            "__getattr__ that may provide it."
        ),
        why="Whether the import works is decided at run time; a static check cannot tell.",
        fix=(
            "Nothing, if the __getattr__ serves the name; otherwise import it from its real "
            "module. `vam verify-imports --dynamic` imports the module to find out."
        ),
    ),
    Code(
        "VAI101", WARNING, "name unknown: third-party star import or globals() writes",
        means=(
            "The module may bind the name in a way that cannot be read from its source: a star "
            "import from a third-party module, or writes to globals()."
        ),
        why="The name is not checked; a typo or a moved name would go unnoticed.",
        fix="Import the name from where it is defined, or bind it explicitly in the module.",
    ),
    Code(
        "VAI102", WARNING, "unresolvable first-party import guarded by except ImportError",
        means=(
            "An import that would be an error (VAI001-VAI003) sits inside try/except ImportError, "
            "so the program takes the fallback branch."
        ),
        why="The guarded path never runs; often it is an old import left behind by a move.",
        fix="Point the import at the module's new home, or delete the dead branch.",
        bad=(
            "try:\n"
            "    from vllm_ascend.distributed.mooncake_connector import X\n"
            "except ImportError:\n"
            "    X = None"
        ),
        good="from vllm_ascend.distributed.kv_transfer.kv_p2p.mooncake_connector import X",
    ),
    Code(
        "VAI103", WARNING, "name listed in __all__ that the module never binds",
        means=(
            "The name is imported from a module whose __all__ lists it, but the module never binds "
            "it."
        ),
        why=(
            "`from mod import *` and `from mod import name` both fail with AttributeError or "
            "ImportError."
        ),
        fix="Bind the name in the module (import it there) or drop it from __all__.",
    ),
    Code(
        "VAI104", WARNING, "name served only by a deprecation __getattr__",
        means=(
            "The imported name is not bound in the module; the module's __getattr__ (PEP 562) "
            "serves it from another module and warns that it is deprecated (vLLM 0.11.1's "
            "vllm.utils forwards cdiv, get_open_port and others this way). The message and the "
            "suggestion name the module that defines it now."
        ),
        why=(
            "The import works today with a DeprecationWarning, and breaks in the release that "
            "drops the forwarder."
        ),
        fix=(
            "Import the name from its new home (`vam migrate --rules vllm` rewrites the ones the "
            "vllm pack knows)."
        ),
        bad="from vllm.utils import get_open_port",
        good="from vllm.utils.network_utils import get_open_port",
    ),
    Code(
        "VAI201", ERROR, "--dynamic: the import raised (first line of the error)",
        means="Importing the module in a fresh interpreter raised an exception.",
        why="Any code that imports the module fails the same way.",
        fix=(
            "Read the error and the line it was raised at (given in the message) and fix the "
            "import or the module-level code."
        ),
    ),
    Code(
        "VAI202", ERROR, "--dynamic: the import did not finish within --timeout",
        means="Importing the module in a fresh interpreter took longer than the timeout.",
        why=(
            "Module-level code that blocks (network, locks, a long computation) stalls every "
            "process that imports it."
        ),
        fix=(
            "Move the slow work out of module level, or raise --timeout (or "
            "[tool.vam.verify-imports] timeout) when the import is legitimately slow."
        ),
    ),
    Code(
        "VAI203", INFO, "--dynamic: skipped, an optional dependency is not installed",
        means=(
            "The module imports an optional third-party package (torch_npu, mooncake, "
            "memcache_hybrid, ucm or one given with --optional) that is not installed here."
        ),
        why="The module was not checked in this run.",
        fix="Nothing; install the dependency to check the module.",
    ),
)
