"""Attribute probes on modules that lost names (hasattr, getattr with a default,
inspect.getmembers, pydoc) answer and never raise, in every mode and import order, while a
real use still warns once (warn), raises the warning (-W error) or ImportError (error)."""

from __future__ import annotations

import pytest
from shims_helpers import Tree

import rules

# (host module, moved name, new home) on the bundled table's layout.
TARGETS = [
    ("vllm_ascend.distributed.utils", "align_memory",
     "vllm_ascend.distributed.kv_transfer.utils.utils.align_memory"),
    ("vllm_ascend.distributed", "register_connector",
     "vllm_ascend.distributed.kv_transfer.register_connector"),
]

# mode -> (env value, interpreter flags, whether probes see the name, what a real use does)
MODES = {
    "warn": ("warn", (), True, "warns"),
    "warn -W error::DeprecationWarning": ("warn", ("-W", "error::DeprecationWarning"), True,
                                          "raises-warning"),
    "error": ("error", (), False, "raises-import-error"),
    "ignore": ("ignore", (), True, "silent"),
}

SCRIPT = """
import importlib, inspect, pydoc, warnings
import shims

PRESENT = {present!r}
OUTCOME = {outcome!r}
host = importlib.import_module({host!r})
NAME, NEW = {name!r}, {new!r}


def probe():
    assert hasattr(host, NAME) is PRESENT
    value = getattr(host, NAME, None)
    assert (value is not None) is PRESENT, value
    assert (NAME in dict(inspect.getmembers(host))) is PRESENT
    pydoc.render_doc(host)  # walks every attribute; must not raise
    assert NAME in dir(host)  # listed either way: dir() names what the module serves


def use():
    try:
        exec(f"from {{host.__name__}} import {{NAME}}", {{}})
    except shims.MovedNameError as exc:
        assert OUTCOME == "raises-import-error", exc
        assert isinstance(exc, ImportError) and NEW in str(exc)
        return "import-error"
    except shims.MovedNameWarning as exc:
        assert OUTCOME == "raises-warning", exc
        assert NEW in str(exc)
        return "warning-raised"
    return "ok"


with warnings.catch_warnings(record=True) as caught:
    if OUTCOME != "raises-warning":
        warnings.simplefilter("always")
    if {probe_first!r}:
        probe()
        first = use()
    else:
        first = use()
        probe()
    second = use()
    probe()
moved = [w for w in caught if issubclass(w.category, shims.MovedNameWarning)]
print(first, second, len(moved))
"""

EXPECTED = {
    "warns": "ok ok 1",  # one warning, from the first real use, none from the probes
    "raises-warning": "warning-raised warning-raised 0",  # never marked as shown
    "raises-import-error": "import-error import-error 0",
    "silent": "ok ok 0",
}


@pytest.mark.parametrize("probe_first", [True, False], ids=["probe-first", "use-first"])
@pytest.mark.parametrize("mode", MODES.values(), ids=list(MODES))
@pytest.mark.parametrize("target", TARGETS, ids=[f"{h}.{n}" for h, n, _ in TARGETS])
def test_probes_never_raise_and_real_uses_still_act(
    va_layout: tuple[Tree, rules.Pack],
    target: tuple[str, str, str],
    mode: tuple[str, tuple[str, ...], bool, str],
    probe_first: bool,
) -> None:
    tree, _ = va_layout
    host, name, new = target
    env_value, flags, present, outcome = mode
    code = SCRIPT.format(
        present=present, outcome=outcome, host=host, name=name, new=new, probe_first=probe_first
    )
    proc = tree.run(code, env={"VLLM_ASCEND_SHIMS": env_value}, flags=flags)
    assert proc.stdout.strip() == EXPECTED[outcome]


def test_attribute_use_in_code_still_acts_in_error_mode(va_layout: tuple[Tree, rules.Pack]) -> None:
    """`module.name` in code is a use, not a probe: it fails loudly, naming the new home."""
    tree, _ = va_layout
    proc = tree.run(
        """
        import shims
        import vllm_ascend.distributed.utils as utils
        try:
            utils.align_memory
        except ImportError as exc:
            print(type(exc).__name__, "kv_transfer.utils.utils.align_memory" in str(exc))
        """,
        env={"VLLM_ASCEND_SHIMS": "error"},
    )
    assert proc.stdout.split() == ["MovedNameError", "True"]


def test_old_module_import_still_raises_in_error_mode(va_layout: tuple[Tree, rules.Pack]) -> None:
    tree, _ = va_layout
    proc = tree.run(
        """
        import importlib, shims
        try:
            importlib.import_module("vllm_ascend.distributed.mooncake_connector")
        except shims.MovedNameError as exc:
            print("kv_transfer.kv_p2p.mooncake_connector" in str(exc))
        """,
        env={"VLLM_ASCEND_SHIMS": "error"},
    )
    assert proc.stdout.strip() == "True"
