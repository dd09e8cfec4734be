#!/usr/bin/env bash
# The whole test suite, from a fresh machine: a venv in .venv with the project (editable),
# its test tools and the subsystem's stack (torch CPU, vLLM's CPU build, Mooncake), then pytest.
# Extra arguments go to pytest (e.g. `scripts/test.sh tests/migrator -q`).
set -euo pipefail
cd "$(dirname "$0")/.."

venv=${VAM_VENV:-.venv}
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -m pip install --disable-pip-version-check --progress-bar off -q -e '.[dev,kv]'
scripts/install-subsystem-deps.sh "$venv/bin/python"
exec "$venv/bin/python" -m pytest "$@"
