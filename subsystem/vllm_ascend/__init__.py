"""vllm_ascend: the Ascend KV-transfer subsystem for vLLM, in the 0.14 layout.

Importing this package is cheap: it imports neither torch nor vLLM. vLLM finds
`register_connector` through the `vllm.general_plugins` entry point in subsystem/pyproject.toml
and calls it in every process it starts.

This is the `vam-kv-transfer` distribution, a development stand-in that shares its import name
with the real vllm-ascend. It refuses to be imported when a `vllm-ascend` distribution is
installed in the same environment (ImportError naming both): it would either shadow the real
package or have overwritten its files. A wheel runs no code, so nothing stops pip from
installing one over the other; this check is where the refusal is enforced.
"""

from __future__ import annotations

import os
import sys

__all__ = ["register_connector"]

_THIS_DISTRIBUTION = "vam-kv-transfer"
_REAL = "vllm-ascend"


def _real_vllm_ascend() -> tuple[str, str, bool] | None:
    """The real vllm-ascend installed on `sys.path`: (version, its `vllm_ascend/__init__.py`,
    whether that is this very file, i.e. one install overwrote the other), or None.

    A directory scan first: `importlib.metadata` costs about 100 ms to import, paid only when a
    `vllm_ascend` metadata folder is on the path.
    """
    prefixes = ("vllm_ascend-", "vllm_ascend.", "vllm-ascend-", "vllm-ascend.")
    found = False
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        found = any(
            n.lower().startswith(prefixes) and n.endswith((".dist-info", ".egg-info"))
            for n in names
        )
        if found:
            break
    if not found:
        return None
    from importlib import metadata

    try:
        real = metadata.distribution(_REAL)
    except metadata.PackageNotFoundError:
        return None
    init = os.path.realpath(str(real.locate_file("vllm_ascend/__init__.py")))
    return real.version, init, init == os.path.realpath(__file__)


def _refuse_beside_real() -> None:
    found = _real_vllm_ascend()
    if found is None:
        return
    version, init, same = found
    how = (
        "they were installed into the same folder, so one overwrote the other's files"
        if same
        else f"this copy shadows the real one at {init}"
    )
    raise ImportError(
        f"vllm_ascend at {os.path.dirname(os.path.abspath(__file__))} is {_THIS_DISTRIBUTION} "
        f"(vam's refactored KV-transfer subsystem), but this environment also has {_REAL} "
        f"{version} installed: both are imported as `vllm_ascend` and {how}. Use separate "
        f"virtual environments, or `pip uninstall {_THIS_DISTRIBUTION}` (then `pip install "
        f"--force-reinstall --no-deps {_REAL}=={version}` to restore its files).",
        name=__name__,
    )


_refuse_beside_real()


def register_connector() -> None:
    """Register every KV connector of this package with vLLM's `KVConnectorFactory`.

    Idempotent: calling it again in the same process does nothing. See
    `vllm_ascend.distributed.kv_transfer.register_connector`.
    """
    from vllm_ascend.distributed.kv_transfer import register_connector as _register

    _register()
