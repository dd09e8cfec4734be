#!/bin/bash
# Decode instance of the site's P/D pair. Usage: serve_decode.sh MODEL PORT
set -euo pipefail

vllm serve "$1" \
  --port "$2" \
  --kv-transfer-config '{
    "kv_connector": "MooncakeConnectorV1",
    "kv_role": "kv_consumer",
    "kv_port": "30100",
    "engine_id": "decode-0",
    "kv_connector_module_path": "vllm_ascend.distributed.mooncake_connector",
    "kv_connector_extra_config": {"prefill": {"tp_size": 2}, "decode": {"tp_size": 1}}
  }'
