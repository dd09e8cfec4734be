"""The VAM codes, those `vam migrate` and `vam check` report, each with its rule doc.

Constants naming them are in `migrator.core.findings`. VAM0xx: references; VAM9xx: files that
could not be processed. A new code is one more `Code` here, in the order `vam rule --all`
lists it.
"""

from __future__ import annotations

from migrator.core.codes.model import ERROR, INFO, WARNING, Code

VAM_CODES: tuple[Code, ...] = (
    Code(
        "VAM001", ERROR, "reference to a moved name",
        means=(
            "An import, attribute chain, string, comment or text-file line names a module or "
            "symbol that the move table says has moved."
        ),
        why=(
            "The old path works only through the runtime shims, with a DeprecationWarning, and the "
            "shims are removed in a later release: then the reference breaks."
        ),
        fix="Run `vam migrate` (it rewrites every VAM001 in place; `--diff` previews).",
        bad="from vllm_ascend.distributed.mooncake_connector import MooncakeConnector",
        good=(
            "from vllm_ascend.distributed.kv_transfer.kv_p2p.mooncake_connector import "
            "MooncakeConnector"
        ),
    ),
    Code(
        "VAM002", WARNING, "reference that cannot be rewritten safely",
        means=(
            "A reference to a moved name in a form no tool can rewrite without guessing: a path "
            "split across adjacent string literals, a parent and child passed as separate "
            "arguments, a name completed at run time, a star import from a module that lost names, "
            "or a moved name reached through a local alias that no longer holds it (`du.f` where "
            "`f` left `du`'s module: the chain needs another import). A chain through an alias "
            "that still holds the name is rewritten (`be.backend.X` -> `be.base.X`)."
        ),
        why=(
            "Left alone it breaks when the old path goes away, and rewriting it mechanically could "
            "change what the code means. A warning in CI annotations (a person decides), yet `vam "
            "check` and `vam migrate` still exit 1 on it."
        ),
        fix=(
            "Edit it by hand to name the new path the message gives; `vam explain NAME` shows "
            "where a name went."
        ),
        bad='patch("vllm_ascend.distributed." "mooncake_connector.X")',
        good='patch("vllm_ascend.distributed.kv_transfer.kv_p2p.mooncake_connector.X")',
    ),
    Code(
        "VAM003", ERROR, "reference to a removed name",
        means="The reference names something the table lists as removed, with no replacement.",
        why="The name no longer exists in the new layout: the code fails as soon as it runs.",
        fix=(
            "Follow the hint in the message (the table's `hint` for that name); vam never rewrites "
            "a removed name."
        ),
    ),
    Code(
        "VAM004", INFO, "compatibility pair kept",
        means=(
            "One name is bound from a moved path in one branch and from its new path in a sibling "
            "branch: try/except ImportError (or ModuleNotFoundError), if/else, or a conditional "
            "expression. Both branches are left exactly as they are."
        ),
        why=(
            "That is code written to run against both layouts; rewriting the old branch would "
            "leave two copies of the new path and no fallback. Info only: it does not change the "
            "exit code and `vam check` does not count it as stale."
        ),
        fix=(
            "Nothing while you support both layouts; when you drop the old one, delete the old "
            "branch by hand."
        ),
    ),
    Code(
        "VAM005", INFO, "pinned reference kept",
        means=(
            "A link pinned to a tag, release branch or commit (`/blob/v0.13.0/...`, "
            "`/tree/releases/v0.13.0/...`, raw.githubusercontent.com, gitee, a 7-40 digit sha), or "
            "a `-` line of a diff (a ```diff fence, a .patch or .diff file), names a moved module."
        ),
        why=(
            "Both are history: at that tag the file lives at the old path, and a diff's removed "
            "lines must match the file it was made against. Rewriting them would break the link or "
            "the patch. Info only: it does not change the exit code and `vam check` does not count "
            "it as stale."
        ),
        fix="Nothing. Links to main, master, HEAD or an unpinned branch are rewritten as usual.",
    ),
    Code(
        "VAM006", INFO, "old branch of a version guard kept",
        means=(
            "A branch that runs only on versions older than the one the run migrates to, by its "
            'guard (`if vllm_version_is("0.11.0"):`, `not ...`, `and`/`or`, a conditional '
            "expression; the helpers are [tool.vam] version-guards), names a moved path. It is "
            "left as it is."
        ),
        why=(
            "That branch runs only on the old version, where the old path is right; rewriting it "
            "would break the old version you still support. Info only: it does not change the exit "
            "code and `vam check` does not count it as stale."
        ),
        fix=(
            "Nothing while you support that version; `vam migrate --drop-compat VERSION` removes "
            "the blocks of VERSION and older when you drop it."
        ),
        bad=(
            'if vllm_version_is("0.11.0"):\n'
            "    from vllm.utils import cdiv\n"
            "else:\n"
            "    from vllm.utils.math_utils import cdiv"
        ),
    ),
    Code(
        "VAM007", INFO, "compatibility block collapsed to its newer branch",
        means=(
            "`vam migrate --drop-compat VERSION` found a block guarded for VERSION or older (or a "
            "try/except ImportError fallback to a path that moved after VERSION, up to --to) and "
            "kept only the branch that still runs: header and old branch removed, the kept "
            "branch dedented."
        ),
        why=(
            "Support for VERSION was dropped, so the old branch is dead code. Reported so the "
            "collapse can be reviewed in the diff."
        ),
        fix=(
            "Nothing; review the diff. A condition that stays undecided "
            '(`vllm_version_is("0.11.0") or flag`) is reported as VAM002 instead and left for a '
            "human."
        ),
        bad=(
            'if vllm_version_is("0.11.0"):\n'
            "    from vllm.utils import cdiv\n"
            "else:\n"
            "    from vllm.utils.math_utils import cdiv"
        ),
        good="from vllm.utils.math_utils import cdiv",
    ),
    Code(
        "VAM008", WARNING, "try block that imports the old path first",
        means=(
            "A `try` branch imports a moved path and its `except ImportError` (or "
            "ModuleNotFoundError) branch imports the new path of the same name: a compatibility "
            "pair in the wrong order. Both branches are left as they are."
        ),
        why=(
            "On every release that still serves the old path (through the shims, or a stale "
            "copy left at the old place) the old path is the one that runs, with its "
            "DeprecationWarning; the new path runs only once the old one is gone. A warning, "
            "not info: `vam check` and `vam migrate` exit 1 on it, since vam does not reorder "
            "code and a person must."
        ),
        fix=(
            "Swap the branches: try the new path first and fall back to the old one (then it is "
            "a VAM004 pair); `vam migrate --drop-compat VERSION` collapses it to the new path "
            "when you drop the old release."
        ),
        bad=(
            "try:\n"
            "    from vllm.utils import cdiv\n"
            "except ImportError:\n"
            "    from vllm.utils.math_utils import cdiv"
        ),
        good=(
            "try:\n"
            "    from vllm.utils.math_utils import cdiv\n"
            "except ImportError:\n"
            "    from vllm.utils import cdiv"
        ),
    ),
    Code(
        "VAM009", INFO, "name of a release before the table's default baseline",
        means=(
            "No --from was given, [tool.vam] has no `from` and the project pins no release, so "
            "the table's `default-from` (0.13.0 for vllm_ascend) is the baseline; this name is "
            "one only a step up to that release moved or removed. The message names that step "
            "and the --from that migrates it."
        ),
        why=(
            "Code written for an older release needs those steps, but a fork's own module can "
            "look exactly like an old name (`mooncake.config_data`), so vam does not rewrite it "
            "on a guess, nor stays silent. Info only: no effect on the exit code."
        ),
        fix=(
            "If the code is written for that older release, run with the --from the message "
            "gives (or set [tool.vam] from, or pin the release in the project's requirements); "
            "if the name is your own, nothing."
        ),
        bad="from vllm_ascend.distributed.mooncake.config_data import MooncakeStoreConfig",
        good="vam migrate --from 0.11.0 .",
    ),
    Code(
        "VAM010", INFO, "rewrite held back by the file's release pin",
        means=(
            "A text file names the release it runs (an image tag `vllm-ascend:v0.12.0rc1`, "
            "`pip install vllm-ascend==0.11.0`, a `vllm_ascend==` requirement line): it is "
            "migrated only up to that release, and a path that a later step would write is "
            "kept and reported with the pin's line."
        ),
        why=(
            "That release does not have the new path: rewriting it breaks the deployment, "
            "silently. The old path is right until the pin moves. Info only: no effect on the "
            "exit code."
        ),
        fix=(
            "Move the pin to a newer release and run `vam migrate` again, or rewrite anyway "
            "with `vam migrate --ignore-release-pins`."
        ),
        bad=(
            "image: quay.io/ascend/vllm-ascend:v0.12.0rc1\n"
            "kv_connector_module_path: vllm_ascend.distributed.mooncake_connector"
        ),
        good="(kept as it is until the image moves past 0.14.0)",
    ),
    Code(
        "VAM011", INFO, "reference in a traceback kept",
        means=(
            'A line of a Python traceback names a moved module: a frame (`File "/usr/lib/python3/'
            'site-packages/vllm_ascend/distributed/mooncake_connector.py", line 120, in '
            "start_load_kv`, after any prefix a logger puts on each line), the source line or "
            "`^^^^` line indented under a frame, or the exception line that ends the traceback. "
            "In a log, a text file, a Markdown or reST block, a docstring or a comment."
        ),
        why=(
            "A traceback is a record of what ran, as a diff's removed lines are a record of the "
            "old file: rewriting it would make it name a file that never ran. Info only: it does "
            "not change the exit code and `vam check` does not count it as stale."
        ),
        fix=(
            "Nothing. To have the code it came from migrated, run vam on that code; the "
            "traceback stays as it was printed."
        ),
    ),
    Code(
        "VAM012", INFO, "file rewritten past the release it pins",
        means=(
            "A text file pins the very release the run migrates from (`--from`, given or found: "
            "an image tag `vllm-ascend:v0.13.0-a3`, `pip install vllm-ascend==0.13.0`) and is "
            "migrated with the rest of the code, but vam never edits the pin: reported once, at "
            "the pin's line, with the first release that has every path written."
        ),
        why=(
            "The file now names paths its pinned release lacks: until the pin moves, the "
            "deployment breaks. Info only: no effect on the exit code."
        ),
        fix="Move the pin to the release the message gives, or a later one.",
        bad=(
            "image: quay.io/ascend/vllm-ascend:v0.13.0-a3\n"
            "module: vllm_ascend.distributed.kv_transfer.kv_p2p.mooncake_connector"
        ),
        good="image: quay.io/ascend/vllm-ascend:v0.14.0-a3",
    ),
    Code(
        "VAM013", INFO, "old path kept in a text file for --keep-compat",
        means=(
            "`vam migrate --keep-compat VERSION` writes Python in dual-lane form, but a text "
            "file (YAML, shell, a Dockerfile, Markdown) cannot branch: one that pins no release "
            "is migrated only up to VERSION, and a path a later step would write is kept and "
            "reported. A file that pins a release is migrated up to that release (VAM010)."
        ),
        why=(
            "The file may still run on VERSION, which does not have the new path. Info only: "
            "no effect on the exit code."
        ),
        fix=(
            "Pin the release the file runs (an image tag, a `vllm==` line) once it has the new "
            "path, or take it there with `vam migrate --drop-compat VERSION` when VERSION's "
            "support is dropped."
        ),
        bad="run: python -m vllm.utils.get_open_port   # with --keep-compat 0.11.0",
        good="(kept as it is until 0.11.0's support is dropped)",
    ),
    Code(
        "VAM014", INFO, "patch target moved to where the name is defined",
        means=(
            "A `mock.patch`, `mocker.patch` or `monkeypatch.setattr` target names a symbol that "
            "a symbol row of the table moves out of its module. The target is rewritten to the "
            "new path, which is where the symbol is defined."
        ),
        why=(
            "A patch replaces the name in one module's namespace. Code that imported the symbol "
            "by name reads it from its own module, so a patch of the definition does not reach "
            "it: the test may pass while patching nothing. Info only: no effect on the exit code."
        ),
        fix=(
            "Point the target at the module the code under test looks the name up in (the "
            "module that imports it), or patch the attribute on that module with "
            "`mock.patch.object`."
        ),
        bad='@patch("vllm.v1.spec_decode.eagle.CpuGpuBuffer")   # eagle no longer imports it',
        good='@patch("my_plugin.proposer.CpuGpuBuffer")   # the module under test reads it here',
    ),
    Code(
        "VAM901", ERROR, "Python file that does not parse",
        means=(
            "A .py or .pyi file is not valid Python for the parser, so its imports cannot be "
            "rewritten."
        ),
        why=(
            "The file is left untouched and the run exits 1, so stale references in it survive the "
            "migration."
        ),
        fix="Fix the syntax error the message points at, then run vam again.",
    ),
    Code(
        "VAM902", ERROR, "file that cannot be read or decoded",
        means=(
            "A file could not be read, or its bytes do not decode in its declared or detected "
            "encoding."
        ),
        why="Nothing in the file was checked or rewritten.",
        fix=(
            "Check the file's permissions and encoding (a PEP 263 cookie must match the bytes), or "
            "exclude it with --exclude or [tool.vam] exclude."
        ),
    ),
    Code(
        "VAM903", ERROR, "file that cannot be written",
        means=(
            "A file needed rewriting, but the new content could not be written: the file is "
            "read-only to this process, the folder refuses the temporary file, or the new text "
            "cannot be encoded in the file's encoding."
        ),
        why="The file still holds its old references; vam never replaces a file it may not write.",
        fix=(
            "Make the file (and its folder) writable, or fix the encoding the message names, and "
            "run `vam migrate` again."
        ),
    ),
    Code(
        "VAM904", ERROR, "not a regular file",
        means="A path named on the command line is a FIFO, socket or device, not a file.",
        why=(
            "Reading it could block forever, so vam never opens it for reading. The same files met "
            "while walking a folder are skipped without a finding (`-v` lists them)."
        ),
        fix="Name regular files only, or leave the path off the command line.",
    ),
    Code(
        "VAM999", ERROR, "file vam failed on (a bug: please report it)",
        means=(
            "vam raised an unexpected error on this file; the file was left untouched and the run "
            "went on with the others."
        ),
        why="The file was neither checked nor rewritten, and vam has a bug.",
        fix=(
            "Report it with the file (or a reduced copy) and the message; meanwhile migrate the "
            "file by hand or exclude it."
        ),
    ),
)
