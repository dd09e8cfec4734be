"""What the shims cost: the finder on every import, a forwarded name, the install itself.

Run: `python benchmarks/bench_shims.py` (stdlib only; prints one line per figure).
The finder sits first on `sys.meta_path`, so every import in the process asks it first;
the figure that matters is its answer for names that are not old paths.
"""

from __future__ import annotations

import subprocess
import sys
import timeit
import types

import rules
import shims

PACK = rules.load_pack("vllm_ascend")


def per_call_ns(stmt: str, namespace: dict[str, object], number: int = 200_000) -> float:
    best = min(timeit.repeat(stmt, globals=namespace, number=number, repeat=5))
    return best / number * 1e9


def finder_figures() -> None:
    finder = shims.ShimFinder(PACK, "VLLM_ASCEND_SHIMS")

    class NoOp:
        def find_spec(self, name: str, path: object = None, target: object = None) -> None:
            return None

    for label, name in [
        ("stdlib name", "json.decoder"),
        ("new vllm_ascend path", "vllm_ascend.distributed.kv_transfer.kv_p2p.mooncake_connector"),
        ("near miss (shares a prefix)", "vllm_ascend.distributed.kvpool_extra"),
    ]:
        ours = per_call_ns("find(name)", {"find": finder.find_spec, "name": name})
        base = per_call_ns("find(name)", {"find": NoOp().find_spec, "name": name})
        print(
            f"find_spec, {label}: {ours:.0f} ns (no-op finder: {base:.0f} ns, x{ours / base:.1f})"
        )


def forwarding_figure() -> None:
    host = types.ModuleType("host")
    target = types.ModuleType("target")
    target.f = len  # type: ignore[attr-defined]
    sys.modules["target"] = target
    pack = rules.parse(
        {
            "pack": {"name": "bench"},
            "step": [{"version": "1.0", "symbol": [{"old": "host.f", "new": "target.f"}]}],
        }
    )
    shims.ShimFinder(pack, "BENCH_SHIMS").forward(host)
    shims.install(pack)  # the first use warns; time the steady state
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        host.f  # noqa: B018
    moved = per_call_ns("host.f", {"host": host})
    direct = per_call_ns("target.f", {"target": target})
    print(f"forwarded name, steady state: {moved:.0f} ns (direct attribute: {direct:.0f} ns)")


def install_figure() -> None:
    code = "import time; t = time.perf_counter(); import shims; shims.install('vllm_ascend'); "
    code += "print((time.perf_counter() - t) * 1e3)"
    runs = [
        float(subprocess.check_output([sys.executable, "-c", code], text=True)) for _ in range(7)
    ]
    print(
        "import shims + install('vllm_ascend'), fresh interpreter: "
        f"{sorted(runs)[3]:.1f} ms (median of 7)"
    )


if __name__ == "__main__":
    print(f"Python {sys.version.split()[0]}")
    finder_figures()
    forwarding_figure()
    install_figure()
