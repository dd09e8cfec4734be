"""Tests of the vllm_ascend subsystem parts below the engine (no vLLM engine started)."""
