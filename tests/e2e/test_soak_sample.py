"""A short sample of `benchmarks/soak.py`: every part real, every fault kind once.

The soak runs as a child process (it starts a dozen processes and two network namespaces of its
own) for `MINUTES` of traffic; its JSON must show zero hung requests, zero wrong tokens, zero
leaked blocks and each fault kind at least once. The other invariants (memory growth over a
two-minute run, token gaps under a loaded CI machine) are reported in the JSON, not asserted
here: the long run in BENCHMARKS.md is where they are judged.

Needs root for the namespaces (CI runs as root), the Mooncake binaries and the vLLM CPU build.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from harness import REPO_ROOT, engine_env

sys.path.insert(0, str(REPO_ROOT / "benchmarks"))

for _name in ("torch", "transformers", "tokenizers", "vllm", "mooncake.store", "aiohttp"):
    pytest.importorskip(_name)
from kvpool_master import master_binary  # noqa: E402
from netns import probe  # noqa: E402
from netns_services import client_binary  # noqa: E402
from soaklib.faults import KINDS  # noqa: E402

MINUTES = 2.0
# Start-up (five engines), the fault rounds past the traffic's end, the settle wait: a bound
# on a hang of the soak itself, not a speed assertion.
TIMEOUT_S = 900


def test_soak_sample_every_fault_no_hang_no_wrong_token_no_leak(tmp_path: Path) -> None:
    reason = probe()
    if reason is not None:
        pytest.skip(f"network namespaces unavailable: {reason}")
    if master_binary() is None or client_binary() is None:  # pragma: no cover - in the wheel
        pytest.skip("mooncake_master / mooncake_client not installed")
    out = tmp_path / "soak.json"
    argv = [
        sys.executable, str(REPO_ROOT / "benchmarks" / "soak.py"), "--minutes", str(MINUTES),
        "--seed", "0", "--json", str(out), "--logs", str(tmp_path / "logs"),
    ]  # fmt: skip
    done = subprocess.run(
        argv, env=engine_env(), capture_output=True, text=True, timeout=TIMEOUT_S, check=False
    )
    assert out.exists(), f"soak exited {done.returncode} without a summary:\n{done.stdout[-4000:]}"
    summary = json.loads(out.read_text(encoding="utf-8"))
    # A track that failed stops its faults: its error says more than the missing kinds.
    assert summary["track_errors"] == {}, summary["track_errors"]
    assert sorted({f["kind"] for f in summary["faults"]}) == sorted(KINDS), summary["faults"]
    assert summary["requests_ok"] > 0
    assert summary["hung"] == 0, summary["errors_seen"]
    assert summary["wrong_tokens"] == 0, summary["per_target"]
    assert summary["leaked_blocks"] == 0, summary["idle_after_traffic"]
