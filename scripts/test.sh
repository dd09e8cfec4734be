#!/usr/bin/env bash
# The whole test suite, from a fresh machine: a venv in .venv with both distributions of this
# repository editable (the tool `vam` from the root with its test tools, the KV-transfer subsystem
# `vam-kv-transfer` from subsystem/) and the subsystem's stack (torch CPU, vLLM's CPU build,
# Mooncake), then pytest.
# Extra arguments go to pytest (e.g. `scripts/test.sh tests/migrator -q`).
set -euo pipefail
cd "$(dirname "$0")/.."

venv=${VAM_VENV:-.venv}
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -m pip install --disable-pip-version-check --progress-bar off -q \
    -e '.[dev]' -e './subsystem[kv]'
scripts/install-subsystem-deps.sh "$venv/bin/python"
exec "$venv/bin/python" -m pytest "$@"
